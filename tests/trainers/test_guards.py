"""The online trainers' guards: the best evaluated policy kept at the end (transformers'
``load_best_model_at_end`` / ``metric_for_best_model``), through a resume too, with one-line errors
for the combinations that cannot work; and the one-line warning when the policy's entropy collapses."""

import logging
import os

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from transformers import TrainerCallback

from hfrl import A2CConfig, PPOTrainer
from hfrl.testing import digit_reward

# The eval reward of each iteration's evaluation, by iteration: the best is iteration 2's, not the last's.
EVAL_REWARDS = {1: 0.2, 2: 0.9, 3: 0.5, 4: 0.1}


def prompts(n=8):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


class ScheduledReward:
    """``digit_reward`` in rollouts; at an evaluation (no ``trainer_state``), ``EVAL_REWARDS`` of the
    trainer's iteration, so that which evaluation is best is known in advance."""

    __name__ = "scheduled"

    def __init__(self) -> None:
        self.trainer = None

    def __call__(self, prompts, completions, trainer_state=None, **kwargs):
        if trainer_state is not None:
            return digit_reward(prompts, completions)
        iteration = self.trainer.state.global_step // self.trainer.args.steps_per_iteration
        return [EVAL_REWARDS[iteration]] * len(completions)


class PolicyAtEvaluation(TrainerCallback):
    """The policy's weights at each evaluation, by iteration; raises after the checkpoint of ``crash_at``
    (a run killed right after it)."""

    def __init__(self, trainer, crash_at=None) -> None:
        self.trainer, self.crash_at, self.weights = trainer, crash_at, {}

    def on_evaluate(self, args, state, control, **kwargs):
        policy = self.trainer.model.policy
        self.weights[state.global_step // args.steps_per_iteration] = {
            k: v.detach().clone() for k, v in policy.state_dict().items()
        }

    def on_save(self, args, state, control, **kwargs):
        if self.crash_at is not None and state.global_step // args.steps_per_iteration == self.crash_at:
            raise KeyboardInterrupt("killed")


def best_run(tiny_causal_dir, make_config, crash_at=None, **overrides):
    reward = ScheduledReward()
    args = make_config(num_iterations=4, eval_every=1, load_best_model_at_end=True, **overrides)
    trainer = PPOTrainer(
        model=tiny_causal_dir, args=args, reward_funcs=reward, train_dataset=prompts(), eval_dataset=prompts(4)
    )
    reward.trainer = trainer
    watch = PolicyAtEvaluation(trainer, crash_at)
    trainer.add_callback(watch)
    return trainer, watch


def saved_policy(folder):
    return load_file(os.path.join(folder, "model.safetensors"))


def same(weights, saved) -> bool:
    return all(torch.equal(weights[k], saved[k]) for k in saved)


def test_the_best_evaluated_policy_is_saved_not_the_last(tiny_causal_dir, make_config, tmp_path):
    trainer, watch = best_run(tiny_causal_dir, make_config)
    assert (trainer.args.metric_for_best_model, trainer.args.greater_is_better) == ("eval_reward", True)
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    per = trainer.args.steps_per_iteration
    assert trainer.state.best_metric == pytest.approx(0.9) and trainer.state.best_global_step == 2 * per
    # save_strategy "best": a checkpoint at each new best only (iterations 1 and 2)
    checkpoints = sorted(p for p in os.listdir(trainer.args.output_dir) if p.startswith("checkpoint-"))
    assert checkpoints == [f"checkpoint-{per}", f"checkpoint-{2 * per}"]
    final = saved_policy(tmp_path / "final")
    assert same(watch.weights[2], final) and not same(watch.weights[4], final)
    assert same(saved_policy(os.path.join(trainer.args.output_dir, f"checkpoint-{2 * per}")), final)


def test_a_resumed_run_keeps_the_best_so_far(tiny_causal_dir, make_config, tmp_path):
    """Killed after iteration 3's checkpoint (best so far: iteration 2), resumed: iteration 4 (0.1)
    does not beat the restored best (0.9), and iteration 2's policy is the one saved."""
    trainer, _ = best_run(tiny_causal_dir, make_config, crash_at=3, save_every=1)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    resumed, watch = best_run(tiny_causal_dir, make_config, save_every=1)
    resumed.train(resume_from_checkpoint=True)
    resumed.save_model(str(tmp_path / "final"))
    per = resumed.args.steps_per_iteration
    assert list(watch.weights) == [4]  # the resumed run evaluated iteration 4 only
    assert resumed.state.best_metric == pytest.approx(0.9) and resumed.state.best_global_step == 2 * per
    final = saved_policy(tmp_path / "final")
    assert same(saved_policy(os.path.join(resumed.args.output_dir, f"checkpoint-{2 * per}")), final)
    assert not same(watch.weights[4], final)


def test_best_model_bad_combinations_are_one_line_errors(tiny_causal_dir, make_config):
    with pytest.raises(ValueError) as err:
        make_config(load_best_model_at_end=True)
    assert str(err.value) == (
        "load_best_model_at_end keeps the best evaluated policy: set eval_every N (evaluate every N iterations on "
        "the eval set)"
    )
    with pytest.raises(ValueError) as err:
        make_config(A2CConfig, mini_batch_size=None, num_ppo_epochs=1, load_best_model_at_end=True, eval_every=2,
                    save_every=3)  # fmt: skip
    assert str(err.value) == (
        "load_best_model_at_end: save_every (3 iterations) must be a multiple of eval_every (2), so that every saved "
        "checkpoint was evaluated; or leave save_every unset (a checkpoint at each new best)"
    )
    args = make_config(load_best_model_at_end=True, eval_every=1)
    with pytest.raises(ValueError) as err:
        PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    assert str(err.value) == (  # the Trainer's own check, for any eval_strategy
        "You have set `args.eval_strategy` to IntervalStrategy.STEPS but you didn't pass an `eval_dataset` to "
        "`Trainer`. Either set `args.eval_strategy` to `no` or pass an `eval_dataset`. "
    )
    args = make_config(load_best_model_at_end=True, eval_every=1, metric_for_best_model="loss")
    with pytest.raises(ValueError) as err:
        PPOTrainer(
            model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
            eval_dataset={"a": prompts(4), "b": prompts(4)}, metrics={"distinct": lambda **kw: 0.0},
        )  # fmt: skip
    assert str(err.value) == (
        "metric_for_best_model 'loss' is no evaluation metric of this run; use one of: eval_a_reward, "
        "eval_a_rewards/digit_reward, eval_b_reward, eval_b_rewards/digit_reward, eval_a_distinct"
    )
    for name in ("a_reward", "eval_b_rewards/digit_reward", "eval_a_distinct-2"):  # a metric's keys: known later
        args = make_config(load_best_model_at_end=True, eval_every=1, metric_for_best_model=name)
        PPOTrainer(
            model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
            eval_dataset={"a": prompts(4), "b": prompts(4)}, metrics={"distinct": lambda **kw: 0.0},
        )  # fmt: skip


def test_an_unknown_metric_key_stops_at_the_first_evaluation(tiny_causal_dir, make_config):
    args = make_config(load_best_model_at_end=True, eval_every=1, metric_for_best_model="eval_distinct-3")
    trainer = PPOTrainer(
        model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts(),
        eval_dataset=prompts(4), metrics={"distinct": lambda **kw: {"distinct-1": 0.5, "distinct-2": 0.7}},
    )  # fmt: skip
    with pytest.raises(ValueError) as err:
        trainer.train()
    assert str(err.value) == (
        "metric_for_best_model 'eval_distinct-3' is not among this evaluation's metrics: eval_distinct-1, "
        "eval_distinct-2, eval_reward, eval_rewards/digit_reward"
    )


class Sharpen(TrainerCallback):
    """A forced collapse: after iteration 1 the policy's logits are scaled by 1000 (its final layer
    norm's weight and bias), so that it samples its argmax token nearly always."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == args.steps_per_iteration:
            with torch.no_grad():
                norm = self.trainer.model.policy.transformer.ln_f
                norm.weight.mul_(1000.0)
                norm.bias.mul_(1000.0)


def entropy_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "entropy collapsed" in r.getMessage()]


def test_an_entropy_collapse_is_warned_once(tiny_causal_dir, make_config, caplog):
    args = make_config(num_iterations=4, learning_rate=1e-5)
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    trainer.add_callback(Sharpen(trainer))
    with caplog.at_level(logging.WARNING, logger="hfrl.trainers.online.online_trainer"):
        trainer.train()
    entropies = [h["entropy"] for h in trainer.state.log_history if "entropy" in h]
    assert entropies[1] < 0.01 * entropies[0] and entropies[3] < 0.05 * entropies[0]  # collapsed from iteration 2 on
    (warning,) = entropy_warnings(caplog)  # once, not at iterations 3 and 4
    assert warning == (
        f"the policy's entropy collapsed at iteration 2: {entropies[1]:.3g} nats per token, under 5% of the first "
        f"iteration's {entropies[0]:.3g}; its samples barely vary and learning stalls: raise ent_coef, lower "
        "learning_rate, or keep the best evaluated policy (load_best_model_at_end)"
    )
    assert trainer.online_state.entropy_watch.state() == {
        "initial_entropy": entropies[0],
        "entropy_collapse_warned": True,
    }


def test_no_entropy_warning_without_a_collapse(tiny_causal_dir, make_config, caplog):
    args = make_config(num_iterations=3)
    trainer = PPOTrainer(model=tiny_causal_dir, args=args, reward_funcs=digit_reward, train_dataset=prompts())
    with caplog.at_level(logging.WARNING, logger="hfrl.trainers.online.online_trainer"):
        trainer.train()
    assert entropy_warnings(caplog) == []
