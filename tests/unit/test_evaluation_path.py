"""The one evaluation path (trainers' ``evaluate`` and ``hfrl eval``): batches completed by the
caller's ``complete``, extra columns passed to rewards, internal columns kept out, the mean reward."""

from __future__ import annotations

import pytest
from datasets import Dataset

from hfrl.trainers.evaluation import Scoring, generate_and_score


def test_batches_rows_and_rewards():
    data = Dataset.from_dict(
        {"prompt": ["a", "bb", "ccc", "dddd", "e"], "target": [1, 2, 3, 4, 5], "prompt_ids": [[0]] * 5}
    )
    batches = []

    def complete(batch):
        batches.append(list(batch["prompt"]))
        return [p.upper() for p in batch["prompt"]]

    def match(prompts, completions, target, **kwargs):  # `target` arrives as a column; prompt_ids never does
        assert "prompt_ids" not in kwargs
        return [float(len(c) == t) for c, t in zip(completions, target, strict=True)]

    metrics, records = generate_and_score(data, complete, Scoring([match], [2.0], {}, prefix="eval"), batch_size=2)
    assert batches == [["a", "bb"], ["ccc", "dddd"], ["e"]]
    assert [r["completion"] for r in records] == ["A", "BB", "CCC", "DDDD", "E"]
    assert [r["reward"] for r in records] == [2.0, 2.0, 2.0, 2.0, 0.0]  # weight 2; "E" has length 1, target 5
    assert metrics["eval_reward"] == pytest.approx(8 / 5) and metrics["eval_rewards/match"] == pytest.approx(4 / 5)
    assert records[0]["target"] == 1 and "prompt_ids" not in records[0]


def test_a_split_without_prompts_is_one_line():
    with pytest.raises(ValueError, match=r"^the evaluation split needs a 'prompt' column; it has: text$"):
        generate_and_score(Dataset.from_dict({"text": ["x"]}), list, Scoring([], []), batch_size=1)
