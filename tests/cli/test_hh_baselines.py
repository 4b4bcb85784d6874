"""The Leftover-Lunch baselines on HH: TRL's DPO on HH's chosen / rejected pairs (and its reference-free
form), online PPO / NLPO on HH prompts against the HH reward model, the ``pairs`` layout the task's
configs select for them, and checkpoints of TRL's trainers during a run."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from hfrl.tasks import describe_task, hh, load_task
from hfrl.testing import run_cli

FIXTURES = str(hh.FIXTURE_DIR.parent)


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    return save_sequence_classifier(tmp_path_factory.mktemp("hh-rm"), "gpt2", ["LABEL_0"])  # one output, as OASST's


@pytest.fixture
def fixtures(monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", FIXTURES)


def test_pairs_layout(fixtures, reward_model):
    rows = load_task("hh", classifier=reward_model).dataset
    pairs = load_task("hh", classifier=reward_model, pairs=True).dataset
    assert {s: len(d) for s, d in pairs.items()} == {"train": 21, "validation": 7, "test": 7}  # one row per pair
    assert set(pairs["train"].column_names) == {"prompt", "chosen", "rejected", "references"}
    # the same prompts, completions and references as the A-LoL rows (chosen, rejected, chosen, rejected, ...)
    assert list(pairs["train"]["prompt"]) == list(rows["train"]["prompt"])[::2]
    assert list(pairs["train"]["chosen"]) == list(rows["train"]["completion"])[::2]
    assert list(pairs["train"]["rejected"]) == list(rows["train"]["completion"])[1::2]
    assert list(pairs["test"]["references"]) == list(rows["test"]["references"])
    built = load_task("hh", classifier=reward_model, pairs=True)
    spec = describe_task("hh", classifier=reward_model, pairs=True)  # what resolving a run reads
    assert (spec.name, spec.default_model, spec.configs) == (built.name, built.default_model, built.configs)


def test_hh_configs_name_the_baselines():
    from hfrl.runs.experiment import task_config
    from hfrl.tasks import describe_task
    from hfrl.trainers.schema import config_schema

    spec = hh.read_task_yaml(hh.__file__)
    for alg in ("dpo", "ppo", "nlpo"):  # NLPO inherits PPO's section
        run_keys, _ = task_config(describe_task("hh"), alg, config_schema(alg))
        assert run_keys["task_args"] == {"pairs": True}, alg
    assert spec["configs"]["pro"]["sft_weight"] == 0.05 and spec["configs"]["dpo"]["beta"] == 0.1


def test_the_task_configs_task_args_merge_under_the_users(fixtures, reward_model):
    from hfrl.runs.experiment import resolve_run

    run = resolve_run("hh", "dpo", "tiny", task_args={"classifier": reward_model, "validation_size": 4})
    assert run["task_args"] == {"pairs": True, "classifier": reward_model, "validation_size": 4}
    override = resolve_run("hh", "dpo", "tiny", task_args={"pairs": False})  # the user's value wins
    assert override["task_args"] == {"pairs": False}


COMMON = ["--model", "tiny", "--report_to", "none", "--disable_tqdm", "true", "--logging_steps", "1"]


@pytest.mark.parametrize("reference_free", [False, True])
def test_dpo_on_hh_pairs(reference_free, fixtures, reward_model, tmp_path, capsys):
    out = tmp_path / "dpo"
    args = ["train", "--task", "hh", "--alg", "dpo", "--output-dir", str(out), *COMMON]
    args += ["--task-arg", f"classifier={reward_model}", "--max_steps", "2", "--warmup_steps", "0"]
    args += ["--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "1", "--max_length", "96"]
    args += ["--save_steps", "1", "--reference_free", str(reference_free).lower()]  # a checkpoint mid-run
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    first = next(h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h)
    # DPO's implicit rewards are beta * (log pi(y) - log pi_ref(y)); reference-free: log pi_ref = 0
    if reference_free:
        assert first["rewards/chosen"] == pytest.approx(0.1 * first["logps/chosen"], rel=1e-3)
        margin = first["rewards/chosen"] - first["rewards/rejected"]
        assert first["loss"] == pytest.approx(math.log1p(math.exp(-margin)), rel=1e-3)  # -log sigmoid(margin)
    else:
        assert first["rewards/chosen"] == pytest.approx(0.0, abs=1e-6)  # the policy is its reference at step 1
        assert first["loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert (out / "checkpoint-1").is_dir() and (out / "model.safetensors").is_file()
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["task_args"]["pairs"] is True and saved["reference_free"] is reference_free
    card = (out / "README.md").read_text()
    assert "trained with DPO on the hfrl task `hh`, evaluated with " in card and "maximise" not in card


@pytest.mark.parametrize("alg", ["ppo", "nlpo"])
def test_online_on_hh_prompts_against_the_reward_model(alg, fixtures, reward_model, tmp_path, capsys):
    out = tmp_path / alg
    args = ["train", "--task", "hh", "--alg", alg, "--output-dir", str(out), *COMMON]
    args += ["--task-arg", f"classifier={reward_model}", "--num_iterations", "1", "--rollout_batch_size", "4"]
    args += ["--mini_batch_size", "2", "--num_ppo_epochs", "1", "--max_new_tokens", "6", "--eval_every", "null"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    logged = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logged) == 1 and 0 < logged[0]["rewards/oasst_reward"] < 1  # the reward model through a sigmoid
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["learning_rate"], saved["kl_coef"], saved["generation_kwargs"]) == (
        2e-5,
        0.2,
        {"do_sample": True, "top_p": 0.95},
    )  # LoL-RL's HH PPO settings
