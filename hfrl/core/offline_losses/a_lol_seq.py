"""``a_lol_seq``: A-LoL with a clamped ratio per token, ``A+ * sum_t clamp(rho_t) * (-log pi(y_t))``,
``rho_t = pi(y_t) / pi_ref(y_t)`` (Baheti et al. 2024, §2.3, "A-LoL seq.")."""

from __future__ import annotations

import torch
from torch import Tensor

from hfrl.core.offline_losses.base import OfflineBatch, OfflineLoss, clamped


class ALoLSeq(OfflineLoss):
    """A-LoL sequence: each token's NLL times its own clamped ratio pi(y_t) / pi_ref(y_t), times A+."""

    weight = "advantage"
    needs_reference = True

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        assert batch.ref_logprobs is not None
        mask = batch.mask.to(batch.logprobs.dtype)
        with torch.no_grad():
            rho_t, clipped = clamped(torch.exp(batch.logprobs - batch.ref_logprobs.to(batch.logprobs)), batch.ppo_clip)
            rho_t, count = rho_t * mask, mask.sum(1).clamp(min=1)
        rho = rho_t.sum(1) / count
        parts = {"rho": rho, "rho_clipped": (clipped * mask).sum(1) / count, "weight": scale * rho}
        return scale * (rho_t * batch.token_nll).sum(1), parts  # A+ * sum_t clamp(rho_t) * (-log pi(y_t))


__all__ = ["ALoLSeq"]
