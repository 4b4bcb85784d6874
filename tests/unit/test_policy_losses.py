"""The policy losses (hfrl.core.policy_losses) and their aggregation, computed by hand: clip-higher,
dual-clip, GSPO's sequence ratio, CISPO's detached weight, each aggregation mode against its definition,
and the registry (a loss of one's own by its file's path)."""

from __future__ import annotations

import math

import pytest
import torch

from hfrl.core.policy_losses import POLICY_LOSSES, policy_loss_class
from hfrl.core.policy_losses.aggregation import AGGREGATIONS, aggregate
from hfrl.core.policy_losses.base import LossSettings, PolicyLoss, PolicyOutputs
from hfrl.testing.minibatch import minibatch
from hfrl.utils.registry import UnknownNameError, describe_path


def loss_of(name: str, logp, old, adv, mask, **settings):
    batch = minibatch(mask, logprobs=old, advantages=adv)
    logp = torch.tensor(logp, requires_grad=True)
    loss, stats = policy_loss_class(name)(LossSettings(**settings))(PolicyOutputs(logp, None, None), batch)
    loss.backward()
    return loss.item(), stats, logp.grad.tolist()


# ---- ppo_clip: clip-higher and dual-clip ------------------------------------------------------------
def test_clip_higher_lets_a_rare_token_rise_further():
    # ratio e^0.2 = 1.2214, A = 1: eps 0.2 clips at 1.2 (no gradient); clip-higher 0.28 keeps 1.2214 (gradient r A)
    symmetric, _, grad_s = loss_of("ppo_clip", [[0.2]], [[0.0]], [[1.0]], [[1]], cliprange_low=0.2, cliprange_high=0.2)
    higher, _, grad_h = loss_of("ppo_clip", [[0.2]], [[0.0]], [[1.0]], [[1]], cliprange_low=0.2, cliprange_high=0.28)
    assert symmetric == pytest.approx(-1.2) and grad_s == [[0.0]]
    assert higher == pytest.approx(-math.exp(0.2)) and grad_h[0][0] == pytest.approx(-math.exp(0.2))
    # the lower side is unchanged: ratio e^-0.3 = 0.7408, A = -1 -> max(-0.7408, -0.8) ... min(rA, 0.8 A) = -0.8
    low, _, grad = loss_of("ppo_clip", [[-0.3]], [[0.0]], [[-1.0]], [[1]], cliprange_low=0.2, cliprange_high=0.28)
    assert low == pytest.approx(0.8) and grad == [[0.0]]


def test_dual_clip_bounds_the_loss_of_a_bad_token_whose_ratio_grew():
    # ratio e^1.5 = 4.4817, A = -1: PPO's term min(-4.4817, -1.2) = -4.4817 (loss 4.48, gradient pushes on);
    # dual-clip c = 3: max(-4.4817, 3 x -1) = -3 -> loss 3, no gradient
    plain, _, grad_p = loss_of("ppo_clip", [[1.5]], [[0.0]], [[-1.0]], [[1]])
    dual, stats, grad_d = loss_of("ppo_clip", [[1.5]], [[0.0]], [[-1.0]], [[1]], clip_ratio_c=3.0)
    assert plain == pytest.approx(math.exp(1.5)) and grad_p[0][0] == pytest.approx(math.exp(1.5))
    assert dual == pytest.approx(3.0) and grad_d == [[0.0]] and stats["dual_clipfrac"].item() == 1.0
    # a positive advantage is untouched by the dual clip: min(4.4817, 1.2) = 1.2
    assert loss_of("ppo_clip", [[1.5]], [[0.0]], [[1.0]], [[1]], clip_ratio_c=3.0)[0] == pytest.approx(-1.2)


# ---- gspo: the sequence ratio --------------------------------------------------------------------------
def test_gspo_clips_the_length_normalised_sequence_ratio():
    # row 0: log-ratios 0.1, 0.3 -> s = exp(0.2) = 1.2214 > 1 + 4e-4: clipped, A = 1 -> min(1.2214, 1.0004) = 1.0004
    # row 1: log-ratios 0, 0 (one token masked) -> s = 1, A = -2 -> term -2
    # seq-mean-token-mean: ((1.0004 + 1.0004) / 2 + (-2) / 1) / 2 = -0.4998 -> loss 0.4998
    loss, stats, grad = loss_of("gspo", [[0.1, 0.3], [0.0, 9.0]], [[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [-2.0, -2.0]],
                                [[1, 1], [1, 0]], **{"cliprange_low": 3e-4, "cliprange_high": 4e-4,
                                                     "loss_aggregation": "seq-mean-token-mean"})  # fmt: skip
    assert loss == pytest.approx(0.4998, abs=1e-6)
    assert stats["clipfrac"].item() == 0.5  # one completion of two
    # row 0 is clipped: no gradient; row 1's token: d/dlogp of -(-2 s) / 2 at s = 1 -> 1 (its own gradient, not s_i's)
    assert grad[0] == [0.0, 0.0] and grad[1] == pytest.approx([1.0, 0.0])


def test_gspo_declares_its_defaults_and_whole_sequences():
    gspo = policy_loss_class("gspo")
    assert gspo.needs_whole_sequences and gspo.defaults == {
        "cliprange_low": 3e-4, "cliprange_high": 4e-4, "loss_aggregation": "seq-mean-token-mean"}  # fmt: skip


# ---- cispo: the clipped, detached weight ---------------------------------------------------------------
def test_cispo_keeps_the_gradient_of_every_token():
    # ratios e^0.5 = 1.6487 (clipped to 1.28) and e^-0.5 = 0.6065 (kept: eps_low 1.0), A = 1, logp = 0.5, -0.5
    # loss = -mean(w A logp) = -(1.28 x 0.5 + 0.6065 x -0.5) / 2 = -0.16837; d/dlogp = -w / 2 (w detached)
    loss, stats, grad = loss_of("cispo", [[0.5, -0.5]], [[0.0, 0.0]], [[1.0, 1.0]], [[1, 1]],
                                cliprange_low=1.0, cliprange_high=0.28)  # fmt: skip
    w = [1.28, math.exp(-0.5)]
    assert loss == pytest.approx(-(w[0] * 0.5 - w[1] * 0.5) / 2, rel=1e-5)
    assert grad[0] == pytest.approx([-w[0] / 2, -w[1] / 2], rel=1e-5)  # the clipped token keeps its gradient
    assert stats["clipfrac"].item() == 0.5
    assert policy_loss_class("cispo").defaults == {"cliprange_low": 1.0, "cliprange_high": 0.28}


# ---- aggregation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_each_aggregation_is_its_definition(mode):
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])  # the third row dropped
    by_hand = {
        "token-mean": (1 + 2 + 3 + 4) / 4,  # every kept token alike
        "seq-mean-token-mean": ((1 + 2 + 3) / 3 + 4 / 1) / 2,  # each kept completion alike, its tokens averaged
        "seq-mean-token-sum": ((1 + 2 + 3) + 4) / 2,  # each kept completion's token sum, averaged
        "seq-mean-token-sum-norm": (1 + 2 + 3 + 4) / (3 * 5),  # Dr. GRPO: / (rows x max_new_tokens = 5)
    }[mode]
    assert aggregate(values, mask, mode, max_tokens=5).item() == pytest.approx(by_hand)


def test_an_unknown_aggregation_is_one_line():
    with pytest.raises(ValueError, match=r"^unknown loss_aggregation 'token-sum'; known: token-mean, "):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "token-sum")


# ---- the registry --------------------------------------------------------------------------------------
def test_every_loss_is_a_policy_loss_with_a_line():
    assert {"ppo_clip", "a2c", "gspo", "cispo", "surrogate"} <= set(POLICY_LOSSES)
    for name, path in POLICY_LOSSES.items():
        cls = policy_loss_class(name)
        assert issubclass(cls, PolicyLoss) and describe_path(path), name  # hfrl list algs / --help show its line
    with pytest.raises(UnknownNameError, match=r"unknown policy loss 'gpso'; did you mean 'gspo'\?"):
        policy_loss_class("gpso")


def test_a_loss_of_ones_own_by_its_file(tmp_path):
    (tmp_path / "my_loss.py").write_text(
        "from hfrl.core.policy_losses.a2c import A2C\n\nclass Doubled(A2C):\n"
        "    def __call__(self, out, batch):\n        loss, stats = super().__call__(out, batch)\n"
        "        return 2 * loss, stats\n"
    )
    loss, _, _ = loss_of(f"{tmp_path / 'my_loss.py'}:Doubled", [[-1.0]], [[0.0]], [[3.0]], [[1]])
    assert loss == pytest.approx(6.0)  # -2 x (3 x -1)


# ---- dis: SAO's strict two-sided trust region ------------------------------------------------------------
def test_dis_keeps_the_ratio_inside_the_region_and_masks_outside_it():
    # ratios e^[0, -0.5, 1.0, 2.0] = [1, 0.6065, 2.7183, 7.3891]; region (1 - 0.3, 1 + 5.0) = (0.7, 6.0):
    # in, out (< 0.7), in, out (> 6.0) whatever the advantage's sign (A = [1, 1, -1, 1])
    logp, adv = [[0.0, -0.5, 1.0, 2.0]], [[1.0, 1.0, -1.0, 1.0]]
    loss, stats, grad = loss_of("dis", logp, [[0.0] * 4], adv, [[1, 1, 1, 1]], cliprange_low=0.3, cliprange_high=5.0)
    # -(1 x 1 + 0 + 2.7183 x -1 + 0) / 4: the masked tokens count in the mean's denominator
    assert loss == pytest.approx(-(1.0 - math.e) / 4)
    assert stats["clipfrac"].item() == 0.5
    # d/dlogp of -rho A / 4 = -rho A / 4 inside (the ratio as the gradient's weight), 0 outside
    assert grad[0] == pytest.approx([-0.25, 0.0, math.e / 4, 0.0])


def test_dis_bounds_are_strict():
    # a ratio exactly at 1 - eps_low is outside: masked (eps_low 0.5, the ratio e^log(0.5) = 0.5)
    region = {"cliprange_low": 0.5, "cliprange_high": 5.0}
    loss, stats, grad = loss_of("dis", [[math.log(0.5)]], [[0.0]], [[1.0]], [[1]], **region)
    assert loss == 0.0 and grad == [[0.0]] and stats["clipfrac"].item() == 1.0


def test_dis_takes_saos_math_region_by_default():
    assert policy_loss_class("dis").defaults == {"cliprange_low": 0.3, "cliprange_high": 5.0}
