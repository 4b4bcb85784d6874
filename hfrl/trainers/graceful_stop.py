"""SIGTERM ends a run at its next iteration boundary with a complete checkpoint, instead of killing it.

SLURM (``scancel``, the end of a job's time), Kubernetes and container runtimes send SIGTERM, then
SIGKILL a grace period later (SLURM's ``KillWait``: 30 s by default). Python's default is to die at
once: the run lost everything since its last checkpoint (resume stayed exact, but from further back).
Inside :func:`stop_on_sigterm`, the first SIGTERM only sets a flag; at the end of the current iteration
(an online trainer's ``steps_per_iteration`` optimizer steps, where a checkpoint resumes bit-exactly;
another trainer's current step) the run writes a complete checkpoint and stops. Every process of a
launch stops at the same step: the flag is combined across processes at each boundary. A second
SIGTERM kills at once, as it would have without hfrl.

    with stop_on_sigterm(trainer) as stop:
        trainer.train()
    if stop.stopped:   # a checkpoint of stop.step is complete: hfrl train --resume continues it
        ...
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState


class SignalStop(TrainerCallback):
    """A ``TrainerCallback``: once :meth:`request` was called (the signal handler), the first iteration
    boundary that every process reaches with the request saves a checkpoint and stops training."""

    def __init__(self, steps_per_iteration: int = 1, agree: Any = None) -> None:
        self.steps_per_iteration = max(1, int(steps_per_iteration))
        self.agree = agree  # flag -> whether any process has it (a launch); None: this process alone
        self.requested = False
        self.stopped = False
        self.step: int | None = None

    def request(self) -> None:
        self.requested = True

    def on_step_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> TrainerControl:
        if state.global_step % self.steps_per_iteration:
            return control
        requested = bool(self.agree(self.requested)) if self.agree is not None else self.requested
        if requested and state.global_step < state.max_steps:  # at max_steps the run ends and saves anyway
            control.should_save = True
            control.should_training_stop = True
            self.stopped, self.step = True, state.global_step
        return control


def _agreement(trainer: Any) -> Any:
    """A function ``flag -> any process's flag`` over the trainer's processes, or None for one process."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None or accelerator.num_processes <= 1:
        return None
    import torch

    def agree(flag: bool) -> bool:
        return bool(accelerator.reduce(torch.tensor([int(flag)], device=accelerator.device), reduction="sum").item())

    return agree


@contextlib.contextmanager
def stop_on_sigterm(trainer: Any, announce: Any = None) -> Iterator[SignalStop]:
    """Inside, SIGTERM stops ``trainer`` at its next iteration boundary with a complete checkpoint (see
    the module docstring); ``announce(line)`` says so when the signal arrives. Outside the main thread
    (where Python cannot take signals) nothing is installed."""
    per_iteration = getattr(trainer.args, "steps_per_iteration", 1)
    stop = SignalStop(per_iteration, _agreement(trainer))
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    trainer.add_callback(stop)

    def handle(signum: int, frame: Any) -> None:
        if stop.requested:  # the second one: as if hfrl had not caught the first
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        stop.request()
        if announce is not None:
            announce("SIGTERM: stopping at the end of this iteration with a complete checkpoint (again: stop now)")

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
        trainer.remove_callback(stop)


__all__ = ["SignalStop", "stop_on_sigterm"]
