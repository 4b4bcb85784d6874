"""``ppo_clip``: PPO's clipped surrogate (Schulman et al. 2017, eq. 7), with DAPO's asymmetric clip
(Yu et al. 2025, "clip-higher": ``cliprange_low`` != ``cliprange_high``) and dual-clip for negative
advantages (Ye et al. 2020, "Mastering Complex Control in MOBA Games", eq. 5: ``clip_ratio_c``).
docs/algorithms.md §2 and §15.

    python -m pytest tests/unit/test_policy_losses.py -k ppo_clip
"""

from __future__ import annotations

import torch
from torch import Tensor

from hfrl.core.advantages import masked_mean
from hfrl.core.policy_losses.aggregation import aggregate
from hfrl.core.policy_losses.base import CLIP_SETTINGS, LossSettings, PolicyLoss, PolicyOutputs, taken_logprobs
from hfrl.core.rollout import Rollout


def clipped_surrogate(
    logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor, settings: LossSettings
) -> tuple[Tensor, dict[str, Tensor]]:
    """``-agg(min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A))``, ``rho = exp(logp - logp_old)``; with
    ``clip_ratio_c``, where ``A < 0`` the term is ``max(that, c A)`` (dual-clip: a ratio that grew far
    past 1 on a bad token stops pushing), and ``agg`` the settings' aggregation."""
    low, high = settings.clip_bounds
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    objective = torch.min(ratio * advantages, torch.clamp(ratio, low, high) * advantages)
    if settings.clip_ratio_c is not None:  # -max(-objective, -c A) for A < 0: objective >= c A
        dual = torch.max(objective, settings.clip_ratio_c * advantages)
        objective = torch.where(advantages < 0, dual, objective)
    loss = -aggregate(objective, mask, settings.loss_aggregation, settings.max_tokens)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean(((ratio < low) | (ratio > high)).float(), mask),
            "approx_kl": masked_mean((ratio - 1) - log_ratio, mask),  # k3 estimator, as in SB3
        }
        if settings.clip_ratio_c is not None:
            stats["dual_clipfrac"] = masked_mean(((advantages < 0) & (ratio * advantages < settings.clip_ratio_c
                                                                      * advantages)).float(), mask)  # fmt: skip
    return loss, stats


class PPOClip(PolicyLoss):
    """PPO's clipped ratio: -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A), per token (Schulman et al. 2017)."""

    surrogate = True  # an importance-weighted estimate of the improvement: TRPO can step on it

    paper = "schulman2017proximal"
    reads = (*CLIP_SETTINGS, "clip_ratio_c", "loss_aggregation")  # dual-clip is this loss's alone

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        return clipped_surrogate(taken_logprobs(out), batch.logprobs, batch.advantages, batch.train_mask, self.settings)


__all__ = ["PPOClip", "clipped_surrogate"]
