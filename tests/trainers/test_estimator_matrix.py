"""Every online policy loss with every advantage estimator, each pair on one of the online algorithms
and action spaces: ``--alg ppo|nlpo|a2c|trpo --policy_loss L --advantage_estimator E``, causal and
seq2seq, LoRA and full, the KL in the reward or in the loss, the whole vocabulary or the sets sampled
from. The pairs come from the registries (a new loss or estimator is enrolled with no edit here) and
each runs two iterations on a tiny model, the other settings rotated so that every loss and every
algorithm meets each of them; the group size and the critic follow the estimator's properties, not its
name; critic-free runs build, score, train and save no value head. And each estimator learns the
`numbers` task (so do the newer losses: tests/trainers/test_numbers_learning.py)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from hfrl import A2CConfig, A2CTrainer, NLPOConfig, NLPOTrainer, PPOConfig, PPOTrainer, TRPOConfig, TRPOTrainer
from hfrl.core.estimators import ESTIMATORS, estimator_class
from hfrl.core.policy_losses import POLICY_LOSSES, policy_loss_class
from hfrl.testing import digit_reward

ALGS = {
    "ppo": (PPOTrainer, PPOConfig),
    "nlpo": (NLPOTrainer, NLPOConfig),
    "a2c": (A2CTrainer, A2CConfig),
    "trpo": (TRPOTrainer, TRPOConfig),
}
# the rotated settings: model kind, weights, where the KL goes, the action space (NLPO: always its mask)
ROTATION = list(itertools.product(("causal", "seq2seq"), ("full", "lora"), ("reward", "loss"), ("full", "sampled")))
DEFAULT_LOSS = {alg: config.__dataclass_fields__["policy_loss"].default for alg, (_, config) in ALGS.items()}


def _cases() -> list[tuple[str, ...]]:
    """Every algorithm with every estimator (each with its own policy loss), then every other registered
    loss with every estimator on the algorithms in turn (TRPO steps on a loss only when its value is a
    surrogate: its line search compares it; A2C takes the case otherwise); the settings rotate with a
    step that also turns every 4 cases (a stride found to cover each setting for every loss and every
    algorithm with 5-8 losses and 6-8 estimators: the test below checks it)."""
    pairs = [(DEFAULT_LOSS[alg], estimator, alg) for alg in ALGS for estimator in ESTIMATORS]
    others = [loss for loss in POLICY_LOSSES if loss not in DEFAULT_LOSS.values()]
    for i, (loss, estimator) in enumerate(itertools.product(others, ESTIMATORS)):
        alg = list(ALGS)[i % len(ALGS)]
        pairs.append((loss, estimator, "a2c" if alg == "trpo" and not policy_loss_class(loss).surrogate else alg))
    return [(*pair, *ROTATION[(i + 3 * (i // 4)) % len(ROTATION)]) for i, pair in enumerate(pairs)]


CASES = _cases()


def lora(kind: str):
    from peft import LoraConfig

    if kind == "causal":
        return LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False)
    return LoraConfig(r=4, target_modules=["q", "v"], init_lora_weights=False)


def test_the_rotation_covers_every_setting_for_every_loss_and_algorithm():
    assert {(alg, estimator) for _, estimator, alg, *_ in CASES} >= set(itertools.product(ALGS, ESTIMATORS))
    assert {loss for loss, *_ in CASES} == set(POLICY_LOSSES)
    for column, name in ((0, "policy loss"), (2, "algorithm")):
        for value in {case[column] for case in CASES}:
            seen = [case[3:] for case in CASES if case[column] == value]
            for setting in range(4):
                assert len({s[setting] for s in seen}) == 2, (name, value, seen)


@pytest.mark.parametrize(("loss", "estimator", "alg", "kind", "weights", "kl", "space"), CASES)
def test_every_loss_trains_with_every_estimator(
    loss, estimator, alg, kind, weights, kl, space, tiny_causal_dir, tiny_seq2seq_dir, tmp_path
):
    trainer_class, config_class = ALGS[alg]
    critic = estimator_class(estimator).needs_critic
    groups = 2 if estimator_class(estimator).needs_groups or policy_loss_class(loss).needs_groups else 1
    fields = dict(
        output_dir=str(tmp_path / "run"), num_iterations=2, rollout_batch_size=4, num_generations=groups,
        num_ppo_epochs=1, max_new_tokens=5, learning_rate=1e-2, report_to="none", disable_tqdm=True,
        advantage_estimator=estimator, kl_in_loss=kl == "loss", kl_coef=0.05, policy_loss=loss,
        sampled_set_loss=space == "sampled" and alg != "nlpo",
        generation_kwargs={"do_sample": True, "top_k": 20 if space == "sampled" else 0},
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
    assert type(trainer.policy_loss) is policy_loss_class(loss)
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
    the last 10 iterations beats the first 5 by 0.02. Estimators whose advantages are in reward units
    (``unit_scale`` False: rloo, dr_grpo; ~0.05 here) run without the task's entropy bonus, sized for
    unit-scale advantages (benchmarks/bench_estimators.py ``settings()``). Measured (seeds 0-2, one
    thread, bench_estimators.py learn): every estimator gained at least twice that."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    chosen = estimator_class(estimator)
    groups = 1 if chosen.needs_critic else 4  # the critic-free: groups
    overrides = {
        "num_iterations": 50, "disable_tqdm": True, "advantage_estimator": estimator, "num_generations": groups,
        "lr_scheduler_type": "constant",  # measured so: the task anneals its rate over 500 iterations
        "rollout_batch_size": 64 // groups, **({} if chosen.unit_scale else {"ent_coef": 0.0}),
    }  # fmt: skip
    trainer = build_trainer(resolve_run("numbers", "ppo", "tiny", overrides=overrides, output_dir=str(tmp_path)))
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + 0.02, rewards
