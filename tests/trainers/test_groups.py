"""Group sampling (``num_generations``), the advantage estimators in the trainers, optional critic."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from hfrl import PPOConfig, PPOTrainer
from hfrl.core.minibatches import plan_epoch
from hfrl.testing import digit_reward
from hfrl.trainers.online.iteration_sampler import PLACEHOLDER, IterationSampler


def prompts(n: int = 16) -> Dataset:
    return Dataset.from_dict({"prompt": [f"{i} {i + 1}" if i % 2 else f"the year {i}" for i in range(n)]})


def grouped(trainer, count: int) -> list[dict]:
    """The first ``count`` prompts, each ``num_generations`` times in a row (as the sampler hands them)."""
    return [trainer.train_dataset[i] for i in range(count) for _ in range(trainer.args.num_generations)]


def test_the_sampler_repeats_each_prompt_for_its_group_and_fetches_once():
    sampler = IterationSampler(range(6), batch_size=2, repeat_count=3, seed=0, num_generations=3)
    indices = list(sampler)
    assert len(indices) == len(sampler) == 3 * 2 * 3 * 3  # iterations x prompts x generations x micro-steps
    first = indices[:6]
    assert first[:3] == [first[0]] * 3 and first[3:] == [first[3]] * 3 and first[0] != first[3]
    assert indices[6:18] == [PLACEHOLDER] * 12


def test_group_rollout_keeps_each_prompts_completions_together(tiny_causal_dir, make_config):
    args = make_config(num_generations=4, rollout_batch_size=4, mini_batch_size=8, advantage_estimator="dr_grpo",
                       kl_coef=0.0)  # fmt: skip
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    rollout = trainer.collect_rollout(grouped(trainer, 4))
    assert len(rollout) == 16 and rollout.groups.ids.tolist() == [g for g in range(4) for _ in range(4)]
    for g in range(4):  # one prompt per group
        rows = rollout.query_ids[rollout.groups.ids == g]
        assert (rows == rows[0]).all()
    # dr_grpo with no KL: every token of a completion has A = R - mean(group): zero mean per group
    first = rollout.advantages[:, 0]
    assert torch.allclose(first, rollout.scores - rollout.scores.view(4, 4).mean(1).repeat_interleave(4), atol=1e-6)
    assert torch.allclose(first.view(4, 4).sum(1), torch.zeros(4), atol=1e-5)
    with pytest.raises(ValueError, match=r"each prompt num_generations \(4\) times in a row"):
        trainer.collect_rollout([trainer.train_dataset[i] for i in range(16)])


def test_minibatches_keep_whole_groups_when_asked():
    groups = torch.arange(6).repeat_interleave(2)
    plan = plan_epoch(torch.ones(12, 3), num_minibatches=3, group_ids=groups)
    for [micro] in plan:  # 4 rows: two whole groups of 2
        assert len(micro.rows) == 4 and all((groups[micro.rows] == g).sum() == 2 for g in groups[micro.rows].unique())
    with pytest.raises(ValueError, match="make mini_batch_size a multiple of num_generations"):
        plan_epoch(torch.ones(12, 3), num_minibatches=4, group_ids=groups)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"advantage_estimator": "group_norm"}, "advantage_estimator group_norm compares the completions of each"),
        ({"advantage_estimator": "grpo"}, "unknown advantage estimator 'grpo'; did you mean 'dr_grpo'"),
        ({"num_generations": 3, "mini_batch_size": 16}, r"\(8\) x num_generations \(3\) must be a multiple of mini"),
        ({"num_generations": 2, "generation_batch_size": 3}, "generation_batch_size \\(3\\) must be a multiple of"),
        ({"num_generations": 2, "rollout_tokens": 100}, "leave it unset with num_generations > 1"),
        ({"advantage_estimator": "dr_grpo", "num_generations": 2, "minibatch_unit": "tokens"}, "set minibatch_unit"),
        ({"num_generations": 0}, "num_generations must be >= 1, got 0"),
    ],
)
def test_bad_group_settings_fail_clearly(changes, message, make_config):
    with pytest.raises(ValueError, match=message):
        make_config(**changes)


def test_gamma_defaults_to_one_without_a_critic(make_config):
    assert make_config().gamma == 0.99
    assert make_config(advantage_estimator="reinforce").gamma == 1.0
    assert make_config(advantage_estimator="reinforce", gamma=0.9).gamma == 0.9
    assert PPOConfig(output_dir="x", report_to="none").steps_per_iteration == 4


def test_critic_free_minibatches_hold_whole_groups_and_run_each_prompt_once(tiny_causal_dir, make_config):
    """rloo with 4 completions per prompt: each minibatch is whole groups in order, its forward runs
    each prompt once (4 rows for 16 completions), and right after the rollout the ratio is 1."""
    from hfrl.core.policies import base_lm

    args = make_config(num_generations=4, rollout_batch_size=4, mini_batch_size=8, advantage_estimator="rloo")
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    rollout = trainer.collect_rollout(grouped(trainer, 4))
    parts = trainer._minibatches(rollout)
    for part in parts:
        assert part.groups.ids.view(-1, 4).eq(part.groups.ids.view(-1, 4)[:, :1]).all()  # whole groups, in order
    rows = []
    hook = base_lm(trainer.model.policy).register_forward_pre_hook(
        lambda m, a, k: rows.append(k["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        trainer.model.train()
        trainer.compute_loss(trainer.model, parts[0])
    finally:
        hook.remove()
    assert rows == [2, 8]  # the 2 prompts of the minibatch's 2 groups, then its 8 completions on their cache
    assert trainer.iteration.updates["approx_kl"][0] == pytest.approx(0.0, abs=1e-5)
