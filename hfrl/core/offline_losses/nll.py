"""``nll``: supervised fine-tuning on the data's completions, ``L`` (A-LoL's NLL baseline, Baheti et al. 2024)."""

from __future__ import annotations

from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss, nll_weighted


class NLL(OfflineLoss):
    """Negative log-likelihood of the data's completions (behaviour cloning, no reward)."""

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return nll_weighted(scale, nll)  # L


__all__ = ["NLL"]
