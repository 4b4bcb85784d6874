"""GRUE task ``narrative_qa``: answer a question about a story given its summary (RL4LMs' NarrativeQA).

Data: ``deepmind/narrativeqa`` as Parquet (``data/{split}-*.parquet``, pinned commit). RL4LMs read
the UnifiedQA TSV files, whose input is ``question \\n summary`` (a literal backslash-n between
them) and which it lowercased; references are the answers, lowercased and stripped. The same format
is rebuilt here from DeepMind's rows (one row per question, with all its answers). The story texts
in those rows are not used.

    hfrl train --task narrative_qa --alg ppo
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.data import parquet_builder

SEPARATOR = " \\n "  # UnifiedQA joins question and context with a literal backslash-n


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """DeepMind NarrativeQA rows -> UnifiedQA prompts (lowercased) and answers.

    >>> out = preprocess({"document": [{"summary": {"text": "Mark is a DJ."}}],
    ...                   "question": [{"text": "Who is Mark?"}], "answers": [[{"text": " A DJ "}]]})
    >>> out["prompt"], out["references"]
    (['who is mark? \\\\n mark is a dj.'], [['a dj']])
    """
    prompts, references = [], []
    for document, question, answers in zip(batch["document"], batch["question"], batch["answers"], strict=True):
        prompts.append((question["text"] + SEPARATOR + document["summary"]["text"]).lower())
        references.append([a["text"].lower().strip() for a in answers])
    return {"prompt": prompts, "references": references}


build = parquet_builder(__file__, preprocess, "NarrativeQA")
