"""``a_lol_kl``: A-LoL with a KL penalty instead of the ratio, ``A+ * L + beta * (log pi(y|x) - log pi_ref(y|x))``
(Baheti et al. 2024, §2.3, "A-LoL KL")."""

from __future__ import annotations

from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss


class ALoLKL(OfflineLoss):
    """A-LoL KL: the NLL times A+, plus beta times the sequence KL to the reference."""

    weight = "advantage"
    needs_reference = True

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        # A+ * L + beta * (L_ref - L), L_ref - L = log pi(y|x) - log pi_ref(y|x)
        return scale * nll + batch.kl_beta * (batch.reference_nll - nll), {"weight": scale}


__all__ = ["ALoLKL"]
