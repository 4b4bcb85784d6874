"""What makes a run safe to kill (``kill -9``, a lost machine) and to resume, as a Trainer mixin.

- Checkpoints are complete or not counted (:mod:`hfrl.trainers.checkpoints`): the Trainer's files,
  then the trainer's own state (:meth:`CrashSafeMixin._save_own_state`), then the completion marker,
  then the rotation of old checkpoints (``save_total_limit``).
- ``train(resume_from_checkpoint=True)`` resumes from the newest complete checkpoint, warning about
  newer incomplete ones; a checkpoint path that is incomplete is refused with what it lacks.
- ``iterations.jsonl`` (:mod:`hfrl.trainers.iteration_log`) gets each log entry as it is logged; a
  resumed run keeps the lines up to its checkpoint's step and logs the rest again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Any

from hfrl.trainers.checkpoints import (
    identity_problem,
    mark_complete,
    newest_complete_checkpoint,
    require_complete,
    run_identity,
)
from hfrl.trainers.iteration_log import IterationLog, restart_log

logger = logging.getLogger(__name__)


class CrashSafeMixin:
    """Mixed into a ``transformers.Trainer`` subclass, first in its bases (so that its
    ``_save_checkpoint`` wraps every other one). Subclasses write their own checkpoint state in
    :meth:`_save_own_state` and name its files in ``_own_checkpoint_files``."""

    #: files a subclass adds to every checkpoint (named when an incomplete one lacks them)
    _own_checkpoint_files: tuple[str, ...] = ()
    #: the run's id (``hfrl train`` sets it from config.yaml), recorded in every checkpoint it writes
    run_id: str | None = None
    #: what defines the run on the command line (``hfrl train`` sets it: task, alg, model, rewards, task_args)
    run_definition: dict[str, Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_callback(IterationLog())  # type: ignore[attr-defined]

    # ---- saving -----------------------------------------------------------------------------
    def _save_own_state(self, folder: str) -> None:
        """Hook: write state beyond the Trainer's into the checkpoint ``folder``. Called on every
        process after the Trainer's files and before the checkpoint is marked complete; write on
        ``args.should_save`` only, unless each process has its own."""

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """The Trainer's checkpoint, then :meth:`_save_own_state`, then the completion marker, then
        the rotation of old checkpoints. A leftover folder of the same step (an interrupted write
        before a resume) is removed first, so that its files never mix with the new ones."""
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        args, accelerator = self.args, self.accelerator  # type: ignore[attr-defined]
        run_dir = self._get_output_dir(trial=trial)  # type: ignore[attr-defined]
        step = self.state.global_step  # type: ignore[attr-defined]
        folder = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")
        if args.should_save and os.path.isdir(folder):
            shutil.rmtree(folder)
        accelerator.wait_for_everyone()  # before any process writes into the folder
        limit, args.save_total_limit = args.save_total_limit, None  # rotated below, once complete
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
            self._save_own_state(folder)
        finally:
            args.save_total_limit = limit
        accelerator.wait_for_everyone()  # every process's files (RNG states, shards) are written
        if args.should_save:
            mark_complete(folder, run_identity(args, self.run_id, self.run_definition))
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,  # type: ignore[attr-defined]
                use_mtime=True,
            )

    # ---- resuming ---------------------------------------------------------------------------
    def _expected_checkpoint_files(self) -> list[str]:
        from transformers.trainer import TRAINER_STATE_NAME

        return [TRAINER_STATE_NAME, *self._own_checkpoint_files]

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """The Trainer's ``train``. ``resume_from_checkpoint=True`` takes the newest *complete*
        checkpoint of the output dir; a checkpoint path must be complete (a one-line ValueError
        names what it lacks). ``iterations.jsonl`` restarts (a new run) or continues after the
        checkpoint's step (a resumed run)."""
        from hfrl.utils.folders import check_folder

        output_dir = self.args.output_dir  # type: ignore[attr-defined]
        explicit = isinstance(resume_from_checkpoint, (str, os.PathLike))
        if isinstance(resume_from_checkpoint, (str, os.PathLike)):  # read only inside it, before any file is
            check_folder(resume_from_checkpoint, "checkpoint")
        elif resume_from_checkpoint is True:
            check_folder(output_dir, "run folder")
        if resume_from_checkpoint is True:
            resume_from_checkpoint = newest_complete_checkpoint(output_dir, self._expected_checkpoint_files())
            if resume_from_checkpoint is None:
                raise ValueError(f"no checkpoint-* folder in {output_dir} to resume from")
        elif isinstance(resume_from_checkpoint, (str, os.PathLike)):
            resume_from_checkpoint = os.fspath(resume_from_checkpoint)
            require_complete(resume_from_checkpoint, self._expected_checkpoint_files())
        else:
            resume_from_checkpoint = None
        if resume_from_checkpoint is not None:
            identity = run_identity(self.args, self.run_id, self.run_definition)  # type: ignore[attr-defined]
            problem = identity_problem(resume_from_checkpoint, identity, explicit)
            if problem:
                raise ValueError(
                    f"cannot resume from {resume_from_checkpoint}: {problem}; resume with the settings it was written "
                    "with, or start a new run in another --output-dir"
                )
            step = _global_step(resume_from_checkpoint)
            per_iteration = getattr(self.args, "steps_per_iteration", None)  # type: ignore[attr-defined]
            where = f"iteration {step // per_iteration}, step {step}" if per_iteration else f"step {step}"
            logger.info("resuming from %s (%s)", resume_from_checkpoint, where)
        if self.is_world_process_zero():  # type: ignore[attr-defined]
            restart_log(output_dir, _global_step(resume_from_checkpoint) if resume_from_checkpoint else None)
        return super().train(resume_from_checkpoint, *args, **kwargs)  # type: ignore[misc]

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:
        """The Trainer's epoch, but none once ``max_steps`` is reached: resumed from its final checkpoint
        (a kill between that checkpoint and the end, or ``--resume`` on a finished run), the Trainer
        would otherwise take one more optimizer step before it checks ``max_steps``."""
        state, control = self.state, self.control  # type: ignore[attr-defined]
        if state.max_steps > 0 and state.global_step >= state.max_steps:
            control.should_training_stop = True
            return None
        return super()._run_epoch(*args, **kwargs)  # type: ignore[misc]


def _global_step(checkpoint: str) -> int:
    from transformers.trainer import TRAINER_STATE_NAME

    with open(os.path.join(checkpoint, TRAINER_STATE_NAME)) as fh:
        return int(json.load(fh)["global_step"])
