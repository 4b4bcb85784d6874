"""GRUE task ``common_gen``: generate a sentence that uses a set of concepts (RL4LMs' CommonGen).

Data: the ``gem`` dataset's ``common_gen`` config (what RL4LMs loaded) as the Hub's Parquet
conversion, ``common_gen/{split}/*.parquet`` at a pinned commit of the refs/convert/parquet branch.
Prompt (RL4LMs): ``"generate a sentence with: " + " ".join(concepts) + "."``; one sample per
(concept set, target) row with ``references = [target]`` (an empty target, as in the hidden test
split, becomes RL4LMs' ``"empty reference"``); ``concepts`` is kept as a column.
Reward: METEOR + the CommonGen repeat penalty.

    hfrl train --task common_gen --alg ppo
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.data import parquet_builder

PREFIX = "generate a sentence with: "


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """GEM CommonGen rows -> RL4LMs' prompts and single references.

    >>> out = preprocess({"concepts": [["dog", "frisbee"]], "target": [""]})
    >>> out["prompt"], out["references"], out["concepts"]
    (['generate a sentence with: dog frisbee.'], [['empty reference']], [['dog', 'frisbee']])
    """
    return {
        "prompt": [PREFIX + " ".join(concepts) + "." for concepts in batch["concepts"]],
        "references": [[target or "empty reference"] for target in batch["target"]],
        "concepts": [list(c) for c in batch["concepts"]],
    }


build = parquet_builder(__file__, preprocess, "CommonGen")
