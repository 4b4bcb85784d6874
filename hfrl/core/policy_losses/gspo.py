"""``gspo``: Group Sequence Policy Optimization (Zheng et al. 2025, arXiv 2507.18071): the importance
ratio of a whole completion, ``s_i = (pi(y_i | x) / pi_old(y_i | x))^(1 / |y_i|) = exp(mean_t(logp - logp_old))``,
clipped as PPO clips a token's, in its token form (GSPO-token, §4.3, eq. 13-14: ``s_{i,t} = sg(s_i) pi(y_t) /
sg(pi(y_t))``, the same value as ``s_i`` with each token's own gradient, so per-token advantages work too).
The paper clips at 3e-4 / 4e-4 (§5.1) and averages each completion's tokens (seq-mean-token-mean):
those are its defaults. docs/algorithms.md §15.

    python -m pytest tests/unit/test_policy_losses.py -k gspo
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean
from hfrl.core.policy_losses.base import CLIP_SETTINGS, PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


class GSPO(PolicyLoss):
    """GSPO: PPO's clip on each completion's length-normalised sequence ratio, not on each token's ratio."""

    surrogate = True  # an importance-weighted estimate of the improvement: TRPO can step on it

    needs_whole_sequences = True  # the ratio is a completion's: minibatches of whole completions
    defaults: ClassVar[dict[str, Any]] = {
        "cliprange_low": 3e-4,
        "cliprange_high": 4e-4,
        "loss_aggregation": "seq-mean-token-mean",
    }
    paper = "zheng2025group"
    reads = (*CLIP_SETTINGS, "loss_aggregation")  # the sequence ratio's clip

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        logprobs, mask = taken_logprobs(out), batch.response_mask.to(batch.advantages.dtype)
        log_ratio = (logprobs - batch.logprobs) * mask
        sequence = log_ratio.sum(1) / mask.sum(1).clamp(min=1)  # log s_i = mean_t(logp - logp_old)
        # s_{i,t} = sg(s_i) * pi(y_t) / sg(pi(y_t)): the value of s_i, the gradient of log pi(y_t)
        ratio = torch.exp(logprobs - logprobs.detach() + sequence.detach().unsqueeze(1))
        low, high = self.settings.clip_bounds
        advantages = batch.advantages
        objective = torch.min(ratio * advantages, torch.clamp(ratio, low, high) * advantages)
        loss = -self.aggregate(objective, batch.train_mask)
        with torch.no_grad():
            rows = mask.sum(1) > 0
            clipped = ((sequence.exp() < low) | (sequence.exp() > high)).float()
            stats = {
                "clipfrac": (clipped * rows).sum() / rows.sum().clamp(min=1),  # of the completions
                "approx_kl": masked_mean((log_ratio.exp() - 1) - log_ratio, mask),
            }
        return loss, stats


__all__ = ["GSPO"]
