"""NLPO's top-p action mask and masked log-probs by hand, and the top-p threshold search (the trainer:
tests/trainers/test_nlpo.py)."""

import math

import pytest
import torch

from hfrl.core.masking import top_p_mask
from hfrl.core.rollout import action_logprobs


def test_top_p_mask_hand_worked():
    # probabilities sorted: 0.4 (id 2), 0.3 (id 0), 0.2 (id 3), 0.1 (id 1); top_p 0.6
    logits = torch.tensor([0.3, 0.1, 0.4, 0.2]).log()
    # mass above: id2 0, id0 0.4, id3 0.7, id1 0.9 -> keep ids 2 and 0 (0 crosses 0.6 and is kept)
    assert top_p_mask(logits, 0.6).tolist() == [True, False, True, False]
    # top_p exactly reached by the first two (0.7): the third (mass above 0.7) is out
    assert top_p_mask(logits, 0.7).tolist() == [True, False, True, False]
    assert top_p_mask(logits, 0.71).tolist() == [True, False, True, True]
    # the minimum is kept even when the threshold is reached earlier
    assert top_p_mask(logits, 0.1, min_tokens_to_keep=3).tolist() == [True, False, True, True]
    # special tokens always allowed
    assert top_p_mask(logits, 0.1, always_allowed=[1]).tolist() == [False, True, True, False]
    # batched over leading dims
    assert top_p_mask(torch.stack([logits, logits.flip(0)]), 0.1).sum(-1).tolist() == [1, 1]


def test_masked_logprob_and_entropy_by_hand():
    logits = torch.tensor([[[0.5, 0.25, 0.125, 0.125]]]).log()  # (B=1, T=1, V=4)
    mask = torch.tensor([[[True, True, False, False]]])
    logp, entropy = action_logprobs(logits, torch.tensor([[1]]), mask)
    # renormalised over {0, 1}: p = (2/3, 1/3)
    assert logp.item() == pytest.approx(math.log(1 / 3), rel=1e-5)
    assert entropy.item() == pytest.approx(-(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3), rel=1e-5)
    # a taken token outside the mask is allowed (never -inf): id 2 joins the set {0, 1, 2}
    logp, _ = action_logprobs(logits, torch.tensor([[2]]), mask)
    assert logp.item() == pytest.approx(math.log(0.125 / 0.875), rel=1e-5)


def test_top_p_threshold_is_the_smallest_kept_logit():
    from hfrl.core.masking import top_p_threshold

    logits = torch.tensor([[0.3, 0.1, 0.4, 0.2]]).log()
    # kept {0.4, 0.3} for top_p 0.6 -> the threshold is log 0.3; min 3 kept -> log 0.2
    assert top_p_threshold(logits, 0.6).exp().tolist() == pytest.approx([0.3])
    assert top_p_threshold(logits, 0.1, min_tokens_to_keep=3).exp().tolist() == pytest.approx([0.2])


@pytest.mark.parametrize("scale", [0.05, 1.0, 4.0, 20.0])
def test_top_p_threshold_from_candidates_equals_the_full_sort(scale):
    """The topk shortcut (and its per-row fallback to the sort) gives the sort's thresholds exactly,
    from near-uniform rows (the set spills past the candidates) to peaked ones."""
    from hfrl.core.masking import top_p_threshold

    torch.manual_seed(0)
    logits = torch.randn(6, 3000) * scale
    logits[0] *= 0.01  # one near-uniform row among peaked ones: that row alone falls back
    full = top_p_threshold(logits, 0.9, min_tokens_to_keep=20)
    for candidates in (5, 64, 700):
        assert torch.equal(top_p_threshold(logits, 0.9, 20, candidates=candidates), full)


@pytest.mark.parametrize("which", ["tiny", "tiny-t5"])
def test_mask_policy_steps_its_kv_cache_under_the_current_name(which, monkeypatch):
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes in
    5.40): the mask processor passes and reads the cache under the installed version's name."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import generic

    from hfrl.core.masking import MaskPolicy, TopPMaskProcessor
    from hfrl.core.policies import cache_kwarg
    from hfrl.core.tiny import tiny_model_path

    warned = []
    monkeypatch.setattr(generic.logger, "warning_once", lambda msg, *a, **k: warned.append(msg))
    path = tiny_model_path(which)
    auto = AutoModelForSeq2SeqLM if which == "tiny-t5" else AutoModelForCausalLM
    torch.manual_seed(0)
    lm = auto.from_pretrained(path, trust_remote_code=False).eval()
    tok = AutoTokenizer.from_pretrained(path, padding_side="left", trust_remote_code=False)
    enc = tok(["1 2 3", "the year 19"], return_tensors="pt", padding=True)
    processor = TopPMaskProcessor(MaskPolicy(lm, top_p=0.5, min_tokens_to_keep=1), enc.input_ids, enc.attention_mask)
    out = lm.generate(**enc, logits_processor=[processor], max_new_tokens=4, do_sample=True, top_k=0)
    assert out.shape[1] > (1 if which == "tiny-t5" else enc.input_ids.shape[1])
    assert len(processor.kept) >= 3 and processor.past is not None
    assert not [m for m in warned if "past_key_values" in m], warned
    import transformers
    from packaging.version import Version

    expected = "cache" if Version(transformers.__version__).release >= (5, 24) else "past_key_values"
    assert expected == cache_kwarg(lm)
