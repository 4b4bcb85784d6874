"""How a policy loss turns its per-token terms into one number: ``loss_aggregation`` (docs/algorithms.md §15).

The names are verl's ``loss_agg_mode``. With ``m`` the minibatch's training mask (``(B, T)``, 1 on the
tokens the loss counts) and ``l_t`` a completion's per-token loss:

- ``token-mean``: ``sum_{i,t} m l / sum_{i,t} m``, every token of the minibatch weighs the same (RL4LMs,
  SB3, DAPO's token-level loss, hfrl's default);
- ``seq-mean-token-mean``: ``mean_i (sum_t m l / sum_t m)``, each completion weighs the same, its tokens
  averaged (GRPO's 1/|o_i|, GSPO);
- ``seq-mean-token-sum``: ``mean_i sum_t m l``, each completion's tokens summed;
- ``seq-mean-token-sum-norm``: ``sum_{i,t} m l / (B x max_tokens)``, Dr. GRPO's constant normaliser
  (Liu et al. 2025, §3.1: no 1/|o_i| length bias; verl divides by the horizon only, hfrl by rows too,
  a constant factor, so that the scale does not grow with the batch).

    python -m pytest hfrl/core/policy_losses/aggregation.py
"""

from __future__ import annotations

from torch import Tensor

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def aggregate(values: Tensor, mask: Tensor, mode: str = "token-mean", max_tokens: int | None = None) -> Tensor:
    """``values`` ``(B, T)`` aggregated over ``mask`` as ``mode`` says (the module's list). Rows the mask
    leaves empty (a dropped completion, a token minibatch's other rows) count in no mean.

    >>> import torch
    >>> v, m = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]), torch.tensor([[1, 1, 1], [1, 0, 0]])
    >>> [round(float(aggregate(v, m, mode, max_tokens=3)), 4) for mode in AGGREGATIONS]
    [2.5, 3.0, 5.0, 1.6667]

    (token-mean 10 / 4; seq-mean-token-mean (2 + 4) / 2; seq-mean-token-sum (6 + 4) / 2;
    seq-mean-token-sum-norm 10 / (2 x 3).)
    """
    mask = mask.to(values.dtype)
    if mode == "token-mean":
        return (values * mask).sum() / mask.sum().clamp(min=1)
    if mode == "seq-mean-token-sum-norm":
        if max_tokens is None:
            raise ValueError("loss_aggregation seq-mean-token-sum-norm divides by max_new_tokens: pass max_tokens")
        return (values * mask).sum() / (mask.shape[0] * max_tokens)
    tokens = mask.sum(1)
    rows = tokens > 0
    sums = (values * mask).sum(1)
    if mode == "seq-mean-token-mean":
        per_row = sums / tokens.clamp(min=1)
    elif mode == "seq-mean-token-sum":
        per_row = sums
    else:
        raise ValueError(f"unknown loss_aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")
    return (per_row * rows).sum() / rows.sum().clamp(min=1)


__all__ = ["AGGREGATIONS", "aggregate"]
