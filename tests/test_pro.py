"""PRO (preference ranking optimisation, Song et al. 2023): the loss against a hand computation on two
prompts with three ranked responses each, against PRO's own formula written as its code writes it,
the grouping of rows into rankings, and ``hfrl train --alg pro`` on HH and COMET fixtures.

The two rankings (``s = S / |y|``, the length-normalised log-probability; ``sft_weight`` 0.05):

    prompt A: rewards r = [2, 1, 0], S = [-1.0, -1.0, -4.5], |y| = [2, 1, 3] -> s = [-0.5, -1.0, -1.5]
      k = 1: T = r_1 - r_j = [1, 2] (j = 2, 3), T_11 = max = 2
             L_1 = logsumexp(s_1 T_11, s_2 * 1, s_3 * 2) - s_1 T_11 = logsumexp(-1, -1, -3) + 1
                 = ln(2 e^-1 + e^-3) + 1 = ln(2 + e^-2) = ln 2.135335 = 0.758624
      k = 2: T = [1], T_22 = 1: L_2 = logsumexp(-1.0, -1.5) + 1.0 = ln(1 + e^-0.5) = 0.474077
      SFT: 0.05 * (3 - 1)^2 * (-S_1) = 0.05 * 4 * 1.0 = 0.2;  L_A = 1.432701
    prompt B: r = [1, 1, 0] (a tie: the stable order keeps response 1 first), S = [-1, -2, -1], |y| = 1
      k = 1: T = [0, 1], T_11 = 1: L_1 = logsumexp(-1, 0, -1) + 1 = ln(1 + 2 e^-1) + 1 = 1.551445
      k = 2: T = [1], T_22 = 1: L_2 = logsumexp(-2, -1) + 2 = ln(1 + e) = 1.313262
      SFT: 0.05 * 4 * 1 = 0.2;  L_B = 3.064706
    loss = (L_A + L_B) / 2 = 2.248704
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from hfrl.losses import pro_loss
from hfrl.tasks.data import FIXTURES
from hfrl.testing import run_cli

L_A = math.log(2 + math.exp(-2)) + math.log(1 + math.exp(-0.5)) + 0.2
L_B = math.log(1 + 2 * math.exp(-1)) + 1 + math.log(1 + math.e) + 0.2


def batch(order=(0, 1, 2)):
    """The two rankings above, their responses in ``order`` (the loss sorts by reward itself)."""
    sums = torch.tensor([[-1.0, -1.0, -4.5], [-1.0, -2.0, -1.0]])
    lengths = torch.tensor([[2.0, 1.0, 3.0], [1.0, 1.0, 1.0]])
    rewards = torch.tensor([[2.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    index = torch.tensor(list(order))
    return sums[:, index].clone().requires_grad_(True), lengths[:, index], rewards[:, index], torch.ones(2, 3)


def test_pro_loss_by_hand():
    assert pytest.approx((1.432701, 3.064706), abs=1e-6) == (L_A, L_B)
    sums, lengths, rewards, mask = batch()
    loss, stats = pro_loss(sums, lengths, rewards, mask, sft_weight=0.05)
    assert loss.item() == pytest.approx((L_A + L_B) / 2, abs=1e-6)  # 2.248704
    assert stats["loss/sft"].item() == pytest.approx(0.2) and stats["responses"].item() == 3
    assert stats["loss/ranking"].item() == pytest.approx((L_A + L_B) / 2 - 0.2, abs=1e-6)
    # The order the responses come in does not matter (A's in reverse; B's tie keeps its relative order)
    shuffled, *rest = batch(order=(2, 0, 1))
    assert pro_loss(shuffled, *rest, sft_weight=0.05)[0].item() == pytest.approx((L_A + L_B) / 2, abs=1e-6)


def reference_pro(sums, lengths, rewards, sft_weight):
    """PRO's code (and LoL-RL's ``pro_qlora_llama_hh.py``) for rankings already sorted best first."""
    scores = sums / lengths
    total = 0
    for k in range(scores.shape[1] - 1):
        neg_temperatures = rewards[:, k].view(-1, 1) - rewards[:, k + 1 :]
        pos_temperature = torch.max(neg_temperatures, dim=1).values
        loss = (
            torch.log(
                1e-10
                + torch.exp(scores[:, k] * pos_temperature)
                + torch.sum(torch.exp(scores[:, k + 1 :] * neg_temperatures), dim=1)
            )
            - scores[:, k] * pos_temperature
        )
        total += loss.mean()
    return total + sft_weight * (scores.shape[1] - 1) ** 2 * (-sums[:, 0]).mean()


def test_pro_loss_matches_the_reference_code_and_its_gradient():
    torch.manual_seed(0)
    sums = (-torch.rand(4, 5) * 10).requires_grad_(True)
    lengths = torch.randint(1, 8, (4, 5)).float()
    rewards = torch.sort(torch.rand(4, 5), dim=1, descending=True).values
    ours, _ = pro_loss(sums, lengths, rewards, torch.ones(4, 5), sft_weight=0.3)
    theirs = reference_pro(sums, lengths, rewards, 0.3)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    (grad_ours,) = torch.autograd.grad(ours, sums)
    (grad_theirs,) = torch.autograd.grad(reference_pro(sums, lengths, rewards, 0.3), sums)
    assert torch.allclose(grad_ours, grad_theirs, atol=1e-6)


def test_pro_loss_with_rankings_of_different_lengths():
    # prompt A as above; prompt B has two responses (a third slot is padding): r = [1, 0], S = [-1, -2], |y| = 1
    # k = 1: T = [1], T_11 = 1: L_1 = logsumexp(-1, -2) + 1 = ln(1 + e^-1) = 0.313262; SFT 0.05 * 1 * 1 = 0.05
    sums = torch.tensor([[-1.0, -1.0, -4.5], [-1.0, -2.0, -99.0]])
    lengths = torch.tensor([[2.0, 1.0, 3.0], [1.0, 1.0, 1.0]])
    rewards = torch.tensor([[2.0, 1.0, 0.0], [1.0, 0.0, 5.0]])  # the padding's reward is ignored
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    loss, _ = pro_loss(sums, lengths, rewards, mask, sft_weight=0.05)
    assert loss.item() == pytest.approx((L_A + math.log(1 + math.exp(-1)) + 0.05) / 2, abs=1e-6)


def test_rows_are_grouped_into_rankings():
    from datasets import Dataset

    from hfrl.trainers.offline.pro_trainer import rankings, spread

    data = Dataset.from_dict(
        {
            "prompt": ["a", "a", "b", "a", "c"],
            "prompt_ids": [[1], [1], [2], [1], [3]],
            "completion_ids": [[10], [11], [12], [13], [14]],
            "reward": [0.2, 0.9, 0.5, 0.5, 0.1],
        }
    )
    grouped, stats = rankings(data, None)
    assert list(grouped["prompt"]) == ["a"] and list(grouped["rewards"]) == [[0.9, 0.5, 0.2]]  # best first
    assert list(grouped["completion_ids"]) == [[[11], [13], [10]]]
    assert stats == {"prompts": 1.0, "single_response_prompts": 2.0, "responses_per_prompt": 3.0}
    assert list(rankings(data, 2)[0]["rewards"]) == [[0.9, 0.2]]  # the best and the worst kept
    assert spread(9, 4) == [0, 3, 5, 8]
    single = data.select([2, 4])
    with pytest.raises(ValueError, match="pro ranks several scored responses per prompt, but none of the 2 prompts"):
        rankings(single, None)


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    from hfrl.tiny_classifiers import save_comet_critic, save_sequence_classifier

    root = tmp_path_factory.mktemp("pro-rewards")
    return {
        "hh": save_sequence_classifier(root / "rm", "gpt2", ["LABEL_0"]),  # the reward model's shape: one output
        "comet": save_comet_critic(root / "critic"),
    }


COMMON = ["--model", "tiny", "--report_to", "none", "--disable_tqdm", "true", "--max_new_tokens", "6"]
COMMON += ["--max_prompt_length", "48", "--max_completion_length", "12", "--per_device_train_batch_size", "4"]
COMMON += ["--per_device_eval_batch_size", "8", "--logging_steps", "1", "--warmup_steps", "0", "--eval_strategy", "no"]
COMMON += ["--save_strategy", "no", "--load_best_model_at_end", "false"]


@pytest.mark.parametrize(
    ("task", "args", "prompts"),
    [
        ("hh", ["--task-arg", "classifier={hh}", "--max_steps", "3"], 21),  # each pair's chosen and rejected
        ("comet", ["--task-arg", "critic_model={comet}", "--num_train_epochs", "1"], 8),  # tails per head + relation
    ],
)
def test_hfrl_train_alg_pro(task, args, prompts, reward_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))
    out = tmp_path / "run"
    args = [a.format(**reward_model) for a in args]
    cache = ["--preparation_cache_dir", str(tmp_path / "cache")]
    code, _, err = run_cli(
        ["train", "--task", task, "--alg", "pro", "--output-dir", str(out), *args, *COMMON, *cache], capsys
    )
    assert code == 0, err
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert history[0]["prepare/prompts"] == prompts and history[0]["prepare/responses_per_prompt"] == 2
    steps = [h for h in history if "loss/ranking" in h]
    assert steps and all(h["loss/total"] > 0 and h["responses"] == 2 for h in steps)
    card = (out / "README.md").read_text()
    assert "trained with PRO" in card and "Preference Ranking Optimization for Human Alignment" in card


def test_pro_config_errors():
    from hfrl.trainers.offline.pro_trainer import PROConfig

    with pytest.raises(ValueError, match="max_responses must be >= 2"):
        PROConfig(output_dir="x", max_responses=1)
    with pytest.raises(ValueError, match="unknown algorithm 'a_lol'"):
        PROConfig(output_dir="x", algorithm="a_lol")
    with pytest.raises(ValueError, match="pro has no advantage or reward to sample by: set sampling 'none'"):
        PROConfig(output_dir="x", sampling="good_priority")
