"""The advantage estimators (hfrl.core.estimators), computed by hand.

The shared case: 2 prompts x 2 completions (groups [0, 0, 1, 1]), task scores R = [1, 3, 2, 2],
completion lengths 2, 3, 1, 3, a KL penalty of -0.1 and -0.2 on the first completion's two tokens,
gamma 1: the shaped score R' goes on the last token and the advantages are the returns-to-go
``G_t = sum_{k >= t} r'_k``.
"""

from __future__ import annotations

import pytest
import torch

from hfrl.core.advantages import discounted_returns, gae, whiten
from hfrl.core.estimators import ESTIMATORS, estimator_class
from hfrl.core.estimators.base import EstimatorInputs, add_scores, group_stats
from hfrl.core.policy_losses.aggregation import AGGREGATIONS
from hfrl.utils.registry import UnknownNameError

MASK = torch.tensor([[1.0, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
PENALTY = torch.tensor([[-0.1, -0.2, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
SCORES = torch.tensor([1.0, 3.0, 2.0, 2.0])
GROUPS = torch.tensor([0, 0, 1, 1])


SETTINGS = ("gamma", "lam", "whiten")  # what an estimator is built with; the rest of a case is its inputs


def inputs(**changes) -> EstimatorInputs:
    fields = dict(scores=SCORES, token_rewards=PENALTY, mask=MASK, group_ids=GROUPS)
    fields.update({k: v for k, v in changes.items() if k not in SETTINGS})
    return EstimatorInputs(**fields)


def built(name: str, **changes):
    """The estimator ``name`` built with the settings among ``changes`` (gamma 1 by default)."""
    return estimator_class(name)(**{"gamma": 1.0, **{k: v for k, v in changes.items() if k in SETTINGS}})


def estimate(name: str, **changes) -> tuple[list, list]:
    advantages, returns = built(name, **changes).estimate(inputs(**changes))
    return advantages.tolist(), returns.tolist()


def test_rloo_leaves_each_completion_out_of_its_baseline():
    # group 0: b_0 = R_1 = 3 -> R'_0 = 1 - 3 = -2; b_1 = R_0 = 1 -> R'_1 = 2; group 1: 2 - 2 = 0 twice
    # row 0: r' = [-0.1, -0.2 - 2] -> G = [-2.3, -2.2]; row 1: 2 at every token
    advantages, returns = estimate("rloo")
    assert advantages[0] == pytest.approx([-2.3, -2.2, 0.0]) and advantages[1] == [2.0, 2.0, 2.0]
    assert advantages[2:] == [[0.0] * 3] * 2 and returns == advantages
    # three completions: b_i = (sum - R_i) / 2; R = [0, 3, 6] -> b = [4.5, 3, 1.5], R' = [-4.5, 0, 4.5]
    x = inputs(scores=torch.tensor([0.0, 3.0, 6.0]), token_rewards=torch.zeros(3, 1), mask=torch.ones(3, 1),
               group_ids=torch.zeros(3, dtype=torch.long))  # fmt: skip
    assert built("rloo").estimate(x).advantages.flatten().tolist() == [-4.5, 0.0, 4.5]


def test_group_norm_is_grpo():
    # group 0: mean 2, std sqrt(((1-2)^2 + (3-2)^2) / 1) = sqrt(2): R' = -+1 / (1.41421 + 1e-4) = -+0.70706;
    # group 1: equal rewards, std 0: R' = 0 / 1e-4 = 0.
    # row 0: r' = [-0.1, -0.2 - 0.70706] -> G = [-1.00706, -0.90706]; row 1: G = 0.70706 at every token
    advantages, returns = estimate("group_norm")
    assert advantages[0] == pytest.approx([-1.00706, -0.90706, 0.0], abs=1e-5)
    assert advantages[1] == pytest.approx([0.70706] * 3, abs=1e-5)
    assert advantages[2:] == [[0.0] * 3] * 2
    assert returns == advantages  # no critic, no whitening: the returns are the advantages


def test_dr_grpo_subtracts_the_group_mean_only():
    # R' = R - mean: [-1, 1, 0, 0]; row 0: r' = [-0.1, -1.2] -> G = [-1.3, -1.2]; row 1: 1 at every token
    advantages, _ = estimate("dr_grpo")
    expected = [[-1.3, -1.2, 0.0], [1.0, 1.0, 1.0], [0.0] * 3, [0.0] * 3]
    assert all(row == pytest.approx(want, abs=1e-6) for row, want in zip(advantages, expected, strict=True))
    assert estimator_class("dr_grpo").loss_aggregation == "seq-mean-token-sum-norm"  # no length normalisation


def test_reinforce_baseline_whitens_after_the_group_mean():
    # G as dr_grpo: -1.3, -1.2 | 1, 1, 1 | 0 | 0, 0, 0 over the 9 completion tokens: mean 0.5 / 9 = 0.055556,
    # squared deviations 1.83753 + 1.57642 + 3 x 0.89198 + 4 x 0.0030864 = 6.10223, unbiased var 6.10223 / 8
    # = 0.76278, std 0.87337: A = (G - 0.055556) / 0.87337 = -1.55210, -1.43760 | 1.08138 | -0.063610
    advantages, returns = estimate("reinforce_baseline")
    assert advantages[0][:2] == pytest.approx([-1.55210, -1.43760], abs=1e-4)
    assert advantages[1] == pytest.approx([1.08138] * 3, abs=1e-4)
    assert advantages[2][0] == pytest.approx(-0.063610, abs=1e-4) and advantages[2][1:] == [0.0, 0.0]
    assert returns[0][:2] == pytest.approx([-1.3, -1.2])  # the shaped returns, before whitening


def test_reinforce_whitens_the_plain_returns():
    # 2 completions, lengths 2 and 1, R = [1, 3], no penalty: G = [1, 1 | 3]; mean 5/3, unbiased var
    # ((2/3)^2 x 2 + (4/3)^2) / 2 = 4/3, std 1.15470: A = (1 - 5/3) / 1.1547 = -0.57735, (3 - 5/3) / 1.1547 = 1.15470
    x = inputs(
        scores=torch.tensor([1.0, 3.0]), token_rewards=torch.zeros(2, 2), mask=torch.tensor([[1.0, 1], [1, 0]]),
        group_ids=torch.tensor([0, 1]),
    )  # fmt: skip
    advantages, returns = built("reinforce").estimate(x)
    assert advantages[0].tolist() == pytest.approx([-0.57735, -0.57735], abs=1e-5)
    assert advantages[1].tolist() == pytest.approx([1.15470, 0.0], abs=1e-5)
    assert returns.tolist() == [[1.0, 1.0], [3.0, 0.0]]
    assert estimator_class("reinforce").needs_groups is False  # any num_generations, 1 included


def test_gae_estimator_is_the_gae_function():
    values = torch.tensor([[0.5, 0.2, 0.0], [0.1, 0.1, 0.1], [0.3, 0.0, 0.0], [0.0, 0.4, 0.0]])
    x = inputs(values=values)
    advantages, returns = built("gae", gamma=0.9, lam=0.8, whiten=True).estimate(x)
    expected, expected_returns = gae(add_scores(PENALTY, SCORES, MASK), values, MASK, 0.9, 0.8)
    assert torch.equal(advantages, whiten(expected, MASK)) and torch.equal(returns, expected_returns)
    assert estimator_class("gae").needs_critic and estimator_class("gae").whitening is None


def test_a_dropped_completion_takes_no_part_in_its_group():
    # completion 1 dropped (mask row 0): group 0 is completion 0 alone, group mean 1 -> R' = 0 for it
    mask = MASK.clone()
    mask[1] = 0
    n, total, std = group_stats(SCORES, GROUPS, mask.sum(1) > 0)
    assert n.tolist() == [1.0, 1.0, 2.0, 2.0] and total.tolist() == [1.0, 1.0, 4.0, 4.0] and std[0] == 0
    advantages, _ = estimate("dr_grpo", mask=mask)
    assert advantages[0] == pytest.approx([-0.3, -0.2, 0.0]) and advantages[1] == [0.0] * 3


def test_discounted_returns_by_hand():
    # gamma 0.5: G_2 = 4, G_1 = 2 + 0.5 * 4 = 4, G_0 = 1 + 0.5 * 4 = 3; padding stays 0
    rewards = torch.tensor([[1.0, 2.0, 4.0, 9.0]])
    assert discounted_returns(rewards, torch.tensor([[1.0, 1, 1, 0]]), 0.5).tolist() == [[3.0, 4.0, 4.0, 0.0]]


def test_registry_names_every_estimator_and_fails_clearly():
    assert {"gae", "rloo", "group_norm", "dr_grpo", "reinforce_baseline", "reinforce"} <= set(ESTIMATORS)
    for name in ESTIMATORS:
        cls = estimator_class(name)
        assert cls.__doc__ and cls.loss_aggregation in (None, *AGGREGATIONS)
    with pytest.raises(UnknownNameError, match="unknown advantage estimator 'grpo'"):
        estimator_class("grpo")


# ---- decoupled and length-adaptive GAE (VC-PPO, VAPO) ------------------------------------------------
def test_decoupled_gae_gives_the_critic_lambda_one_returns():
    """lam_critic 1: the critic's targets are the Monte Carlo returns G_t = sum_k gamma^k r_{t+k}, whatever
    the values; the actor's advantages stay GAE(lam)'s."""
    from hfrl.core.advantages import discounted_returns, gae
    from hfrl.core.estimators.base import EstimatorInputs
    from hfrl.core.estimators.gae import GAE

    scores, token_rewards = torch.tensor([1.0, -2.0]), torch.tensor([[0.1, 0.0, 0.2], [0.0, 0.3, 0.0]])
    mask, values = torch.tensor([[1.0, 1, 1], [1, 1, 0]]), torch.tensor([[0.5, -0.2, 0.4], [1.0, 0.7, 0.0]])
    x = EstimatorInputs(scores, token_rewards, mask, torch.tensor([0, 1]), values)
    rewards = torch.tensor([[0.1, 0.0, 1.2], [0.0, -1.7, 0.0]])  # the score on each last token
    decoupled = GAE(gamma=0.9, lam=0.95, whiten=False, lam_critic=1.0).estimate(x)
    assert torch.allclose(decoupled.returns, discounted_returns(rewards, mask, 0.9))
    assert torch.allclose(decoupled.advantages, gae(rewards, values, mask, 0.9, 0.95)[0])
    # by hand, row 1: G_1 = -1.7, G_0 = 0 + 0.9 x -1.7 = -1.53
    assert decoupled.returns[1].tolist() == pytest.approx([-1.53, -1.7, 0.0])
    coupled = GAE(gamma=0.9, lam=0.95, whiten=False).estimate(x)
    assert torch.allclose(coupled.returns, gae(rewards, values, mask, 0.9, 0.95)[1])


def test_length_adaptive_lambda_is_gae_with_each_completions_own_lambda():
    """VAPO: lambda_i = 1 - 1 / (alpha |y_i|); a row's advantages equal GAE at that row's lambda, and at
    lambda 1 (a long enough completion) they are the returns minus the values."""
    from hfrl.core.advantages import gae, length_adaptive_lambda

    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0]])
    rewards = torch.tensor([[0.0, 0.5, 0.0, 1.0], [0.2, -1.0, 0.0, 0.0]])
    values = torch.tensor([[0.1, 0.2, -0.3, 0.4], [0.5, 0.1, 0.0, 0.0]])
    lam = length_adaptive_lambda(mask, alpha=0.5)  # 1 - 1 / (0.5 x 4) = 0.5; 1 - 1 / (0.5 x 2) = 0
    assert lam.tolist() == [0.5, 0.0]
    advantages, returns = gae(rewards, values, mask, 0.9, lam)
    for row, lam_i in enumerate(lam.tolist()):
        expected, expected_returns = gae(rewards[row : row + 1], values[row : row + 1], mask[row : row + 1], 0.9, lam_i)
        assert torch.allclose(advantages[row], expected[0]) and torch.allclose(returns[row], expected_returns[0])
    # lambda 0 is the one-step TD error: row 1, t = 0: 0.2 + 0.9 x 0.1 - 0.5 = -0.21; t = 1: -1 - 0.1 = -1.1
    assert advantages[1].tolist() == pytest.approx([-0.21, -1.1, 0.0, 0.0])
    long = length_adaptive_lambda(torch.ones(1, 400), alpha=1.0)  # 1 - 1/400
    assert long.item() == pytest.approx(0.9975)
