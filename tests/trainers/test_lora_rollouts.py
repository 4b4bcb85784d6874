"""A LoRA policy's rollouts sampled with the adapter merged (hfrl/trainers/online/lora_rollouts.py,
``merge_lora_for_rollouts``): every weight bit for bit after, the same greedy completions, merged only where
the rollout keeps no log-probs from generation and then its log-probs those of the unmerged policy (the
scoring forward), and the refusals."""

import json

import pytest
import torch
from accelerate import Accelerator
from peft import LoraConfig, PromptTuningConfig, get_peft_model
from peft.tuners.lora import LoraLayer
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerState

from hfrl import PPOConfig
from hfrl.core.action_space import FULL_VOCABULARY
from hfrl.core.estimators.gae import GAE
from hfrl.core.policies import ActorCritic, ReferencePolicy
from hfrl.core.rollout import generate_completions, score
from hfrl.testing import run_cli
from hfrl.trainers.evaluation import PROMPT_IDS
from hfrl.trainers.online import collector as collector_module
from hfrl.trainers.online.collector import RolloutCollector
from hfrl.trainers.online.lora_rollouts import merge_refusal, merged_for_rollout

EPS32 = torch.finfo(torch.float32).eps


def lora(tiny_causal_dir):
    """The tiny GPT-2 with LoRA on every linear layer, its B matrices random (as after training: merging
    then changes the weights)."""
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", fan_in_fan_out=True,
                        init_lora_weights=False, task_type="CAUSAL_LM")  # fmt: skip
    return get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_causal_dir), config).eval()


def merged_layers(policy) -> list[bool]:
    return [m.merged for m in policy.modules() if isinstance(m, LoraLayer)]


def snapshot(policy) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in policy.named_parameters()}


def test_every_weight_bit_for_bit_after_a_merged_rollout(tiny_causal_dir):
    policy = lora(tiny_causal_dir)
    before = snapshot(policy)
    with merged_for_rollout(policy):
        assert all(merged_layers(policy)) and len(merged_layers(policy)) > 0
        changed = [n for n, p in policy.named_parameters() if not torch.equal(p, before[n])]
        assert changed and all(".base_layer.weight" in n for n in changed)  # the merge wrote the base weights
    assert not any(merged_layers(policy))
    assert all(torch.equal(p, before[n]) for n, p in policy.named_parameters())  # base and adapter weights
    # why the restore: PEFT's own merge then unmerge (W + BA - BA) leaves rounding in some base weights
    policy.merge_adapter()
    policy.unmerge_adapter()
    assert any(not torch.equal(p, before[n]) for n, p in policy.named_parameters())


def test_merged_logits_and_greedy_completions_equal_unmerged(tiny_causal_dir):
    """Merged, each layer computes x(W + sBA) where unmerged it computes xW + s(xA)B: the same up to
    float32 rounding of the sums (a few ulps of the logits' scale; 64 ulps of the largest logit is the
    bound). Greedy completions could then differ only at a step whose two best logits sit within that
    bound, which is checked not to happen on these prompts, so they are equal."""
    policy = lora(tiny_causal_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir, padding_side="left")
    batch = tokenizer(["1 2 3", "the cat", "9 8"], return_tensors="pt", padding=True)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    greedy = {"max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False}
    with torch.no_grad():
        plain = generate_completions(policy, ids, mask, greedy, tokenizer.pad_token_id)
        full = torch.cat([plain.query_ids, plain.response_ids], 1)
        full_mask = torch.cat([plain.query_mask, plain.response_mask], 1)
        logits = policy(input_ids=full, attention_mask=full_mask).logits
        with merged_for_rollout(policy):
            fused = generate_completions(policy, ids, mask, greedy, tokenizer.pad_token_id)
            fused_logits = policy(input_ids=full, attention_mask=full_mask).logits
    bound = 64 * EPS32 * logits.abs().max()
    assert (logits - fused_logits).abs().max() <= bound
    steps = logits[:, plain.query_ids.shape[1] - 1 : -1]  # the logits that chose each completion token
    top2 = steps.topk(2, dim=-1).values
    assert (top2[..., 0] - top2[..., 1]).min() > 2 * bound  # no near-tie greedy could resolve differently
    assert torch.equal(plain.response_ids, fused.response_ids)


def test_merge_refusals_one_phrase_each(tiny_causal_dir):
    assert merge_refusal(AutoModelForCausalLM.from_pretrained(tiny_causal_dir)) == "no PEFT adapter"
    policy = lora(tiny_causal_dir)
    assert merge_refusal(policy) is None
    assert merge_refusal(policy, sharded=True) == "weights sharded by ZeRO-3 / FSDP"
    prompt = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_causal_dir),
        PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=2),
    )
    assert merge_refusal(prompt) == "a prompt-learning adapter has no weights to merge"
    policy.add_adapter("mask", policy.peft_config["default"])  # NLPO's mask adapter shares the base weights
    assert merge_refusal(policy) == "more than one adapter (NLPO's mask policy shares the base weights)"
    before = snapshot(policy)
    with merged_for_rollout(policy):  # refused: sampled unmerged
        assert not any(merged_layers(policy))
        assert all(torch.equal(p, before[n]) for n, p in policy.named_parameters())


def count_digits(prompts, completions, **kwargs):
    return [float(sum(ch.isdigit() for ch in c)) for c in completions]


@pytest.mark.parametrize(
    ("merge_setting", "from_generation", "merged", "captured"),
    [
        (True, False, True, False),  # a scoring forward anyway: sampled merged
        (False, False, False, False),  # the setting off
        (True, True, False, True),  # the default: generation keeps the log-probs, unmerged
    ],
)
def test_the_collector_samples_merged_and_scores_the_unmerged_policy(
    tiny_causal_dir, tmp_path, monkeypatch, merge_setting, from_generation, merged, captured
):
    args = PPOConfig(
        output_dir=str(tmp_path), rollout_batch_size=2, num_generations=2, mini_batch_size=2, max_new_tokens=5,
        report_to="none", use_cpu=True, merge_lora_for_rollouts=merge_setting,
        logprobs_from_generation=from_generation,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir, padding_side="left")
    policy = lora(tiny_causal_dir)
    model = ActorCritic(policy).eval()  # the tiny GPT-2's dropout off: scoring twice gives the same numbers
    collector = RolloutCollector(
        args, tokenizer, [count_digits], [1.0], ReferencePolicy(policy), FULL_VOCABULARY,
        GAE(gamma=1.0, lam=0.95), Accelerator(cpu=True), is_encoder_decoder=False,
    )  # fmt: skip
    seen = []

    def spy(lm, *a, **kw):
        out = generate_completions(lm, *a, **kw)
        seen.append((all(merged_layers(lm)), kw["capture"] is not None, out))
        return out

    monkeypatch.setattr(collector_module, "generate_completions", spy)
    before = snapshot(policy)
    examples = [{"prompt": p, PROMPT_IDS: tokenizer(p)["input_ids"]} for p in ("1 2", "3 4 5") for _ in range(2)]
    torch.manual_seed(1)
    rollout, _ = collector.collect(model, examples, kl_coef=0.1, state=TrainerState())

    [(_, _, completions)] = seen
    assert seen[0][:2] == (merged, captured)
    assert not any(merged_layers(policy)) and all(torch.equal(p, before[n]) for n, p in policy.named_parameters())
    if merged:  # the rollout's log-probs and values: the unmerged policy's forward over the same completions
        unmerged = score(model, None, completions, batch_size=args.mini_batch_size)
        assert rollout.values is not None and unmerged.values is not None
        assert torch.equal(rollout.logprobs, unmerged.logprobs) and torch.equal(rollout.values, unmerged.values)


def test_list_fields_shows_the_setting(capsys):
    code, out, _ = run_cli(["list", "fields", "--alg", "ppo", "--json"], capsys)
    assert code == 0
    rows = {row["name"].split()[0]: f"{row['name']}  {row['description']}" for row in json.loads(out)}
    assert rows["--merge_lora_for_rollouts"].endswith("(default: True)")
    assert "restore them bit for bit after" in " ".join(rows["--merge_lora_for_rollouts"].split())
