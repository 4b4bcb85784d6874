"""What the offline (A-LoL family) losses share: their inputs, the weight each example gets, and the
interface (docs/algorithms.md §6).

The whole response is one action. Per example ``L = -sum_t log pi(y_t | x, y_<t)`` (summed over tokens,
not averaged); every weight is detached; the batch loss is the mean of the example losses
(:func:`hfrl.core.losses.alol_loss`). A variant is a class: its ``weight`` (nothing, the reward ``R``, or
the positive advantage ``A+ = max(R - V(x), 0)``), whether it ``needs_reference`` (log-probs of the
reference policy), and its :meth:`OfflineLoss.example_losses`.

    python -m pytest tests/unit/test_alol_losses.py
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor


@dataclass
class OfflineBatch:
    """An offline minibatch as the losses see it: ``(B, T)`` over completion tokens, ``(B,)`` per example."""

    logprobs: Tensor  # log pi(y_t | x, y_<t), with gradients
    mask: Tensor  # 1 on completion tokens
    rewards: Tensor | None = None  # R(x, y)
    advantages: Tensor | None = None  # A = R - V(x)
    ref_logprobs: Tensor | None = None  # log pi_ref(y_t | x, y_<t)
    ppo_clip: float = 0.9  # the ratio's clamp [1 - ppo_clip, 1 + ppo_clip]
    kl_beta: float = 0.0  # a_lol_kl's KL weight
    gold_floor: float = 0.1  # r_gold's lower bound on a token's weight pi(y_t)

    @property
    def token_nll(self) -> Tensor:
        return -self.logprobs * self.mask.to(self.logprobs.dtype)  # -log pi(y_t), 0 on padding

    @property
    def reference_nll(self) -> Tensor:
        """``L_ref = -sum_t log pi_ref(y_t)`` (detached)."""
        assert self.ref_logprobs is not None
        return -(self.ref_logprobs.to(self.logprobs).detach() * self.mask.to(self.logprobs.dtype)).sum(1)


class OfflineLoss:
    """The interface: :meth:`example_losses` and what the trainer must prepare for a variant. The class's
    docstring (its first paragraph) is its line in ``hfrl list algs``."""

    #: what multiplies each example's NLL: None (1), "reward" (R) or "advantage" (A+ = max(A, 0))
    weight: ClassVar[str | None] = None
    #: the reference policy's log-probs are needed (a ratio, a KL)
    needs_reference: ClassVar[bool] = False

    def example_losses(self, batch: OfflineBatch, scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Per-example losses ``(B,)`` from the example's detached ``scale`` (1, R or A+) and ``nll`` (L), with
        the parts to log (``weight``: the detached multiplier of L, or its token mean)."""
        raise NotImplementedError


def clamped(raw: Tensor, ppo_clip: float) -> tuple[Tensor, Tensor]:
    """``(clamp(raw, 1 - ppo_clip, 1 + ppo_clip), whether it was clamped)``: A-LoL's clamp (not PPO's min)."""
    low, high = 1.0 - ppo_clip, 1.0 + ppo_clip
    return raw.clamp(low, high), ((raw < low) | (raw > high)).to(raw.dtype)


def nll_weighted(scale: Tensor, nll: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``scale * L``, the weight ``scale``."""
    return scale * nll, {"weight": scale}


__all__ = ["OfflineBatch", "OfflineLoss", "clamped", "nll_weighted"]
