"""``dis``: SAO's direct double-sided importance sampling (arXiv 2607.07508, §3.1, eq. 3): the importance
ratio ``rho = pi_theta / pi_rollout`` of each token is its weight while it lies strictly inside a trust
region, ``1 - eps_low < rho < 1 + eps_high``, and the token is masked (weight 0, not clipped) outside it,
whatever the advantage's sign:

    loss = -agg( 1[1 - eps_low < rho < 1 + eps_high] * rho * A )

Its gradient is ``-agg(1[in] * rho * A * grad log pi)``: the ratio as a detached weight on the policy
gradient (what the paper's REINFORCE form computes). The denominator of the mean counts the masked
tokens too: a masked token adds 0, it does not raise the others' weight. SAO trains on the rollout's
own log-probs as the behaviour policy (hfrl's rollouts are synchronous: they are pi_old's); the paper's
math setting is eps_low 0.3, eps_high 5.0 (coding: 0.8, 3.0). docs/algorithms.md §15.

    python -m pytest tests/unit/test_policy_losses.py -k dis
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean
from hfrl.core.policy_losses.base import CLIP_SETTINGS, PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


class DIS(PolicyLoss):
    """SAO's DIS: the ratio weighs each token inside a strict two-sided trust region; outside it a token is masked."""

    defaults: ClassVar[dict[str, Any]] = {"cliprange_low": 0.3, "cliprange_high": 5.0}
    surrogate = True  # its value is an importance-weighted estimate of the improvement, as TRPO's
    paper = "sao2026single"
    reads = (*CLIP_SETTINGS, "loss_aggregation")  # the trusted ratio's band

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        logprobs = taken_logprobs(out)
        low, high = self.settings.clip_bounds
        ratio = torch.exp(logprobs - batch.logprobs)  # rho = pi_theta / pi_rollout, with its gradient
        trusted = (ratio > low) & (ratio < high)  # strict on both sides, whatever the sign of A
        loss = -self.aggregate(torch.where(trusted, ratio * batch.advantages, 0.0), batch.train_mask)
        with torch.no_grad():
            mask = batch.train_mask
            stats = {
                "clipfrac": masked_mean((~trusted).float(), mask),  # the masked tokens' share
                "approx_kl": masked_mean((ratio - 1) - (logprobs - batch.logprobs), mask),
            }
        return loss, stats


__all__ = ["DIS"]
