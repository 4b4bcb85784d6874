"""PPO's loss and the update's composition against hand-computed values (the numbers are the ones
these tests held before the policy losses became registered parts: issue 35)."""

import math

import pytest
import torch

from hfrl.core.losses import UpdateLoss, value_loss
from hfrl.core.policy_losses.base import LossSettings, PolicyOutputs
from hfrl.core.policy_losses.ppo_clip import PPOClip, clipped_surrogate
from hfrl.testing.minibatch import minibatch


def test_ppo_policy_loss_by_hand():
    # Three tokens (one padded away). ratios: e^0.5 = 1.6487, e^-0.5 = 0.6065, padding ignored.
    logp = torch.tensor([[0.5, -0.5, 3.0]])
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, stats = clipped_surrogate(logp, old, adv, mask, LossSettings(cliprange_low=0.2, cliprange_high=0.2))
    # token 0: min(1.6487*1, 1.2*1) = 1.2; token 1: min(0.6065*1, 0.8*1) = 0.6065
    expected = -(1.2 + math.exp(-0.5)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["clipfrac"].item() == pytest.approx(1.0)  # both |ratio - 1| > 0.2
    # approx_kl = mean((r - 1) - log r) = ((e^.5 - 1 - .5) + (e^-.5 - 1 + .5)) / 2
    kl = ((math.exp(0.5) - 1.5) + (math.exp(-0.5) - 0.5)) / 2
    assert stats["approx_kl"].item() == pytest.approx(kl, rel=1e-5)


def test_ppo_policy_loss_negative_advantage_uses_pessimistic_branch():
    logp = torch.tensor([[0.5]])  # ratio 1.6487, A = -2
    loss, _ = clipped_surrogate(logp, torch.zeros(1, 1), torch.tensor([[-2.0]]), torch.ones(1, 1), LossSettings())
    # min(1.6487 * -2, 1.2 * -2) = -3.2974 -> loss 3.2974 (unclipped is the smaller)
    assert loss.item() == pytest.approx(2 * math.exp(0.5), rel=1e-5)


def test_value_loss_plain_and_clipped():
    values = torch.tensor([[1.0, 0.0]])
    old = torch.tensor([[0.0, 0.0]])
    returns = torch.tensor([[0.5, 2.0]])
    mask = torch.ones(1, 2)
    plain, _ = value_loss(values, old, returns, mask)
    assert plain.item() == pytest.approx((0.25 + 4.0) / 2)  # mean of (1-0.5)^2, (0-2)^2
    clipped, stats = value_loss(values, old, returns, mask, cliprange_value=0.2)
    # token 0: clipped prediction 0.2 -> (0.2-0.5)^2 = 0.09 < 0.25, keep 0.25 (max); token 1 unchanged 4
    assert clipped.item() == pytest.approx((0.25 + 4.0) / 2)
    values = torch.tensor([[1.0, 0.0]])
    returns = torch.tensor([[2.0, 2.0]])
    clipped, stats = value_loss(values, old, returns, mask, cliprange_value=0.2)
    # token 0: plain (1-2)^2 = 1, clipped (0.2-2)^2 = 3.24 -> 3.24; token 1: 4
    assert clipped.item() == pytest.approx((3.24 + 4.0) / 2)
    assert stats["vf_clipfrac"].item() == pytest.approx(0.5)


def test_ppo_loss_composition():
    logp = torch.zeros(1, 2, requires_grad=True)
    values = torch.tensor([[1.0, 1.0]])
    batch = minibatch(torch.ones(1, 2), advantages=[[1.0, -1.0]], values=values, returns=[[0.0, 0.0]])
    out = PolicyOutputs(logp, torch.tensor([[2.0, 4.0]]), values)
    loss, stats = UpdateLoss(PPOClip(), vf_coef=0.5, ent_coef=0.1)(out, batch)
    # policy: -(1 - 1)/2 = 0; value: 1; entropy 3 -> 0 + 0.5*1 - 0.1*3 = 0.2
    assert loss.item() == pytest.approx(0.2)
    assert stats["loss/value"].item() == pytest.approx(1.0)
    assert stats["entropy"].item() == pytest.approx(3.0)
    loss.backward()
    # d(-mean(r*A))/d logp at r=1 is -A/2
    assert logp.grad[0].tolist() == pytest.approx([-0.5, 0.5])


def test_the_kl_term_is_added_once_at_the_iterations_beta():
    # logp = -1, ref = -2 on one token: k3 = e^-1 + 1 - 1 = 0.3679; beta 0.5 -> + 0.18394
    logp = torch.tensor([[-1.0]], requires_grad=True)
    batch = minibatch(torch.ones(1, 1), logprobs=[[-1.0]], ref_logprobs=[[-2.0]], advantages=[[0.0]])
    loss, stats = UpdateLoss(PPOClip(), ent_coef=0.0)(PolicyOutputs(logp, None, None, logp), batch, kl_coef=0.5)
    assert stats["loss/kl"].item() == pytest.approx(math.exp(-1), rel=1e-5)
    assert loss.item() == pytest.approx(0.5 * math.exp(-1), rel=1e-5)
    assert stats["loss/total"].item() == pytest.approx(loss.item())


def test_a_critic_only_forward_is_its_value_loss_unweighted():
    """TRPO's minibatches regress the critic alone: no vf_coef, no policy term."""
    batch = minibatch(torch.ones(1, 2), values=[[0.0, 0.0]], returns=[[1.0, 3.0]])
    loss, stats = UpdateLoss(PPOClip(), vf_coef=0.5)(PolicyOutputs(None, None, torch.tensor([[0.0, 0.0]])), batch)
    assert loss.item() == pytest.approx(5.0) and set(stats) == {"loss/value"}  # mean(1, 9)


def test_the_positive_example_lm_loss_adds_the_nll_of_the_rewarded_completions():
    """VAPO's self-imitation: + coef x token-mean NLL of the completions whose reward is above the threshold;
    here row 0 (reward 1) of two, its log-probs log 0.5 and log 0.25, A = 0 (no policy term)."""
    logp = torch.log(torch.tensor([[0.5, 0.25], [0.1, 0.1]])).requires_grad_()
    batch = minibatch(torch.ones(2, 2), logprobs=logp.detach().tolist(), advantages=[[0.0, 0.0], [0.0, 0.0]])
    batch.scores = torch.tensor([1.0, 0.0])
    loss, stats = UpdateLoss(PPOClip(), positive_lm_coef=0.1)(PolicyOutputs(logp, None, None), batch)
    nll = (math.log(2) + math.log(4)) / 2  # 1.0397
    assert stats["loss/positive_lm"].item() == pytest.approx(nll, rel=1e-5)
    assert loss.item() == pytest.approx(0.1 * nll, rel=1e-5)
    loss.backward()
    # d/dlogp of -0.1 x mean over row 0's two tokens: -0.05 each; row 1 is no positive example: 0
    assert logp.grad.tolist() == [pytest.approx([-0.05, -0.05]), pytest.approx([0.0, 0.0])]
    none = minibatch(torch.ones(1, 1), advantages=[[0.0]])
    _, stats = UpdateLoss(PPOClip(), positive_lm_coef=0.1)(PolicyOutputs(torch.zeros(1, 1), None, None), none)
    assert stats["loss/positive_lm"].item() == 0.0  # no completion above the threshold: nothing to imitate
