"""What hfrl adds to every ``transformers.Trainer`` it drives (its own trainers and TRL's), as one mixin
of small ones, each in the module named for what it does:

- :class:`~hfrl.trainers.hub_mixin.HubMixin`: the model card on save, Hub pushes through hfrl's run push;
- :class:`~hfrl.trainers.finite_guard.FiniteGuardMixin`: a NaN or infinite gradient norm stops the run
  before the optimizer step (:class:`~hfrl.trainers.finite_guard.NonFiniteError`);
- :class:`~hfrl.trainers.tied_weights.TiedWeightsMixin`: a checkpoint loads back into a model with tied
  weights without a false warning;
- :class:`~hfrl.trainers.secret_free_save.SecretFreeSaveMixin`: no secret in ``training_args.bin``;

and, here, what is left: the dependencies' warnings a user cannot act on kept quiet from the start
(:func:`hfrl.utils.quiet.quiet`), and the config a trainer given none trains with (:meth:`default_config`).
"""

from __future__ import annotations

import os
from typing import Any

from hfrl.trainers.finite_guard import FiniteGuardMixin
from hfrl.trainers.hub_mixin import HubMixin
from hfrl.trainers.secret_free_save import SecretFreeSaveMixin
from hfrl.trainers.tied_weights import TiedWeightsMixin


class TrainerMixin(FiniteGuardMixin, TiedWeightsMixin, SecretFreeSaveMixin, HubMixin):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases). A trainer
    using it declares ``config_class`` and the card metadata :class:`HubMixin` reads."""

    #: the trainer's config (a ``TrainingArguments`` dataclass), what :meth:`default_config` builds
    config_class: type[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from hfrl.utils.quiet import quiet

        quiet()
        super().__init__(*args, **kwargs)

    @classmethod
    def default_config(cls, model: Any) -> Any:
        """The config a trainer given none trains with (as TRL's trainers): ``config_class``'s defaults,
        saving to ``<model name>-<algorithm>`` (``gpt2-ppo``)."""
        name = model if isinstance(model, str) else model.config._name_or_path
        return cls.config_class(output_dir=f"{os.path.basename(str(name).rstrip('/'))}-{cls._name.lower()}")


__all__ = ["TrainerMixin"]
