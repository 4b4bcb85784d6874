"""What hfrl adds to every ``transformers.Trainer`` it drives (its own trainers and TRL's): one mixin whose
methods are the ``Trainer`` overrides, each a few lines over the module that does the work:

- crash safety (:mod:`hfrl.trainers.crash_safe`): complete checkpoints (the trainer's own state, the
  marker, then the rotation), resuming from the newest complete one, ``iterations.jsonl``;
- a NaN or infinite gradient norm stops the run before the optimizer step (:mod:`hfrl.trainers.finite_guard`);
- a checkpoint loads back into a model with tied weights without a false warning (:mod:`hfrl.trainers.tied_weights`);
- no secret in ``training_args.bin`` or in what the callbacks (TensorBoard, W&B, ...) are handed
  (:mod:`hfrl.trainers.secret_free_save`);
- the model card on save, Hub pushes through hfrl's run push (:mod:`hfrl.trainers.card_and_push`);
- the dependencies' warnings a user cannot act on kept quiet from the start (:func:`hfrl.utils.quiet.quiet`),
  and the config a trainer given none trains with (:meth:`TrainerMixin.default_config`).

Each override names the transformers version it was checked against (5.24). Mixed in before ``Trainer``
(or TRL's trainer) in a trainer's bases; for mypy the mixin is a ``Trainer`` (its ``super()`` calls are).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from transformers.utils import logging

from hfrl.trainers.finite_guard import NonFiniteError, is_finite, non_finite_error
from hfrl.trainers.run_facts import RunFacts

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo
    from transformers import Trainer as _Trainer
else:
    _Trainer = object

logger = logging.get_logger(__name__)


class TrainerMixin(_Trainer):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases). A trainer using it
    declares ``config_class``, its card metadata (``_name``, ``_tag_names``, ``_paper``) and ``reward_funcs``;
    it writes its own checkpoint state in :meth:`_save_own_state` and names its files in ``_own_checkpoint_files``."""

    #: the trainer's config (a ``TrainingArguments`` dataclass), what :meth:`default_config` builds
    config_class: type[Any]
    _name: str
    _tag_names: list[str]
    _paper: dict[str, str]
    reward_funcs: Any  # the trainer's reward functions (a list), named on the card
    #: files a trainer adds to every checkpoint (named when an incomplete one lacks them)
    _own_checkpoint_files: tuple[str, ...] = ()
    #: the run's facts (``hfrl train`` sets them once, :mod:`hfrl.trainers.run_facts`): its id (config.yaml's) and
    #: what defines it on the command line, recorded in every checkpoint it writes; none from Python
    run_facts: RunFacts = RunFacts()
    _checkpointing = False  # inside _save_checkpoint: the run directory holds no final model yet
    _folder_checked = False  # train() found output_dir free of another run (run_guard) once: this run's now

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from hfrl.trainers.iteration_log import IterationLog
        from hfrl.trainers.secret_free_save import secret_free_callbacks
        from hfrl.trainers.sharding_guard import ShardingGuard
        from hfrl.utils.quiet import quiet

        quiet()
        super().__init__(*args, **kwargs)
        secret_free_callbacks(self.callback_handler)  # the integrations log the arguments: never a token
        from hfrl.core.zero3 import default_persistence_threshold
        from hfrl.metrics.learned import shard_classifiers

        default_persistence_threshold(self.accelerator, self.model)  # ZeRO-3: small tensors sharded too
        shard_classifiers(self.accelerator)  # ZeRO-3: reward classifiers partitioned as TRL prepares its reward models
        self.add_callback(IterationLog())
        self.add_callback(ShardingGuard(self))  # what a distributed run got; a stop if it asked to shard and did not

    @classmethod
    def default_config(cls, model: Any) -> Any:
        """The config a trainer given none trains with (as TRL's trainers): ``config_class``'s defaults,
        saving to ``<model name>-<algorithm>`` (``gpt2-ppo``)."""
        name = model if isinstance(model, str) else model.config._name_or_path
        return cls.config_class(output_dir=f"{os.path.basename(str(name).rstrip('/'))}-{cls._name.lower()}")

    # ---- a NaN or infinite gradient stops the run (finite_guard) -------------------------------------
    def non_finite(self, what: str) -> NonFiniteError:
        """The error for a NaN / inf ``what`` (loss terms, gradient norm) at the current step."""
        return non_finite_error(self.args, self.state.global_step, what)

    def _get_grad_norm(self, model: Any, grad_norm: Any = None) -> Any:  # transformers 5.24: Trainer._get_grad_norm
        """The Trainer's gradient norm, checked before ``optimizer.step()`` would apply it."""
        norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        if not is_finite(norm):
            raise self.non_finite(f"the gradient norm is {float(norm)}")
        return norm

    # ---- complete checkpoints, resumed exactly (crash_safe) ----------------------------------------
    def _save_own_state(self, folder: str) -> None:
        """Hook: write state beyond the Trainer's into the checkpoint ``folder``. Called on every process
        after the Trainer's files and before the checkpoint is marked complete; write on
        ``args.should_save`` only, unless each process has its own."""

    def _save_checkpoint(self, model: Any, trial: Any) -> None:  # transformers 5.24: Trainer._save_checkpoint
        """The Trainer's checkpoint, then :meth:`_save_own_state`, then the completion marker, then the
        rotation of old checkpoints. A leftover folder of the same step (an interrupted write before a
        resume) is removed first, so that its files never mix with the new ones."""
        import shutil

        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        from hfrl.trainers.checkpoints import run_identity
        from hfrl.trainers.crash_safe import complete_checkpoint, write_failure

        args = self.args
        run_dir = self._get_output_dir(trial=trial)
        folder = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if args.should_save and os.path.isdir(folder):
            shutil.rmtree(folder)
        self.accelerator.wait_for_everyone()  # before any process writes into the folder
        limit, args.save_total_limit = args.save_total_limit, None  # rotated below, once complete
        self._checkpointing = True
        try:
            super()._save_checkpoint(model, trial)
            self._save_own_state(folder)
        except Exception as err:  # noqa: BLE001 - a full disk is one line naming the last complete checkpoint
            failure = write_failure(err, folder, run_dir)
            if failure is None:
                raise
            raise failure from err
        finally:
            args.save_total_limit, self._checkpointing = limit, False
        self.accelerator.wait_for_everyone()  # every process's files (RNG states, shards) are written
        if args.should_save:
            _remove_deepspeed_scripts(folder)
            identity = run_identity(args, self.run_facts.run_id, self.run_facts.definition)
            try:
                complete_checkpoint(folder, run_dir, identity, limit, self.state.best_model_checkpoint, self)
            except Exception as err:  # noqa: BLE001 - the marker itself may not fit on the disk
                failure = write_failure(err, folder, run_dir)
                if failure is None:
                    raise
                raise failure from err

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """The Trainer's ``train`` (transformers 5.24). ``resume_from_checkpoint=True`` takes the newest
        *complete* checkpoint of the output dir; a checkpoint path must be complete, and either must be
        this run's (:func:`hfrl.trainers.crash_safe.checkpoint_to_resume`: one-line errors). A new run
        never writes into a folder that holds another one, unless ``overwrite_output_dir``
        (:mod:`hfrl.trainers.run_guard`). ``iterations.jsonl`` restarts (a new run) or continues after
        the checkpoint's step."""
        from transformers.trainer import TRAINER_STATE_NAME

        from hfrl.trainers.checkpoints import run_identity
        from hfrl.trainers.crash_safe import checkpoint_to_resume, global_step
        from hfrl.trainers.iteration_log import restart_log
        from hfrl.trainers.run_guard import check_output_dir

        output_dir = str(self.args.output_dir)
        expected = [TRAINER_STATE_NAME, *self._own_checkpoint_files]
        identity = run_identity(self.args, self.run_facts.run_id, self.run_facts.definition)
        per_iteration = getattr(self.args, "steps_per_iteration", None)
        checkpoint = checkpoint_to_resume(resume_from_checkpoint, output_dir, expected, identity, per_iteration)
        # hfrl train checked the folder itself (RunFolder) and gave the trainer its run's id
        if checkpoint is None and self.run_facts.run_id is None and not self._folder_checked:
            check_output_dir(output_dir, bool(getattr(self.args, "overwrite_output_dir", False)))
        self._folder_checked = True
        if self.is_world_process_zero():
            restart_log(output_dir, global_step(checkpoint) if checkpoint else None)
        return super().train(checkpoint, *args, **kwargs)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:  # transformers 5.24: Trainer._run_epoch
        """The Trainer's epoch, but none once ``max_steps`` is reached: resumed from its final checkpoint
        (a kill between that checkpoint and the end, or ``--resume`` on a finished run), the Trainer
        would otherwise take one more optimizer step before it checks ``max_steps``."""
        if self.state.max_steps > 0 and self.state.global_step >= self.state.max_steps:
            self.control.should_training_stop = True
            return None
        return super()._run_epoch(*args, **kwargs)

    # ---- tied weights load back without a false alarm (tied_weights) -------------------------------
    def _issue_warnings_after_load(self, load_result: Any) -> None:  # transformers 5.24
        from hfrl.trainers.tied_weights import without_tied_keys

        super()._issue_warnings_after_load(without_tied_keys(self.model, load_result))

    # ---- no secret in training_args.bin (secret_free_save) ------------------------------------------
    def _save(  # transformers 5.24
        self, output_dir: str | None = None, state_dict: dict[str, Any] | None = None
    ) -> None:
        """The Trainer's save, with no secret in the ``training_args.bin`` it writes."""
        from transformers.trainer import TRAINING_ARGS_NAME

        from hfrl.utils.secrets import check_written, secrets_removed

        with secrets_removed(self.args):
            super()._save(output_dir, state_dict)
        folder = output_dir or self.args.output_dir  # where the Trainer wrote (it has, to get here)
        if folder is not None:
            check_written(os.path.join(folder, TRAINING_ARGS_NAME))

    # ---- the model card and the Hub (card_and_push) ------------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:  # transformers 5.24
        """Save as the Trainer does, then write the model card into the run directory. The model is
        saved first: a card that cannot be written is reported, never a lost model. A push asked for
        by ``args.push_to_hub`` goes through :meth:`push_to_hub` (the model or adapter and its card)."""
        from hfrl.trainers.card_and_push import push_run_folder, run_dir

        super().save_model(output_dir, _internal_call=True)
        folder = run_dir(self)
        if output_dir is None or os.path.abspath(output_dir) == os.path.abspath(folder):
            try:
                self.create_model_card()
            except Exception as err:  # noqa: BLE001 - the model is saved; the card is secondary
                logger.warning(
                    f"the model is saved in {folder}, but its card could not be written: {err} "
                    f'(write it later with: python -c "from hfrl.cards import write_card; '
                    f"write_card('{folder}')\")"
                )
        if self.args.push_to_hub and not _internal_call:
            push_run_folder(self, folder, "Model save", self.args.hub_token, self.args.hub_revision, None)

    def _card_kwargs(self) -> dict[str, Any]:
        """What the trainer knows better than the run directory (:func:`hfrl.trainers.card_and_push.card_kwargs`)."""
        from hfrl.trainers.card_and_push import card_kwargs

        return card_kwargs(self)

    def create_model_card(  # transformers 5.24 / TRL 1.16: Trainer.create_model_card
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
        the others are accepted and ignored). Not while a checkpoint is saved: TRL's trainers call this
        at every checkpoint, before the run directory holds a model; hfrl writes the card when the model
        is saved (:meth:`save_model`)."""
        if args:
            raise TypeError("create_model_card takes keyword arguments only (model_name=..., license=..., tags=...)")
        if not self.is_world_process_zero() or self._checkpointing:
            return
        from hfrl.trainers.card_and_push import write_run_card

        write_run_card(self, tags, model_name=model_name, license=license, base_model=finetuned_from, datasets=dataset)

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
        from hfrl.trainers.card_and_push import push_run_folder, run_dir

        self.save_model(_internal_call=True)
        token, revision = token or self.args.hub_token, revision or self.args.hub_revision
        return push_run_folder(self, run_dir(self), commit_message, token, revision, private)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:  # transformers 5.24
        """Pushes during training (``hub_strategy``): the checkpoint's model and card through
        :func:`hfrl.runs.hub.push_run`, synchronously; never ``training_args.bin``."""
        from hfrl.trainers.card_and_push import push_run_folder

        if self.args.hub_strategy != "end":
            iteration = self.state.global_step // getattr(self.args, "steps_per_iteration", 1)
            message = f"Training in progress, iteration {iteration}"
            push_run_folder(self, checkpoint_folder, message, self.args.hub_token, self.args.hub_revision, None)


__all__ = ["TrainerMixin"]


# DeepSpeed's engine copies these scripts into every checkpoint it saves (DeepSpeedEngine.
# _copy_recovery_script, deepspeed 0.19); a run directory is data, and hfrl's own export
# (``hfrl export``) gathers ZeRO-3 weights without them, so they are not kept or pushed.
DEEPSPEED_SCRIPTS = ("zero_to_fp32.py", "zero_to_torch.py")


def _remove_deepspeed_scripts(folder: str) -> None:
    for name in DEEPSPEED_SCRIPTS:
        path = os.path.join(folder, name)
        if os.path.lexists(path):
            os.remove(path)
