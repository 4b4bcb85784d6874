"""A-LoL's priority sampling of training examples, reproducible epoch by epoch (exact resume)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class PrioritySampler(Sampler[int]):
    """``P(i) ∝ w_i`` with replacement (``good_priority``; ``uniform``: each positive example once,
    in random order, ``good_random``), as many draws per epoch as examples with a positive weight.

    Epoch ``e`` draws with a generator seeded with ``seed + e`` (the Trainer calls :meth:`set_epoch`),
    so a run resumed in any epoch draws what an uninterrupted run draws. The first epoch's draws are
    those of torch's ``WeightedRandomSampler`` / ``SubsetRandomSampler`` seeded with ``seed``; those
    kept one generator for the whole run, which a resumed run restarted (its weights then differed
    from an uninterrupted run's by 5.9e-3 at checkpoint-60).

    >>> list(PrioritySampler(torch.tensor([0.0, 1.0, 0.0, 3.0]), uniform=True, seed=0))
    [1, 3]
    """

    def __init__(self, weights: torch.Tensor, uniform: bool, seed: int) -> None:
        self.weights = torch.as_tensor(weights, dtype=torch.double)
        self.positive = torch.nonzero(self.weights > 0).flatten().tolist()
        self.uniform, self.seed, self.epoch = uniform, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        if self.uniform:
            order = torch.randperm(len(self.positive), generator=generator).tolist()
            return iter([self.positive[i] for i in order])
        return iter(torch.multinomial(self.weights, len(self.positive), True, generator=generator).tolist())

    def __len__(self) -> int:
        return len(self.positive)
