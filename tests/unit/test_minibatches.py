"""Minibatches of a rollout: whole completions or transitions drawn across completions (SB3 /
RL4LMs), per-minibatch advantage whitening, and a rollout of a fixed number of transitions.
(The tests that train: tests/trainers/test_minibatches_training.py.)"""

import pytest
import torch

from hfrl.core.minibatches import plan_epoch, selection_mask, whiten_per_minibatch

# 3 completions of 4, 1 and 3 tokens: 8 transitions
MASK = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]])


def test_token_minibatches_cover_every_transition_once_in_equal_shares():
    torch.manual_seed(0)
    plan = plan_epoch(MASK, num_minibatches=3, micro_batches=2, unit="tokens")
    assert len(plan) == 3 and all(len(minibatch) == 2 for minibatch in plan)
    counts = torch.zeros_like(MASK)
    sizes = []
    for minibatch in plan:
        selected = selection_mask(minibatch, MASK)
        sizes.append(int(selected.sum()))
        counts += selected
        for micro in minibatch:
            # only rows with a selected token are run, and only completion tokens are selected
            assert micro.token_mask.any(1).all()
            assert (micro.token_mask <= MASK[micro.rows].bool()).all()
    assert torch.equal(counts, MASK)  # every transition exactly once per epoch, nothing else
    assert sorted(sizes) == [2, 3, 3]  # 8 transitions in 3 minibatches: sizes differ by at most one


def test_token_minibatches_draw_across_completions():
    """Over many epochs a 2-token minibatch holds tokens of two different completions about as often
    as uniform sampling says: 1 - P(same row) = 1 - (4*3 + 0 + 3*2) / (8*7) = 1 - 18/56 = 0.68."""
    torch.manual_seed(0)
    mixed = total = 0
    for _ in range(500):
        for [micro] in plan_epoch(MASK, num_minibatches=4, unit="tokens"):
            mixed += len(micro.rows) == 2
            total += 1
    assert mixed / total == pytest.approx(0.68, abs=0.05)


def test_sequence_minibatches_are_the_shuffled_rows():
    torch.manual_seed(3)
    order = torch.randperm(4)
    torch.manual_seed(3)
    plan = plan_epoch(torch.ones(4, 2, dtype=torch.long), num_minibatches=2, micro_batches=2, unit="sequences")
    rows = [micro.rows.tolist() for minibatch in plan for micro in minibatch]
    assert rows == [[r] for r in order.tolist()]  # the same draw as one randperm of the rows, in order
    assert all(micro.token_mask is None for minibatch in plan for micro in minibatch)


def test_whiten_per_minibatch_by_hand():
    advantages = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 0.0, 0.0, 0.0], [5.0, 6.0, 7.0, 0.0]])
    minibatch = plan_epoch(MASK, num_minibatches=1, unit="tokens")[0]
    # keep the tokens (0, 0), (0, 2) and (1, 0): advantages 1, 3, 4
    minibatch[0].token_mask.zero_()
    rows = minibatch[0].rows.tolist()
    for row, t in ((0, 0), (0, 2), (1, 0)):
        minibatch[0].token_mask[rows.index(row), t] = True
    out = whiten_per_minibatch(advantages, MASK, minibatch)
    # mean 8/3; unbiased var ((5/3)^2 + (1/3)^2 + (4/3)^2) / 2 = 7/3; std 1.5275
    expected = torch.zeros(3, 4)
    expected[0, 0], expected[0, 2], expected[1, 0] = -1.0911, 0.2182, 0.8729
    assert torch.allclose(out, expected, atol=1e-4)


def test_unknown_unit_fails_clearly():
    with pytest.raises(ValueError, match="minibatch unit must be one of sequences, tokens, got 'rows'"):
        plan_epoch(MASK, 1, unit="rows")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"minibatch_unit": "rows"}, "minibatch_unit must be 'sequences' or 'tokens', got 'rows'"),
        ({"whiten_scope": "batch"}, "whiten_scope must be 'rollout' or 'minibatch', got 'batch'"),
        ({"rollout_tokens": 0}, r"rollout_tokens must be >= 1 or None \(one completion per prompt\), got 0"),
    ],
)
def test_bad_options_fail_clearly(overrides, message, make_config):
    with pytest.raises(ValueError, match=message):
        make_config(**overrides)


def test_rounds_of_different_widths_pad_every_field():
    """A rollout of several generation rounds pads each round's fields to the widest round along
    the token axis: (B, T) tensors and NLPO's packed sets (B, T, V / 8) alike (empty sets: 0)."""
    from hfrl.core.capture import Captured
    from hfrl.core.rollout import Completions, concat

    def round_of(width):  # one completion of `width` tokens, every set full, every number 0.5
        ones = torch.ones(1, width)
        captured = Captured(full_logprobs=ones / 2, logprobs=ones / 2, entropy=ones / 2, hidden=torch.ones(1, width, 2))
        ids, mask, sets = (
            torch.full((1, width), 5),
            torch.ones(1, width, dtype=torch.long),
            torch.full((1, width, 3), 255),
        )
        return Completions(torch.tensor([[7]]), torch.ones(1, 1), ids, mask, captured, sets.to(torch.uint8))

    out = concat([round_of(2), round_of(4)], 1, torch.tensor([[7], [7]]), torch.ones(2, 1))
    assert out.response_ids.tolist() == [[5, 5, 1, 1], [5, 5, 5, 5]]  # padded with the pad id (1)
    assert out.response_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert out.captured.logprobs.tolist() == [[0.5, 0.5, 0.0, 0.0], [0.5] * 4]
    assert out.captured.hidden.shape == (2, 4, 2) and out.captured.hidden[0, 2:].eq(0).all()
    sets = out.action_sets
    assert sets.shape == (2, 4, 3) and sets[0, :2].eq(255).all() and sets[0, 2:].eq(0).all() and sets[1].eq(255).all()
