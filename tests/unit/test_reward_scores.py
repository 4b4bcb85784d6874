"""Reward models fitted to scored texts (hfrl.trainers.reward_scores): the loss against a hand computation,
the agreement count, the collator, which rows count as scored, and the one-line errors."""

import math

import pytest
import torch
from datasets import Dataset

from hfrl.trainers import reward_scores as rs


def test_scored_loss_is_binary_cross_entropy_to_the_scores():
    rewards, scores = torch.tensor([0.0, 2.0, -1.0]), torch.tensor([0.5, 1.0, 0.2])
    by_hand = [
        math.log(2),  # sigmoid(0) = 0.5 against 0.5: -(0.5 ln 0.5 + 0.5 ln 0.5)
        math.log(1 + math.exp(-2)),  # -ln sigmoid(2)
        -(0.2 * math.log(1 / (1 + math.e)) + 0.8 * math.log(1 - 1 / (1 + math.e))),
    ]
    assert float(rs.scored_loss(rewards, scores)) == pytest.approx(sum(by_hand) / 3, abs=1e-6)
    # smallest where sigmoid(r) equals the score
    grid = torch.linspace(-3, 3, 601)
    best = grid[torch.stack([rs.scored_loss(r.reshape(1), torch.tensor([0.8])) for r in grid]).argmin()]
    assert float(torch.sigmoid(best)) == pytest.approx(0.8, abs=0.01)


def test_side_agreement_leaves_undecided_scores_out():
    agree, decided = rs.side_agreement(torch.tensor([1.0, -1.0, 0.5, 2.0]), torch.tensor([0.9, 0.7, 0.5, 0.1]))
    assert (agree, decided) == (1.0, 3)  # row 0 agrees, rows 1 and 3 do not, row 2 (score 0.5) is left out


def test_collator_pads_scored_rows_and_passes_pairs_on():
    seen = []
    collate = rs.ScoresOrPairs(lambda examples: seen.append(examples) or "pairs", pad_token_id=9)
    batch = collate([{"input_ids": [1, 2, 3], "score": 0.25}, {"input_ids": [4], "score": 1.0}])
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 9, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["score"].tolist() == [0.25, 1.0]
    assert collate([{"chosen_ids": [1], "rejected_ids": [2]}]) == "pairs" and len(seen) == 1


def test_which_rows_are_scored_and_their_columns():
    scored = Dataset.from_dict({"prompt": ["", ""], "text": ["a", "b"], "score": [0.0, 1.0], "references": [[], []]})
    assert rs.is_scored(scored) and rs.scored_rows(scored).column_names == ["prompt", "text", "score"]
    pairs = Dataset.from_dict({"chosen": ["a"], "rejected": ["b"], "score": [1.0]})
    assert not rs.is_scored(pairs)  # chosen / rejected win: the pairs loss


def test_scored_rows_errors_are_one_line():
    with pytest.raises(ValueError, match=r"^a reward model fitted to scores reads a 'text' column \(or 'prompt' \+ "):
        rs.scored_rows(Dataset.from_dict({"prompt": ["q"], "score": [0.5]}))
    with pytest.raises(ValueError, match=r"^row 1: score -0\.5 is not in \[0, 1\] \(1 such rows\)"):
        rs.scored_rows(Dataset.from_dict({"text": ["a", "b"], "score": [0.5, -0.5]}))


def test_scored_texts_tokenized_with_the_eos_rule_and_length_limit():
    class Tok:
        eos_token = "</s>"

        def __call__(self, text):
            return {"input_ids": [ord(c) for c in text]}

    data = Dataset.from_dict({"prompt": ["Q:", ""], "completion": [" ab", " abcdefgh"], "score": [0.1, 0.9]})
    out = rs.tokenize_scored(data, Tok(), max_length=10)
    # the first is 5 + 4 characters long, the second 9 + 4: dropped
    assert sorted(out.column_names) == ["input_ids", "score"] and len(out) == 1
    assert out[0]["input_ids"] == [ord(c) for c in "Q: ab</s>"] and out[0]["score"] == pytest.approx(0.1)


def test_scored_texts_are_tokenized_once(tiny_causal_dir, tmp_path):
    """TRL's evaluate prepares a dataset it is given again: tokenized scored rows pass through unchanged."""
    from hfrl.trainers.trl_adapters import RewardConfig, RewardTrainer

    rows = Dataset.from_dict({"text": [f"a {i}" for i in range(8)], "score": [0.2, 0.8] * 4})
    args = RewardConfig(output_dir=str(tmp_path), report_to="none", max_steps=1, save_strategy="no")
    trainer = RewardTrainer("tiny", args, train_dataset=rows, eval_dataset=rows)
    once = trainer.train_dataset
    again = trainer._prepare_dataset(once, trainer.processing_class, trainer.args, "eval")
    assert again["input_ids"] == once["input_ids"] and again["score"] == once["score"]
