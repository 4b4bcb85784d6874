"""PRO's loss (Song et al. 2023) against a hand computation on two prompts with three ranked responses
each and against PRO's own formula as its code writes it, and the grouping of rows into rankings
(the trainer: tests/trainers/test_pro.py)."""

from __future__ import annotations

import math

import pytest
import torch

from hfrl.core.losses import pro_loss

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
    # two float32 formulas of a loss near 30, whose ulp (2e-6) is already above 1e-6: relative, each of its
    # ~20 exp/log/sum terms rounding by eps/2: 32 eps (3.8e-6 relative, 1.1e-4 here) bounds the difference
    assert ours.item() == pytest.approx(theirs.item(), rel=32 * torch.finfo(torch.float32).eps)
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
