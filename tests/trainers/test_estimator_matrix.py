"""Every online algorithm with every advantage estimator: ``--alg ppo|nlpo|a2c|trpo
--advantage_estimator E --num_generations G``, causal and seq2seq, LoRA and full, the KL in the
reward or in the loss. The 24 algorithm x estimator pairs each run two iterations on a tiny model,
the other settings rotated so that every algorithm meets each of them; critic-free runs build, score,
train and save no value head. And each estimator learns the `numbers` task."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl import A2CConfig, A2CTrainer, NLPOConfig, NLPOTrainer, PPOConfig, PPOTrainer, TRPOConfig, TRPOTrainer
from hfrl.core.estimators import ESTIMATORS
from hfrl.testing import digit_reward

ALGS = {
    "ppo": (PPOTrainer, PPOConfig),
    "nlpo": (NLPOTrainer, NLPOConfig),
    "a2c": (A2CTrainer, A2CConfig),
    "trpo": (TRPOTrainer, TRPOConfig),
}
ROTATION = list(itertools.product(("causal", "seq2seq"), ("full", "lora"), ("reward", "loss")))  # 8 settings
CASES = [
    (alg, estimator, *ROTATION[(a * len(ESTIMATORS) + e) % len(ROTATION)])
    for a, alg in enumerate(ALGS)
    for e, estimator in enumerate(ESTIMATORS)
]


def lora(kind: str):
    from peft import LoraConfig

    if kind == "causal":
        return LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    return LoraConfig(r=4, target_modules=["q", "v"], init_lora_weights=False)


def test_the_rotation_covers_every_setting_for_every_algorithm():
    for alg in ALGS:
        seen = {case[2:] for case in CASES if case[0] == alg}
        for column in range(3):
            assert len({s[column] for s in seen}) == 2, (alg, seen)


@pytest.mark.parametrize(("alg", "estimator", "kind", "weights", "kl"), CASES)
def test_every_algorithm_trains_with_every_estimator(
    alg, estimator, kind, weights, kl, tiny_causal_dir, tiny_seq2seq_dir, tmp_path
):
    from hfrl.core.estimators import estimator_class

    trainer_class, config_class = ALGS[alg]
    critic = estimator_class(estimator).needs_critic
    groups = 1 if estimator in ("gae", "reinforce") else 2
    fields = dict(
        output_dir=str(tmp_path / "run"), num_iterations=2, rollout_batch_size=4, num_generations=groups,
        num_ppo_epochs=1, max_new_tokens=5, learning_rate=1e-2, report_to="none", disable_tqdm=True,
        advantage_estimator=estimator, kl_in_loss=kl == "loss", kl_coef=0.05,
    )  # fmt: skip
    if alg != "a2c":
        fields["mini_batch_size"] = 4
    if alg == "nlpo":
        fields.update(min_tokens_to_keep=5, mask_update_every=1)
    trainer = trainer_class(
        model=tiny_causal_dir if kind == "causal" else tiny_seq2seq_dir,
        args=config_class(**fields),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the year", "7", "4 5"] * 4}),
        peft_config=lora(kind) if weights == "lora" else None,
    )
    wrapper = trainer.accelerator.unwrap_model(trainer.model)
    assert (wrapper.value_head is not None) == critic and trainer.has_critic == critic
    policy = [(n, p.detach().clone()) for n, p in wrapper.policy.named_parameters() if p.requires_grad]
    trainer.train()
    trainer.save_model()

    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(h["num_completions"] == 4 * groups for h in logs)
    for h in logs:
        assert ("loss/value" in h) == ("explained_variance" in h) == ("value_mean" in h) == critic
        if alg != "trpo":
            assert ("loss/kl" in h) == (kl == "loss") and torch.isfinite(torch.tensor(h["loss/total"]))
    changed = [n for n, before in policy if not torch.equal(dict(wrapper.policy.named_parameters())[n], before)]
    assert changed, "the policy did not move"
    assert os.path.isfile(os.path.join(trainer.args.output_dir, "value_head.safetensors")) == critic
    card = Path(trainer.args.output_dir, "README.md").read_text()  # the card says it too
    assert f"**Advantages.** `{estimator}`" in card and ("no value head was trained or saved" in card) != critic


def test_a_critic_free_checkpoint_has_no_value_head_and_resumes(tiny_causal_dir, make_config):
    args = make_config(advantage_estimator="reinforce_baseline", num_generations=2, save_every=1, num_iterations=2)
    data = Dataset.from_dict({"prompt": ["1 2 3", "the year", "7", "4 5"] * 4})
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=data)
    trainer.train()
    checkpoint = os.path.join(args.output_dir, f"checkpoint-{args.steps_per_iteration}")
    files = set(os.listdir(checkpoint))
    assert "value_head.safetensors" not in files and "online_state.json" in files
    assert "value_head.safetensors" not in trainer._own_checkpoint_files
    resumed = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=data)
    resumed.train(resume_from_checkpoint=checkpoint)
    with_critic = PPOTrainer(model=tiny_causal_dir, args=make_config(num_iterations=3), reward_funcs=digit_reward,
                             train_dataset=data)  # fmt: skip
    with pytest.raises(ValueError, match="holds no value head: a run without a critic wrote it"):
        with_critic._load_from_checkpoint(checkpoint)


@pytest.mark.slow
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_each_estimator_learns_numbers(estimator, tmp_path):
    """PPO on `numbers` (its shipped config, the built-in tiny model) with each estimator, 4 completions
    per prompt (16 prompts: 64 completions a rollout, as the task's 64) for 50 iterations: the reward of
    the last 10 iterations beats the first 5 by 0.02. rloo and dr_grpo, whose advantages are in reward
    units (~0.05 here), run without the task's entropy bonus, sized for unit-scale advantages
    (benchmarks/bench_estimators.py ``SETTINGS``). Measured (seeds 0-2, one thread, bench_estimators.py
    learn): every estimator gained at least twice that."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    groups = 1 if estimator == "gae" else 4
    overrides = {
        "num_iterations": 50, "disable_tqdm": True, "advantage_estimator": estimator, "num_generations": groups,
        "lr_scheduler_type": "constant",  # measured so: the task anneals its rate over 500 iterations
        "rollout_batch_size": 64 // groups, **({"ent_coef": 0.0} if estimator in ("rloo", "dr_grpo") else {}),
    }  # fmt: skip
    trainer = build_trainer(resolve_run("numbers", "ppo", "tiny", overrides=overrides, output_dir=str(tmp_path)))
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + 0.02, rewards
