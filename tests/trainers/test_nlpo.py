"""NLPO: the top-p action mask, masked log-probs, the mask-policy refresh used by generation.
(The maths by hand: tests/unit/test_nlpo_mask.py.)"""

import copy
import json
import os

import pytest
import torch
from datasets import Dataset

from hfrl import NLPOConfig, NLPOTrainer
from hfrl.core.capture import unpack_sets
from hfrl.core.masking import MASK_ADAPTER, top_p_mask
from hfrl.core.policies import completion_forward, tempered
from hfrl.testing import digit_reward


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


@pytest.fixture
def nlpo_config(make_config):
    def make(**overrides):
        fields = dict(max_new_tokens=6, num_ppo_epochs=2, top_mask=0.9, min_tokens_to_keep=5, mask_update_every=1)
        return make_config(NLPOConfig, **{**fields, **overrides})

    return make


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
    assert trainer.action_space.refreshed_at == 3

    query_ids, query_mask = trainer.collector.queries(batch)
    processor = trainer.action_space.processors(query_ids, query_mask)[0]
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
    mask_policy = trainer.action_space.mask_policy
    with torch.no_grad(), mask_policy.active() as model:  # its top-p set at every completion position
        batch = (rollout.query_ids, rollout.query_mask, rollout.response_ids, rollout.response_mask)
        logits = tempered(completion_forward(model, *batch)[0], mask_policy.temperature)
    mask = top_p_mask(logits, mask_policy.top_p, mask_policy.min_tokens_to_keep, mask_policy.always_allowed)
    taken = mask.gather(-1, rollout.response_ids.unsqueeze(-1)).squeeze(-1)
    valid = rollout.response_mask.bool()
    assert taken[valid].all()  # every sampled token was inside the mask policy's top-p set
    # old log-probs are the renormalised ones: never below the full distribution's
    full = rollout.kl + rollout.ref_logprobs  # log pi(a|s) unmasked
    assert (rollout.logprobs[valid] >= full[valid] - 1e-5).all()
    assert (rollout.logprobs[valid] > full[valid] + 1e-3).any()
    vocab = trainer.accelerator.unwrap_model(trainer.model).config.vocab_size
    assert 5 <= trainer.iteration.metrics["mask/kept_tokens"] < vocab


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
    mask_policy = trainer.action_space.mask_policy
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
    assert resumed.action_space.refreshed_at == 2
    state = resumed.action_space.mask_policy.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved.items())


def _spy_processed_scores(policy) -> list:
    """Make ``policy.generate`` also keep transformers' processed scores: the logits after every
    logits processor, which sampling drew from (one tuple of ``(B, V)`` per generate call)."""
    calls = []
    original = policy.generate

    def generate(**kwargs):
        out = original(**kwargs, output_scores=True, return_dict_in_generate=True)
        calls.append(out.scores)
        return out.sequences

    policy.generate = generate
    return calls


@pytest.mark.parametrize("capture", [True, False], ids=["captured", "scored"])
@pytest.mark.parametrize(
    "generation",
    [
        {"do_sample": True, "top_k": 5},  # top_k after the top-p mask: at most 5 tokens
        {"do_sample": True, "top_k": 0, "min_new_tokens": 6},  # EOS forbidden: EOS is special, so in the top-p mask
    ],
    ids=["top_k", "min_new_tokens"],
)
def test_stored_action_sets_are_the_sets_sampled_from(tiny_causal_dir, nlpo_config, generation, capture):
    """The stored set of every step (old log-probs, loss, entropy) is the set of finite processed
    logits generation sampled from (RL4LMs), not the mask policy's top-p set alone: the old log-prob
    is the behaviour policy's and the first minibatch's ratio is 1."""
    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(
            top_mask=0.9, min_tokens_to_keep=20, generation_kwargs=generation, logprobs_from_generation=capture
        ),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    calls = _spy_processed_scores(model.policy)
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    assert len(calls) == 1
    processed = torch.stack(calls[0], dim=1)  # (B, T, V) what sampling drew from, step by step
    valid = rollout.response_mask.bool()
    vocab = processed.shape[-1]
    stored = unpack_sets(rollout.action_sets, vocab)
    assert torch.equal(stored[valid], torch.isfinite(processed)[valid])
    sizes = stored[valid].sum(-1)
    eos = trainer.tokenizer.eos_token_id
    if "top_k" in generation and generation["top_k"]:
        assert sizes.max() <= 5 and trainer.iteration.metrics["mask/kept_tokens"] <= 5
        assert trainer.iteration.metrics["mask/top_p_tokens"] >= 20  # the mask policy's set alone is larger
    else:
        assert not stored[..., eos][valid].any()  # min_new_tokens: EOS never in a stored set
    # old log-prob = the behaviour policy's: log softmax of the processed logits at the sampled token
    behaviour = processed.log_softmax(-1).gather(-1, rollout.response_ids.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(rollout.logprobs[valid], behaviour[valid], atol=1e-5, rtol=0)
    # the first minibatch's ratio is 1: the loss renormalises the same policy over the same sets
    minibatch = rollout[torch.arange(4)]
    with torch.no_grad():
        new_logprobs = trainer.policy_outputs(model, minibatch).logprobs
    ratio = torch.exp(new_logprobs - minibatch.logprobs)[minibatch.response_mask.bool()]
    torch.testing.assert_close(ratio, torch.ones_like(ratio), atol=1e-5, rtol=0)


def test_ppo_ratio_is_over_the_full_distribution_with_top_k(tiny_causal_dir, make_config):
    """PPO keeps no sampled set: with top_k its old log-prob is the full softmax's (not the truncated
    distribution it sampled from), and the first ratio is still 1."""
    from hfrl import PPOTrainer

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(generation_kwargs={"do_sample": True, "top_k": 5}),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    calls = _spy_processed_scores(model.policy)
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    assert rollout.action_sets is None
    valid = rollout.response_mask.bool()
    behaviour = torch.stack(calls[0], dim=1).log_softmax(-1)
    behaviour = behaviour.gather(-1, rollout.response_ids.unsqueeze(-1)).squeeze(-1)
    assert (rollout.logprobs[valid] < behaviour[valid] - 1e-3).all()  # the full softmax spreads mass past the 5
    with torch.no_grad():
        new_logprobs = trainer.policy_outputs(model, rollout).logprobs
    torch.testing.assert_close(new_logprobs[valid], rollout.logprobs[valid], atol=1e-5, rtol=0)


@pytest.mark.parametrize("capture", [True, False], ids=["captured", "scored"])
def test_ppo_sampled_set_loss_renormalises_over_the_top_k_it_sampled_from(tiny_causal_dir, make_config, capture):
    """``sampled_set_loss``: PPO samples as before, but keeps each step's set (what top_k left) and its
    old log-prob is the truncated distribution's, the behaviour policy's: log softmax of the processed
    logits; the first ratio is 1 and the sets' size is logged."""
    from hfrl import PPOTrainer

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(
            generation_kwargs={"do_sample": True, "top_k": 5}, sampled_set_loss=True, logprobs_from_generation=capture
        ),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    calls = _spy_processed_scores(model.policy)
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    processed = torch.stack(calls[0], dim=1)
    valid = rollout.response_mask.bool()
    stored = unpack_sets(rollout.action_sets, processed.shape[-1])
    assert torch.equal(stored[valid], torch.isfinite(processed)[valid])
    assert stored[valid].sum(-1).max() == 5
    behaviour = processed.log_softmax(-1).gather(-1, rollout.response_ids.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(rollout.logprobs[valid], behaviour[valid], atol=1e-5, rtol=0)
    with torch.no_grad():
        new_logprobs = trainer.policy_outputs(model, rollout).logprobs
    torch.testing.assert_close(new_logprobs[valid], rollout.logprobs[valid], atol=1e-5, rtol=0)
    assert trainer.action_space.rollout_stats(rollout.action_sets, rollout.response_mask) == {"sampled_set/tokens": 5.0}


@pytest.mark.parametrize("alg", ["a2c", "trpo", "ppo+rloo"])
def test_sampled_set_loss_trains_every_online_algorithm(tiny_causal_dir, make_config, alg):
    """One iteration of A2C, TRPO and critic-free PPO with the loss over the sampled sets: finite
    losses, the sets' size logged, the weights moved."""
    from hfrl.runs.experiment import algorithm_trainer

    name, _, estimator = alg.partition("+")
    trainer_class = algorithm_trainer(name)
    extra = {"advantage_estimator": estimator, "num_generations": 2} if estimator else {}
    args = make_config(
        trainer_class.config_class, generation_kwargs={"do_sample": True, "top_k": 4}, sampled_set_loss=True,
        num_iterations=1, **extra,
    )  # fmt: skip
    trainer = trainer_class(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    before = [p.detach().clone() for p in trainer.model.parameters() if p.requires_grad]
    trainer.train()
    after = [p for p in trainer.model.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    logged = [entry for entry in trainer.state.log_history if "sampled_set/tokens" in entry]
    assert logged and logged[0]["sampled_set/tokens"] == 4.0


def test_generation_looks_among_candidates_once_sets_are_small(tiny_causal_dir, nlpo_config):
    """A peaked mask policy (temperature 0.05): after the first step the processor looks for each
    top-p set among twice the last step's largest set (a topk), and its thresholds are the sort's."""
    from hfrl.core.masking import top_p_threshold

    trainer = NLPOTrainer(
        model=tiny_causal_dir,
        args=nlpo_config(
            top_mask=0.5, min_tokens_to_keep=1, generation_kwargs={"do_sample": True, "temperature": 0.05}
        ),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    batch = [trainer.train_dataset[i] for i in range(8)]
    query_ids, query_mask = trainer.collector.queries(batch)
    processor = trainer.action_space.processors(query_ids, query_mask)[0]
    assert processor.candidates is None  # the first step sorts
    vocab = trainer.accelerator.unwrap_model(trainer.model).policy.config.vocab_size
    processor(query_ids, torch.zeros(len(batch), vocab))
    assert processor.candidates == 256  # 2 x (largest set + specials) is small: a topk next time
    step = torch.cat([query_ids, torch.full((len(batch), 1), 7)], dim=1)
    processor(step, torch.zeros(len(batch), vocab))
    with trainer.action_space.mask_policy.active() as model:
        response = torch.tensor([[7, 0]] * len(batch))  # logits at position 1 follow the token 7
        logits, _ = completion_forward(model, query_ids, query_mask, response, torch.ones_like(response))
    expected = top_p_threshold(logits[:, 1] / 0.05, 0.5, 1)
    torch.testing.assert_close(processor.thresholds[1], expected, atol=1e-3, rtol=0)


@pytest.mark.parametrize("lora", [False, True])
def test_the_mask_policy_costs_one_cached_forward_per_generated_token(lora, tiny_causal_dir, nlpo_config):
    """Per generated token one forward of the mask policy, on the new token alone after the prompt
    (its own KV cache), the prompt's asking for its last position's logits only; under LoRA the mask
    adapter is switched on the adapter layers (PEFT's set_adapter walked every module twice a token)
    and gives the logits PEFT's own switch gives."""
    from peft import LoraConfig

    from hfrl.core.policies import base_lm

    generation = {"do_sample": True, "top_k": 0, "min_new_tokens": 6}
    peft = LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False) if lora else None
    trainer = NLPOTrainer(model=tiny_causal_dir, args=nlpo_config(generation_kwargs=generation),
                          reward_funcs=digit_reward, train_dataset=prompts(), peft_config=peft)  # fmt: skip
    mask_policy = trainer.action_space.mask_policy
    mask_model = base_lm(mask_policy.policy) if lora else mask_policy.model
    calls = []

    def spy(module, args, kwargs):  # the mask policy runs in inference mode (under LoRA the module is shared)
        calls.append((kwargs["input_ids"].shape, kwargs.get("logits_to_keep"), torch.is_inference_mode_enabled()))

    hook = mask_model.register_forward_pre_hook(spy, with_kwargs=True)
    try:
        rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    finally:
        hook.remove()
    steps = rollout.response_ids.shape[1]
    mask_calls = [call for call in calls if call[2]]
    assert steps == 6 and len(mask_calls) == steps
    assert mask_calls[0][1] == 1 and all(shape == (8, 1) for shape, _, _ in mask_calls[1:])
    if lora:
        ids, mask = rollout.query_ids, rollout.query_mask
        with torch.no_grad(), mask_policy.active() as model:
            ours = model(input_ids=ids, attention_mask=mask).logits
        previous = mask_policy.policy.active_adapter
        mask_policy.policy.set_adapter(MASK_ADAPTER)
        with torch.no_grad():
            theirs = mask_policy.policy(input_ids=ids, attention_mask=mask).logits
        mask_policy.policy.set_adapter(previous)
        assert torch.equal(ours, theirs)
