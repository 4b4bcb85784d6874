"""``cispo``: Clipped IS-weight Policy Optimization (MiniMax-M1, arXiv 2506.13585, §3.1, eq. 4-5): the
importance weight itself is clipped and detached, ``-agg(sg(clip(rho, 1 - eps_low, 1 + eps_high)) A log pi)``,
so every token keeps its gradient (PPO's clip zeroes the gradient of a token whose ratio left the range:
often the rare "However" / "Wait" tokens). MiniMax-M1 sets no lower bound (eps_low large: 1.0 here, the
weight >= 0) and tunes eps_high; the default 0.28 is DAPO's clip-higher value (Trinity-RFT's CISPO default).
The loss is a token mean over the minibatch (its 1 / sum_i |o_i|). docs/algorithms.md §15.

    python -m pytest tests/unit/test_policy_losses.py -k cispo
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean
from hfrl.core.policy_losses.base import CLIP_SETTINGS, PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


class CISPO(PolicyLoss):
    """CISPO: the policy gradient weighted by the clipped, detached importance ratio; every token keeps its gradient."""

    defaults: ClassVar[dict[str, Any]] = {"cliprange_low": 1.0, "cliprange_high": 0.28}
    paper = "minimax2025minimax"
    reads = (*CLIP_SETTINGS, "loss_aggregation")  # the clip of the detached weight

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        logprobs = taken_logprobs(out)
        low, high = self.settings.clip_bounds
        with torch.no_grad():
            ratio = torch.exp(logprobs - batch.logprobs)
            weight = torch.clamp(ratio, low, high)  # sg(clip(rho, 1 - eps_low, 1 + eps_high))
        loss = -self.aggregate(weight * batch.advantages * logprobs, batch.train_mask)
        with torch.no_grad():
            mask = batch.train_mask
            stats = {
                "clipfrac": masked_mean(((ratio < low) | (ratio > high)).float(), mask),
                "approx_kl": masked_mean((ratio - 1) - (logprobs - batch.logprobs), mask),
            }
        return loss, stats


__all__ = ["CISPO"]
