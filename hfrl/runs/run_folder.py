"""The output folder of one ``hfrl train`` command, held for the command's life: one run per folder,
never lost, never mixed.

    with RunFolder("runs/numbers-ppo", overwrite=False) as folder:
        trainer = build_trainer(run)            # a failure here leaves the folder as it was
        trainer.add_callback(folder.callback)   # the first optimizer step marks the run as started
        trainer.train()

- **A lock.** The folder is locked (``flock`` on the folder itself) from before anything is checked
  until the command ends: a second ``hfrl train`` (or ``--resume``) on the same folder stops at once
  with one line, instead of both passing the "holds another run" check and interleaving their files.
- **A failed start changes nothing.** Until the run has made its first optimizer step (the first
  rollout generated, scored and learned from), any failure (a bad value found late, a model that
  cannot load, too few prompts, WordNet missing, a diverging first step) removes what the command
  wrote and puts back what was there; a folder the command created is removed again.
- **Replacing a run** (``--overwrite_output_dir``) moves the old run aside inside the folder
  (``.hfrl-replaced/``) and deletes it only once the new run has started; a failed start restores it,
  and so does the next command that finds it after a start that was killed (``kill -9``, a lost
  machine: :func:`restore_replaced`, said in one line). Only an hfrl run is replaced: a folder whose
  ``config.yaml`` hfrl did not write (another tool's, or none) is refused, whatever it holds.
- **Data, all the way down**: a folder that exists is checked before anything is written into it
  (:func:`hfrl.utils.folders.check_folder`): a link in it that leaves it is refused, so that no file of
  the run is written through it.
- **A folder named by a file** (``output_dir`` in a ``--config`` file, not on the command line) must be
  new or empty: a downloaded config never chooses to write over a folder of yours.
- **The default folder is numbered** (``number=True``: ``hfrl train`` without ``--output-dir``): when
  ``runs/numbers-ppo`` holds a run, or another command holds it, the run takes the first free of
  ``runs/numbers-ppo-2``, ``-3``, ... (``folder.path`` says which). Numbers, not the model or a variant
  in the name: only a number keeps every new run apart whatever differs (a learning rate, a seed),
  and the first run of a task keeps the short name. ``--resume`` without a folder continues the newest
  of these that holds a checkpoint (:func:`resumable_runs`).
- **A run stopped before its first checkpoint** (killed: its ``config.yaml`` and the log of its first
  iterations, nothing to resume, evaluate or chat with: :func:`stopped_before_checkpoint`) does not keep
  its folder: the next run started there (the same command again, or the default folder's next run)
  replaces it as ``--overwrite_output_dir`` would, said in one line; ``--resume`` says so.

Only the main process (rank 0 of ``accelerate launch``) holds the folder; the others write only
what the Trainer has them write. A rank is read from the environment only when a launcher set it
(:func:`launch_rank`): ``RANK=1`` left in a shell does not make ``hfrl train`` skip its checks.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrl.runs.run_config import CONFIG_NAME
from hfrl.trainers.run_guard import RUN_FILES, another_run, run_marks  # the rule, the same in Python

if TYPE_CHECKING:
    from types import TracebackType

    from transformers import TrainerControl, TrainerState, TrainingArguments

REPLACED = ".hfrl-replaced"  # the run --overwrite_output_dir replaces, until the new one has started
DELETING = ".hfrl-replaced-deleting"  # renamed so once the new run started: a kill while deleting leaves no doubt


class FolderInUseError(RuntimeError):
    """Another hfrl command holds the run folder (the CLI exits with code 1)."""


def numbered(base: str | os.PathLike[str]) -> Iterator[Path]:
    """``base``, then ``base-2``, ``base-3``, ...: the default folders of a task and algorithm."""
    base = Path(base)
    yield base
    n = 2
    while True:
        yield base.with_name(f"{base.name}-{n}")
        n += 1


def numbered_runs(base: str | os.PathLike[str]) -> list[Path]:
    """The existing folders ``base`` and ``base-N`` that hold a run (a ``config.yaml``), in number order."""
    base = Path(base)
    if not base.parent.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(base.name)}(?:-(\d+))?$")
    found = []
    for path in base.parent.iterdir():
        match = pattern.match(path.name)
        if match and (path / CONFIG_NAME).is_file():
            found.append((int(match.group(1) or 1), path))
    return [path for _, path in sorted(found)]


def stopped_before_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds an ``hfrl train`` run that stopped (a kill, a lost machine) before its first
    checkpoint: its config.yaml (hfrl's) and logs only, no checkpoint, trainer state or model."""
    path = Path(path)
    return run_marks(path) == [CONFIG_NAME] and is_hfrl_run(path)


def stopped_early(path: str | os.PathLike[str]) -> str:
    """``--resume``'s line for a run that :func:`stopped_before_checkpoint`."""
    return (
        f"--resume: {path} holds a run that stopped before its first checkpoint, so there is nothing to resume; "
        "run the same command without --resume to start it again in that folder"
    )


def resumable_runs(base: str | os.PathLike[str]) -> list[Path]:
    """The runs of :func:`numbered_runs` that have a checkpoint, the most recently checkpointed first."""
    from hfrl.trainers.checkpoints import checkpoints_newest_first

    newest = {}
    for path in numbered_runs(base):
        restore_replaced(path)  # a killed --overwrite_output_dir start: the run it moved aside is the one here
        checkpoints = checkpoints_newest_first(str(path))
        if checkpoints:
            newest[path] = max(os.path.getmtime(c) for c in checkpoints)
    return sorted(newest, key=lambda p: newest[p], reverse=True)


LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def launch_rank(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """This process's rank in a launch (``accelerate launch``, ``torchrun``): 0 for a single process.
    A rank counts only with what every launcher sets beside it (``WORLD_SIZE`` > 1 and ``MASTER_ADDR``);
    rank variables without them (left in a shell, a job script) are a one-line ``ValueError``, not a
    silent non-main process that would skip the folder's checks.

    >>> launch_rank({}), launch_rank({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"})
    (0, 1)
    >>> launch_rank({"RANK": "1"})
    Traceback (most recent call last):
    ValueError: RANK=1 is set, but no launcher started this process (WORLD_SIZE is unset, MASTER_ADDR is unset); ...
    """
    given = {name: environ[name] for name in LAUNCH_VARIABLES if environ.get(name, "") != ""}
    if not given:
        return 0
    try:
        numbers = {name: int(value) for name, value in given.items()}
    except ValueError:
        raise ValueError(
            f"{', '.join(f'{k}={v}' for k, v in given.items())}: launch variables are whole numbers"
        ) from None
    world = numbers.get("WORLD_SIZE", 1)
    rank = numbers.get("RANK", numbers.get("LOCAL_RANK", 0))
    if world == 1 and rank == 0:
        return 0
    missing = [f"{name} is unset" for name in ("WORLD_SIZE", "MASTER_ADDR") if not environ.get(name)]
    if missing or not 0 <= rank < world:
        set_ = ", ".join(f"{k}={v}" for k, v in given.items() if k != "WORLD_SIZE" or world > 1)
        why = ", ".join(missing) or f"rank {rank} is not below WORLD_SIZE {world}"
        raise ValueError(
            f"{set_} is set, but no launcher started this process ({why}); unset "
            f"{' and '.join(k for k in given if k != 'WORLD_SIZE' or world > 1)} for a single process, or start "
            "several with accelerate launch or torchrun"
        )
    return rank


def _is_main_process() -> bool:
    return launch_rank() == 0


def is_hfrl_run(path: Path) -> bool:
    """Whether ``path`` holds a run of ``hfrl train``: a ``config.yaml`` that hfrl wrote (its first line
    is hfrl's header, :func:`hfrl.runs.run_config.config_text`)."""
    from hfrl.runs.run_config import CONFIG_HEADER

    try:
        with open(path / CONFIG_NAME, "rb") as fh:
            return fh.read(len(CONFIG_HEADER)) == CONFIG_HEADER.encode()
    except OSError:
        return False


def restore_replaced(path: str | os.PathLike[str]) -> bool:
    """Put back the run that ``--overwrite_output_dir`` moved aside into ``path/.hfrl-replaced`` when the
    command that was replacing it was killed before its new run started (what that start wrote is
    removed: it never took an optimizer step). Said in one warning line; True when a run was restored.
    Nothing happens while another command holds the folder (it is that start, still going)."""
    path = Path(path)
    aside = path / REPLACED
    if not aside.is_dir() or aside.is_symlink():
        return False
    fd = _try_lock(path)
    if fd is None:
        return False
    try:
        _put_back(path, aside)
    finally:
        os.close(fd)
    import logging

    logging.getLogger(__name__).warning(
        f"{path}: restored the run that an interrupted --overwrite_output_dir had moved aside into {REPLACED}/ "
        "(its new run never started)"
    )
    return True


def _put_back(path: Path, aside: Path) -> None:
    """Remove everything of ``path`` but ``aside``, then move ``aside``'s entries back and remove it."""
    for name in set(os.listdir(path)) - {REPLACED}:
        _remove(path / name)
    for name in os.listdir(aside):
        os.replace(aside / name, path / name)
    aside.rmdir()


def _remove(target: Path) -> None:
    shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()


def _try_lock(path: Path) -> int | None:
    """A descriptor holding ``flock`` on ``path`` (None when another command holds it; -1 without flock)."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no lock
        return os.open(path, os.O_RDONLY)
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class RunFolder:
    """See the module docstring. ``resume``: the folder holds the run to continue (locked only: a
    resumed run keeps what it wrote). ``from_file``: the path came from a file, not the user.
    ``number``: the path is a default; a taken one gives way to the next free number."""

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False, resume: bool = False,
                 from_file: str | None = None, number: bool = False) -> None:  # fmt: skip
        if not str(path).strip():
            raise ValueError("--output-dir is empty: give the run's folder (default: runs/TASK-ALG)")
        self.path = self.asked = Path(path)
        self.overwrite, self.resume, self.from_file = overwrite, resume, from_file
        self.number = number and not overwrite and not resume
        self.started = False
        self.restart = False  # the folder holds a run stopped before its first checkpoint: started again here
        self._fd: int | None = None
        self._created: Path | None = None
        self._before: set[str] = set()
        self.main = _is_main_process()

    # ---- entering: lock, then check ---------------------------------------------------------------
    def __enter__(self) -> RunFolder:
        if not self.number:
            return self._enter() if self.main else self
        # the first that holds no run and that no other command holds. The other processes of a launch
        # choose as the main one does: it writes the run's files only after the Trainer is built, once
        # every process has passed the launch's rendezvous (and so chosen).
        for path in numbered(self.asked):
            if path.is_dir():
                restore_replaced(path)  # a killed --overwrite_output_dir start: the folder holds the old run
            if path.exists() and (not path.is_dir() or (run_marks(path) and not stopped_before_checkpoint(path))):
                continue  # a run stopped before its first checkpoint gives its folder to the next
            self.path = path
            if not self.main:
                return self
            try:
                return self._enter()
            except FolderInUseError:
                continue
        raise AssertionError("unreachable")  # numbered() never ends

    def _enter(self) -> RunFolder:
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"--output-dir {self.path} is a file; give a directory")
        from hfrl.utils.folders import check_folder

        check_folder(self.path, "run folder")  # no link out of it: nothing of the run is written through one
        self._created = self.path
        while not self._created.parent.exists():  # the top folder this command creates: removed on failure
            self._created = self._created.parent
        self._created = self._created if not self.path.exists() else None
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._lock()
            self._restore_interrupted()
            self._check()
        except BaseException:
            self._release()
            raise
        self._before = set(os.listdir(self.path))
        if (self.overwrite or self.restart) and not self.resume and run_marks(self.path):
            self._move_aside()  # deleted once the new run has started; a failed start puts it back
        if self.restart:
            import logging

            logging.getLogger(__name__).warning(
                f"{self.path}: the run there stopped before its first checkpoint (nothing of it to resume): "
                "this run starts in its place"
            )
        return self

    def _lock(self) -> None:
        self._fd = _try_lock(self.path)
        if self._fd is None:
            raise FolderInUseError(
                f"{self.path} is in use by another hfrl command (a run or a resume is writing there); "
                "wait for it to end, or give another --output-dir"
            )

    def _restore_interrupted(self) -> None:
        """The folder is locked: a ``.hfrl-replaced/`` in it is a start that was killed (a finished one
        removes it; a failed one puts it back), a ``.hfrl-replaced-deleting/`` a deletion that was."""
        if (self.path / DELETING).is_dir():
            shutil.rmtree(self.path / DELETING)
        if (self.path / REPLACED).is_dir() and not (self.path / REPLACED).is_symlink():
            _put_back(self.path, self.path / REPLACED)
            import logging

            logging.getLogger(__name__).warning(
                f"{self.path}: restored the run that an interrupted --overwrite_output_dir had moved aside into "
                f"{REPLACED}/ (its new run never started)"
            )

    def _check(self) -> None:
        if self.resume:
            return
        marks = run_marks(self.path)
        self.restart = bool(marks) and not self.overwrite and not self.from_file
        self.restart = self.restart and stopped_before_checkpoint(self.path)
        if marks and not self.overwrite and not self.restart:
            raise ValueError(another_run(self.path, marks))
        present = sorted(os.listdir(self.path))
        if self.overwrite and present and not is_hfrl_run(self.path):
            listed = ", ".join(present[:4]) + (", ..." if len(present) > 4 else "")
            raise ValueError(
                f"--overwrite_output_dir replaces an hfrl run only, and {self.path} holds none (no config.yaml written "
                f"by hfrl train; it holds {listed}): give a new or empty --output-dir, or empty this one yourself"
            )
        if self.from_file and not self.overwrite:
            present = sorted(p for p in os.listdir(self.path) if p != REPLACED)
            if present:
                raise ValueError(
                    f"{self.from_file} names output_dir {self.path}, which is not empty ({', '.join(present[:3])}"
                    f"{', ...' if len(present) > 3 else ''}); a path read from a file only chooses a new or empty "
                    "folder: pass --output-dir DIR"
                )

    def _move_aside(self) -> None:
        aside = self.path / REPLACED  # none here: _restore_interrupted put an earlier one back
        aside.mkdir()
        for name in sorted(self._before - {REPLACED}):
            os.replace(self.path / name, aside / name)
        self._before = {REPLACED}

    # ---- the run started: the old run is gone for good --------------------------------------------
    def mark_started(self) -> None:
        if self.started:
            return
        self.started = True
        if self.main and (self.path / REPLACED).is_dir():
            os.replace(self.path / REPLACED, self.path / DELETING)  # one step: never a half-deleted old run
            shutil.rmtree(self.path / DELETING)

    @property
    def callback(self) -> Any:
        """A ``TrainerCallback`` that marks the run started at its first optimizer step."""
        from transformers import TrainerCallback

        folder = self

        class _Started(TrainerCallback):
            def on_step_end(
                self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
            ) -> None:
                folder.mark_started()

        return _Started()

    # ---- leaving ----------------------------------------------------------------------------------
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.main:
                if exc_type is None:
                    self.mark_started()
                elif not self.started and not self.resume:
                    self._roll_back()
        finally:
            self._release()

    def _roll_back(self) -> None:
        """Remove what the failed start wrote; put back what was there."""
        if not self.path.is_dir():
            return
        for name in set(os.listdir(self.path)) - self._before:
            _remove(self.path / name)
        aside = self.path / REPLACED
        if aside.is_dir():
            _put_back(self.path, aside)
        if self._created is not None:
            folder = self.path
            while not os.listdir(folder):
                folder.rmdir()
                if folder == self._created:
                    break
                folder = folder.parent

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


__all__ = [
    "REPLACED",
    "RUN_FILES",
    "FolderInUseError",
    "RunFolder",
    "is_hfrl_run",
    "launch_rank",
    "numbered",
    "numbered_runs",
    "restore_replaced",
    "resumable_runs",
    "run_marks",
    "stopped_before_checkpoint",
    "stopped_early",
]
