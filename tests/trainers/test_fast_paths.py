"""The speed paths of the online rollout give the same numbers as the plain ones: log-probs and
values captured during generation, logits at completion positions only, padding trimmed per
batch, and rollouts under bf16 autocast."""

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from hfrl import PPOTrainer
from hfrl.core.capture import CaptureSettings
from hfrl.core.policies import ActorCritic, completion_forward, disable_dropout
from hfrl.core.rollout import generate_completions, pad, score
from hfrl.testing import digit_reward


def load(kind, causal_dir, seq2seq_dir):
    path = causal_dir if kind == "causal" else seq2seq_dir
    cls = AutoModelForCausalLM if kind == "causal" else AutoModelForSeq2SeqLM
    lm = cls.from_pretrained(path).eval()
    disable_dropout(lm)
    return lm, AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_captured_logprobs_and_values_equal_a_scoring_forward(kind, tiny_causal_dir, tiny_seq2seq_dir):
    """Prompts of unequal lengths, two generate calls of unequal completion lengths, temperature
    0.7: the log-probs and values kept from generation equal one batched forward's, position by
    position, and are zero past each batch's end."""
    torch.manual_seed(0)
    lm, tok = load(kind, tiny_causal_dir, tiny_seq2seq_dir)
    model = ActorCritic(lm).eval()
    torch.nn.init.normal_(model.value_head.summary.weight)  # a trained critic's values, not the initial zeros
    texts = ["1 2 3 4 5 6", "a", "the movie was", "7", "", "x y"]
    ids = [tok(t)["input_ids"] or [tok.eos_token_id] for t in texts]
    query_ids, query_mask = pad(ids, tok.pad_token_id, "left" if kind == "causal" else "right")
    kwargs = {"do_sample": True, "top_k": 0, "temperature": 0.7, "max_new_tokens": 9}
    completions = generate_completions(
        lm, query_ids, query_mask, kwargs, tok.pad_token_id, batch_size=4, capture=CaptureSettings(temperature=0.7)
    )
    captured, response_ids = completions.captured, completions.response_ids
    assert completions.action_sets is None  # no action set: the action distribution is the full softmax
    assert torch.equal(captured.logprobs, captured.full_logprobs)
    assert captured.full_logprobs.shape == response_ids.shape
    assert captured.hidden.shape == (*response_ids.shape, lm.config.hidden_size)
    completions.captured = None  # score with a forward
    forward = score(model, None, completions, batch_size=6, temperature=0.7)
    real = completions.response_mask.bool()
    torch.testing.assert_close(captured.full_logprobs[real], forward.full_logprobs[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(model.value_head(captured.hidden)[real], forward.values[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(captured.entropy[real], forward.entropy[real], atol=1e-4, rtol=0)


def test_capture_under_peft_hooks_the_base_model(tiny_causal_dir):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    lm, tok = load("causal", tiny_causal_dir, None)
    peft = get_peft_model(lm, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False))
    query_ids, query_mask = pad([tok("1 2")["input_ids"], tok("3")["input_ids"]], tok.pad_token_id, "left")
    completions = generate_completions(
        peft, query_ids, query_mask, {"do_sample": True, "max_new_tokens": 5}, tok.pad_token_id,
        capture=CaptureSettings(hidden=False),
    )  # fmt: skip
    assert completions.captured.hidden is None
    response_ids, real = completions.response_ids, completions.response_mask.bool()
    logits, _ = completion_forward(peft, query_ids, query_mask, response_ids, completions.response_mask)
    expected = logits.log_softmax(-1).gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(completions.captured.full_logprobs[real], expected[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("alg", ["ppo", "nlpo", "nlpo-peft", "nlpo-t5"])
def test_rollout_without_capture_gives_the_same_advantages(alg, tiny_causal_dir, tiny_seq2seq_dir, make_config):
    """``logprobs_from_generation`` on and off: the same rollout numbers for the same samples. NLPO:
    the log-probs and entropy under the set generation sampled from equal the scoring forward's
    under the stored sets (the mask policy under PEFT is an adapter of the captured model itself:
    its forwards inside generation are not steps)."""
    from peft import LoraConfig

    from hfrl import NLPOConfig, NLPOTrainer

    data = Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * 2})
    trainer_class, config_class = (PPOTrainer, None) if alg == "ppo" else (NLPOTrainer, NLPOConfig)
    extra = {"generation_batch_size": 4}  # two generate calls: one processor (and action set) each for NLPO
    if alg != "ppo":
        extra.update(config_class=config_class, top_mask=0.5, min_tokens_to_keep=5)
    peft = LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True) if alg == "nlpo-peft" else None
    rollouts = []
    for capture in (True, False):
        torch.manual_seed(0)
        trainer = trainer_class(
            model=tiny_seq2seq_dir if alg == "nlpo-t5" else tiny_causal_dir,
            args=make_config(logprobs_from_generation=capture, kl_coef=0.1, **extra),
            reward_funcs=digit_reward,
            train_dataset=data,
            peft_config=peft,
        )
        assert trainer.collector.captures is capture
        torch.manual_seed(1)
        rollouts.append(trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)]))
    with_capture, without = rollouts
    assert torch.equal(with_capture.response_ids, without.response_ids)
    mask = without.response_mask.bool()
    for name in ("logprobs", "values", "advantages", "returns", "kl", "entropy"):
        torch.testing.assert_close(getattr(with_capture, name)[mask], getattr(without, name)[mask], atol=1e-4, rtol=0)
    if alg != "ppo":  # the masked distribution differs from the full one: the test sees the mask
        assert (with_capture.logprobs - with_capture.kl - with_capture.ref_logprobs)[mask].abs().max() > 1e-2


def test_lm_head_sees_completion_positions_only(tiny_causal_dir):
    lm, _ = load("causal", tiny_causal_dir, None)
    seen = []
    lm.get_output_embeddings().register_forward_hook(lambda m, i, o: seen.append(o.shape))
    query_ids, query_mask = torch.randint(3, 100, (2, 11)), torch.ones(2, 11, dtype=torch.long)
    response_ids, response_mask = torch.randint(3, 100, (2, 4)), torch.ones(2, 4, dtype=torch.long)
    logits, _ = completion_forward(lm, query_ids, query_mask, response_ids, response_mask)
    assert seen == [torch.Size([2, 5, lm.config.vocab_size])]  # T + 1 positions, not P + T
    full = lm(torch.cat([query_ids, response_ids], 1)).logits[:, 10:14]
    torch.testing.assert_close(logits, full, atol=1e-5, rtol=0)


def test_all_padding_prompt_columns_are_trimmed_without_changing_logits(tiny_causal_dir):
    lm, tok = load("causal", tiny_causal_dir, None)
    query_ids, query_mask = pad([[5, 6, 7], [8]], tok.pad_token_id, "left")
    wide_ids = torch.cat([torch.full((2, 4), tok.pad_token_id), query_ids], 1)  # 4 extra all-pad columns
    wide_mask = torch.cat([torch.zeros(2, 4, dtype=torch.long), query_mask], 1)
    response_ids, response_mask = torch.tensor([[9, 10], [11, 12]]), torch.ones(2, 2, dtype=torch.long)
    seen = []
    lm.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[1]), with_kwargs=True)
    narrow, _ = completion_forward(lm, query_ids, query_mask, response_ids, response_mask)
    wide, _ = completion_forward(lm, wide_ids, wide_mask, response_ids, response_mask)
    assert seen == [5, 5]
    torch.testing.assert_close(narrow, wide)


def test_bf16_rollouts_run_under_autocast(tiny_causal_dir, make_config):
    """``bf16=True`` on CPU: generation and scoring run in bfloat16 like Accelerate's update forward."""
    data = Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * 2})
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(bf16=True, kl_coef=0.1),  # no GPU here: the config turns use_cpu on itself
        reward_funcs=digit_reward,
        train_dataset=data,
    )
    if not torch.cuda.is_available():
        assert trainer.args.use_cpu
    dtypes = set()
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    policy.get_output_embeddings().register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    assert dtypes == {torch.bfloat16}
    assert rollout.logprobs.dtype == torch.float32 and torch.isfinite(rollout.advantages).all()


def test_rollout_orders_prompts_by_length_when_generation_is_batched(tiny_causal_dir, make_config):
    """Generation in batches of 2: prompts of similar length share a batch, so each batch's left
    padding is trimmed to its own longest prompt; every completion stays with its prompt."""
    data = Dataset.from_dict({"prompt": ["1 2 3 4 5 6 7 8", "a", "1 2 3 4 5 6 7", "b"]})
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(rollout_batch_size=4, mini_batch_size=2, generation_batch_size=2, log_completions=True),
        reward_funcs=digit_reward,
        train_dataset=data,
    )
    widths = []
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    generate = policy.generate

    def recording_generate(input_ids, **kwargs):
        widths.append(input_ids.shape[1])
        return generate(input_ids=input_ids, **kwargs)

    policy.generate = recording_generate
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(4)])
    lengths = rollout.query_mask.sum(1).tolist()
    assert lengths == sorted(lengths)
    tok = trainer.tokenizer
    assert widths == [len(tok("b")["input_ids"]), len(tok("1 2 3 4 5 6 7 8")["input_ids"])]
