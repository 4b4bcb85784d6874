"""``wbc``: weighted behaviour cloning, ``R * L`` (A-LoL's baseline, Baheti et al. 2024, §3)."""

from __future__ import annotations

from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss, nll_weighted


class WBC(OfflineLoss):
    """Weighted behaviour cloning: each completion's NLL times its reward R."""

    weight = "reward"

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return nll_weighted(scale, nll)  # R * L


__all__ = ["WBC"]
