"""RL4LMs' layout end to end: token minibatches, per-minibatch whitening and a rollout of a fixed number
of transitions train PPO and NLPO (the minibatch maths: tests/unit/test_minibatches.py)."""

import pytest
import torch
from datasets import Dataset

from hfrl import PPOConfig, PPOTrainer
from hfrl.testing import digit_reward


@pytest.mark.parametrize("alg", ["ppo", "nlpo"])
def test_rl4lms_layout_trains(alg, tiny_causal_dir, make_config):
    """Token minibatches, per-minibatch whitening and a rollout of at least 48 transitions (4 prompts
    of at most 8 tokens: several generation rounds): every rollout holds enough completions, the
    first minibatch reproduces the rollout's log-probs (NLPO: under the top-p sets rebuilt from
    every round's thresholds), and training moves every parameter."""
    from hfrl import NLPOConfig, NLPOTrainer

    config_class, trainer_class = (PPOConfig, PPOTrainer) if alg == "ppo" else (NLPOConfig, NLPOTrainer)
    extra = {} if alg == "ppo" else {"top_mask": 0.5}
    args = make_config(
        config_class,
        **extra,
        rollout_batch_size=4,
        mini_batch_size=2,
        gradient_accumulation_steps=2,
        rollout_tokens=48,
        minibatch_unit="tokens",
        whiten_scope="minibatch",
    )
    trainer = trainer_class(
        model=tiny_causal_dir,
        args=args,
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"]}),
    )
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(4)])
    assert int(rollout.response_mask.sum()) >= 48 and len(rollout) > 4  # further completions of the 4 prompts
    parts = trainer._minibatches(rollout)
    assert len(parts) == args.micro_steps_per_iteration == 2 * 2 * 2  # epochs x minibatches x micro-batches
    assert sum(int(part.token_mask.sum()) for part in parts[:4]) == int(rollout.response_mask.sum())  # one epoch
    trainer.model.train()
    trainer.compute_loss(trainer.model, parts[0])
    assert trainer.iteration.updates["approx_kl"][0] == pytest.approx(0.0, abs=1e-6)

    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            assert not torch.equal(param, before[name]), f"{name} did not change"
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and all(h["num_completions"] > 4 for h in logs)
