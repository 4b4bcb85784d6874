"""``training_args.bin`` without secrets: the Trainer pickles its whole ``TrainingArguments``, which hold
``hub_token`` and, in ``model_init_kwargs``, possibly from_pretrained's ``token``. Both are removed while
the file is written (:func:`hfrl.utils.secrets.secrets_removed`), and the written file is checked for a
string shaped like a Hub token (:func:`hfrl.utils.secrets.check_written`)."""

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


__all__ = ["save_training_args"]
