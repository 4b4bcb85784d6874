"""One online iteration's record, from its rollout to its last update, typed.

:meth:`hfrl.trainers.online.online_trainer.OnlineTrainer.collect_rollout` opens it, the policy step
(TRPO) and every minibatch's loss add to it, and the Trainer's training log of the iteration closes
it: one ``iterations.jsonl`` line per iteration.

    python -m pytest tests/trainers/test_ppo_trainer.py
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class IterationRecord:
    """What one iteration logs, as it fills up.

    >>> record = IterationRecord(start=0.0, update_start=1.5, tokens=40, kl_coef=0.1, metrics={"reward": 0.5})
    >>> record.add_update({"loss/policy": 1.0}); record.add_update({"loss/policy": 3.0})
    >>> record.update_means()
    {'loss/policy': 2.0}
    """

    start: float  # time.perf_counter() when the rollout began
    update_start: float  # ... when the rollout was assembled and the updates began
    tokens: int  # completion tokens this process generated
    kl_coef: float  # the KL coefficient beta the rollout was assembled with (and its loss's KL term uses)
    metrics: dict[str, float]  # rollout statistics, rewards, timings, the action space's and the policy step's
    updates: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # each minibatch's loss stats

    def add_update(self, stats: dict[str, float]) -> None:
        """One minibatch's loss statistics (averaged into the log entry)."""
        for key, value in stats.items():
            self.updates[key].append(value)

    def update_means(self) -> dict[str, float]:
        """The mean of each loss statistic over the iteration's minibatches (this process's)."""
        return {key: sum(values) / len(values) for key, values in self.updates.items()}
