"""What makes a run safe to kill (``kill -9``, a lost machine) and to resume: the steps
:class:`~hfrl.trainers.trainer_mixin.TrainerMixin`'s ``_save_checkpoint`` and ``train`` take.

- Checkpoints are complete or not counted (:mod:`hfrl.trainers.checkpoints`): the Trainer's files,
  then the trainer's own state (its ``_save_own_state``), then the completion marker
  (:func:`complete_checkpoint`), then the rotation of old checkpoints (``save_total_limit``).
- ``train(resume_from_checkpoint=True)`` resumes from the newest complete checkpoint, warning about
  newer incomplete ones; a checkpoint path that is incomplete, damaged or another run's is refused
  with what is wrong (:func:`checkpoint_to_resume`).
- ``iterations.jsonl`` (:mod:`hfrl.trainers.iteration_log`) gets each log entry as it is logged; a
  resumed run keeps the lines up to its checkpoint's step and logs the rest again.
- A disk that fills up while a checkpoint is written stops the run with one line naming that checkpoint
  and the last complete one (:func:`write_failure`), not torch's ``enforce fail at inline_container.cc``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from typing import Any

from hfrl.trainers.checkpoints import (
    checkpoint_problem,
    checkpoints_newest_first,
    identity_problem,
    mark_complete,
    newest_complete_checkpoint,
    require_complete,
)

logger = logging.getLogger(__name__)


def checkpoint_to_resume(
    resume_from_checkpoint: str | os.PathLike[str] | bool | None,
    output_dir: str,
    expected: list[str],
    identity: dict[str, Any],
    steps_per_iteration: int | None = None,
) -> str | None:
    """The checkpoint a ``train(resume_from_checkpoint=...)`` resumes from, checked before any of its
    files is read: ``True``, the newest *complete* checkpoint of ``output_dir``; a path, that checkpoint,
    which must be complete (a one-line ``ValueError`` names what it lacks); either way written by the run
    ``identity`` describes (:func:`hfrl.trainers.checkpoints.identity_problem`; an older hfrl's marker
    only when named by path) and holding no link out of itself. None for a new run."""
    from hfrl.utils.folders import check_folder

    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    explicit = resume_from_checkpoint is not True
    if explicit:
        checkpoint = os.fspath(resume_from_checkpoint)  # type: ignore[arg-type]  # a path: not True
        check_folder(checkpoint, "checkpoint")  # read only inside it, before any file is
        require_complete(checkpoint, expected)
    else:
        check_folder(output_dir, "run folder")
        found = newest_complete_checkpoint(output_dir, expected)
        if found is None:
            raise ValueError(f"no checkpoint-* folder in {output_dir} to resume from")
        checkpoint = found
    problem = identity_problem(checkpoint, identity, explicit)
    if problem:
        raise ValueError(
            f"cannot resume from {checkpoint}: {problem}; resume with the settings it was written with, or start "
            "a new run in another --output-dir"
        )
    step = global_step(checkpoint)
    where = f"iteration {step // steps_per_iteration}, step {step}" if steps_per_iteration else f"step {step}"
    logger.info("resuming from %s (%s)", checkpoint, where)
    return checkpoint


def complete_checkpoint(
    folder: str, run_dir: str, identity: dict[str, Any], limit: int | None, best: Any, trainer: Any = None
) -> None:
    """The last steps of a checkpoint, once every process has written its files: the completion marker
    (the run's ``identity`` in it), then the rotation of old checkpoints (``save_total_limit``), which
    keeps ``best`` (the best evaluated checkpoint)."""
    mark_complete(folder, identity)
    rotate_old_checkpoints(run_dir, limit, best, trainer)


def rotate_old_checkpoints(run_dir: str, limit: int | None, best: Any, trainer: Any = None) -> None:
    """Keep the newest ``limit`` checkpoints of ``run_dir`` (and ``best``): transformers' ``rotate_checkpoints``
    (5.2 and later); before 5.2 (pyproject's floor is 5.0) only ``trainer._rotate_checkpoints`` does it, which
    reads the limit from the trainer's arguments and the best checkpoint from its state."""
    try:
        from transformers.trainer_utils import rotate_checkpoints
    except ImportError:  # transformers 5.0 and 5.1
        if trainer is None:
            raise
        saved, trainer.args.save_total_limit = trainer.args.save_total_limit, limit
        try:
            trainer._rotate_checkpoints(use_mtime=True, output_dir=run_dir)
        finally:
            trainer.args.save_total_limit = saved
        return
    rotate_checkpoints(output_dir=run_dir, save_total_limit=limit, best_model_checkpoint=best, use_mtime=True)


def global_step(checkpoint: str) -> int:
    """The optimizer step a checkpoint folder was written at (its ``trainer_state.json``)."""
    from transformers.trainer import TRAINER_STATE_NAME

    with open(os.path.join(checkpoint, TRAINER_STATE_NAME)) as fh:
        return int(json.load(fh)["global_step"])


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (the disk is full): the CLI's one line, exit code 1."""


# What a full disk says: the OSError's errno; safetensors' Rust error ("IoError(Os { code: 28, kind:
# StorageFull, message: \"No space left on device\" })"); torch.save's zip writer, whose RuntimeError
# keeps no errno ("[enforce fail at inline_container.cc:664] . unexpected pos 1088 vs 988", "PytorchStreamWriter
# failed writing file data/0: file write failed").
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_SIGNS = ("No space left on device", "Disk quota exceeded", "StorageFull", "inline_container.cc")


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or what it was raised from) says a write found the disk full."""
    cause: BaseException | None = err
    for _ in range(5):
        if cause is None:
            return False
        if isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS:
            return True
        if any(sign in str(cause) for sign in DISK_FULL_SIGNS):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def write_failure(err: BaseException, folder: str, run_dir: str) -> CheckpointWriteError | None:
    """The one-line error for ``err`` raised while the checkpoint ``folder`` was written, when the disk is
    full (:func:`disk_full`), naming the last complete checkpoint of ``run_dir``; None for another error.

    >>> print(write_failure(OSError(28, "No space left on device"), "/nowhere/checkpoint-4", "/nowhere"))
    disk full while writing checkpoint-4 ([Errno 28] No space left on device); no complete checkpoint was ...
    """
    if not disk_full(err):
        return None
    here = os.path.abspath(folder)
    last = next(
        (f for f in checkpoints_newest_first(run_dir) if os.path.abspath(f) != here and checkpoint_problem(f) is None),
        None,
    )
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    then = (
        f"the last complete one is {os.path.basename(last)}: free some space, then continue with "
        f"hfrl train -o {run_dir} --resume"
        if last
        else "no complete checkpoint was written before it: free some space and start the run again"
    )
    return CheckpointWriteError(f"disk full while writing {os.path.basename(folder)} ({detail}); {then}")


__all__ = [
    "CheckpointWriteError",
    "checkpoint_to_resume",
    "complete_checkpoint",
    "disk_full",
    "global_step",
    "write_failure",
]
