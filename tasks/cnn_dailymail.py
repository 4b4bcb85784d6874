"""GRUE task ``cnn_dailymail``: summarise a news article (RL4LMs' CNN/DailyMail 3.0.0).

Data: ``abisee/cnn_dailymail`` (the maintained repository of ``cnn_dailymail``, Parquet files
``3.0.0/{split}-*.parquet``). Prompt (RL4LMs): ``"Summarize: " + article``, cut on the right to 512
tokens by the trainer; ``references = [highlights]``; ``id`` is kept. Reward: ROUGE-1 (NLPO: METEOR).

    hfrl train --task cnn_dailymail --alg ppo
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.data import parquet_builder

PREFIX = "Summarize: "


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Articles -> prompts; highlights -> references.

    >>> preprocess({"article": ["Text."], "highlights": ["Sum."], "id": ["x1"]})
    {'prompt': ['Summarize: Text.'], 'references': [['Sum.']], 'id': ['x1']}
    """
    return {
        "prompt": [PREFIX + article for article in batch["article"]],
        "references": [[summary] for summary in batch["highlights"]],
        "id": list(batch["id"]),
    }


build = parquet_builder(__file__, preprocess, "CNN/DailyMail")
