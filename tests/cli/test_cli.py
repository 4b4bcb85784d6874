"""The command line: help, listings, the error boundary, and training runs with the tiny model."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from hfrl.cli.app import main
from hfrl.tasks import TASKS
from hfrl.testing import run_cli
from hfrl.trainers import ALGORITHMS

FAST = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["list", "--help"]])
def test_help(args, capsys):
    code, out, _ = run_cli(args, capsys)
    assert code == 0
    assert "Usage" in out


def test_train_help_has_examples_and_override_form(capsys):
    _, out, _ = run_cli(["train", "--help"], capsys)
    assert "hfrl train --task numbers --alg ppo --model tiny" in out
    assert "--FIELD VALUE" in out
    flat = " ".join(out.split())  # help paragraphs are re-flowed to the terminal's width
    assert "`hfrl list fields --alg ALG` lists the algorithm's fields" in flat
    assert "--report_to tensorboard" in flat and '--lora_target_modules "[q_proj, v_proj]"' in flat
    assert "iteration k ends at step k x steps_per_iteration" in flat and "--threads" in flat


def test_list_fields_of_an_algorithm(capsys):
    import json

    code, out, _ = run_cli(["list", "fields", "--alg", "nlpo", "--json"], capsys)
    assert code == 0
    rows = {row["name"].split()[0]: f"{row['name']}  {row['description']}" for row in json.loads(out)}
    assert "Cumulative probability of the mask policy's top-p action set" in rows["--top_mask"]
    assert rows["--top_mask"].endswith("(default: 0.9)") and "(default: 1e-06)" in rows["--learning_rate"]
    assert "lora_r" in rows["--use_peft"] and "TrainingArguments" in out and "--output_dir" not in rows
    code, _, err = run_cli(["list", "fields", "--alg", "ppp"], capsys)
    assert code == 2 and "unknown algorithm 'ppp'; did you mean 'ppo'?" in err


def test_every_option_is_declared_once():
    """An option (``--task``, ``--merge``...) used by several commands is one type in cli/_options.py,
    not redeclared per command."""
    import re
    from collections import Counter
    from pathlib import Path

    cli = Path(__file__).resolve().parents[2] / "cli"
    flags = Counter(
        flag for path in cli.glob("*.py") for flag in re.findall(r'typer\.Option\(\s*"(--[\w-]+)"', path.read_text())
    )
    assert flags["--task"] == 1 and flags["--seed"] == 1  # the scan finds the declarations
    assert [flag for flag, count in flags.items() if count > 1] == []


def test_threads_default_to_one_for_small_models_on_the_cpu(monkeypatch):
    import torch

    from hfrl.trainers.devices import cpu_threads

    small, big = torch.nn.Linear(8, 8), torch.nn.Embedding(50_000, 1024)  # 51M parameters
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert (cpu_threads(small), cpu_threads(big), cpu_threads(small, use_cpu=False)) == (1, None, None)
    assert cpu_threads(big, requested=2) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's setting wins
    assert cpu_threads(small) is None
    with pytest.raises(ValueError, match="--threads must be >= 1, got 0"):
        cpu_threads(small, requested=0)


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("tasks", "numbers"),
        ("algs", "ppo"),
        ("algs", "RLOO, no critic: each completion"),
        ("fields", "How rewards become advantages"),
        ("rewards", "increasing_numbers"),
        ("metrics", "distinct_n"),
    ],
)
def test_list(what, expected, capsys):
    code, out, _ = run_cli(["list", what], capsys)
    assert code == 0 and expected in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["train", "--task", "numbrs"],
            # the known names from the registry, never a list kept here: a new task needs no edit
            f"error: unknown task 'numbrs'; did you mean 'numbers'? (known: {', '.join(sorted(TASKS))}), or a "
            "'module:attr' path to your own task, a data file (.jsonl, .json, .csv, .tsv, .parquet), a folder of "
            "them or a Hub dataset id",
        ),
        (
            ["train", "--task", "numbers", "--alg", "ppx"],
            f"error: unknown algorithm 'ppx'; did you mean 'ppo'? (known: {', '.join(sorted(ALGORITHMS))}), "
            "or a 'module:attr' path to your own algorithm",
        ),
        (
            ["train", "--task", "numbers", "--learning_rte", "1e-3"],
            "error: unknown config key (from the command line) 'learning_rte'; did you mean 'learning_rate'?",
        ),
        (
            ["train", "--task", "numbers", "--model", "./no/such/model"],
            "error: --model ./no/such/model: no such folder or file; give a model folder, a .gguf file, a Hub id "
            "(owner/name) or a built-in model (tiny, tiny-t5, smollm2)",
        ),
    ],
)
def test_unknown_names_exit_2_with_one_line(args, message, capsys, tmp_path):
    code, _, err = run_cli([*args, "--output-dir", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.splitlines()[0].startswith(message)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--generation_kwargs", "5"], "error: --generation_kwargs takes a mapping such as {top_k: 20}, got 5"),
        (
            ["--use_peft", "--lora_target_modules", "5"],
            "error: --lora_target_modules takes a list such as [a, b], got 5",
        ),
        (  # was read as the list of its 3 characters: "reward_weights has 3 entries for 1 reward functions"
            ["--reward_weights", "abc"],
            "error: --reward_weights takes a list of numbers such as [1.0, 0.5], got 'abc'",
        ),
    ],
)
def test_a_structure_of_the_wrong_kind_is_bad_input(args, message, capsys, tmp_path):
    """These reached a library as an AttributeError / TypeError (now shown as bugs, with a traceback)."""
    code, _, err = run_cli(["train", "--task", "numbers", "-o", str(tmp_path / "o"), *args], capsys)
    assert code == 2 and err.splitlines()[0] == message


def test_reward_weights_take_numbers_in_one_text(capsys, tmp_path):
    """``--reward_weights 1,2`` is two weights (it was the 3 characters '1', ',', '2'): with one reward
    function the count is the error, and it says so."""
    code, _, err = run_cli(["train", "--task", "numbers", "-o", str(tmp_path / "o"), "--reward_weights", "1,2"], capsys)
    assert code == 2 and err.splitlines()[0] == (
        "error: reward_weights has 2 entries for 1 reward functions: give one weight per reward"
    )


def test_unknown_config_key_in_file(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("task: numbers\nnum_iteration: 3\n")
    code, _, err = run_cli(["train", "--config", str(cfg)], capsys)
    assert code == 2
    assert f"unknown config key (from the config file {cfg}) 'num_iteration'; did you mean 'num_iterations'?" in err


def test_malformed_yaml_names_file_and_line(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("task: numbers\nlearning_rate: [1e-3\nseed: 3\n")
    code, _, err = run_cli(["train", "--config", str(cfg)], capsys)
    assert code == 2
    assert err.startswith(f"error: {cfg}:3: invalid YAML")


def _errors():
    from hfrl.metrics.learned import ClassifierUnavailableError
    from hfrl.rewards.combine import RewardError
    from hfrl.runs.run_config import ConfigFileError
    from hfrl.trainers.finite_guard import NonFiniteError
    from hfrl.utils.registry import UnknownNameError
    from hfrl.utils.trust import UntrustedCodeError

    return [
        (ValueError("lr must be > 0"), 2),  # hfrl's bad-input errors and their subclasses
        (UnknownNameError("unknown task 'x'"), 2),
        (UntrustedCodeError("config.yaml names code"), 2),
        (ConfigFileError("bad.yaml:3: invalid YAML"), 2),
        (RewardError("reward function 'r' returned nan"), 2),
        (FileNotFoundError("no such data file"), 2),
        (NonFiniteError("iteration 1: loss = nan"), 1),  # failures while running
        (ClassifierUnavailableError("org/clf", OSError("offline")), 1),
        (ConnectionError("cannot reach the Hub"), 1),
        (RuntimeError("task 'x': cannot load the data"), 1),
        (ImportError("pip install 'hfrl[metrics]'"), 1),
        (TypeError("'int' object is not iterable"), None),  # bugs: the traceback, not "bad input"
        (KeyError("input_ids"), None),
        (AttributeError("'NoneType' object has no attribute 'shape'"), None),
    ]


def test_exit_codes_by_error_class():
    from hfrl.cli.app import exit_code

    assert [exit_code(err) for err, _ in _errors()] == [code for _, code in _errors()]


@pytest.mark.parametrize("error", [TypeError("'int' object is not iterable"), KeyError("input_ids")])
def test_a_library_bug_shows_its_traceback_not_a_usage_error(error, monkeypatch, capsys):
    """A TypeError / KeyError from inside a command is a bug, not bad input: it propagates (Python prints
    the traceback and exits 1) instead of ``error: ...`` with exit code 2."""
    from hfrl.cli import list_cmd

    def broken(what):
        raise error

    monkeypatch.setattr(list_cmd, "_rows", broken)
    with pytest.raises(type(error)):
        main(["list", "tasks"])
    assert "error:" not in capsys.readouterr().err


def test_a_failure_while_running_is_one_line_with_exit_code_1(monkeypatch, capsys):
    from hfrl.cli import list_cmd
    from hfrl.trainers.finite_guard import NonFiniteError

    def diverged(what):
        raise NonFiniteError("iteration 3: loss/value = inf before the optimizer step\nmore detail")

    monkeypatch.setattr(list_cmd, "_rows", diverged)
    code, _, err = run_cli(["list", "tasks"], capsys)
    assert code == 1
    assert (
        err == "error: iteration 3: loss/value = inf before the optimizer step\n(set HFRL_DEBUG=1 for the traceback)\n"
    )


def test_debug_variable_shows_traceback(monkeypatch):
    monkeypatch.setenv("HFRL_DEBUG", "1")
    from hfrl.utils.registry import UnknownNameError

    with pytest.raises(UnknownNameError):
        main(["train", "--task", "numbrs"])


def test_train_precedence_and_saved_config(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    # the task's default learning rate is 2e-3; the file says 1e-3; the flag says 5e-4
    cfg.write_text("task: numbers\nlearning_rate: 1.0e-3\nnum_iterations: 2\nent_coef: 0.05\n")
    out_dir = tmp_path / "run"
    code, out, err = run_cli(
        [
            "train",
            "--config",
            str(cfg),
            "--model",
            "tiny",
            "--output-dir",
            str(out_dir),
            "--seed",
            "3",
            "--learning-rate=5e-4",
            *FAST,
        ],
        capsys,
    )
    assert code == 0, err
    saved = yaml.safe_load((out_dir / "config.yaml").read_text())
    assert saved["task"] == "numbers" and saved["alg"] == "ppo" and saved["model"] == "tiny"
    assert saved["learning_rate"] == 5e-4  # flag > file > task
    assert saved["ent_coef"] == 0.05  # file > task
    assert saved["num_iterations"] == 2 and saved["seed"] == 3
    assert saved["cliprange"] == 0.1  # task default
    state = json.loads((out_dir / "trainer_state.json").read_text())
    assert len([h for h in state["log_history"] if "reward" in h]) == 2
    assert {"config.json", "model.safetensors", "value_head.safetensors", "tokenizer.json"} <= set(os.listdir(out_dir))
    assert " in the first iteration" in out
    # the saved config repeats the run
    code, _, err = run_cli(
        ["train", "--config", str(out_dir / "config.yaml"), "--output-dir", str(tmp_path / "again")], capsys
    )
    assert code == 0, err


def test_resume_from_cli(tmp_path, capsys):
    out_dir = str(tmp_path / "run")
    base = ["train", "--task", "numbers", "--model", "tiny", "--output-dir", out_dir, *FAST, "--save_every", "1"]
    assert run_cli([*base, "--num_iterations", "2"], capsys)[0] == 0
    code, _, err = run_cli([*base, "--num_iterations", "3", "--resume"], capsys)
    assert code == 0, err
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    assert [h["iteration"] for h in state["log_history"] if "reward" in h] == [1, 2, 3]


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "hfrl.cli", "list", "algs"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("ppo")


def test_eval_test_before_after_and_no_token_in_config(tmp_path, capsys):
    out_dir = tmp_path / "run"
    code, _, err = run_cli(
        ["train", "--task", "numbers", "--model", "tiny", "--output-dir", str(out_dir), *FAST,
         "--num_iterations", "1", "--eval-test", "--hub_token", "hf_secret_value"], capsys)  # fmt: skip
    assert code == 0, err
    assert (out_dir / "eval" / "test-base.json").is_file() and (out_dir / "eval" / "test.json").is_file()
    saved = (out_dir / "config.yaml").read_text()
    assert "eval_test: true" in saved and "hf_secret_value" not in saved
    card = (out_dir / "README.md").read_text()
    assert "hf_secret_value" not in card


def test_train_help_and_list_fields_show_the_same_fields(capsys):
    """One source: the config dataclasses' fields (hfrl.trainers.schema). `hfrl train --help` lists
    --alg ppo's as `hfrl list fields` does, with the same defaults."""
    import json

    from hfrl.testing import run_cli

    code, listed, _ = run_cli(["list", "fields", "--alg", "ppo", "--json"], capsys)
    assert code == 0
    code, helped, _ = run_cli(["train", "--help"], capsys)
    assert code == 0
    rows = [(r["name"], r["description"]) for r in json.loads(listed) if "(default: " in r["description"]]
    assert len(rows) > 30 and all(f"{flag} " in helped for flag, _ in rows)
    for flag, text in rows:
        default = text.rpartition("(default: ")[2]
        line = next(line for line in helped.splitlines() if line.strip().startswith(f"{flag} "))
        assert line.rstrip().endswith(f"(default: {default}"), (flag, line)
