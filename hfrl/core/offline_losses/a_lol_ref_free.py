"""``a_lol_ref_free``: A-LoL without the reference ratio, ``A+ * L`` (Baheti et al. 2024, §2.3)."""

from __future__ import annotations

from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss, nll_weighted


class ALoLRefFree(OfflineLoss):
    """A-LoL reference-free: the NLL times the positive advantage A+ = max(R - V(x), 0), no ratio."""

    weight = "advantage"

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return nll_weighted(scale, nll)  # A+ * L


__all__ = ["ALoLRefFree"]
