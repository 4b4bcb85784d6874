"""``iterations.jsonl``: a run's log entries, one JSON line each, written as they are logged.

``trainer_state.json`` is written at checkpoints and at the end of training, so a killed run lost the
curve since its last checkpoint. This file gets each entry of the Trainer's ``log_history`` (the
same dict, ``step`` included) appended and flushed the moment it is logged: for the online trainers
one line per iteration (with its ``iteration``), for the offline and TRL trainers one line per
logging step, and evaluations and the final summary as lines of their own. RL4LMs kept such logs.

Beside it, the other callbacks that report a run as it goes: ``SaveStateAtEnd`` (``trainer_state.json``
at the end of training), the online trainers' progress bar over iterations (``IterationProgress``)
and the other trainers' bar over optimizer steps (``StepProgress``: TRL's, A-LoL, PRO), each with
the few numbers that matter instead of the Trainer's raw log dict at every logging step.
"""

from __future__ import annotations

import json
import os
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState

ITERATIONS_NAME = "iterations.jsonl"


class IterationLog(TrainerCallback):
    """Append every new ``log_history`` entry to ``<output_dir>/iterations.jsonl`` (main process only)."""

    def on_log(
        self,
        args: Any,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if state.is_world_process_zero and state.log_history:
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, ITERATIONS_NAME), "a") as fh:
                fh.write(json.dumps(state.log_history[-1], default=str) + "\n")


def restart_log(output_dir: str, resumed_step: int | None) -> None:
    """Prepare ``iterations.jsonl`` for a run that starts: a new run (``resumed_step`` None) starts an
    empty file; a run resumed from the checkpoint at ``resumed_step`` keeps the lines up to that step
    and drops those logged after it by the run that was interrupted, since the resumed run logs those
    steps again (bit-exactly the same values but for timings): each step appears once."""
    path = os.path.join(output_dir, ITERATIONS_NAME)
    if not os.path.isfile(path):
        return
    kept: list[str] = []
    if resumed_step is not None:
        with open(path) as fh:
            kept = [line for line in fh if (step := _step(line)) is not None and step <= resumed_step]
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.writelines(kept)
    os.replace(tmp, path)


def _step(line: str) -> int | None:
    """The ``step`` of a line; None for a line cut short by a kill or not an entry."""
    try:
        entry: Any = json.loads(line)
    except ValueError:
        return None
    step = entry.get("step") if isinstance(entry, dict) else None
    return step if isinstance(step, int) else None


class SaveStateAtEnd(TrainerCallback):
    """``trainer_state.json`` (with the whole ``log_history``) in the output dir of every run, which
    the Trainer writes only into checkpoints: the card's curve reads it."""

    def on_train_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            os.makedirs(args.output_dir, exist_ok=True)
            state.save_to_json(os.path.join(args.output_dir, "trainer_state.json"))


class IterationProgress(TrainerCallback):
    """The online trainers' progress bar: one step per iteration, showing the latest reward and KL."""

    def __init__(self) -> None:
        self.bar = None

    def on_train_begin(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            done = state.global_step // args.steps_per_iteration
            self.bar = tqdm(total=args.num_iterations, initial=done, desc="iterations", dynamic_ncols=True)

    def on_log(
        self,
        args: Any,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.bar is not None and logs and "reward" in logs:
            postfix = {"reward": f"{logs['reward']:.3f}"}
            if logs.get("beta"):  # the KL is measured only when there is a reference model
                postfix["kl"] = f"{round(logs['kl'], 3) + 0.0:.3f}"  # + 0.0: no "-0.000"
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(1)

    def on_train_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class StepProgress(TrainerCallback):
    """The progress bar of the trainers that count optimizer steps (TRL's GRPO / RLOO / SFT / DPO, the
    A-LoL family, PRO), in place of transformers' ``ProgressCallback``, which writes every log entry as a
    raw dict under the bar: one bar over the steps, showing the latest reward (and KL) or loss."""

    SHOWN = (("reward", "reward"), ("kl", "kl"), ("loss", "loss"), ("eval_loss", "eval loss"))

    def __init__(self) -> None:
        self.bar = None

    def on_train_begin(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="steps", dynamic_ncols=True)

    def on_step_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(
        self,
        args: Any,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.bar is None or not logs:
            return
        postfix = {}
        for key, label in self.SHOWN:
            value = logs.get(key)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and not (key == "loss" and "reward" in logs)
            ):
                postfix[label] = f"{value:.4g}"
        if postfix:
            self.bar.set_postfix(postfix, refresh=True)

    def on_train_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class LogAtEpochEnd(TrainerCallback):
    """A log entry at the end of each epoch for the steps since the last one: a run shorter than
    ``logging_steps`` (or one whose sampler ends before the step budget, as A-LoL's drops the samples
    with a negative advantage) still logs its loss, and so gets its curve."""

    def on_epoch_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        control.should_log = True


def report_steps(trainer: Any) -> None:
    """For a trainer that counts optimizer steps: transformers' ``ProgressCallback`` replaced by
    :class:`StepProgress` (a run with ``disable_tqdm`` keeps transformers' ``PrinterCallback``: its log
    entries, one per line), and :class:`LogAtEpochEnd`."""
    from transformers.trainer_callback import ProgressCallback

    if any(isinstance(c, ProgressCallback) for c in trainer.callback_handler.callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(StepProgress())
    trainer.add_callback(LogAtEpochEnd())
