"""The A-LoL family's losses (docs/algorithms.md §6) against values computed by hand.

One two-example batch throughout, completion tokens as probabilities so that the logarithms are easy:

    example 0: pi(y_t) = [0.50, 0.25]          pi_ref(y_t) = [0.5, 0.5]   (2 tokens)
    example 1: pi(y_t) = [0.05, <padding>]     pi_ref(y_t) = [0.001]      (1 token)

    L   = -sum_t log pi     : L0 = ln 2 + ln 4 = ln 8 = 2.07944,   L1 = ln 20   = 2.99573
    L_ref                   : L0 = ln 2 + ln 2 = ln 4 = 1.38629,   L1 = ln 1000 = 6.90776
    rho = exp(L_ref - L)    : rho0 = 4 / 8 = 0.5 (inside [0.1, 1.9]),  rho1 = 1000 / 20 = 50 -> 1.9 (clamped)
    R = [0.8, 0.5]          A = [0.6, -0.2] (example 1 has a negative advantage)
"""

import math

import pytest
import torch

from hfrl.core.losses import ALOL_ALGORITHMS, alol_example_losses, alol_loss

LN2, LN4, LN8, LN20, LN1000 = (math.log(x) for x in (2, 4, 8, 20, 1000))


def batch(advantages=(0.6, -0.2)):
    logprobs = torch.log(torch.tensor([[0.5, 0.25], [0.05, 0.9]])).requires_grad_(True)  # 0.9: padding
    return {
        "logprobs": logprobs,
        "mask": torch.tensor([[1, 1], [1, 0]]),
        "rewards": torch.tensor([0.8, 0.5]),
        "advantages": torch.tensor(list(advantages)),
        "ref_logprobs": torch.log(torch.tensor([[0.5, 0.5], [0.001, 0.3]])),  # 0.3: padding
    }


def losses(algorithm, **overrides):
    inputs = {**batch(), **overrides}
    out, parts = alol_example_losses(algorithm, **inputs, ppo_clip=0.9, kl_beta=0.1)
    return out, parts, inputs["logprobs"]


EXPECTED = {
    # L
    "nll": [LN8, LN20],
    # R * L = [0.8 * 2.07944, 0.5 * 2.99573]
    "wbc": [0.8 * LN8, 0.5 * LN20],
    # R * sum_t max(pi_t, 0.1) * (-log pi_t): 0.8 * (0.5 ln 2 + 0.25 ln 4) = 0.55452;
    # example 1: pi = 0.05 is floored to 0.1: 0.5 * 0.1 * ln 20 = 0.14979
    "r_gold": [0.8 * (0.5 * LN2 + 0.25 * LN4), 0.5 * 0.1 * LN20],
    # R * clamp(rho) * L: 0.8 * 0.5 * ln 8 = 0.83178 (clamp inactive); 0.5 * 1.9 * ln 20 = 2.84594 (active)
    "r_lol": [0.8 * 0.5 * LN8, 0.5 * 1.9 * LN20],
    # A+ * clamp(rho) * L: 0.6 * 0.5 * ln 8 = 0.62383; A = -0.2 -> A+ = 0: dropped
    "a_lol": [0.6 * 0.5 * LN8, 0.0],
    # A+ * L: 0.6 * ln 8 = 1.24766; dropped
    "a_lol_ref_free": [0.6 * LN8, 0.0],
    # A+ * sum_t clamp(rho_t) * (-log pi_t), rho_t = [0.5/0.5, 0.25/0.5] = [1, 0.5]:
    # 0.6 * (1 * ln 2 + 0.5 * ln 4) = 0.83178 (not 0.6 * 0.5 * ln 8: the weights are per token); dropped
    "a_lol_seq": [0.6 * (LN2 + 0.5 * LN4), 0.0],
    # A+ * L + beta * (log pi(y|x) - log pi_ref(y|x)), beta 0.1:
    # 0.6 * ln 8 + 0.1 * (-ln 8 + ln 4) = 1.24766 - 0.06931 = 1.17835;
    # example 1: 0 + 0.1 * (-ln 20 + ln 1000) = 0.1 * ln 50 = 0.39120 (the KL term stays, as in LoL-RL)
    "a_lol_kl": [0.6 * LN8 + 0.1 * (LN4 - LN8), 0.1 * (LN1000 - LN20)],
}


@pytest.mark.parametrize("algorithm", ALOL_ALGORITHMS)
def test_example_losses_by_hand(algorithm):
    out, _, _ = losses(algorithm)
    assert out.tolist() == pytest.approx(EXPECTED[algorithm], abs=1e-5)


def test_the_clamp_binds_for_a_lol_when_the_advantage_is_positive():
    # A = [0.6, 0.4]: example 1's rho = 50 is clamped to 1 + 0.9: 0.4 * 1.9 * ln 20 = 2.27675
    out, parts, _ = losses("a_lol", advantages=torch.tensor([0.6, 0.4]))
    assert out.tolist() == pytest.approx([0.6 * 0.5 * LN8, 0.4 * 1.9 * LN20], abs=1e-5)
    assert parts["rho"].tolist() == pytest.approx([0.5, 1.9])
    assert parts["rho_clipped"].tolist() == [0.0, 1.0]


def test_the_lower_clamp_bound():
    # pi_ref = 0.9 on both tokens of example 0: rho0 = (0.5 * 0.25) / (0.9 * 0.9) = 0.15432
    inputs = {**batch(), "ref_logprobs": torch.log(torch.tensor([[0.9, 0.9], [0.001, 0.3]]))}
    _, parts = alol_example_losses("a_lol", **inputs, ppo_clip=0.9)
    assert parts["rho"][0].item() == pytest.approx(0.125 / 0.81)  # inside [0.1, 1.9]
    out, parts = alol_example_losses("a_lol", **inputs, ppo_clip=0.5)
    assert parts["rho"][0].item() == pytest.approx(0.5)  # raised to 1 - 0.5
    assert out[0].item() == pytest.approx(0.6 * 0.5 * LN8, abs=1e-5)  # 0.6 * 0.5 * ln 8 = 0.62383


def test_a_lol_seq_clamps_each_token():
    # A = [0.6, 0.4]: example 1's one token has rho_t = 0.05 / 0.001 = 50 -> 1.9: 0.4 * 1.9 * ln 20
    out, parts, _ = losses("a_lol_seq", advantages=torch.tensor([0.6, 0.4]))
    assert out.tolist() == pytest.approx([0.6 * (LN2 + 0.5 * LN4), 0.4 * 1.9 * LN20], abs=1e-5)
    assert parts["rho"].tolist() == pytest.approx([0.75, 1.9])  # token means of the clamped ratios
    assert parts["rho_clipped"].tolist() == pytest.approx([0.0, 1.0])


def test_every_weight_is_detached():
    """Gradients flow through log pi only: d(mean loss)/d log pi_t = -weight_t / B."""
    out, _, logprobs = losses("a_lol")
    out.mean().backward()
    # a_lol example 0: -(A * rho) / 2 = -(0.6 * 0.5) / 2 = -0.15 on both tokens; example 1 dropped: 0
    assert logprobs.grad.flatten().tolist() == pytest.approx([-0.15, -0.15, 0.0, 0.0])

    out, _, logprobs = losses("r_gold")
    out.mean().backward()
    # -R * max(pi_t, 0.1) / 2: [-0.8 * 0.5 / 2, -0.8 * 0.25 / 2] and [-0.5 * 0.1 / 2, padding 0]
    assert logprobs.grad.flatten().tolist() == pytest.approx([-0.2, -0.1, -0.025, 0.0])

    out, _, logprobs = losses("a_lol_kl")
    out.mean().backward()
    # (-A+ + beta) / 2: (-0.6 + 0.1) / 2 = -0.25; example 1: (0 + 0.1) / 2 = 0.05
    assert logprobs.grad.flatten().tolist() == pytest.approx([-0.25, -0.25, 0.05, 0.0])


def test_batch_loss_is_the_mean_with_stats():
    inputs = batch()
    loss, stats = alol_loss("r_lol", **inputs, ppo_clip=0.9)
    # (0.83178 + 2.84594) / 2 = 1.83886
    assert loss.item() == pytest.approx((0.8 * 0.5 * LN8 + 0.5 * 1.9 * LN20) / 2, abs=1e-5)
    assert stats["rho"].item() == pytest.approx((0.5 + 1.9) / 2)
    assert stats["rho_clipfrac"].item() == pytest.approx(0.5)
    assert stats["nll"].item() == pytest.approx((LN8 + LN20) / 2, abs=1e-5)
    assert stats["kl"].item() == pytest.approx(((LN4 - LN8) + (LN1000 - LN20)) / 2, abs=1e-5)
    # per completion token: the two example losses over the 3 tokens, (0.83178 + 2.84594) / 3 = 1.22591
    assert stats["loss/per_token"].item() == pytest.approx((0.8 * 0.5 * LN8 + 0.5 * 1.9 * LN20) / 3, abs=1e-5)
    assert not any(v.requires_grad for v in stats.values())


def test_missing_inputs_and_unknown_algorithm_fail_clearly():
    inputs = batch()
    with pytest.raises(ValueError, match="unknown A-LoL algorithm 'a-lol'"):
        alol_example_losses("a-lol", inputs["logprobs"], inputs["mask"])
    with pytest.raises(ValueError, match="a_lol needs the advantages"):
        alol_example_losses("a_lol", inputs["logprobs"], inputs["mask"], ref_logprobs=inputs["ref_logprobs"])
    with pytest.raises(ValueError, match="r_lol needs the reference"):
        alol_example_losses("r_lol", inputs["logprobs"], inputs["mask"], rewards=inputs["rewards"])
