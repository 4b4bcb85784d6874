"""A :class:`~hfrl.core.rollout.Rollout` minibatch built from the few tensors a loss reads, for hand-computed
loss tests (``from hfrl.testing.minibatch import minibatch``)."""

from __future__ import annotations

from typing import Any

import torch

from hfrl.core.rollout import Rollout


def minibatch(mask: Any, **fields: Any) -> Rollout:
    """A rollout of ``mask``'s shape ``(B, T)`` whose other per-token tensors are zero unless given
    (``logprobs`` are the rollout's old log-probs, ``values`` its critic's; ``None`` is kept as None).

    >>> batch = minibatch([[1, 1, 0]], advantages=[[1.0, -1.0, 0.0]])
    >>> batch.train_mask.tolist(), batch.advantages.tolist(), batch.values
    ([[1, 1, 0]], [[1.0, -1.0, 0.0]], None)
    """
    mask = torch.as_tensor(mask)
    zeros = torch.zeros(mask.shape)
    tensors = {k: (torch.as_tensor(v, dtype=torch.float32) if v is not None else None) for k, v in fields.items()}
    default = {name: zeros.clone() for name in ("logprobs", "ref_logprobs", "kl", "rewards", "advantages", "returns")}
    rows = mask.shape[0]
    values = tensors.pop("values", None)
    per_token: dict[str, Any] = {**default, **tensors}
    return Rollout(
        query_ids=torch.zeros(rows, 1, dtype=torch.long),
        query_mask=torch.ones(rows, 1, dtype=torch.long),
        response_ids=torch.zeros(mask.shape, dtype=torch.long),
        response_mask=mask,
        values=values,
        scores=torch.zeros(rows),
        **per_token,
    )


__all__ = ["minibatch"]
