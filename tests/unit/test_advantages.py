"""GAE, whitening and masked statistics against hand-computed values."""

import math

import pytest
import torch

from hfrl.core.advantages import explained_variance, gae, masked_mean, masked_var, whiten


def test_masked_mean_and_var_ignore_padding():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, 100.0, 100.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert masked_mean(x, m).item() == pytest.approx(2.0)  # (1 + 2 + 3) / 3
    # unbiased variance of {1, 2, 3} = ((1)^2 + 0 + (1)^2) / 2 = 1
    assert masked_var(x, m).item() == pytest.approx(1.0)
    assert masked_mean(x, m, dim=1).tolist() == pytest.approx([1.5, 3.0])


def test_gae_by_hand():
    gamma, lam = 0.9, 0.5
    # One row of 3 valid tokens and one padding position; one row of 1 token.
    rewards = torch.tensor([[0.0, 0.0, 1.0, 7.0], [2.0, 0.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.4, 0.3, 9.0], [1.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    adv, ret = gae(rewards, values, mask, gamma, lam)
    # Row 0: delta_2 = 1 + 0.9*0 - 0.3 = 0.7 (episode ends after token 2)
    #        delta_1 = 0 + 0.9*0.3 - 0.4 = -0.13
    #        delta_0 = 0 + 0.9*0.4 - 0.5 = -0.14
    #        A_2 = 0.7; A_1 = -0.13 + 0.45*0.7 = 0.185; A_0 = -0.14 + 0.45*0.185 = -0.05675
    assert adv[0].tolist() == pytest.approx([-0.05675, 0.185, 0.7, 0.0])
    assert ret[0].tolist() == pytest.approx([-0.05675 + 0.5, 0.185 + 0.4, 0.7 + 0.3, 0.0])
    # Row 1: a single token: A = 2 - 1 = 1
    assert adv[1].tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])


def test_gae_lambda_one_gamma_one_is_monte_carlo():
    rewards = torch.tensor([[1.0, 2.0, 3.0]])
    values = torch.tensor([[0.1, 0.2, 0.3]])
    adv, ret = gae(rewards, values, torch.ones(1, 3), gamma=1.0, lam=1.0)
    assert ret[0].tolist() == pytest.approx([6.0, 5.0, 3.0])  # reward-to-go
    assert adv[0].tolist() == pytest.approx([5.9, 4.8, 2.7])


def test_whiten_masked():
    x = torch.tensor([[1.0, 3.0, 50.0]])
    m = torch.tensor([[1, 1, 0]])
    w = whiten(x, m)
    # mean 2, unbiased var 2 -> (x - 2) / sqrt(2)
    assert w[0].tolist() == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2), 0.0], abs=1e-6)


def test_explained_variance():
    targets = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones(1, 4)
    assert explained_variance(targets, targets, mask).item() == pytest.approx(1.0)
    assert explained_variance(torch.zeros_like(targets) + 2.5, targets, mask).item() == pytest.approx(0.0)
