"""TRPO's natural-gradient step (Schulman et al. 2015; sb3-contrib's TRPO): conjugate gradient on
Fisher-vector products, then a backtracking line search under a KL bound (docs/algorithms.md §5).
Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    b: torch.Tensor,
    max_steps: int = 15,
    residual_tol: float = 1e-10,
) -> torch.Tensor:
    """Approximately solve ``A x = b`` for a symmetric positive-definite ``A`` given only
    ``matvec(v) = A v`` (here the damped Fisher-vector product).

    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]])
    >>> [round(v, 6) for v in conjugate_gradient(lambda v: A @ v, torch.tensor([1.0, 2.0])).tolist()]  # 1/11, 7/11
    [0.090909, 0.636364]
    """
    x = torch.zeros_like(b)
    r = b.clone()  # residual b - A x
    p = r.clone()
    rr = r @ r
    for _ in range(max_steps):
        if rr < residual_tol:
            break
        ap = matvec(p)
        alpha = rr / (p @ ap)
        # in place, one pass each: with a whole model's parameters (1e8 floats) the vector algebra costs
        # as much as a Fisher-vector product at one CPU thread when it allocates temporaries
        x.addcmul_(p, alpha)
        r.addcmul_(ap, alpha, value=-1)
        rr_new = r @ r
        p.mul_(rr_new / rr).add_(r)
        rr = rr_new
    return x


@dataclass
class LineSearchResult:
    accepted: bool
    step_fraction: float  # shrink^i of the accepted try (0.0 when none was accepted)
    steps: int  # tries evaluated
    kl: float  # KL of the accepted step (or of the last rejected try)
    objective: float  # surrogate after the step (the old one when rejected)


@torch.no_grad()
def backtracking_line_search(
    params: Sequence[torch.Tensor],
    full_step: Sequence[torch.Tensor],
    evaluate: Callable[[], tuple[float, float]],
    old_objective: float,
    max_kl: float,
    shrink: float = 0.8,
    max_tries: int = 10,
) -> LineSearchResult:
    """Try ``params + shrink^i * full_step`` for i = 0, 1, ...; accept the first whose
    ``evaluate() -> (objective, kl)`` has ``kl <= max_kl`` and ``objective > old_objective``.
    When no try is accepted the parameters are restored."""
    originals = [p.detach().clone() for p in params]
    kl = float("nan")
    for i in range(max_tries):
        fraction = shrink**i
        for p, p0, step in zip(params, originals, full_step, strict=True):
            p.copy_(p0).add_(step, alpha=fraction)
        objective, kl = evaluate()
        if kl <= max_kl and objective > old_objective:
            return LineSearchResult(True, fraction, i + 1, kl, objective)
    for p, p0 in zip(params, originals, strict=True):
        p.copy_(p0)
    return LineSearchResult(False, 0.0, max_tries, kl, old_objective)


def flat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def unflat(vector: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    out, start = [], 0
    for t in like:
        out.append(vector[start : start + t.numel()].view_as(t))
        start += t.numel()
    return out
