"""The ``orz`` preset (hfrl/presets/orz.yaml, Open-Reasoner-Zero): its settings resolve as
docs/algorithms.md §16 says, over a task's tuning, with no reference model loaded."""

from pathlib import Path

import yaml

from hfrl import PPOConfig
from hfrl.testing import run_cli
from hfrl.trainers.presets import preset_settings, read_preset

ORZ = {"advantage_estimator": "gae", "lam": 1.0, "lam_critic": 1.0, "gamma": 1.0, "kl_coef": 0.0,
       "kl_target": None, "critic_learning_rate_ratio": 5.0, "num_ppo_epochs": 1, "critic_epochs": 4,
       "critic_warmup_iterations": 5}  # fmt: skip


def test_the_orz_preset_holds_the_documented_settings(tmp_path):
    assert preset_settings("orz") == ORZ
    assert read_preset("orz").paper == "hu2025orz"
    docs = Path(__file__).resolve().parents[2] / "docs" / "algorithms.md"
    row = next(line for line in docs.read_text().splitlines() if line.startswith("| `orz` |"))
    for key in ORZ:
        assert f"`{key}`" in row, key
    args = PPOConfig(output_dir=str(tmp_path), num_iterations=12, **preset_settings("orz"))
    assert (args.lam, args.gamma, args.kl_coef, args.critic_learning_rate_ratio) == (1.0, 1.0, 0.0, 5.0)


def test_an_orz_run_on_arith_chains_resolves_and_loads_no_reference(tmp_path, capsys):
    out = tmp_path / "orz"
    task = ["--task", "arith_chains", "--task-arg", "train_size=16", "--task-arg", "eval_size=4"]
    budget = ["--num_iterations", "4", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "8"]
    code, stdout, err = run_cli(["train", *task, "--alg", "ppo", "--preset", "orz", "--model", "tiny", *budget,
                                 "--output_dir", str(out)], capsys)  # fmt: skip
    assert code == 0, err
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["preset"] == "orz"
    assert {k: config[k] for k in ORZ} == {**ORZ, "critic_warmup_iterations": 2}  # half of the 4 iterations
    assert "the first 2 iterations train the critic only" in stdout
    # no KL anywhere: the iteration logs say 0, and no reference forward ran
    state = yaml.safe_load((out / "trainer_state.json").read_text())
    assert all(h["kl"] == 0.0 and h["beta"] == 0.0 for h in state["log_history"] if "kl" in h)
