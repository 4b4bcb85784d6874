"""The state of the online iteration under way, on one value: its rollout, the KL coefficient beta the
rollout was assembled with (the one the update's KL term uses), whether it is one of the critic's warm-up
iterations, and the passes over it still to run.

:meth:`hfrl.trainers.online.online_trainer.OnlineTrainer.collect_rollout` makes it; the update's
minibatches (:func:`hfrl.trainers.online.update.minibatches`) fill its ``pending`` passes, and each
micro-step takes the next one. It outlives the iteration's log entry (the
:class:`~hfrl.trainers.online.iteration_record.IterationRecord`, closed by the Trainer's log) until the
next rollout replaces it.

    python -m pytest tests/trainers/test_iteration_state.py
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hfrl.core.rollout import Rollout

#: one micro-step's minibatch, or a callable that makes the next minibatches when their turn comes (the
#: policy's, from advantages estimated again after the critic's passes moved the critic)
Pass = Rollout | Callable[[], list[Rollout]]


@dataclass
class IterationState:
    """One iteration's rollout, its beta, its warm-up flag and its pending passes.

    >>> from unittest.mock import sentinel
    >>> state = IterationState(rollout=sentinel.rollout, kl_coef=0.05, warming_up=False)
    >>> state.pending = [sentinel.first, lambda: [sentinel.second, sentinel.third]]
    >>> [state.next_minibatch() for _ in range(3)], state.pending
    ([sentinel.first, sentinel.second, sentinel.third], [])
    """

    rollout: Rollout  # the iteration's rollout (hfrl.core.rollout.Rollout)
    kl_coef: float  # beta: the rollout was assembled with it, the loss's KL term (kl_in_loss) uses it
    warming_up: bool  # one of the critic's warm-up iterations (critic_warmup_iterations): the critic alone learns
    pending: list[Pass] = field(default_factory=list)  # the passes' minibatches still to run, in order

    def next_minibatch(self) -> Rollout:
        """The next micro-step's minibatch; a pending callable is made into its minibatches first."""
        item = self.pending.pop(0)
        while callable(item):
            self.pending[:0] = item()
            item = self.pending.pop(0)
        return item


__all__ = ["IterationState", "Pass"]
