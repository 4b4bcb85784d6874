"""NLPO: the top-p action mask, masked log-probs, the mask-policy refresh used by generation."""

import copy
import json
import math
import os

import pytest
import torch
from datasets import Dataset

from hfrl import NLPOConfig, NLPOTrainer
from hfrl.masking import MASK_ADAPTER, top_p_mask
from hfrl.policies import completion_forward
from hfrl.rollout import action_logprobs
from hfrl.testing import digit_reward


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


@pytest.fixture
def nlpo_config(make_config):
    def make(**overrides):
        fields = dict(max_new_tokens=6, num_ppo_epochs=2, top_mask=0.9, min_tokens_to_keep=5, mask_update_every=1)
        return make_config(NLPOConfig, **{**fields, **overrides})

    return make


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


def _policy_mask(model, query_ids, query_mask, top_p, min_keep, special):
    """The top-p set of `model`'s next-token distribution after the prompt."""
    with torch.no_grad():
        logits = completion_forward(model, query_ids, query_mask, query_ids[:, :1], query_mask[:, :1])[0][:, 0]
    return top_p_mask(logits, top_p, min_keep, special)


def test_generation_masks_with_the_refreshed_policy_not_the_initial_one(tiny_causal_dir, nlpo_config):
    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(top_mask=0.5, min_tokens_to_keep=1, learning_rate=5e-3, num_iterations=3),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    initial = copy.deepcopy(policy).eval()
    trainer.train()  # refreshes before iterations 2 and 3, then updates the policy again
    batch = [trainer.train_dataset[i] for i in range(8)]
    trainer.collect_rollout(batch)  # the next rollout refreshes the mask policy from the current policy
    assert trainer._mask_refreshed_at == 3

    query_ids, query_mask = trainer._queries(batch)
    processor = trainer._logits_processor()(query_ids, query_mask)[0]
    vocab = policy.config.vocab_size
    masked = processor(query_ids, torch.zeros(len(batch), vocab))
    generation_mask = torch.isfinite(masked)

    special = trainer.tokenizer.all_special_ids
    current = _policy_mask(policy.eval(), query_ids, query_mask, 0.5, 1, special)
    initial_mask = _policy_mask(initial, query_ids, query_mask, 0.5, 1, special)
    assert torch.equal(generation_mask, current)
    assert not torch.equal(generation_mask, initial_mask)


def test_rollout_tokens_lie_in_the_mask_and_kl_uses_unmasked(tiny_causal_dir, nlpo_config):
    trainer = NLPOTrainer(
        model=tiny_causal_dir, args=nlpo_config(top_mask=0.3), reward_funcs=digit_reward, train_dataset=prompts()
    )
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    mask = trainer.mask_policy.action_mask(
        rollout.query_ids, rollout.query_mask, rollout.response_ids, rollout.response_mask
    )
    taken = mask.gather(-1, rollout.response_ids.unsqueeze(-1)).squeeze(-1)
    valid = rollout.response_mask.bool()
    assert taken[valid].all()  # every sampled token was inside the mask policy's top-p set
    # old log-probs are the renormalised ones: never below the full distribution's
    full = rollout.kl + rollout.ref_logprobs  # log pi(a|s) unmasked
    assert (rollout.logprobs[valid] >= full[valid] - 1e-5).all()
    assert (rollout.logprobs[valid] > full[valid] + 1e-3).any()
    assert (
        5 <= trainer._iteration["mask/kept_tokens"] < trainer.accelerator.unwrap_model(trainer.model).config.vocab_size
    )


def test_nlpo_trains_seq2seq_and_logs_kept_tokens(tiny_seq2seq_dir, nlpo_config):
    trainer = NLPOTrainer(
        model=tiny_seq2seq_dir, args=nlpo_config(), reward_funcs=digit_reward, train_dataset=prompts()
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all("mask/kept_tokens" in h for h in logs)


def test_peft_mask_policy_is_an_adapter_copy(tiny_causal_dir, nlpo_config):
    from peft import LoraConfig

    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(num_iterations=2),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )
    mask_policy = trainer.mask_policy
    assert mask_policy.model is None  # no second base model
    policy = mask_policy.policy
    assert MASK_ADAPTER in policy.peft_config
    trainable_before = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable_before and not any(MASK_ADAPTER in n for n in trainable_before)
    trainer.train()
    trainable_after = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable_after == trainable_before  # switching adapters for masking left training alone
    mask_policy.refresh()
    for mask_param, param in mask_policy._adapter_pairs():
        assert torch.equal(mask_param, param)


def test_nlpo_resume_restores_mask_policy(tiny_causal_dir, nlpo_config):
    config = dict(num_iterations=3, save_every=1, mask_update_every=2)
    first = NLPOTrainer(
        model=tiny_causal_dir, args=nlpo_config(**config), reward_funcs=digit_reward, train_dataset=prompts()
    )
    first.train()
    checkpoint = os.path.join(first.args.output_dir, f"checkpoint-{3 * first.args.steps_per_iteration}")
    with open(os.path.join(checkpoint, "online_state.json")) as fh:
        assert json.load(fh)["mask_refreshed_at"] == 2
    from safetensors.torch import load_file

    saved = load_file(os.path.join(checkpoint, "mask_policy.safetensors"))
    resumed = NLPOTrainer(
        model=tiny_causal_dir, args=nlpo_config(**config), reward_funcs=digit_reward, train_dataset=prompts()
    )
    resumed._load_from_checkpoint(checkpoint)
    assert resumed._mask_refreshed_at == 2
    state = resumed.mask_policy.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved.items())


def test_loss_masks_from_rollout_thresholds_equal_the_sorted_top_p_sets(tiny_causal_dir, nlpo_config):
    """Generation keeps one threshold per position (B x T floats, from the mask policy's cached
    step-by-step logits); scoring and the loss rebuild the same masks from one batched mask-policy
    forward and a comparison, without sorting the vocabulary again."""
    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(top_mask=0.5, generation_batch_size=3),  # 3 generate calls of unequal lengths
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    assert rollout.mask_thresholds.shape == rollout.response_ids.shape
    minibatch = rollout[torch.tensor([5, 1, 3])]  # another batch composition than at generation and scoring
    real = minibatch.response_mask.bool()
    from_thresholds = trainer.loss_action_mask(minibatch)
    sorted_sets = trainer.mask_policy.action_mask(
        minibatch.query_ids, minibatch.query_mask, minibatch.response_ids, minibatch.response_mask
    )
    assert torch.equal(from_thresholds[real], sorted_sets[real])
    # the generation-time thresholds are the batched forward's, up to float noise of the KV cache
    with trainer.mask_policy.active() as model:
        from hfrl.policies import completion_forward

        logits, _ = completion_forward(
            model, minibatch.query_ids, minibatch.query_mask, minibatch.response_ids, minibatch.response_mask
        )
    from hfrl.masking import top_p_threshold

    batched = top_p_threshold(logits, 0.5, trainer.args.min_tokens_to_keep)
    torch.testing.assert_close(minibatch.mask_thresholds[real], batched[real], atol=1e-4, rtol=0)
    assert torch.isinf(minibatch.mask_thresholds[~real]).all()  # padding: nothing allowed


def test_top_p_threshold_is_the_smallest_kept_logit():
    from hfrl.masking import top_p_threshold

    logits = torch.tensor([[0.3, 0.1, 0.4, 0.2]]).log()
    # kept {0.4, 0.3} for top_p 0.6 -> the threshold is log 0.3; min 3 kept -> log 0.2
    assert top_p_threshold(logits, 0.6).exp().tolist() == pytest.approx([0.3])
    assert top_p_threshold(logits, 0.1, min_tokens_to_keep=3).exp().tolist() == pytest.approx([0.2])


@pytest.mark.parametrize("scale", [0.05, 1.0, 4.0, 20.0])
def test_top_p_threshold_from_candidates_equals_the_full_sort(scale):
    """The topk shortcut (and its per-row fallback to the sort) gives the sort's thresholds exactly,
    from near-uniform rows (the set spills past the candidates) to peaked ones."""
    from hfrl.masking import top_p_threshold

    torch.manual_seed(0)
    logits = torch.randn(6, 3000) * scale
    logits[0] *= 0.01  # one near-uniform row among peaked ones: that row alone falls back
    full = top_p_threshold(logits, 0.9, min_tokens_to_keep=20)
    for candidates in (5, 64, 700):
        assert torch.equal(top_p_threshold(logits, 0.9, 20, candidates=candidates), full)


def test_generation_looks_among_candidates_once_sets_are_small(tiny_causal_dir, nlpo_config):
    """A peaked mask policy (temperature 0.05): after the first step the processor looks for each
    top-p set among twice the last step's largest set (a topk), and its thresholds are the sort's."""
    from hfrl.masking import top_p_threshold

    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(
            top_mask=0.5, min_tokens_to_keep=1, generation_kwargs={"do_sample": True, "temperature": 0.05}
        ),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    batch = [trainer.train_dataset[i] for i in range(8)]
    query_ids, query_mask = trainer._queries(batch)
    processor = trainer._logits_processor()(query_ids, query_mask)[0]
    assert processor.candidates is None  # the first step sorts
    vocab = trainer.accelerator.unwrap_model(trainer.model).policy.config.vocab_size
    processor(query_ids, torch.zeros(len(batch), vocab))
    assert processor.candidates == 256  # 2 x (largest set + specials) is small: a topk next time
    step = torch.cat([query_ids, torch.full((len(batch), 1), 7)], dim=1)
    processor(step, torch.zeros(len(batch), vocab))
    with trainer.mask_policy.active() as model:
        response = torch.tensor([[7, 0]] * len(batch))  # logits at position 1 follow the token 7
        logits, _ = completion_forward(model, query_ids, query_mask, response, torch.ones_like(response))
    expected = top_p_threshold(logits[:, 1] / 0.05, 0.5, 1)
    torch.testing.assert_close(processor.thresholds[1], expected, atol=1e-3, rtol=0)
