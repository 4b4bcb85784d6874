"""``surrogate``: the unclipped importance-weighted objective, ``-agg(rho A)``, ``rho = exp(logp - logp_old)``:
what TRPO's natural-gradient step maximises inside its KL trust region (Schulman et al. 2015, eq. 14).
docs/algorithms.md §5.

    python -m pytest tests/unit/test_policy_losses.py -k surrogate
"""

from __future__ import annotations

import torch
from torch import Tensor

from hfrl.core.policy_losses.base import PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


class Surrogate(PolicyLoss):
    """The unclipped surrogate -rho A that TRPO's trust-region step maximises (Schulman et al. 2015)."""

    surrogate = True  # an importance-weighted estimate of the improvement: TRPO can step on it

    paper = "schulman2015trust"

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        ratio = torch.exp(taken_logprobs(out) - batch.logprobs)
        return -self.aggregate(ratio * batch.advantages, batch.train_mask), {}


__all__ = ["Surrogate"]
