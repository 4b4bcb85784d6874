"""PPOTrainer end to end on tiny local models: training, logging, saving, resuming, PEFT."""

import json
import os
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl import PPOTrainer
from hfrl.testing import digit_reward

ITERATION_KEYS = {
    "reward",
    "reward_std",
    "kl",
    "beta",
    "loss/policy",
    "loss/value",
    "entropy",
    "clipfrac",
    "approx_kl",
    "explained_variance",
    "completion_length",
    "time/generate",
    "time/reward",
    "time/score",
    "time/update",
    "tokens_per_second",
}


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def iteration_logs(trainer):
    return [h for h in trainer.state.log_history if "reward" in h]


def test_python_api_trains_every_parameter(tiny_causal_dir, make_config):
    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward, train_dataset=prompts())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            assert not torch.equal(param, before[name]), f"{name} did not change"
    logs = iteration_logs(trainer)
    assert len(logs) == 2  # one entry per iteration
    assert set(logs[0]) >= ITERATION_KEYS
    assert [h["iteration"] for h in logs] == [1, 2]
    # trainer_state.json with the per-iteration log history at the end of the run
    with open(os.path.join(trainer.args.output_dir, "trainer_state.json")) as fh:
        state = json.load(fh)
    assert len([h for h in state["log_history"] if "reward" in h]) == 2


def test_seq2seq_trains_and_logs(tiny_seq2seq_dir, make_config):
    trainer = PPOTrainer(
        model=tiny_seq2seq_dir,
        args=make_config(kl_coef=0.05, kl_target=0.1),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
    )
    trainer.train()
    logs = iteration_logs(trainer)
    assert len(logs) == 2 and set(logs[-1]) >= ITERATION_KEYS
    assert logs[0]["kl"] == pytest.approx(0.0, abs=1e-5)  # the first rollout's policy is the reference
    assert logs[1]["beta"] != 0.05  # the adaptive controller moved


@pytest.mark.parametrize("alg", ["ppo", "nlpo"])
def test_first_minibatch_ratio_is_one(alg, tiny_causal_dir, make_config):
    """Right after a rollout, the update's log-probs equal the rollout's (dropout off), which come
    from generation; NLPO's under the top-p set generation sampled from, the update's under the
    set rebuilt from the rollout's thresholds."""
    from hfrl import NLPOConfig, NLPOTrainer

    trainer_class, args = (
        (PPOTrainer, make_config()) if alg == "ppo" else (NLPOTrainer, make_config(NLPOConfig, top_mask=0.5))
    )
    trainer = trainer_class(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    assert trainer.collector.captures
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    trainer.model.train()
    trainer.compute_loss(trainer.model, rollout)
    assert trainer.iteration.updates["approx_kl"][0] == pytest.approx(0.0, abs=1e-6)
    assert trainer.iteration.updates["clipfrac"][0] == 0.0


def test_eval_saves_predictions_and_metrics(tiny_causal_dir, make_config):
    from hfrl.metrics.diversity import DistinctN

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(per_device_eval_batch_size=3),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
        eval_dataset=prompts(8),
        metrics={"distinct": DistinctN()},
    )
    metrics = trainer.evaluate()
    assert {"eval_reward", "eval_rewards/digit_reward", "eval_distinct_1", "eval_distinct_2"} <= set(metrics)
    path = os.path.join(trainer.args.output_dir, "predictions", "eval-step0.jsonl")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert len(rows) == 8 and {"prompt", "completion", "reward"} <= set(rows[0])


def test_resume_restores_iteration_kl_and_optimizer(tiny_causal_dir, make_config):
    config = dict(num_iterations=3, save_every=1, kl_coef=0.2, kl_target=0.01)
    first = PPOTrainer(
        model=tiny_causal_dir, args=make_config(**config), reward_funcs=digit_reward, train_dataset=prompts()
    )
    first.train()
    out = first.args.output_dir
    checkpoint = os.path.join(out, f"checkpoint-{2 * first.args.steps_per_iteration}")
    saved = json.loads(Path(checkpoint, "online_state.json").read_text())
    assert saved["iteration"] == 2
    beta_after_two = saved["kl_controller"]["value"]
    assert beta_after_two != 0.2

    resumed = PPOTrainer(
        model=tiny_causal_dir, args=make_config(**config), reward_funcs=digit_reward, train_dataset=prompts()
    )
    captured = {}
    original = resumed.collect_rollout

    def spy(batch):
        captured.setdefault("beta", resumed.online_state.kl.value)
        captured.setdefault("step", resumed.state.global_step)
        captured.setdefault("adam_steps", [float(s["step"]) for s in resumed.optimizer.state.values()][:1])
        return original(batch)

    resumed.collect_rollout = spy
    resumed.train(resume_from_checkpoint=checkpoint)
    assert captured["beta"] == pytest.approx(beta_after_two)  # KL coefficient restored
    assert captured["step"] == 2 * first.args.steps_per_iteration  # iteration count restored
    assert float(captured["adam_steps"][0]) == 2 * first.args.steps_per_iteration  # optimizer state restored
    logs = iteration_logs(resumed)
    assert [h["iteration"] for h in logs] == [1, 2, 3]  # the checkpoint's history, then the new iteration
    assert logs[-1]["beta"] == pytest.approx(beta_after_two)


def test_peft_adapter_run_saves_adapter(tiny_causal_dir, make_config):
    from peft import LoraConfig

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=1),
        reward_funcs=digit_reward,
        train_dataset=prompts(),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )
    assert trainer.reference.model is None  # the reference is the adapter-disabled base
    trainer.train()
    trainer.save_model()
    files = os.listdir(trainer.args.output_dir)
    assert "adapter_model.safetensors" in files and "value_head.safetensors" in files


@pytest.mark.slow
def test_numbers_learning_curve_goes_up(tmp_path):
    """PPO on the `numbers` task (its shipped config) with the built-in tiny model: reward rises well
    above random. Runs diverge chaotically with float order (threads, memory alignment, the tests that
    ran before), so the bound sits far from the curves: over 100 iterations, seeds 0-2 gained 0.09-0.13
    (first 5 iterations 0.105-0.114, last 10 0.200-0.239); the test asks for 0.04."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    run = resolve_run(
        "numbers",
        "ppo",
        "tiny",
        # the shipped rate, constant: the task anneals it over 500 iterations, and the bound was measured so
        overrides={"num_iterations": 100, "disable_tqdm": True, "lr_scheduler_type": "constant"},
        output_dir=str(tmp_path / "numbers"),
    )
    trainer = build_trainer(run)
    trainer.train()
    rewards = [h["reward"] for h in iteration_logs(trainer)]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + 0.04, rewards


def test_bad_inputs_fail_clearly(tiny_causal_dir, make_config):
    with pytest.raises(ValueError, match="needs a 'prompt' column; it has: text"):
        PPOTrainer(
            model=tiny_causal_dir,
            args=make_config(),
            reward_funcs=digit_reward,
            train_dataset=Dataset.from_dict({"text": ["a"]}),
        )
    with pytest.raises(ValueError, match="reward_funcs is required"):
        PPOTrainer(model=tiny_causal_dir, args=make_config(), train_dataset=prompts())
    with pytest.raises(ValueError, match=r"rollout_batch_size \(10\) must be a multiple of mini_batch_size \(4\)"):
        make_config(rollout_batch_size=10)
    with pytest.raises(ValueError) as err:
        make_config(generation_kwargs={"do_sample": True, "num_beams": 4})
    assert str(err.value) == (
        "generation_kwargs: num_beams must be 1 in rollouts (completions are sampled from the policy), got 4; set "
        "num_generations for several completions per prompt"
    )
    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward, train_dataset=prompts(4))
    with pytest.raises(ValueError, match="has 4 prompts, fewer than one rollout"):
        trainer.train()


def test_save_from_a_gathered_state_dict(tiny_causal_dir, make_config, tmp_path):
    """What DeepSpeed / FSDP hand to `_save`: the whole wrapper's state dict, split by prefix."""
    from transformers import AutoModelForCausalLM

    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward, train_dataset=prompts())
    state = {k: v.clone() + 1.0 for k, v in trainer.model.state_dict().items()}  # distinguishable weights
    trainer._save(str(tmp_path / "saved"), state_dict=state)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    assert torch.equal(loaded.transformer.wte.weight, state["policy.transformer.wte.weight"])
    from safetensors.torch import load_file

    head = load_file(tmp_path / "saved" / "value_head.safetensors")
    assert torch.equal(head["summary.weight"], state["value_head.summary.weight"])


def test_same_seed_same_value_head_and_adapter(tiny_causal_dir, make_config):
    """The value head and a LoRA adapter are initialised under ``args.seed``, whatever the global
    random state was when the trainer was built."""
    from peft import LoraConfig

    heads = []
    for noise in (1, 1000):
        torch.rand(noise)  # a different global random state each time
        trainer = PPOTrainer(
            model=tiny_causal_dir,
            args=make_config(seed=3),
            reward_funcs=digit_reward,
            train_dataset=prompts(),
            peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False),
        )
        wrapper = trainer.accelerator.unwrap_model(trainer.model)
        lora = [p.detach().clone() for n, p in wrapper.policy.named_parameters() if "lora_" in n]
        heads.append((wrapper.value_head.summary.weight.detach().clone(), lora))
    assert torch.equal(heads[0][0], heads[1][0])
    assert all(torch.equal(a, b) for a, b in zip(heads[0][1], heads[1][1], strict=True))


def test_dataloader_hands_over_prompts_without_walking_their_token_ids(tiny_causal_dir, make_config):
    """Accelerate's send_to_device would recurse into every prompt token id at every micro-step;
    the trainer's batches pass through it untouched and the rollout reads their examples."""
    from accelerate.utils import send_to_device

    from hfrl.trainers.online.iteration_sampler import PromptBatch

    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward, train_dataset=prompts())
    batch = next(iter(trainer.get_train_dataloader()))
    assert isinstance(batch, PromptBatch) and len(batch) == trainer.args.rollout_batch_size
    assert send_to_device(batch, torch.device("cpu")) is batch
    assert "labels" not in batch  # what the Trainer asks before counting label tokens
    assert {"prompt", "prompt_ids"} <= set(batch.examples[0])
    rollout = trainer._prepare_inputs(batch)
    assert len(rollout) == trainer.args.per_device_train_batch_size
