"""No secret in what the Trainer writes or hands out:

- ``training_args.bin``: the Trainer pickles its whole ``TrainingArguments``, which hold ``hub_token``
  and, in ``model_init_kwargs``, possibly from_pretrained's ``token``. Both are removed while the file is
  written (:func:`hfrl.utils.secrets.secrets_removed`), and the written file is checked for a string
  shaped like a Hub token (:func:`hfrl.utils.secrets.check_written`).
- the callbacks: transformers' integrations (TensorBoard, W&B, MLflow, trackio, ...) serialise the
  arguments they are handed (``args.to_json_string()``, ``to_dict()``, ``to_sanitized_dict()``), and
  ``to_dict`` masks only top-level ``*_token`` fields (transformers 5.25): TensorBoard wrote
  ``model_init_kwargs: {token: ...}`` into its event file. Every callback event gets the arguments
  without secrets (:func:`secret_free_callbacks`).
"""

from __future__ import annotations

import os
from typing import Any

from hfrl.utils.secrets import check_written, secrets_removed


def save_training_args(args: Any, output_dir: str) -> None:
    """``training_args.bin`` as the Trainer writes it, without secrets (:func:`secrets_removed`)."""
    import torch
    from transformers.trainer import TRAINING_ARGS_NAME

    path = os.path.join(output_dir, TRAINING_ARGS_NAME)
    with secrets_removed(args) as clean:
        torch.save(clean, path)
    check_written(path)


def secret_free_callbacks(handler: Any) -> None:
    """Make the Trainer's ``CallbackHandler`` (of any class: TRL has its own) call every callback with the
    arguments without secrets (:func:`secrets_removed`, restored after each event). Every event goes
    through ``call_event`` (transformers 5.25: ``CallbackHandler.on_*``), the one place where the
    integrations are handed the arguments; wrapped on the instance, so a subclass keeps its own."""
    call_event = handler.call_event

    def call_without_secrets(event: str, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        with secrets_removed(args):
            return call_event(event, args, state, control, **kwargs)

    handler.call_event = call_without_secrets


__all__ = ["save_training_args", "secret_free_callbacks"]
