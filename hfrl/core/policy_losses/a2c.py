"""``a2c``: the plain policy gradient of A2C (Mnih et al. 2016) and REINFORCE: ``-agg(A log pi)``, no
ratio, no clipping (one gradient step per rollout: the log-probs are the rollout's own).
docs/algorithms.md §4.

    python -m pytest tests/unit/test_policy_losses.py -k a2c
"""

from __future__ import annotations

from torch import Tensor

from hfrl.core.policy_losses.base import PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


class A2C(PolicyLoss):
    """The policy gradient -A log pi, no ratio or clipping (A2C, Mnih et al. 2016; REINFORCE with a baseline)."""

    paper = "mnih2016asynchronous"

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        return -self.aggregate(batch.advantages * taken_logprobs(out), batch.train_mask), {}  # -mean(A log pi)


__all__ = ["A2C"]
