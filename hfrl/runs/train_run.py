"""One ``hfrl train`` run, from its resolved settings to its closing lines: the run layer's side of the
command (``hfrl.cli.train`` parses the command line into a resolved run and calls :func:`train_run`).

    check_launch(threads=None)                      # rank variables, devices, --threads: before any folder
    run = experiment.resolve_run("numbers", "ppo", "tiny", None, {}, "runs/n", None)
    train_run(run, say=print)

The phases, one call each: the folder (:class:`~hfrl.runs.run_folder.RunFolder`: locked; a start that
fails leaves it as it was), the trainer and its ``config.yaml`` (:func:`hfrl.runs.experiment.build_trainer`,
which gives the trainer its :class:`~hfrl.trainers.run_facts.RunFacts`), the start line, training (SIGTERM:
stop at an iteration's end with a complete checkpoint, :func:`hfrl.trainers.graceful_stop.stop_on_sigterm`),
a reward model's held-out pairs, the saved model and card, the closing lines.

    python -m pytest tests/cli/test_run_facts.py tests/cli/test_cli.py
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

Say = Callable[[str], None]


class StoppedBySigterm(Exception):
    """The run stopped on SIGTERM at an iteration's end, its checkpoint complete (the first process said
    so and how to continue): the command's exit code is 143 (128 + SIGTERM)."""

    exit_code = 143


def check_launch(threads: int | None = None) -> None:
    """What would stop a launch, each in one line, before any folder is made or torch imported: rank
    variables a launcher did not set, FSDP / DeepSpeed on a machine without GPUs, ``--threads`` below 1."""
    from hfrl.runs.run_folder import launch_rank
    from hfrl.trainers.devices import check_launch_devices, check_threads

    launch_rank()
    check_launch_devices()
    check_threads(threads)


def train_run(
    run: dict[str, Any],
    *,
    resume: bool = False,
    overwrite: bool = False,
    threads: int | None = None,
    starting: Callable[[], None] = lambda: None,
    say: Say = print,
) -> None:
    """Train the resolved ``run`` (:func:`hfrl.runs.experiment.resolve_run` or ``resolve_resume``) in its
    folder; ``say`` prints the first process's lines. ``resume``: continue the run
    in its folder from its last complete checkpoint; ``overwrite``: replace the run in the folder;
    ``threads``: torch's CPU threads (default: :func:`hfrl.trainers.devices.cpu_threads`'); ``starting()``
    is called when training starts (``hfrl train``: SIGTERM before it stops the command, after it stops
    the run at an iteration's end). Raises :class:`StoppedBySigterm` when SIGTERM stopped it."""
    from hfrl.runs.run_folder import RunFolder
    from hfrl.trainers.devices import close_process_group

    default = run["output_dir"]
    folder = RunFolder(run["output_dir"], overwrite=overwrite, resume=resume,
                       from_file=getattr(run, "output_dir_from", None),
                       number=getattr(run, "output_dir_default", False))  # fmt: skip
    with folder:  # locked; a start that fails leaves it as it was; one run per folder
        run["output_dir"] = str(folder.path)  # a default folder that was taken gives way to the next number
        trainer, checkpoint = _build(run, folder, resume, threads)  # a run's refusals come first, before torch
        from hfrl.runs.run_eval import heldout_pairs
        from hfrl.runs.run_report import start_line

        main = trainer.is_world_process_zero()
        if main:
            say(start_line(trainer, run, earlier=default, resumed=resume))
        starting()  # from here SIGTERM stops at an iteration's end with a checkpoint
        _run_training(trainer, checkpoint, say if main else None)
        # a reward model: its held-out accuracy, before the card is written
        heldout = heldout_pairs(trainer, run["task"]) if trainer.run_facts.reward_model else None
        trainer.save_model()
    if main:
        for line in closing_lines(run, trainer, heldout):
            say(line)
    del trainer  # DDP's reducer holds the default group on the C++ side: it must go before the group is closed
    close_process_group()  # every process, after the last collective: a ZeRO-3 run could abort at exit without it


def _build(run: dict[str, Any], folder: Any, resume: bool, threads: int | None) -> tuple[Any, str | bool | None]:
    """The trainer in ``folder`` (its CPU threads set, its ``config.yaml`` written, the folder told when
    it starts) and the checkpoint it resumes from (None: a new run)."""
    from hfrl.runs import experiment  # read at call time: a test may replace build_trainer / save_run_config
    from hfrl.trainers.devices import set_cpu_threads

    named = run.pop("resume_from_checkpoint", None)  # a checkpoint named explicitly
    checkpoint = (named or experiment.last_checkpoint(run["output_dir"])) if resume else named
    trainer = experiment.build_trainer(run)
    set_cpu_threads(trainer.model, threads, use_cpu=trainer.args.use_cpu or trainer.args.device.type == "cpu")
    experiment.save_run_config(run, trainer)
    trainer.add_callback(folder.callback)
    return trainer, checkpoint


def _run_training(trainer: Any, checkpoint: str | bool | None, say: Say | None) -> None:
    """``trainer.train()``, the checkpoint it resumes from named on the console and SIGTERM taken at an
    iteration's end (``say``: the first process's console, None on the others)."""
    from hfrl.trainers.graceful_stop import stop_on_sigterm

    with _resume_said(say is not None), stop_on_sigterm(trainer, say) as stop:
        trainer.train(resume_from_checkpoint=checkpoint)
    if stop.stopped:
        if say is not None:
            out, per = trainer.args.output_dir, getattr(trainer.args, "steps_per_iteration", None)
            at = f"iteration {stop.step // per} (step {stop.step})" if per else f"step {stop.step}"
            say(f"stopped by SIGTERM after {at}: checkpoint-{stop.step} is complete; continue the run "
                f"with: hfrl train -o {out} --resume")  # fmt: skip
        raise StoppedBySigterm(f"stopped by SIGTERM after step {stop.step}")


def closing_lines(run: dict[str, Any], trainer: Any, heldout: str | None = None) -> list[str]:
    """The lines after the run: the test split's before / after table (``--eval-test``), a reward model's
    held-out accuracy (``heldout``), the result, what was saved where and the next commands
    (:func:`hfrl.runs.run_report.end_lines`)."""
    from hfrl.runs.run_report import end_lines
    from hfrl.utils.trust import names_code

    out, facts, evaluated = trainer.args.output_dir, trainer.run_facts, bool(run.get("eval_test"))
    lines = eval_table_lines(out, "test") if evaluated else []
    lines += [heldout] if heldout else []
    own_code = names_code(run) is not None  # hfrl eval on this run reads its config: --trust-code
    reward_model = (run["task"], str(run["model"])) if facts.reward_model else None
    splits = list(facts.splits) or None
    return lines + end_lines(out, trainer.state.log_history, evaluated, splits, own_code, reward_model)


def eval_table_lines(output_dir: str, split: str) -> list[str]:
    """``--eval-test``: the before / after table of ``split``, as ``hfrl eval`` prints it (none when
    neither was written)."""
    import json
    from pathlib import Path

    from hfrl.runs.run_config import BASE_SUFFIX, EVAL_DIR
    from hfrl.runs.run_eval import format_table

    columns = {}
    for name, file in (("before", f"{split}{BASE_SUFFIX}.json"), ("after", f"{split}.json")):
        path = Path(output_dir) / EVAL_DIR / file
        if path.is_file():
            columns[name] = json.loads(path.read_text())
    if not columns:
        return []
    first = next(iter(columns.values()))
    return [f"{first.get('task')} / {split} ({first.get('num_samples')} prompts), before and after training:",
            format_table(columns)]  # fmt: skip


@contextlib.contextmanager
def _resume_said(main: bool) -> Iterator[None]:
    """While training: the INFO line in which the trainer names the checkpoint it resumes from
    (:mod:`hfrl.trainers.crash_safe`) is printed on the console (main process only)."""
    import logging

    logger = logging.getLogger("hfrl.trainers.crash_safe")
    if not main:
        yield
        return
    handler, level = logging.StreamHandler(), logger.level
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def resume_folder(task: str | None, alg: str | None, model: str | None = None, say: Say = print) -> str:
    """The folder ``--resume`` continues without ``--output-dir``: the newest run of runs/TASK-ALG (or
    runs/TASK-ALG-N, the numbered ones) that has a checkpoint (a path read from a file never chooses
    the folder a command writes into); ``model``: that model's runs only. ``say``: the note naming the
    other resumable runs."""
    from hfrl.runs.experiment import default_output_dir
    from hfrl.runs.run_folder import numbered_runs, resumable_runs

    if not task:
        raise ValueError("--resume: which run? pass --output-dir DIR (or --task, for runs/TASK-ALG)")
    base = default_output_dir(task, alg or "ppo")
    found = resumable_runs(base)
    if model is not None:  # the runs of that model only
        from hfrl.runs.run_config import CONFIG_NAME, read_config_file

        found = [p for p in found if str(read_config_file(p / CONFIG_NAME).get("model")) == model]
    if found:
        if len(found) > 1:
            others = ", ".join(str(p) for p in found[1:4])
            say(f"--resume: {found[0]} holds the newest checkpoint (also resumable: {others}; -o DIR picks one)")
        return str(found[0])
    runs = numbered_runs(base)
    if not runs:
        raise ValueError(f"--resume: no run in {base} to resume; train without --resume, or pass --output-dir DIR")
    from hfrl.runs.run_folder import stopped_before_checkpoint, stopped_early

    stopped = [p for p in runs if stopped_before_checkpoint(p)]
    if stopped:  # killed before its first checkpoint: the same command without --resume starts it again there
        raise ValueError(stopped_early(stopped[0]))
    raise ValueError(
        f"--resume: no checkpoint-* folder in {', '.join(str(p) for p in runs[:3])}; train with --save_every N "
        "(or --save_steps N) first, or pass --output-dir DIR"
    )


__all__ = ["StoppedBySigterm", "check_launch", "closing_lines", "eval_table_lines", "resume_folder", "train_run"]
