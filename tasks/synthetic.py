"""Dataset builder shared by the synthetic tasks: every prompt is empty (generation starts from
the BOS/EOS token, as in RL4LMs), no references."""

from __future__ import annotations

from typing import Any

MAX_PROMPTS = 10**6  # prompts per split of a synthetic task


def empty_prompts(train_size: int = 512, eval_size: int = 64) -> Any:
    """A ``DatasetDict`` of ``train_size`` / ``eval_size`` / ``eval_size`` empty prompts (``datasets`` is
    imported here, not with the module: a command line is checked without it)."""
    for name, n in (("train_size", train_size), ("eval_size", eval_size)):
        if not 1 <= n <= MAX_PROMPTS:  # 10**12 empty prompts would fill the memory before anything says so
            raise ValueError(f"task argument {name} must be in [1, {MAX_PROMPTS}] (prompts per split), got {n}")
    from datasets import Dataset, DatasetDict, Features, Sequence, Value

    features = Features({"prompt": Value("string"), "references": Sequence(Value("string"))})

    def split(n: int) -> Dataset:
        return Dataset.from_dict({"prompt": [""] * n, "references": [[] for _ in range(n)]}, features=features)

    return DatasetDict(train=split(train_size), validation=split(eval_size), test=split(eval_size))
