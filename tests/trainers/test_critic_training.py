"""Training the critic (issue 36, docs/algorithms.md §16): the warm-up leaves the policy bit-identical,
critic passes come before the policy's and refresh its advantages, the critic's own learning rate,
SAO's frozen-attention critic, and one-line errors for settings without a critic to train."""

from __future__ import annotations

import re

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback

from hfrl import PPOConfig, PPOTrainer, TRPOConfig
from hfrl.core.rollout import reestimate
from hfrl.testing import digit_reward


def prompts(n=16):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def trainer_with(model, make_config, **settings):
    return PPOTrainer(model=model, args=make_config(**settings), reward_funcs=digit_reward, train_dataset=prompts())


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


class AtIterationEnd(TrainerCallback):
    """The policy's and the value head's weights at the end of each iteration."""

    def __init__(self, trainer):
        self.trainer, self.policy, self.head = trainer, [], []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % args.steps_per_iteration == 0:
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            self.policy.append(snapshot(model.policy))
            self.head.append(snapshot(model.value_head))


@pytest.mark.parametrize("separate", [False, True])
def test_the_critic_warmup_leaves_the_policy_bit_identical(separate, tiny_causal_dir, make_config):
    trainer = trainer_with(tiny_causal_dir, make_config, num_iterations=3, critic_warmup_iterations=2,
                           separate_critic=separate)  # fmt: skip
    model = trainer.accelerator.unwrap_model(trainer.model)
    start_policy, start_head = snapshot(model.policy), snapshot(model.value_head)
    seen = AtIterationEnd(trainer)
    trainer.add_callback(seen)
    trainer.train()
    for iteration in (0, 1):  # the warm-up: the critic alone learns
        assert all(torch.equal(seen.policy[iteration][n], p) for n, p in start_policy.items())
    assert any(not torch.equal(seen.head[0][n], p) for n, p in start_head.items())
    assert any(not torch.equal(seen.policy[2][n], p) for n, p in start_policy.items())  # then the policy moves
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert [h.get("critic_warmup") for h in logs] == [1.0, 1.0, None]
    assert "loss/policy" not in logs[0] and "loss/policy" in logs[2] and "loss/value" in logs[0]
    assert trainer.warmup_estimator.lam_critic == 1.0  # the warm-up's targets: lambda 1


def test_critic_passes_come_first_and_the_policy_trains_on_refreshed_advantages(tiny_causal_dir, make_config):
    """critic_epochs K: K x minibatches critic-only steps (on the rollout's returns), then the policy's
    epochs, made when their turn comes from the advantages of the critic those steps trained."""
    trainer = trainer_with(tiny_causal_dir, make_config, critic_epochs=2, num_ppo_epochs=1, vf_coef=0.0)
    args = trainer.args
    assert args.steps_per_iteration == (1 + 2) * (8 // 4)
    trainer.create_optimizer_and_scheduler(num_training_steps=args.max_steps)
    rollout = trainer.collect_rollout(list(trainer.train_dataset.select(range(8))))
    buffer = trainer._minibatches(rollout)
    critic, later = buffer[:4], buffer[4]
    assert len(buffer) == 5 and all(part.critic_only for part in critic) and callable(later)
    model = trainer.accelerator.unwrap_model(trainer.model)
    head = snapshot(model.value_head)
    with torch.no_grad():  # the critic moves, as its passes would move it
        for p in model.value_head.parameters():
            p.add_(0.5)
    policy_parts = later()
    assert len(policy_parts) == 2 and not any(part.critic_only for part in policy_parts)
    # The critic's values in the trainer's own chunks (scoring_batch_size, else mini_batch_size): float32
    # sums depend on the batch shape (one forward over all 8 rows differed by 1e-5 on an AVX-512 machine,
    # carried along the sequence by GAE), and the same shapes give the same values bit for bit.
    size = args.scoring_batch_size or args.mini_batch_size
    with torch.no_grad():
        values = torch.cat([model(part.query_ids, part.query_mask, part.response_ids, part.response_mask,
                                  values_only=True)[1].float()
                            for part in (rollout[s : s + size] for s in range(0, len(rollout), size))])  # fmt: skip
    expected = reestimate(rollout, values, trainer.estimator)
    refreshed = torch.cat([part.advantages for part in policy_parts])
    rows = torch.cat([torch.nonzero((rollout.response_ids == part.response_ids[i]).all(1))[0]
                      for part in policy_parts for i in range(len(part))])  # fmt: skip
    assert torch.equal(refreshed, expected.advantages[rows])
    assert not torch.allclose(refreshed, rollout.advantages[rows])
    assert torch.equal(torch.cat([p.returns for p in policy_parts]), rollout.returns[rows])  # fixed targets
    assert head  # (the snapshot: the value head existed)


def test_critic_passes_train_the_critic_alone(tiny_causal_dir, make_config):
    trainer = trainer_with(tiny_causal_dir, make_config, num_iterations=1, critic_epochs=1, num_ppo_epochs=1)
    model = trainer.accelerator.unwrap_model(trainer.model)
    start = snapshot(model.policy)
    steps = []

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            steps.append(all(torch.equal(p, start[n]) for n, p in model.policy.named_parameters()))

    trainer.add_callback(Watch())
    trainer.train()
    assert steps == [True, True, False, False]  # 2 critic minibatches, then the policy's 2


@pytest.mark.parametrize("rate", [{"critic_learning_rate": 5e-3}, {"critic_learning_rate_ratio": 5.0}])
def test_the_critic_learns_at_its_own_rate(tiny_causal_dir, make_config, rate):
    trainer = trainer_with(tiny_causal_dir, make_config, learning_rate=1e-3, lr_scheduler_type="constant", **rate)
    optimizer = trainer.create_optimizer()
    model = trainer.accelerator.unwrap_model(trainer.model)
    critic = {id(p) for p in model.value_head.parameters()}
    rates: dict[float, set[int]] = {}
    for group in optimizer.param_groups:  # (weight decay's groups: one rate may have two)
        rates.setdefault(group["lr"], set()).update(id(p) for p in group["params"])
    assert set(rates) == {1e-3, 5e-3} and rates[5e-3] == critic
    everything = {id(p) for p in model.parameters() if p.requires_grad}
    assert rates[1e-3] | rates[5e-3] == everything  # every parameter in exactly one group
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(everything)


def test_saos_critic_keeps_its_attention_frozen(tiny_causal_dir, make_config):
    trainer = trainer_with(tiny_causal_dir, make_config, num_iterations=1, separate_critic=True,
                           critic_freeze_attention=True)  # fmt: skip
    model = trainer.accelerator.unwrap_model(trainer.model)
    frozen = {n for n, p in model.critic.named_parameters() if not p.requires_grad}
    assert frozen and all(".attn." in n for n in frozen)
    assert all(p.requires_grad for p in model.policy.parameters())  # the policy's attention learns
    before = snapshot(model.critic)
    trainer.train()
    after = snapshot(model.critic)
    assert all(torch.equal(before[n], after[n]) for n in frozen)
    assert any(not torch.equal(before[n], after[n]) for n in before if n not in frozen)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"advantage_estimator": "rloo", "num_generations": 2, "critic_epochs": 2},
         "critic_epochs trains the critic, and advantage_estimator rloo has none: use advantage_estimator gae, or "
         "leave critic_epochs unset"),
        ({"advantage_estimator": "group_norm", "num_generations": 2, "lam_alpha": 0.05},
         "lam_alpha trains the critic, and advantage_estimator group_norm has none"),
        ({"critic_warmup_iterations": 2},
         "critic_warmup_iterations (2) leaves the policy no iteration of num_iterations (2): set num_iterations >= 3 "
         "or critic_warmup_iterations <= 1"),
        ({"critic_freeze_attention": True},
         "critic_freeze_attention freezes the critic's own attention: set separate_critic true"),
        ({"lam_critic": 1.5}, "lam_critic"),
        ({"critic_learning_rate": 0.0}, "critic_learning_rate"),
        ({"critic_learning_rate": 1e-3, "critic_learning_rate_ratio": 5.0},
         "critic_learning_rate and critic_learning_rate_ratio both set the critic's rate: set one of them"),
        ({"advantage_estimator": "rloo", "num_generations": 2, "critic_learning_rate_ratio": 5.0},
         "critic_learning_rate_ratio trains the critic, and advantage_estimator rloo has none"),
    ],
)  # fmt: skip
def test_critic_settings_without_a_critic_to_train_are_one_line(settings, message, make_config):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_config(**settings)


def test_trpo_trains_its_critic_in_its_own_passes(make_config):
    with pytest.raises(ValueError, match=re.escape("critic_epochs (1): TRPO's minibatches already train the critic")):
        make_config(TRPOConfig, critic_epochs=1)


def test_the_steps_of_an_iteration_count_the_critic_passes(make_config):
    args = make_config(PPOConfig, critic_epochs=3, num_ppo_epochs=1, num_iterations=4)
    assert args.steps_per_iteration == 4 * 2 and args.max_steps == 4 * 4 * 2


def test_the_schedule_keeps_the_critics_rate_in_proportion(tiny_causal_dir, make_config):
    trainer = trainer_with(tiny_causal_dir, make_config, num_iterations=2, learning_rate=1e-3,
                           critic_learning_rate=4e-3, lr_scheduler_type="linear")  # fmt: skip
    seen = []

    class Rates(TrainerCallback):
        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            seen.append(sorted({group["lr"] for group in optimizer.param_groups}))

    trainer.add_callback(Rates())
    trainer.train()
    low, high = seen[2]  # a step into the schedule: both rates scaled alike
    assert 0 < low < 1e-3 and high == pytest.approx(4 * low)
