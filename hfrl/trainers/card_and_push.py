"""Model cards and Hub pushes for hfrl's trainers (``hfrl.cards``, ``hfrl.runs.hub``): what
:class:`~hfrl.trainers.trainer_mixin.TrainerMixin`'s ``save_model``, ``create_model_card`` and
``push_to_hub`` do.

Every ``save_model`` into the run directory writes ``README.md`` (the card) and the reward curve;
``push_to_hub`` and pushes during training go through :func:`hfrl.runs.hub.push_run`, which never
uploads ``training_args.bin`` (it holds ``hub_token``) or optimizer state. A trainer declares
``_name``, ``_tag_names`` and ``_paper`` (its card metadata) and ``reward_funcs``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo
    from transformers import TrainerState, TrainingArguments


class CardTrainer(Protocol):
    """What the card and the push read of a trainer (:class:`~hfrl.trainers.trainer_mixin.TrainerMixin`'s)."""

    @property
    def args(self) -> TrainingArguments: ...  # a property: a subclass's config (PPOConfig) is one too

    @property
    def state(self) -> TrainerState: ...

    model: Any
    train_dataset: Any
    reward_funcs: Any

    def is_world_process_zero(self) -> bool: ...

    def _card_kwargs(self) -> dict[str, Any]: ...


def run_dir(trainer: CardTrainer) -> str:
    """``args.output_dir``, the run directory (typed ``str | None``; ``TrainingArguments`` sets its
    default, ``trainer_output``, when none is given)."""
    folder = trainer.args.output_dir
    if folder is None:
        raise ValueError("args.output_dir is None: give the run directory (output_dir=...)")
    return folder


def card_kwargs(trainer: CardTrainer) -> dict[str, Any]:
    """What the trainer knows better than the run directory: its card metadata, the live log history,
    its reward functions, a training prompt and, for a run not started by ``hfrl train`` (no
    config.yaml), its hyperparameters."""
    from transformers import TrainingArguments

    from hfrl.rewards.combine import reward_name

    folder = run_dir(trainer)
    kwargs: dict[str, Any] = {
        "algorithm": type(trainer),
        "log_history": trainer.state.log_history,
        "rewards": [reward_name(f) for f in trainer.reward_funcs],
    }
    if not os.path.isfile(os.path.join(folder, "config.yaml")):
        inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
        own = [f.name for f in dataclasses.fields(trainer.args) if f.name not in inherited]
        names = [*own, "learning_rate", "lr_scheduler_type", "max_grad_norm", "seed"]
        kwargs["hyperparameters"] = {name: getattr(trainer.args, name) for name in names}
        base = base_model_name(trainer.model)  # the model the run started from (no config.yaml names it)
        if base:
            kwargs["base_model"] = base
    data: Any = trainer.train_dataset  # a datasets.Dataset: rows by index
    if data is not None and len(data):
        prompt = data[0].get("prompt")  # a TRL trainer may have tokenized it away
        if isinstance(prompt, str) and prompt:
            kwargs["prompt"] = prompt
    return kwargs


def base_model_name(model: Any) -> str | None:
    """The name the trained model was loaded from (a built-in one as ``tiny``), from its config."""
    from hfrl.core.models import builtin_name

    for attr in ("policy", "pretrained_model"):  # hfrl's online wrapper, a value-head wrapper
        model = getattr(model, attr, model)
    if callable(getattr(model, "get_base_model", None)):  # a PEFT model: its base
        model = model.get_base_model()
    name = getattr(getattr(model, "config", None), "_name_or_path", None)
    return builtin_name(name) if isinstance(name, str) and name else None


def write_run_card(trainer: CardTrainer, tags: str | list[str] | None, **given: Any) -> None:
    """``README.md`` (and ``reward_curve.png``) in the run directory (``hfrl.cards``): what the trainer
    knows (its ``_card_kwargs``: :func:`card_kwargs`, or a trainer's own, such as A-LoL's naming the run's
    algorithm of the family), ``given`` (transformers' and TRL's card arguments, renamed) over it. A run
    with a critic gets its section (:func:`hfrl.runs.hub.write_critic_section`: on ``arith_chains``, the
    value at each step)."""
    from hfrl.cards import write_card

    known = trainer._card_kwargs()
    base = given.pop("base_model", None) or known.pop("base_model", None)
    known.pop("base_model", None)
    folder = run_dir(trainer)
    write_card(folder, tags=[tags] if isinstance(tags, str) else tags, base_model=base, **given, **known)
    from hfrl.runs.hub import write_critic_section

    write_critic_section(folder, known.get("log_history"), known.get("rewards"))  # what the critic predicts


def push_run_folder(
    trainer: CardTrainer,
    folder: str,
    commit_message: str | None,
    token: str | None,
    revision: str | None,
    private: bool | None,
) -> CommitInfo | None:
    """The run folder pushed with :func:`hfrl.runs.hub.push_run` (main process only: None elsewhere)."""
    if not trainer.is_world_process_zero():
        return None
    from pathlib import Path

    from hfrl.runs.hub import push_run

    return push_run(
        folder,
        trainer.args.hub_model_id or Path(run_dir(trainer)).absolute().name,
        private=private if private is not None else trainer.args.hub_private_repo,
        token=token,
        commit_message=commit_message,
        revision=revision,
        card_kwargs=trainer._card_kwargs(),
    )


__all__ = ["CardTrainer", "base_model_name", "card_kwargs", "push_run_folder", "run_dir", "write_run_card"]
