"""TRL-style reward functions in hfrl (trl 1.16's calling convention, ``GRPOTrainer._calculate_rewards``):
``async``, ``None`` for samples they do not score, ``completion_ids`` / ``trainer_state`` /
``log_extra`` / ``log_metric`` keyword arguments. (hfrl's own rewards through TRL's GRPOTrainer:
tests/trainers/test_rewards_through_trl.py.)"""

from __future__ import annotations

import asyncio
import math

import pytest
import torch
from datasets import Dataset

from hfrl.rewards.combine import compute_rewards


def test_async_rewards_none_and_extras_combine_as_trl_does():
    calls = {}

    async def half(prompts, completions, completion_ids, trainer_state, log_extra, log_metric, **columns):
        await asyncio.sleep(0)
        calls["half"] = (completion_ids, trainer_state, sorted(columns))
        log_metric("half/seen", len(completions))
        log_extra("note", ["x"] * len(completions))
        return [None if c.startswith("skip") else 1.0 for c in completions]

    async def length(prompts, completions, **kwargs):
        return [float(len(c)) for c in completions]

    def plain(prompts, completions, **kwargs):
        return [2.0] * len(completions)

    logged, extra = [], []
    extras = {
        "completion_ids": [[1], [2, 3]],
        "trainer_state": "state",
        "log_extra": lambda k, v: extra.append(k),
        "log_metric": lambda k, v: logged.append((k, v)),
    }
    mask = torch.ones(2, 2, dtype=torch.long)
    funcs, weights = [half, length, plain], [1.0, 0.5, 0.25]
    out = compute_rewards(funcs, weights, ["p", "q"], ["ab", "skip"], mask, {"ref": ["r", "s"]}, extras=extras)
    # completion 0: 1 + 0.5 * 2 + 0.25 * 2 = 2.5; completion 1: (None: nothing) + 0.5 * 4 + 0.25 * 2 = 2.5
    assert out.scores.tolist() == [2.5, 2.5]
    assert out.means == {"half": 1.0, "length": 3.0, "plain": 2.0}  # None left out of the mean
    assert calls["half"] == ([[1], [2, 3]], "state", ["ref"])
    assert logged == [("half/seen", 2)] and extra == ["note"]


def test_async_rewards_run_inside_a_running_event_loop():
    async def one(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    async def main():
        return compute_rewards([one], [1.0], ["p"], ["c"], torch.ones(1, 1, dtype=torch.long), {}).scores.tolist()

    assert asyncio.run(main()) == [1.0]


@pytest.mark.slow
def test_a_trl_style_reward_trains_in_hfrls_ppo(tiny_causal_dir, make_config):
    from hfrl import PPOTrainer

    seen = {}

    async def digits(prompts, completions, completion_ids, trainer_state, log_extra, log_metric, **kwargs):
        seen["step"] = trainer_state.global_step
        seen["ids"] = completion_ids
        log_metric("digits/none", sum(i % 2 for i in range(len(completions))))
        return [None if i % 2 else sum(ch.isdigit() for ch in c) / max(len(c), 1) for i, c in enumerate(completions)]

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=2),
        reward_funcs=digits,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the year"] * 8}),
    )
    trainer.train()
    logs = [e for e in trainer.state.log_history if "rewards/digits" in e]
    assert len(logs) == 2 and all(math.isfinite(e["reward"]) for e in logs)
    assert all(e["digits/none"] == 4 for e in logs)  # 8 completions, every second one None
    assert len(seen["ids"]) == 8 and all(isinstance(i, int) for ids in seen["ids"] for i in ids)
