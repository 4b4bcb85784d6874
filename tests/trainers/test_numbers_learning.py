"""A2C, TRPO and NLPO, and PPO's loop with the newer policy losses (GSPO, CISPO, DIS), learn the `numbers` task
with its shipped config and the built-in tiny model (PPO's: tests/trainers/test_ppo_trainer.py,
test_estimator_matrix.py). Shorter than the shipped
runs, with bounds far from the measured curves: runs diverge chaotically with float order (threads,
memory alignment, the tests that ran before), so each bound is half the lowest gain measured over
seeds 0-2 and 42 at one thread (the numbers in each case; two threads could not be measured on the
shared machine, issue 29's report)."""

import pytest

CASES = {
    # alg: (iterations, the gain of the last 10 iterations' mean reward over the first 5's asked for).
    # A2C (1000 iterations shipped), its first 300: gains 0.183 / 0.089 / 0.041 (seeds 0-2) and 0.047
    # (seed 42, the test's), one thread.
    "a2c": (300, 0.02),
    # TRPO (300 iterations shipped), its first 50: gains 0.062 / 0.059 / 0.059 (seeds 0-2) and 0.040
    # (seed 42), one thread.
    "trpo": (50, 0.02),
}


def iteration_rewards(trainer):
    return [h["reward"] for h in trainer.state.log_history if "reward" in h]


@pytest.mark.slow
@pytest.mark.parametrize("alg", sorted(CASES))
def test_numbers_learning_curve_goes_up(alg, tmp_path):
    from hfrl.runs.experiment import build_trainer, resolve_run

    iterations, gain = CASES[alg]
    run = resolve_run(
        "numbers", alg, "tiny", overrides={"num_iterations": iterations, "disable_tqdm": True},
        output_dir=str(tmp_path / "numbers"),
    )  # fmt: skip
    trainer = build_trainer(run)
    trainer.train()
    rewards = iteration_rewards(trainer)
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + gain, rewards


LOSSES = {
    # policy_loss: the gain asked for over 50 iterations of PPO's loop at the task's rate, held constant
    # (the task anneals it over 500), each loss with its own defaults (GSPO's clip 3e-4 / 4e-4, CISPO's
    # 1.0 / 0.28). Measured gains, seeds 0-2 and 42, one thread: gspo 0.050 / 0.038 / 0.043 / 0.043,
    # cispo 0.041 / 0.032 / 0.063 / 0.040 (PPO's clip: test_estimator_matrix.py).
    "gspo": 0.015,
    "cispo": 0.015,
    # DIS (SAO's masked importance sampling, its own clip), the same 50 iterations: gains 0.087 / 0.043 /
    # 0.088 / 0.107 at seeds 0-2 and 42, one thread (issue 54's measurement).
    "dis": 0.02,
}
# The registered losses whose learning is asserted elsewhere, each by its algorithm's own test.
ELSEWHERE = {
    "ppo_clip": "tests/trainers/test_estimator_matrix.py (PPO's loss with each estimator)",
    "a2c": "CASES['a2c'] above (A2C's config's loss)",
    "surrogate": "CASES['trpo'] above (TRPO's config's loss)",
}


def test_every_registered_policy_loss_has_a_measured_learning_bound():
    """A new loss in the registry fails here until its learning on numbers is measured: no loss is left
    out of the learning tests in silence."""
    from hfrl.core.policy_losses import POLICY_LOSSES

    missing = sorted(set(POLICY_LOSSES) - set(LOSSES) - set(ELSEWHERE))
    assert not missing, (
        f"policy loss {', '.join(missing)} has no learning bound: measure it (the gain of the last 10 iterations "
        "over the first 5 in 50 iterations, seeds 0-2 and 42, one thread) and add half the lowest to LOSSES"
    )


@pytest.mark.slow
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_the_newer_policy_losses_learn_numbers(loss, tmp_path):
    from hfrl.runs.experiment import build_trainer, resolve_run

    overrides = {"num_iterations": 50, "disable_tqdm": True, "policy_loss": loss, "lr_scheduler_type": "constant"}
    trainer = build_trainer(resolve_run("numbers", "ppo", "tiny", overrides=overrides, output_dir=str(tmp_path)))
    trainer.train()
    rewards = iteration_rewards(trainer)
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + LOSSES[loss], rewards


@pytest.mark.slow
def test_the_vapo_preset_learns_numbers(tmp_path):
    """``--preset vapo`` over the task's tuning (rate held constant): its 50 warm-up iterations train the
    critic alone, then 50 of the policy's. The gain of the last 10 iterations over the first 5 after the
    warm-up, measured at seeds 0-2 and 42, one thread: 0.027 / 0.027 / 0.038 / 0.036 (PPO's clip without
    the preset gains 0.04-0.05 in 50 iterations: on 20-token completions VAPO's alpha 0.05 gives lambda 0,
    one-step TD advantages); the bound is under half the lowest."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    overrides = {"preset": "vapo", "num_iterations": 100, "disable_tqdm": True, "lr_scheduler_type": "constant"}
    trainer = build_trainer(resolve_run("numbers", "ppo", "tiny", overrides=overrides, output_dir=str(tmp_path)))
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert sum(1 for h in logs if h.get("critic_warmup")) == 50
    rewards = [h["reward"] for h in logs if not h.get("critic_warmup")]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + 0.012, rewards


@pytest.mark.slow
def test_nlpo_learns_numbers_with_its_task_settings(tmp_path):
    """NLPO with the task's own section (tasks/numbers.yaml: the top-p mask refreshed every 10 iterations) for
    100 iterations, the rate annealed over them as the task's run anneals its 500. Gains of the last 10
    iterations over the first 5, seeds 0-2 and 42, one thread: 0.137 / 0.085 / 0.200 / 0.181 (the whole run
    ends at 0.79-0.99); the bound is under half the lowest. It guards the drop that an untuned section gave
    (0.47 after 300 iterations, issue 58)."""
    from hfrl.runs.experiment import build_trainer, resolve_run

    overrides = {"num_iterations": 100, "disable_tqdm": True}
    trainer = build_trainer(resolve_run("numbers", "nlpo", "tiny", overrides=overrides, output_dir=str(tmp_path)))
    assert trainer.args.lr_scheduler_type == "linear" and trainer.args.top_mask == 0.9
    trainer.train()
    rewards = iteration_rewards(trainer)
    first, last = sum(rewards[:5]) / 5, sum(rewards[-10:]) / 10
    assert last > first + 0.04, rewards
