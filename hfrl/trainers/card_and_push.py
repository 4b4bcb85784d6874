"""Model cards and Hub pushes for hfrl's trainers (``hfrl.cards``, ``hfrl.runs.hub``), as a mixin.

Every ``save_model`` into the run directory writes ``README.md`` (the card) and the reward curve;
``push_to_hub`` and pushes during training go through :func:`hfrl.runs.hub.push_run`, which never
uploads ``training_args.bin`` (it holds ``hub_token``) or optimizer state. A trainer using it
declares ``_name``, ``_tag_names`` and ``_paper`` (its card metadata) and ``reward_funcs``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from transformers.utils import logging

if TYPE_CHECKING:  # the mixin's attributes and super() calls are the Trainer's
    from huggingface_hub import CommitInfo
    from transformers import Trainer as _Trainer
else:
    _Trainer = object

logger = logging.get_logger(__name__)


class HubMixin(_Trainer):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases)."""

    # Model-card metadata, read by hfrl.cards (each trainer sets its own)
    _name: str
    _tag_names: list[str]
    _paper: dict[str, str]
    reward_funcs: Any  # the trainer's reward functions (a list), named on the card

    _checkpointing = False  # inside _save_checkpoint: the run directory holds no final model yet

    @property
    def _run_dir(self) -> str:
        """``args.output_dir``, the run directory (typed ``str | None``; ``TrainingArguments`` sets its
        default, ``trainer_output``, when none is given)."""
        run_dir = self.args.output_dir
        if run_dir is None:
            raise ValueError("args.output_dir is None: give the run directory (output_dir=...)")
        return run_dir

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save as the Trainer does, then write the model card into the run directory. The model is
        saved first: a card that cannot be written is reported, never a lost model. A push asked for
        by ``args.push_to_hub`` goes through :meth:`push_to_hub` (the model or adapter and its card)."""
        super().save_model(output_dir, _internal_call=True)
        if output_dir is None or os.path.abspath(output_dir) == os.path.abspath(self._run_dir):
            try:
                self.create_model_card()
            except Exception as err:  # noqa: BLE001 - the model is saved; the card is secondary
                logger.warning(
                    f"the model is saved in {self._run_dir}, but its card could not be written: {err} "
                    f'(write it later with: python -c "from hfrl.cards import write_card; '
                    f"write_card('{self._run_dir}')\")"
                )
        if self.args.push_to_hub and not _internal_call:
            self._push_run(self._run_dir, "Model save", self.args.hub_token, self.args.hub_revision, None)

    def _card_kwargs(self) -> dict[str, Any]:
        """What the trainer knows better than the run directory: its card metadata, the live log
        history, its reward functions, a training prompt and, for a run not started by ``hfrl train``
        (no config.yaml), its hyperparameters."""
        from transformers import TrainingArguments

        from hfrl.rewards.combine import reward_name

        kwargs: dict[str, Any] = {
            "algorithm": type(self),
            "log_history": self.state.log_history,
            "rewards": [reward_name(f) for f in self.reward_funcs],
        }
        if not os.path.isfile(os.path.join(self._run_dir, "config.yaml")):
            inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
            own = [f.name for f in dataclasses.fields(self.args) if f.name not in inherited]
            names = [*own, "learning_rate", "lr_scheduler_type", "max_grad_norm", "seed"]
            kwargs["hyperparameters"] = {name: getattr(self.args, name) for name in names}
            base = self._base_model_name()  # the model the run started from (no config.yaml names it)
            if base:
                kwargs["base_model"] = base
        data: Any = self.train_dataset  # a datasets.Dataset: rows by index
        if data is not None and len(data):
            prompt = data[0].get("prompt")  # a TRL trainer may have tokenized it away
            if isinstance(prompt, str) and prompt:
                kwargs["prompt"] = prompt
        return kwargs

    def _base_model_name(self) -> str | None:
        """The name the trained model was loaded from (a built-in one as ``tiny``), from its config."""
        from hfrl.core.models import builtin_name

        model: Any = self.model
        for attr in ("policy", "pretrained_model"):  # hfrl's online wrapper, a value-head wrapper
            model = getattr(model, attr, model)
        if callable(getattr(model, "get_base_model", None)):  # a PEFT model: its base
            model = model.get_base_model()
        name = getattr(getattr(model, "config", None), "_name_or_path", None)
        return builtin_name(name) if isinstance(name, str) and name else None

    def create_model_card(
        self,
        *args: Any,  # refused: transformers' and TRL's positional orders differ
        model_name: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        finetuned_from: str | None = None,
        dataset: str | list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Write ``README.md`` (and ``reward_curve.png``) into the output directory (``hfrl.cards``).
        Keyword arguments only (those of transformers' and TRL's ``create_model_card`` that hfrl reads;
        the others are accepted and ignored).

        Not while a checkpoint is saved: TRL's trainers call this at every checkpoint, before the run
        directory holds a model; hfrl writes the card when the model is saved (:meth:`save_model`)."""
        if args:
            raise TypeError("create_model_card takes keyword arguments only (model_name=..., license=..., tags=...)")
        if not self.is_world_process_zero() or self._checkpointing:
            return
        from hfrl.cards import write_card

        known = self._card_kwargs()
        write_card(
            self._run_dir,
            model_name=model_name,
            license=license,
            tags=[tags] if isinstance(tags, str) else tags,
            base_model=finetuned_from or known.pop("base_model", None),
            datasets=dataset,
            **{k: v for k, v in known.items() if k != "base_model"},
        )

    def push_to_hub(  # type: ignore[override]  # None off the main process, as the Trainer's own (annotated CommitInfo)
        self,
        commit_message: str | None = "End of training",
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        private: bool | None = None,
        **kwargs: Any,
    ) -> CommitInfo | None:
        """Save, then upload the model or adapter, tokenizer, card, reward curve, run config and eval
        results to ``args.hub_model_id`` (default: the output directory's name) with
        :func:`hfrl.runs.hub.push_run`. Synchronous (``blocking`` is ignored); returns the ``CommitInfo``."""
        self.save_model(_internal_call=True)
        token, revision = token or self.args.hub_token, revision or self.args.hub_revision
        return self._push_run(self._run_dir, commit_message, token, revision, private)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        self._checkpointing = True
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._checkpointing = False

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Pushes during training (``hub_strategy``): the checkpoint's model and card through
        :func:`hfrl.runs.hub.push_run`, synchronously; never ``training_args.bin``."""
        if self.args.hub_strategy != "end":
            iteration = self.state.global_step // getattr(self.args, "steps_per_iteration", 1)
            message = f"Training in progress, iteration {iteration}"
            self._push_run(checkpoint_folder, message, self.args.hub_token, self.args.hub_revision, None)

    def _push_run(
        self, folder: str, commit_message: str | None, token: str | None, revision: str | None, private: bool | None
    ) -> CommitInfo | None:
        """The run folder pushed with :func:`hfrl.runs.hub.push_run` (main process only: None elsewhere)."""
        if not self.is_world_process_zero():
            return None
        from pathlib import Path

        from hfrl.runs.hub import push_run

        return push_run(
            folder,
            self.args.hub_model_id or Path(self._run_dir).absolute().name,
            private=private if private is not None else self.args.hub_private_repo,
            token=token,
            commit_message=commit_message,
            revision=revision,
            card_kwargs=self._card_kwargs(),
        )


__all__ = ["HubMixin"]
