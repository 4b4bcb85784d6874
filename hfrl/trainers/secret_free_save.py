"""``training_args.bin`` without secrets: the Trainer pickles its whole ``TrainingArguments``, which hold
``hub_token`` and, in ``model_init_kwargs``, possibly from_pretrained's ``token``. Both are removed while
the file is written (:func:`hfrl.utils.secrets.secrets_removed`), and the written file is checked for a
string shaped like a Hub token (:func:`hfrl.utils.secrets.check_written`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hfrl.utils.secrets import check_written, secrets_removed

if TYPE_CHECKING:  # the mixin's attributes and super() calls are the Trainer's
    from transformers import Trainer as _Trainer
else:
    _Trainer = object


def save_training_args(args: Any, output_dir: str) -> None:
    """``training_args.bin`` as the Trainer writes it, without secrets (:func:`secrets_removed`)."""
    import torch
    from transformers.trainer import TRAINING_ARGS_NAME

    path = os.path.join(output_dir, TRAINING_ARGS_NAME)
    with secrets_removed(args) as clean:
        torch.save(clean, path)
    check_written(path)


class SecretFreeSaveMixin(_Trainer):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases): its ``_save``
    writes no secret into ``training_args.bin``. A trainer with its own ``_save`` calls
    :func:`save_training_args` instead of ``torch.save(self.args, ...)``."""

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """The Trainer's save, with no secret in the ``training_args.bin`` it writes."""
        from transformers.trainer import TRAINING_ARGS_NAME

        with secrets_removed(self.args):
            super()._save(output_dir, state_dict)
        folder = output_dir or self.args.output_dir  # where the Trainer wrote (it has, to get here)
        if folder is not None:
            check_written(os.path.join(folder, TRAINING_ARGS_NAME))


__all__ = ["SecretFreeSaveMixin", "save_training_args"]
