"""Advantage estimation for token-level RL: masked statistics, whitening and GAE (docs/algorithms.md §1).

Pure functions on ``(batch, time)`` tensors whose ``mask`` marks the completion tokens (1) against
padding (0). Completions are right-padded, so every row's valid tokens form a prefix.

    python -m pytest tests/unit/test_advantages.py
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# Sums a tensor over all processes (``accelerator.reduce(t, "sum")``); None in a single process.
Reduce = Callable[[torch.Tensor], torch.Tensor] | None


def masked_mean(
    values: torch.Tensor, mask: torch.Tensor, dim: int | None = None, reduce: Reduce = None
) -> torch.Tensor:
    """Mean of ``values`` over the positions where ``mask`` is 1 (over all processes with ``reduce``)."""
    mask = mask.to(values.dtype)
    if dim is not None:
        return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)
    total, count = (values * mask).sum(), mask.sum()
    if reduce is not None:
        total, count = reduce(total), reduce(count)
    return total / count.clamp(min=1)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True, reduce: Reduce = None) -> torch.Tensor:
    """Variance of ``values`` over the masked positions (Bessel-corrected when ``unbiased``)."""
    mean = masked_mean(values, mask, reduce=reduce)
    var = masked_mean((values - mean) ** 2, mask, reduce=reduce)
    n = mask.to(values.dtype).sum()
    if reduce is not None:
        n = reduce(n)
    if unbiased and n > 1:
        var = var * n / (n - 1)
    return var


def whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8, reduce: Reduce = None) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps)`` over the masked positions (of every process with ``reduce``);
    padding comes back as 0."""
    mean, var = masked_mean(values, mask, reduce=reduce), masked_var(values, mask, reduce=reduce)
    return (values - mean) * torch.rsqrt(var + eps) * mask


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.99,
    lam: float | torch.Tensor = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over the completion tokens.

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V`` after the last valid token equal to 0
    (the episode ends there), and ``A_t = sum_k (gamma * lam)^k * delta_{t+k}``.
    The recursion is written as one matrix product with the discount matrix ``D[k, t] =
    (gamma*lam)^(k-t)`` for ``k >= t``, so there is no Python loop over tokens. ``lam`` may be one
    lambda per completion, a ``(batch,)`` tensor (:func:`length_adaptive_lambda`): then the recursion
    ``A_t = delta_t + gamma * lam_i * A_{t+1}`` runs backwards over the tokens, vectorised over rows.

    Returns ``(advantages, returns)``, both ``(batch, time)``, zero on padding;
    ``returns = advantages + values``.
    """
    mask = mask.to(values.dtype)
    values = values * mask
    next_values = torch.zeros_like(values)
    next_values[:, :-1] = values[:, 1:]  # V_{t+1}; 0 past the end (padding is masked to 0)
    deltas = (rewards + gamma * next_values - values) * mask
    if isinstance(lam, torch.Tensor):  # one lambda per completion
        decay = gamma * lam.to(values)
        advantages, running = torch.zeros_like(values), torch.zeros_like(values[:, 0])
        for t in reversed(range(values.shape[1])):
            running = (deltas[:, t] + decay * running) * mask[:, t]  # A_t = delta_t + gamma lam_i A_{t+1}
            advantages[:, t] = running
        return advantages, (advantages + values) * mask
    steps = torch.arange(values.shape[1], device=values.device)
    power = (steps[:, None] - steps[None, :]).to(values.dtype)  # power[k, t] = k - t
    discount = torch.where(power >= 0, (gamma * lam) ** power.clamp(min=0), torch.zeros_like(power))
    advantages = (deltas @ discount) * mask
    return advantages, (advantages + values) * mask


def length_adaptive_lambda(mask: torch.Tensor, alpha: float) -> torch.Tensor:
    """VAPO's length-adaptive lambda (Yue et al. 2025, arXiv 2504.05118) of each completion,
    ``lambda_i = 1 - 1 / (alpha * |y_i|)``, kept in ``[0, 1]``: a long completion's advantages keep more
    of the far reward (lambda near 1), a short one's lean on the critic. ``(batch,)``.

    >>> length_adaptive_lambda(torch.tensor([[1.0] * 40, [1.0] * 10 + [0.0] * 30]), alpha=0.05).tolist()
    [0.5, 0.0]
    """
    lengths = mask.sum(1).to(torch.float32)
    return (1.0 - 1.0 / (alpha * lengths.clamp(min=1))).clamp(0.0, 1.0)


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Returns-to-go ``G_t = sum_{k >= t} gamma^(k - t) * r_k`` over the completion tokens (0 on
    padding): GAE with no critic and lambda 1, one matrix product.

    >>> discounted_returns(torch.tensor([[1.0, 2.0, 4.0]]), torch.ones(1, 3), gamma=0.5).tolist()
    [[3.0, 4.0, 4.0]]
    """
    return gae(rewards, torch.zeros_like(rewards), mask, gamma, 1.0)[0]


def explained_variance(
    predictions: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, reduce: Reduce = None
) -> torch.Tensor:
    """``1 - Var(targets - predictions) / Var(targets)`` over the masked positions (SB3)."""
    var_targets = masked_var(targets, mask, reduce=reduce)
    return 1 - masked_var(targets - predictions, mask, reduce=reduce) / var_targets.clamp(min=1e-8)


__all__ = [
    "discounted_returns",
    "explained_variance",
    "gae",
    "length_adaptive_lambda",
    "masked_mean",
    "masked_var",
    "whiten",
]
