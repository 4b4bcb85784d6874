"""Shared prompt prefill: with ``num_generations`` > 1 each prompt is encoded once and its KV cache (a
seq2seq model's encoder outputs) expanded to its group's completions; greedy completions are the
ones generate gives when every copy is encoded, and so are the captured log-probs and hidden states."""

from __future__ import annotations

import pytest
import torch

from hfrl.core.capture import CaptureSettings
from hfrl.core.masking import MaskPolicy, TopPMaskProcessor
from hfrl.core.models import fix_tokenizer, load_model, load_tokenizer
from hfrl.core.rollout import generate_completions, pad

PROMPTS = ["1 2 3", "the year 1999 was a", "7", "4 5 6 7 8 9"]


def setup(path: str, lora: bool = False):
    model = load_model(path)
    tokenizer = load_tokenizer(path)
    fix_tokenizer(tokenizer, model)
    if lora:
        from peft import LoraConfig, get_peft_model

        seq2seq = model.config.is_encoder_decoder
        config = LoraConfig(r=4, target_modules=["q", "v"] if seq2seq else ["c_attn"], fan_in_fan_out=not seq2seq,
                            init_lora_weights=False)  # fmt: skip
        model = get_peft_model(model, config)
    model.eval()
    side = "right" if model.config.is_encoder_decoder else "left"
    ids, mask = pad([tokenizer(p)["input_ids"] for p in PROMPTS], tokenizer.pad_token_id, side)
    return model, tokenizer, ids, mask


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_greedy_group_completions_equal_encoding_every_copy(kind, lora, tiny_causal_dir, tiny_seq2seq_dir):
    model, tokenizer, ids, mask = setup(tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir, lora)
    settings = {"max_new_tokens": 8, "do_sample": False}
    runs = [
        generate_completions(
            model,
            ids,
            mask,
            settings,
            tokenizer.pad_token_id,
            num_generations=3,
            share_prefill=share,
            capture=CaptureSettings(1.0, hidden=True),
        )  # fmt: skip
        for share in (True, False)
    ]
    shared, every = runs
    assert torch.equal(shared.response_ids, every.response_ids)
    assert torch.equal(shared.query_ids, ids.repeat_interleave(3, 0)) and shared.groups.ids.tolist() == [
        g for g in range(4) for _ in range(3)
    ]
    torch.testing.assert_close(shared.captured.full_logprobs, every.captured.full_logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(shared.captured.hidden, every.captured.hidden, atol=1e-5, rtol=1e-5)
    # the same completions as one generate call over the repeated prompts (today's path without groups)
    plain = generate_completions(model, ids.repeat_interleave(3, 0), mask.repeat_interleave(3, 0), settings,
                                 tokenizer.pad_token_id)  # fmt: skip
    assert torch.equal(shared.response_ids, plain.response_ids)


def test_the_prefill_runs_the_prompt_once_per_group(tiny_causal_dir):
    model, tokenizer, ids, mask = setup(tiny_causal_dir)
    rows = []
    hook = model.register_forward_pre_hook(lambda m, a, k: rows.append(k["input_ids"].shape), with_kwargs=True)
    try:
        generate_completions(model, ids, mask, {"max_new_tokens": 2, "do_sample": False}, tokenizer.pad_token_id,
                             num_generations=4)  # fmt: skip
    finally:
        hook.remove()
    width = int(mask.sum(1).max())
    assert rows[0] == (4, width - 1)  # the prompts once, but their last token
    assert rows[1] == (16, 1) and rows[2] == (16, 1)  # then every completion: the last prompt token, one new token


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_nlpo_mask_policy_encodes_each_prompt_once_with_the_same_sets(kind, tiny_causal_dir, tiny_seq2seq_dir):
    model, tokenizer, ids, mask = setup(tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir)
    policy = MaskPolicy(model, top_p=0.5, min_tokens_to_keep=3, always_allowed=tokenizer.all_special_ids)
    expanded_ids, expanded_mask = ids.repeat_interleave(2, 0), mask.repeat_interleave(2, 0)
    grouped = TopPMaskProcessor(policy, expanded_ids, expanded_mask, num_generations=2)
    single = TopPMaskProcessor(policy, expanded_ids, expanded_mask)
    start = torch.zeros(8, 1, dtype=torch.long) if kind == "seq2seq" else expanded_ids
    scores = torch.zeros(8, model.config.vocab_size)
    sequence = start
    for token in (5, 6):
        a, b = grouped(sequence, scores.clone()), single(sequence, scores.clone())
        assert torch.equal(torch.isfinite(a), torch.isfinite(b))
        sequence = torch.cat([sequence, torch.full((8, 1), token)], dim=1)
    torch.testing.assert_close(torch.stack(grouped.thresholds), torch.stack(single.thresholds), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_grouped_scoring_runs_each_prompt_once_with_the_same_logits(kind, tiny_causal_dir, tiny_seq2seq_dir):
    """The reference forward of a rollout's groups: each prompt once, then its completions on the
    expanded cache (or encoder outputs): the logits of the plain forward over every copy."""
    from hfrl.core.policies import completion_forward, grouped_completion_forward

    model, tokenizer, ids, mask = setup(tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir)
    settings = {"max_new_tokens": 6, "do_sample": True, "top_k": 0}
    torch.manual_seed(0)
    done = generate_completions(model, ids, mask, settings, tokenizer.pad_token_id, num_generations=3)
    assert done.groups.size == 3 and done.groups.whole() == 3 and done.groups[:4].whole() == 1  # set at generation
    with torch.no_grad():
        plain, _ = completion_forward(model, done.query_ids, done.query_mask, done.response_ids, done.response_mask)
    grouped = grouped_completion_forward(model, ids, mask, done.response_ids, done.response_mask, 3)
    valid = done.response_mask.bool()
    torch.testing.assert_close(grouped[valid], plain[valid], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_the_update_forward_of_whole_groups_gives_the_plain_gradients(kind, tiny_causal_dir, tiny_seq2seq_dir):
    """Without a critic a minibatch of whole groups runs each prompt once in the update too, the
    gradient flowing back through the expanded cache: the same log-probs and gradients as running
    every copy."""
    from hfrl.core.policies import ActorCritic, disable_dropout

    model, tokenizer, ids, mask = setup(tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir, lora=True)
    disable_dropout(model)  # as the trainers do
    torch.manual_seed(0)
    done = generate_completions(model, ids, mask, {"max_new_tokens": 5, "do_sample": True, "top_k": 0},
                                tokenizer.pad_token_id, num_generations=2)  # fmt: skip
    wrapper = ActorCritic(model, critic=False).train()
    batch = (done.query_ids, done.query_mask, done.response_ids, done.response_mask)
    results = []
    for group in (1, 2):
        wrapper.zero_grad()
        logits, values = wrapper(*batch, group=group)
        logprobs = logits.log_softmax(-1).gather(-1, done.response_ids.unsqueeze(-1)).squeeze(-1)
        (logprobs * done.response_mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in wrapper.named_parameters() if p.grad is not None}
        results.append((logprobs.detach(), grads))
        assert values is None
    (plain, plain_grads), (grouped, grouped_grads) = results
    valid = done.response_mask.bool()
    torch.testing.assert_close(grouped[valid], plain[valid], atol=1e-5, rtol=1e-5)
    assert plain_grads.keys() == grouped_grads.keys() and plain_grads
    for name in plain_grads:
        torch.testing.assert_close(grouped_grads[name], plain_grads[name], atol=1e-4, rtol=1e-3, msg=name)
