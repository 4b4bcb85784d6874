"""Model cards and Hub pushes for hfrl's trainers (``hfrl.cards``, ``hfrl.runs.hub``), as a mixin.

Every ``save_model`` into the run directory writes ``README.md`` (the card) and the reward curve;
``push_to_hub`` and pushes during training go through :func:`hfrl.runs.hub.push_run`, which never
uploads ``training_args.bin`` (it holds ``hub_token``) or optimizer state. A trainer using it
declares ``_name``, ``_tag_names`` and ``_paper`` (its card metadata) and ``reward_funcs``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from transformers.utils import logging

logger = logging.get_logger(__name__)


@contextlib.contextmanager
def secrets_removed(args: Any) -> Iterator[Any]:
    """``args`` without secrets inside: a secret-named field (``hub_token``) set to None, a mapping
    field holding one at any depth (``model_init_kwargs: {token: ...}``) replaced by its redacted copy
    (:mod:`hfrl.utils.secrets`), so that what ``training_args.bin`` pickles never holds a secret. The
    values come back on exit."""
    from hfrl.utils.secrets import is_secret, redacted

    saved = {}
    for f in dataclasses.fields(args):
        value = getattr(args, f.name, None)
        if is_secret(f.name) and isinstance(value, str):
            saved[f.name], clean = value, None
        elif isinstance(value, (dict, list, tuple)) and redacted(value) is not value:
            saved[f.name], clean = value, redacted(value)
        else:
            continue
        setattr(args, f.name, clean)
    try:
        yield args
    finally:
        for name, value in saved.items():
            setattr(args, name, value)


def check_written(path: str) -> None:
    """Delete ``path`` and raise :class:`hfrl.utils.secrets.SecretInFileError` if the file holds a
    string shaped like a Hub token (a secret under a name hfrl cannot know)."""
    from hfrl.utils.secrets import SecretInFileError, refuse_tokens

    if not os.path.isfile(path):
        return
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        refuse_tokens(data, path)
    except SecretInFileError:
        os.remove(path)
        raise


def save_training_args(args: Any, output_dir: str) -> None:
    """``training_args.bin`` as the Trainer writes it, without secrets (:func:`secrets_removed`)."""
    import torch
    from transformers.trainer import TRAINING_ARGS_NAME

    path = os.path.join(output_dir, TRAINING_ARGS_NAME)
    with secrets_removed(args) as clean:
        torch.save(clean, path)
    check_written(path)


class NonFiniteError(FloatingPointError):
    """A loss or gradient that is NaN or infinite: the run stops before the optimizer step."""


class HubMixin:
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases)."""

    @classmethod
    def default_config(cls, model: Any) -> Any:
        """The config a trainer given none trains with (as TRL's trainers): ``config_class``'s defaults,
        saving to ``<model name>-<algorithm>`` (``gpt2-ppo``)."""
        name = model if isinstance(model, str) else model.config._name_or_path
        return cls.config_class(output_dir=f"{os.path.basename(str(name).rstrip('/'))}-{cls._name.lower()}")  # type: ignore[attr-defined]

    _checkpointing = False  # inside _save_checkpoint: the run directory holds no final model yet

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from hfrl.utils.quiet import quiet

        quiet()
        super().__init__(*args, **kwargs)

    # ---- model card and Hub (hfrl.cards, hfrl.runs.hub) -------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save as the Trainer does, then write the model card into the run directory. The model is
        saved first: a card that cannot be written is reported, never a lost model. A push asked for
        by ``args.push_to_hub`` goes through :meth:`push_to_hub` (the model or adapter and its card)."""
        super().save_model(output_dir, _internal_call=True)
        if output_dir is None or os.path.abspath(output_dir) == os.path.abspath(self.args.output_dir):
            try:
                self.create_model_card()
            except Exception as err:  # noqa: BLE001 - the model is saved; the card is secondary
                logger.warning(
                    f"the model is saved in {self.args.output_dir}, but its card could not be written: {err} "
                    f'(write it later with: python -c "from hfrl.cards import write_card; '
                    f"write_card('{self.args.output_dir}')\")"
                )
        if self.args.push_to_hub and not _internal_call:
            self._push_run(self.args.output_dir, "Model save", self.args.hub_token, self.args.hub_revision, None)

    def _card_kwargs(self) -> dict[str, Any]:
        """What the trainer knows better than the run directory: its card metadata, the live log
        history, its reward functions, a training prompt and, for a run not started by ``hfrl train``
        (no config.yaml), its hyperparameters."""
        import dataclasses

        from transformers import TrainingArguments

        from hfrl.rewards.combine import reward_name

        kwargs: dict[str, Any] = {
            "algorithm": type(self),
            "log_history": self.state.log_history,
            "rewards": [reward_name(f) for f in self.reward_funcs],
        }
        if not os.path.isfile(os.path.join(self.args.output_dir, "config.yaml")):
            inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
            own = [f.name for f in dataclasses.fields(self.args) if f.name not in inherited]
            names = [*own, "learning_rate", "lr_scheduler_type", "max_grad_norm", "seed"]
            kwargs["hyperparameters"] = {name: getattr(self.args, name) for name in names}
            base = self._base_model_name()  # the model the run started from (no config.yaml names it)
            if base:
                kwargs["base_model"] = base
        if self.train_dataset is not None and len(self.train_dataset):
            prompt = self.train_dataset[0].get("prompt")  # a TRL trainer may have tokenized it away
            if isinstance(prompt, str) and prompt:
                kwargs["prompt"] = prompt
        return kwargs

    def _base_model_name(self) -> str | None:
        """The name the trained model was loaded from (a built-in one as ``tiny``), from its config."""
        from hfrl.core.models import builtin_name

        model = self.model  # type: ignore[attr-defined]
        for attr in ("policy", "pretrained_model"):  # hfrl's online wrapper, a value-head wrapper
            model = getattr(model, attr, model)
        if callable(getattr(model, "get_base_model", None)):  # a PEFT model: its base
            model = model.get_base_model()
        name = getattr(getattr(model, "config", None), "_name_or_path", None)
        return builtin_name(name) if isinstance(name, str) and name else None

    def create_model_card(
        self,
        model_name: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        finetuned_from: str | None = None,
        dataset: str | list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Write ``README.md`` (and ``reward_curve.png``) into the output directory (``hfrl.cards``).

        Not while a checkpoint is saved: TRL's trainers call this at every checkpoint, before the run
        directory holds a model; hfrl writes the card when the model is saved (:meth:`save_model`)."""
        if not self.is_world_process_zero() or self._checkpointing:
            return
        from hfrl.cards import write_card

        known = self._card_kwargs()
        write_card(
            self.args.output_dir,
            model_name=model_name,
            license=license,
            tags=[tags] if isinstance(tags, str) else tags,
            base_model=finetuned_from or known.pop("base_model", None),
            datasets=dataset,
            **{k: v for k, v in known.items() if k != "base_model"},
        )

    def push_to_hub(
        self,
        commit_message: str | None = "End of training",
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        private: bool | None = None,
        **kwargs: Any,
    ):
        """Save, then upload the model or adapter, tokenizer, card, reward curve, run config and eval
        results to ``args.hub_model_id`` (default: the output directory's name) with
        :func:`hfrl.runs.hub.push_run`. Synchronous (``blocking`` is ignored); returns the ``CommitInfo``."""
        self.save_model(_internal_call=True)
        token, revision = token or self.args.hub_token, revision or self.args.hub_revision
        return self._push_run(self.args.output_dir, commit_message, token, revision, private)

    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        """The Trainer's save, with no secret in the ``training_args.bin`` it writes."""
        from transformers.trainer import TRAINING_ARGS_NAME

        with secrets_removed(self.args):
            super()._save(output_dir, state_dict)  # type: ignore[misc]
        check_written(os.path.join(output_dir or self.args.output_dir, TRAINING_ARGS_NAME))

    def _iteration_text(self) -> str:
        per = getattr(self.args, "steps_per_iteration", None)
        step = self.state.global_step
        return f"iteration {step // per + 1}" if per else f"step {step + 1}"

    def non_finite(self, what: str) -> NonFiniteError:
        """The error for a NaN / inf ``what`` (loss terms, gradient norm) at the current step."""
        return NonFiniteError(
            f"{self._iteration_text()}: {what}, before the optimizer step (nothing of it was applied or saved): "
            f"lower learning_rate (now {self.args.learning_rate:g}) or check the rewards' scale"
        )

    def _get_grad_norm(self, model: Any, grad_norm: Any = None) -> Any:
        """The Trainer's gradient norm, checked: a NaN or infinite norm stops the run before
        ``optimizer.step()`` would write it into the weights."""
        norm = super()._get_grad_norm(model, grad_norm=grad_norm)  # type: ignore[misc]
        value = float(norm) if norm is not None else 0.0
        if value != value or value in (float("inf"), float("-inf")):
            raise self.non_finite(f"the gradient norm is {value}")
        return norm

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """The Trainer's check after loading a checkpoint (the best model at the end), without its
        false alarm for tied weights: safetensors stores a tied ``lm_head.weight`` once, under the
        embedding's name, and transformers 5 lists it as missing. Tied keys are re-tied instead."""
        model = getattr(self.model, "policy", self.model)
        tied = set(getattr(model, "all_tied_weights_keys", None) or {})
        prefix = "policy." if model is not self.model else ""
        missing = [k for k in load_result.missing_keys if k.removeprefix(prefix) not in tied]
        if len(missing) < len(load_result.missing_keys):
            model.tie_weights()
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))  # type: ignore[misc]

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        self._checkpointing = True
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            self._checkpointing = False

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Pushes during training (``hub_strategy``): the checkpoint's model and card through
        :func:`hfrl.runs.hub.push_run`, synchronously; never ``training_args.bin``."""
        if self.args.hub_strategy != "end":
            iteration = self.state.global_step // getattr(self.args, "steps_per_iteration", 1)
            message = f"Training in progress, iteration {iteration}"
            self._push_run(checkpoint_folder, message, self.args.hub_token, self.args.hub_revision, None)

    def _push_run(self, folder: str, commit_message, token, revision, private):
        if not self.is_world_process_zero():
            return None
        from pathlib import Path

        from hfrl.runs.hub import push_run

        return push_run(
            folder,
            self.args.hub_model_id or Path(self.args.output_dir).absolute().name,
            private=private if private is not None else self.args.hub_private_repo,
            token=token,
            commit_message=commit_message,
            revision=revision,
            card_kwargs=self._card_kwargs(),
        )
