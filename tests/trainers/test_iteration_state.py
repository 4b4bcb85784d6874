"""The iteration's state on one value (hfrl.trainers.online.iteration_state): the loss's KL coefficient beta
is the one its rollout was assembled with, kept after the iteration's log record is closed, and a loss
with no rollout of the trainer's own fails in one line instead of dropping the KL term."""

import pytest
import torch
from datasets import Dataset

from hfrl import PPOTrainer, TRPOConfig, TRPOTrainer
from hfrl.testing import digit_reward

NO_BETA = (
    r"^{name}: the loss's KL coefficient \(beta\) comes from the iteration's rollout, and this trainer has "
    r"collected none; collect one first \(trainer.collect_rollout\(examples\), or train\(\)\)$"
)


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def test_the_loss_takes_beta_from_the_rollout_after_the_record_is_logged(tiny_causal_dir, make_config):
    """log() closes the iteration's record (trainer.iteration = None); the loss's beta is the rollout's
    all the same: loss = (the loss at beta 0) + beta * k3, with k3 > 0 once the policy has moved."""
    beta = 0.5
    trainer = PPOTrainer(
        model=tiny_causal_dir, args=make_config(kl_in_loss=True, kl_coef=beta), reward_funcs=digit_reward,
        train_dataset=prompts(),
    )  # fmt: skip
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(8)])
    assert trainer.current is not None and trainer.current.kl_coef == beta == trainer.iteration.kl_coef
    assert trainer.rollout is rollout and not trainer.current.warming_up
    with torch.no_grad():  # the policy leaves the reference: a KL term that is not 0
        for p in trainer.accelerator.unwrap_model(trainer.model).policy.parameters():
            p.add_(0.01)
    trainer.iteration = None  # what log() does once the iteration is logged
    trainer.model.train()
    loss = float(trainer.compute_loss(trainer.model, rollout).detach())
    out = trainer.policy_outputs(trainer.model, rollout)
    without = float(trainer.update_loss(out, rollout, 0.0)[0].detach())
    kl = float(trainer.update_loss(out, rollout, beta)[1]["loss/kl"])
    assert kl > 1e-4
    # the same float32 terms summed in the same order, bar the KL's: float32 rounding of the sums (2^-23
    # relative, a few terms) is the tolerance
    assert loss - without == pytest.approx(beta * kl, rel=1e-5, abs=1e-6 * max(1.0, abs(loss)))


def test_a_missing_beta_fails_in_one_line(tiny_causal_dir, make_config):
    """A rollout the collector made alone (not the trainer's iteration) has no beta for the trainer's
    loss: one line, where a silent 0 would have dropped the KL term."""
    trainer = PPOTrainer(
        model=tiny_causal_dir, args=make_config(kl_in_loss=True, kl_coef=0.5), reward_funcs=digit_reward,
        train_dataset=prompts(),
    )  # fmt: skip
    examples = [trainer.train_dataset[i] for i in range(8)]
    rollout, _ = trainer.collector.collect(trainer.model_wrapped, examples, 0.5, trainer.state)
    assert trainer.current is None and trainer.rollout is None
    with pytest.raises(RuntimeError, match=NO_BETA.format(name="PPO")):
        trainer.compute_loss(trainer.model, rollout)


def test_trpos_objective_has_no_silent_beta_either(tiny_causal_dir, make_config):
    trainer = TRPOTrainer(
        model=tiny_causal_dir, args=make_config(TRPOConfig, kl_in_loss=True, kl_coef=0.5), reward_funcs=digit_reward,
        train_dataset=prompts(),
    )  # fmt: skip
    examples = [trainer.train_dataset[i] for i in range(8)]
    rollout, _ = trainer.collector.collect(trainer.model_wrapped, examples, 0.5, trainer.state)
    with pytest.raises(RuntimeError, match=NO_BETA.format(name="TRPO")):
        trainer.policy_step(rollout)
