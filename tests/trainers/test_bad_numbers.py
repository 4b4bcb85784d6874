"""Bad numbers stop the run, naming the culprit: a reward that is NaN, infinite, huge or not a number,
a non-finite loss term or gradient (before the optimizer step: no NaN weights are ever saved)."""

from __future__ import annotations

import math
import os

import pytest
import torch
from datasets import Dataset

from hfrl import PPOTrainer
from hfrl.rewards.combine import RewardError, compute_rewards
from hfrl.testing import digit_reward, run_cli
from hfrl.trainers.finite_guard import NonFiniteError


def prompts(n=8):
    return Dataset.from_dict({"prompt": ["1 2 3", "the movie", "", "a b"] * (n // 4)})


def returning(*values):
    """A reward that returns ``values`` in turn for the completions (cycled)."""

    def reward(prompts, completions, **kwargs):
        return [values[i % len(values)] for i in range(len(completions))]

    return reward


def train(tiny_causal_dir, make_config, reward, **config):
    trainer = PPOTrainer(
        model=tiny_causal_dir, args=make_config(**config), reward_funcs=reward, train_dataset=prompts()
    )
    trainer.train()
    return trainer


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((0.5, 0.5, 0.5, float("nan")), "reward function 'reward' returned nan for completion 3 (and 1 more); fix"),
        ((0.5, float("inf")), "reward function 'reward' returned inf for completion 1 (and 3 more)"),
        ((0.5, 1e30), "reward function 'reward' returned 1e+30 (|r| > 1e+06) for completion 1 (and 3 more)"),
    ],
    ids=["nan", "inf", "huge"],
)
def test_a_bad_reward_stops_the_run_naming_it(values, message, tiny_causal_dir, make_config):
    with pytest.raises(RewardError) as err:
        train(tiny_causal_dir, make_config, returning(*values))
    assert str(err.value).startswith(message) and "invalid_rewards" in str(err.value)


def test_rewards_of_the_wrong_type_name_the_function():
    mask = torch.ones(2, 3)

    def call(out):
        def my_reward(prompts, completions, **kwargs):
            return out

        return compute_rewards([my_reward], [1.0], ["", ""], ["a", "b"], mask, {})

    with pytest.raises(RewardError, match=r"^reward function 'my_reward' returned float 0.5, not one value per comp"):
        call(0.5)
    with pytest.raises(RewardError, match=r"^reward function 'my_reward' returned str 'ab', not one value per"):
        call("ab")
    with pytest.raises(RewardError, match=r"^reward function 'my_reward' returned 'good' \(str\) for completion 1"):
        call([1.0, "good"])
    with pytest.raises(RewardError, match=r"^reward function 'my_reward' returned \{\} \(dict\) for completion 0"):
        call([{}, 1.0])
    scores, _, _ = call([None, 1])  # None: the reward does not apply here; ints and bools are numbers
    assert scores.tolist() == [0.0, 1.0]


def test_invalid_rewards_drop_leaves_those_completions_out(tiny_causal_dir, make_config, caplog):
    trainer = train(tiny_causal_dir, make_config, returning(1.0, float("nan")), invalid_rewards="drop")
    logs = [h for h in trainer.state.log_history if "reward" in h]
    # half the completions are dropped: the logged reward is the mean over the kept ones, all 1.0
    assert [h["reward"] for h in logs] == [1.0, 1.0] and [h["num_completions"] for h in logs] == [4.0, 4.0]
    assert (
        "reward function 'reward' returned nan for completion 1 (and 3 more); left out of this rollout" in caplog.text
    )


def test_a_diverging_run_stops_before_saving_nan_weights(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--learning_rate", "1e3",
            "--num_iterations", "5", "--rollout_batch_size", "8", "--mini_batch_size", "4"]  # fmt: skip
    code, _, err = run_cli([*args, "--disable_tqdm", "true"], capsys)
    err = err[err.index("error: ") :]  # after the model-loading progress bar
    assert code == 1 and len(err.strip().splitlines()) == 2, err  # one line and the HFRL_DEBUG hint
    assert err.startswith("error: iteration ") and "before the optimizer step" in err
    assert "lower learning_rate (now 1000)" in err
    assert not (out / "model.safetensors").exists()  # nothing saved with exit code 0


def test_a_non_finite_loss_term_is_named(tiny_causal_dir, make_config):
    """A reward of 1e30 (no bound): returns and the value loss overflow; the run stops naming the term."""
    with pytest.raises(NonFiniteError, match=r"^iteration 1: loss/value = inf") as err:
        train(tiny_causal_dir, make_config, returning(1e30), max_abs_reward=None)
    assert "before the optimizer step" in str(err.value)


def test_the_gradient_norm_is_checked_before_the_step(tiny_causal_dir, make_config, monkeypatch):
    trainer = PPOTrainer(model=tiny_causal_dir, args=make_config(), reward_funcs=digit_reward, train_dataset=prompts())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    from transformers import Trainer

    monkeypatch.setattr(Trainer, "_get_grad_norm", lambda self, model, grad_norm=None: torch.tensor(float("nan")))
    with pytest.raises(NonFiniteError, match=r"^iteration 1: the gradient norm is nan, before the optimizer step"):
        trainer.train()
    assert all(torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())  # no step was taken


def test_the_logged_loss_is_the_real_loss(tiny_causal_dir, make_config):
    trainer = train(tiny_causal_dir, make_config, digit_reward)
    for log in [h for h in trainer.state.log_history if "reward" in h]:
        assert math.isclose(log["loss"], log["loss/total"], rel_tol=1e-3, abs_tol=1e-6)
    assert trainer.args.logging_nan_inf_filter is False


def test_each_token_level_reward_logs_its_own_mean():
    """(The logged rewards/<name> was the running sum: the second reward logged the first's mean.)"""

    def first(prompts, completions, **kwargs):
        return [[1.0, 1.0], [2.0]]

    def second(prompts, completions, **kwargs):
        return [[0.0, 0.0], [0.0]]

    mask = torch.tensor([[1, 1], [1, 0]])
    _, token_rewards, means = compute_rewards([first, second], [1.0, 1.0], ["", ""], ["a b", "c"], mask, {})
    assert means == {"first": 2.0, "second": 0.0}  # per completion: (1 + 1, 2) -> 2.0
    assert token_rewards.tolist() == [[1.0, 1.0], [2.0, 0.0]]


def test_bad_config_values_are_one_line(make_config):
    with pytest.raises(ValueError, match="invalid_rewards must be 'error' or 'drop', got 'skip'"):
        make_config(invalid_rewards="skip")
    with pytest.raises(ValueError, match="max_abs_reward must be > 0 or None, got 0"):
        make_config(max_abs_reward=0)
    assert os.environ.get("OMP_NUM_THREADS") == "1"  # (conftest: these runs are single-threaded)
