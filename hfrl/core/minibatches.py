"""Minibatches of one rollout for the update epochs: whole completions, or transitions.

``"sequences"``: each minibatch holds whole completions. ``"tokens"``: each minibatch holds
transitions (completion tokens) drawn at random across every completion of the rollout, as SB3's
rollout buffer hands RL4LMs' PPO its minibatches (``RolloutBuffer.get``: one permutation of all
transitions per epoch, cut into ``batch_size`` pieces). Either way one epoch visits every completion
token exactly once, in ``num_minibatches`` minibatches of equal size (to one row or token), each cut
into ``micro_batches`` pieces for gradient accumulation.

A token minibatch runs every row it touches through the model whole (a token's log-prob needs its
prefix) and its ``token_mask`` tells the loss which of the row's tokens count.

    python -m pytest tests/unit/test_minibatches.py
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from hfrl.core.advantages import whiten

MINIBATCH_UNITS = ("sequences", "tokens")


class MicroBatch(NamedTuple):
    """The rollout rows one micro-step runs, and which of their tokens it trains on."""

    rows: torch.Tensor  # (n,) row indices into the rollout
    token_mask: torch.Tensor | None  # (n, T) bool: the selected transitions; None: every completion token


def plan_epoch(
    response_mask: torch.Tensor,
    num_minibatches: int,
    micro_batches: int = 1,
    unit: str = "sequences",
) -> list[list[MicroBatch]]:
    """One epoch over a rollout: ``num_minibatches`` minibatches, each a list of ``micro_batches``
    :class:`MicroBatch` es, together covering every completion token once (shuffled with torch's
    global generator).

    >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    >>> plan = plan_epoch(mask, num_minibatches=3, unit="tokens")
    >>> sorted(int(mb.token_mask.sum()) for [mb] in plan)  # 3 tokens, one per minibatch
    [1, 1, 1]
    """
    if unit not in MINIBATCH_UNITS:
        raise ValueError(f"minibatch unit must be one of {', '.join(MINIBATCH_UNITS)}, got {unit!r}")
    device = response_mask.device
    if unit == "sequences":
        order = torch.randperm(len(response_mask), device=device)
        return [
            [MicroBatch(rows, None) for rows in torch.tensor_split(minibatch, micro_batches)]
            for minibatch in torch.tensor_split(order, num_minibatches)
        ]
    positions = response_mask.nonzero()  # (N, 2): (row, t) of every transition
    order = torch.randperm(len(positions), device=device)
    plan = []
    for minibatch in torch.tensor_split(order, num_minibatches):
        micro = []
        for chosen in torch.tensor_split(minibatch, micro_batches):
            rows, local = positions[chosen, 0].unique(return_inverse=True)  # rows sorted, local = row's slot
            token_mask = torch.zeros(len(rows), response_mask.shape[1], dtype=torch.bool, device=device)
            token_mask[local, positions[chosen, 1]] = True
            micro.append(MicroBatch(rows, token_mask))
        plan.append(micro)
    return plan


def selection_mask(minibatch: list[MicroBatch], response_mask: torch.Tensor) -> torch.Tensor:
    """The ``(B, T)`` 0/1 mask of the rollout's transitions a whole minibatch trains on."""
    mask = torch.zeros_like(response_mask)
    for micro in minibatch:
        mask[micro.rows] = response_mask[micro.rows] if micro.token_mask is None else micro.token_mask.to(mask)
    return mask


def whiten_per_minibatch(
    advantages: torch.Tensor, response_mask: torch.Tensor, minibatch: list[MicroBatch]
) -> torch.Tensor:
    """``(B, T)`` advantages normalised over one minibatch's transitions, ``(A - mean) / std``
    (SB3's ``normalize_advantage``, per minibatch); 0 outside the minibatch."""
    return whiten(advantages, selection_mask(minibatch, response_mask))
