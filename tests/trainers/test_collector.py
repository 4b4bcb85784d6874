"""The rollout collector without a Trainer (hfrl/trainers/online/collector.py says it needs none): built
from a config, a policy, a tokenizer, a reward function and a plain ``accelerate.Accelerator``, it collects
one rollout whose shapes and values are checked against what it was given."""

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerState

from hfrl import PPOConfig
from hfrl.core.action_space import FULL_VOCABULARY
from hfrl.core.estimators.gae import GAE
from hfrl.core.policies import ActorCritic, ReferencePolicy
from hfrl.trainers.evaluation import PROMPT_IDS
from hfrl.trainers.online.collector import RolloutCollector


def count_digits(prompts, completions, **kwargs):
    return [float(sum(ch.isdigit() for ch in c)) for c in completions]


def test_a_collector_without_a_trainer_collects_one_rollout(tiny_causal_dir, tmp_path):
    torch.manual_seed(0)
    args = PPOConfig(
        output_dir=str(tmp_path), rollout_batch_size=3, num_generations=2, mini_batch_size=2, max_new_tokens=5,
        kl_coef=0.1, report_to="none", use_cpu=True,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    model = ActorCritic(policy)
    collector = RolloutCollector(
        args, tokenizer, [count_digits], [1.0], ReferencePolicy(policy), FULL_VOCABULARY,
        GAE(gamma=1.0, lam=0.95), Accelerator(cpu=True), is_encoder_decoder=False,
    )  # fmt: skip
    prompts = ["1 2", "3 4 5", "6"]
    examples = [
        {"prompt": p, PROMPT_IDS: tokenizer(p)["input_ids"]} for p in prompts for _ in range(args.num_generations)
    ]
    rollout, record = collector.collect(model, examples, kl_coef=0.1, state=TrainerState())

    n = len(prompts) * args.num_generations  # each prompt num_generations times, in a row
    assert rollout.response_ids.shape[0] == n and rollout.response_ids.shape[1] <= args.max_new_tokens
    for name in ("response_mask", "logprobs", "ref_logprobs", "kl", "values", "rewards", "advantages", "returns"):
        assert getattr(rollout, name).shape == rollout.response_ids.shape, name
    texts = tokenizer.batch_decode(rollout.response_ids * rollout.response_mask, skip_special_tokens=True)
    assert rollout.scores.tolist() == count_digits(prompts, texts)  # every completion scored by the reward
    # the reference is the untrained policy itself: its log-probs equal the sampling policy's, KL 0
    mask = rollout.response_mask.bool()
    assert torch.allclose(rollout.logprobs[mask], rollout.ref_logprobs[mask], atol=1e-5)
    # the task reward sits on each completion's last token, beside -beta * KL (0 here)
    last = mask.long().cumsum(1).argmax(1)
    assert torch.allclose(rollout.rewards[torch.arange(n), last], rollout.scores, atol=1e-5)
    assert torch.isfinite(rollout.advantages[mask]).all() and torch.isfinite(rollout.returns[mask]).all()
    assert record.tokens == int(mask.sum()) and record.kl_coef == 0.1
    assert record.metrics["beta"] == 0.1 and "time/generate" in record.metrics
