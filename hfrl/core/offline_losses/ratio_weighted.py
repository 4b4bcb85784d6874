"""The sequence-ratio variants (Baheti et al. 2024, §2.2): ``r_lol``, ``R * clamp(rho) * L``, and ``a_lol``,
``A+ * clamp(rho) * L``, with ``rho = pi(y|x) / pi_ref(y|x) = exp(L_ref - L)`` clamped to
``[1 - ppo_clip, 1 + ppo_clip]`` (detached)."""

from __future__ import annotations

import torch
from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss, clamped


class _RatioWeighted(OfflineLoss):
    needs_reference = True

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        with torch.no_grad():
            rho, clipped = clamped(torch.exp(batch.reference_nll - nll), batch.ppo_clip)  # rho = exp(L_ref - L)
        weight = scale * rho
        return weight * nll, {"rho": rho, "rho_clipped": clipped, "weight": weight}  # scale * clamp(rho) * L


class RLoL(_RatioWeighted):
    """R-LoL: the NLL times the reward and the clamped sequence ratio pi / pi_ref."""

    weight = "reward"


class ALoL(_RatioWeighted):
    """A-LoL: the NLL times the positive advantage A+ and the clamped sequence ratio pi / pi_ref."""

    weight = "advantage"


__all__ = ["ALoL", "RLoL"]
