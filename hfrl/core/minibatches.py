"""Minibatches of one rollout for the update epochs: whole completions, or transitions.

``"sequences"``: each minibatch holds whole completions (with ``group_ids``, whole groups: the
completions of a prompt stay together, for a loss that needs them). ``"tokens"``: each minibatch holds
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

from typing import TYPE_CHECKING, NamedTuple

import torch

from hfrl.core.advantages import whiten

if TYPE_CHECKING:
    from hfrl.core.rollout import Rollout

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
    group_ids: torch.Tensor | None = None,
) -> list[list[MicroBatch]]:
    """One epoch over a rollout: ``num_minibatches`` minibatches, each a list of ``micro_batches``
    :class:`MicroBatch` es, together covering every completion token once (shuffled with torch's
    global generator). With ``group_ids`` (sequences only) the groups are shuffled and each
    minibatch holds whole groups: their number must be a multiple of ``num_minibatches``.

    >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    >>> plan = plan_epoch(mask, num_minibatches=3, unit="tokens")
    >>> sorted(int(mb.token_mask.sum()) for [mb] in plan)  # 3 tokens, one per minibatch
    [1, 1, 1]
    >>> plan = plan_epoch(torch.ones(4, 2), num_minibatches=2, group_ids=torch.tensor([0, 0, 1, 1]))
    >>> sorted(sorted(mb.rows.tolist()) for [mb] in plan)  # each minibatch one whole group
    [[0, 1], [2, 3]]
    """
    if unit not in MINIBATCH_UNITS:
        raise ValueError(f"minibatch unit must be one of {', '.join(MINIBATCH_UNITS)}, got {unit!r}")
    device = response_mask.device
    if unit == "sequences":
        if group_ids is None:
            order = torch.randperm(len(response_mask), device=device)
        else:
            groups = group_ids.unique()
            if len(groups) % num_minibatches:
                raise ValueError(
                    f"{len(groups)} groups cannot be split into {num_minibatches} minibatches of whole groups: make "
                    "mini_batch_size a multiple of num_generations"
                )
            shuffled = groups[torch.randperm(len(groups), device=device)]
            order = torch.cat([(group_ids == g).nonzero().flatten() for g in shuffled])
        return [
            [MicroBatch(rows, None) for rows in torch.tensor_split(minibatch, micro_batches)]
            for minibatch in torch.tensor_split(order, num_minibatches)
        ]
    if group_ids is not None:
        raise ValueError("minibatches of whole groups hold whole completions: use minibatch_unit 'sequences'")
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


def rollout_minibatches(
    rollout: Rollout,
    *,
    epochs: int,
    minibatches: int,
    micro_batches: int = 1,
    unit: str = "sequences",
    whole_groups: bool = False,
    whiten_each: bool = False,
) -> list[Rollout]:
    """Every micro-step's share of ``rollout`` for one iteration's update: ``epochs`` shuffled passes of
    ``minibatches`` minibatches (:func:`plan_epoch`; of whole groups with ``whole_groups``), each cut into
    ``micro_batches`` for gradient accumulation; with ``whiten_each``, each minibatch's advantages whitened
    over its own transitions (SB3 / RL4LMs' ``whiten_scope`` minibatch)."""
    out = []
    groups = rollout.groups.ids if whole_groups and rollout.groups is not None else None
    for _ in range(epochs):
        for minibatch in plan_epoch(rollout.response_mask, minibatches, micro_batches, unit, group_ids=groups):
            advantages = (
                whiten_per_minibatch(rollout.advantages, rollout.response_mask, minibatch) if whiten_each else None
            )
            for micro in minibatch:
                part = rollout[micro.rows]
                part.token_mask = micro.token_mask
                if advantages is not None:
                    part.advantages = advantages[micro.rows]
                out.append(part)
    return out
