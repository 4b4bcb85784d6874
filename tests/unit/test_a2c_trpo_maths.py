"""A2C's loss, TRPO's surrogate and KL, conjugate gradient and the line search, against hand-computed
values (the trainers: tests/trainers/test_a2c_trpo.py)."""

import pytest
import torch

from hfrl.core.losses import UpdateLoss, categorical_kl
from hfrl.core.natural_gradient import backtracking_line_search, conjugate_gradient
from hfrl.core.policy_losses.a2c import A2C
from hfrl.core.policy_losses.base import PolicyOutputs
from hfrl.core.policy_losses.surrogate import Surrogate
from hfrl.testing.minibatch import minibatch


def test_a2c_loss_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -9.0]], requires_grad=True)
    adv = torch.tensor([[2.0, -1.0, 5.0]])
    values = torch.tensor([[1.0, 0.0, 7.0]])
    returns = torch.tensor([[0.0, 2.0, 0.0]])
    entropy = torch.tensor([[1.0, 3.0, 100.0]])
    mask = torch.tensor([[1, 1, 0]])
    batch = minibatch(mask, advantages=adv, values=values, returns=returns)
    loss, stats = UpdateLoss(A2C(), vf_coef=0.5, ent_coef=0.01)(PolicyOutputs(logp, entropy, values), batch)
    # policy: -mean(A * logp) = -((2 * -1) + (-1 * -2)) / 2 = 0
    # value: mean((1 - 0)^2, (0 - 2)^2) = 2.5 ; entropy: mean(1, 3) = 2
    # total: 0 + 0.5 * 2.5 - 0.01 * 2 = 1.23
    assert stats["loss/policy"].item() == pytest.approx(0.0)
    assert stats["loss/value"].item() == pytest.approx(2.5)
    assert loss.item() == pytest.approx(1.23)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-1.0, 0.5, 0.0])  # -A / 2 on valid tokens


def test_conjugate_gradient_solves_known_system():
    a = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    b = torch.tensor([1.0, 2.0, 3.0])
    x = conjugate_gradient(lambda v: a @ v, b, max_steps=10)
    assert torch.allclose(x, torch.linalg.solve(a, b), atol=1e-5)
    # exact in n steps for an n x n system: x = [2/9, 1/9, 13/9]
    # (check: 4*2/9 + 1/9 = 1; 2/9 + 3/9 + 13/9 = 2; 1/9 + 26/9 = 3)
    assert x.tolist() == pytest.approx([2 / 9, 1 / 9, 13 / 9], abs=1e-5)


def test_line_search_rejects_a_step_that_breaks_the_kl_bound():
    param = torch.zeros(1)
    # objective improves with the step, KL = x^2: the full step (1.0) has KL 1 > 0.5; 0.5 * 1 has 0.25
    evaluate = lambda: (param.item(), param.item() ** 2)  # noqa: E731
    result = backtracking_line_search([param], [torch.ones(1)], evaluate, 0.0, max_kl=0.5, shrink=0.5)
    assert result.accepted and result.steps == 2 and result.step_fraction == 0.5
    assert param.item() == pytest.approx(0.5)
    # no acceptable step: every try breaks the bound -> parameters restored
    param.zero_()
    result = backtracking_line_search([param], [torch.ones(1)], evaluate, 0.0, max_kl=1e-9, shrink=0.5, max_tries=3)
    assert not result.accepted and result.steps == 3 and param.item() == 0.0
    # the surrogate must improve: a step that lowers it is rejected even within the KL bound
    result = backtracking_line_search([param], [-torch.ones(1)], evaluate, 0.0, max_kl=10.0, max_tries=2)
    assert not result.accepted and param.item() == 0.0


def test_categorical_kl_and_surrogate():
    old = torch.tensor([[[0.5, 0.5]]]).log()
    new = torch.tensor([[[0.25, 0.75]]]).log()
    mask = torch.ones(1, 1)
    # KL = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75)
    expected = 0.5 * torch.log(torch.tensor(2.0)) + 0.5 * torch.log(torch.tensor(2 / 3))
    assert categorical_kl(old, new, mask).item() == pytest.approx(expected.item())
    batch = minibatch(mask, logprobs=[[0.0]], advantages=[[3.0]])
    assert -Surrogate()(PolicyOutputs(torch.tensor([[0.0]]), None, None), batch)[0].item() == 3.0  # mean(rho A)
