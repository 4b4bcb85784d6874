"""``r_gold``: reward-weighted GOLD (Pang & He 2021, as A-LoL's baseline): each token's NLL weighted by
its own probability, floored, ``R * sum_t max(pi(y_t), floor) * (-log pi(y_t))``."""

from __future__ import annotations

import torch
from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss


class RGold(OfflineLoss):
    """Reward GOLD: each token's NLL weighted by max(pi(y_t), 0.1), times the reward R."""

    weight = "reward"

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        mask = batch.mask.to(batch.logprobs.dtype)
        with torch.no_grad():
            token_weight = torch.clamp(batch.logprobs.exp(), min=batch.gold_floor) * mask  # max(pi(y_t), 0.1)
        weight = scale * (token_weight.sum(1) / mask.sum(1).clamp(min=1))
        return scale * (token_weight * batch.token_nll).sum(1), {"weight": weight}  # R * sum_t w_t * (-log pi(y_t))


__all__ = ["RGold"]
