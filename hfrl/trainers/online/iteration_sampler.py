"""The online trainers' prompt sampler: each iteration's prompts are fetched once.

The Trainer's loop takes one batch from the dataloader per micro-step, and an iteration has
``micro_steps_per_iteration`` of them (``num_ppo_epochs x rollout_completions / mini_batch_size x
gradient_accumulation_steps``); only the first collects the rollout, the others train on its
minibatches. TRL's ``RepeatSampler`` repeats the iteration's prompt indices for every micro-step, so
the dataloader fetched and collated the whole rollout's prompts again at each one: at a rollout of
2048 prompts, 512 times per iteration, more than half of the update time. :class:`IterationSampler`
yields the prompt indices once (each ``num_generations`` times in a row: a prompt's group, as TRL's
``RepeatSampler`` repeats them; the dataset is not repeated), then :data:`PLACEHOLDER` indices,
which :class:`PromptRows` turns into ``None`` rows without touching the dataset. The dataloader's
length, the Trainer's ``max_steps`` and epoch accounting, Accelerate's sharding of batches across
processes (each process's rollout is its own ``rollout_batch_size`` prompts' slice of a chunk, whole
groups, its first batch of each iteration) and skipping batches on resume stay as they were.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

PLACEHOLDER = -1  # the index of a micro-step that needs no prompts


class IterationSampler(Sampler[int]):
    """Indices of ``batch_size`` prompts (``rollout_batch_size`` x processes) per iteration, each
    ``num_generations`` times in a row, then ``(repeat_count - 1) x batch_size x num_generations``
    placeholders (``repeat_count``: micro-steps per iteration).

    An epoch is a permutation of the dataset cut into chunks of ``batch_size`` (an incomplete last
    chunk is dropped), one chunk per iteration; the first epoch's order is TRL's ``RepeatSampler``'s
    (``torch.randperm`` seeded with ``seed``). Epoch ``e`` draws its permutation with ``seed + e``
    (the Trainer calls :meth:`set_epoch`), so a run resumed in any epoch gets the same prompts as an
    uninterrupted one; ``RepeatSampler``'s generator restarted on resume instead.

    >>> list(IterationSampler(range(5), batch_size=2, repeat_count=3, seed=0))
    [4, 0, -1, -1, -1, -1, 1, 3, -1, -1, -1, -1]
    >>> list(IterationSampler(range(5), batch_size=2, repeat_count=2, seed=0, num_generations=2))[:8]
    [4, 4, 0, 0, -1, -1, -1, -1]
    """

    def __init__(
        self, data_source: Sized, batch_size: int, repeat_count: int, seed: int, num_generations: int = 1
    ) -> None:
        self.num_prompts, self.batch_size, self.repeat_count, self.seed = (
            len(data_source),
            batch_size,
            repeat_count,
            seed,
        )
        self.num_generations = num_generations
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.num_prompts, generator=generator).tolist()
        per_iteration = self.batch_size * self.num_generations
        for start in range(0, self.num_prompts - self.batch_size + 1, self.batch_size):
            for index in order[start : start + self.batch_size]:
                yield from itertools.repeat(index, self.num_generations)
            yield from itertools.repeat(PLACEHOLDER, (self.repeat_count - 1) * per_iteration)

    def __len__(self) -> int:
        return (self.num_prompts // self.batch_size) * self.batch_size * self.num_generations * self.repeat_count


class PromptRows(Dataset[Any]):
    """A prompt dataset as the online dataloader reads it: a batch of :data:`PLACEHOLDER` indices
    is a list of ``None`` (no rows fetched), any other batch the dataset's rows."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return None if index == PLACEHOLDER else self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        if indices and indices[0] == PLACEHOLDER:
            return [None] * len(indices)
        return (
            [self.dataset[i] for i in indices]
            if not hasattr(self.dataset, "__getitems__")
            else self.dataset.__getitems__(indices)
        )


class PromptBatch:
    """One micro-step's examples, as the dataloader hands them over (the data collator): opaque to
    Accelerate's ``send_to_device``, which would otherwise walk every prompt token id at every
    micro-step; the rollout moves to the device what it uses."""

    __slots__ = ("examples",)

    def __init__(self, examples: list[dict[str, Any]]) -> None:
        self.examples = examples

    def __contains__(self, key: object) -> bool:  # the Trainer asks whether a batch holds "labels"
        return False

    def __len__(self) -> int:
        return len(self.examples)
