"""Bad input gets one line that says what to change, and fast: names, types and numbers of the command
line and of config files are checked before torch is imported; NaN and infinity are refused; damaged
files, broken chat templates and rewards of the wrong kind are one line, not a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


def error_line(err: str) -> str:
    """The CLI's one error line (libraries may have drawn progress bars on stderr before it)."""
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


def imported(line: str) -> str:
    """The module an ``-X importtime`` line names, however deeply nested (its name is indented).

    >>> imported("import time:     94646 |    2003080 |     torch"), imported("import time:  9 |  9 | torch.nn")
    ('torch', 'torch.nn')
    """
    return line.rpartition("|")[2].strip() if line.startswith("import time:") else ""


def hfrl_importtime(*args: str, cwd: Path | None = None) -> tuple[int, str, bool]:
    """``python -X importtime -m hfrl.cli ARGS``: (exit code, stderr without the import lines, torch imported?).
    It inherits ``HFRL_CACHE``, which conftest's ``_warm_schema`` filled: the option schema is read, not built."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "hfrl.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)  # fmt: skip
    lines = proc.stderr.splitlines()
    torch = any(imported(line) == "torch" for line in lines)
    return proc.returncode, "\n".join(line for line in lines if not line.startswith("import time:")), torch


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["train", "--task", "numbers", "--model", "tiny", "--learning_rate", "abc"], 2,
         "error: --learning_rate takes a number, got 'abc'"),
        (["train", "--task", "numbrs"], 2, "error: unknown task 'numbrs'; did you mean 'numbers'?"),
        (["train", "--task", "numbers", "--lerning_rate", "1"], 2, "did you mean 'learning_rate'?"),
        (["train", "--task", "numbers", "--kl_coef", "nan"], 2, "error: --kl_coef takes a finite number, got nan"),
        (["train", "--task", "numbers", "--alg", "a_lol", "--learning_rate", ".inf"], 2, "--learning_rate takes a"),
        (["--help"], 0, ""),
        (["--version"], 0, ""),
        (["list", "tasks"], 0, ""),
        (["list", "algs"], 0, ""),
        (["list", "fields", "--alg", "nlpo"], 0, ""),
    ],
)  # fmt: skip
def test_the_command_line_is_checked_before_torch_is_imported(args, code, message):
    returncode, err, torch = hfrl_importtime(*args)
    assert returncode == code, err
    assert message in err
    assert not torch, f"hfrl {' '.join(args)} imported torch"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--kl_coef", "nan"], "--kl_coef takes a finite number, got nan"),
        (["--reward_weights", "[.nan]"], "--reward_weights[0] takes a finite number, got [nan]"),
        (["--max_abs_reward", "nan"], "--max_abs_reward takes a finite number, got nan"),
        (["--ent_coef", ".inf"], "--ent_coef takes a finite number, got inf"),
        (["--generation_kwargs", "{temperature: .nan}"], "--generation_kwargs.temperature takes a finite number"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(extra, field, tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"), *extra], capsys)
    assert code == 2 and err.startswith(f"error: {field}"), err
    assert not (tmp_path / "r").exists()


def test_non_finite_numbers_are_refused_in_python_too():
    from hfrl import ALoLConfig, PPOConfig

    with pytest.raises(ValueError, match=r"^kl_coef must be a finite number, got nan$"):
        PPOConfig(output_dir="x", kl_coef=float("nan"))
    with pytest.raises(ValueError, match=r"^reward_weights\[1\] must be a finite number, got \[1.0, inf\]$"):
        PPOConfig(output_dir="x", reward_weights=[1.0, float("inf")])
    with pytest.raises(ValueError, match=r"^learning_rate must be a finite number"):
        ALoLConfig(output_dir="x", learning_rate=float("nan"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("bad") / "run"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST])
    assert exc.value.code in (0, None)
    return out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"task": {"name": "numbers"}}, "task takes a task name or a data path (text), got {'name': 'numbers'}"),
        ({"alg": 3}, "alg takes an algorithm name (text), got 3"),
        ({"model": ["tiny"]}, "model takes a model name or path (text), got ['tiny']"),
        ({"eval_generation_kwargs": [1, 2]}, "eval_generation_kwargs takes a mapping such as {top_k: 20}, got [1, 2]"),
    ],
)
@pytest.mark.parametrize("command", ["train --config", "eval", "chat"])
def test_a_config_file_of_the_wrong_yaml_types_is_one_line(command, edit, message, run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    args = {
        "train --config": ["train", "--config", str(run / "config.yaml"), "-o", str(tmp_path / "again")],
        "eval": ["eval", str(run), "--max-samples", "2"],
        "chat": ["chat", str(run), "--message", "hi"],
    }[command]
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert err.splitlines()[0] == f"error: config file {run / 'config.yaml'}: {message}", err


def garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8:20] = b"garbage!!!!!"  # inside the JSON header
    path.write_bytes(bytes(data))


def test_a_damaged_model_file_is_one_line(run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    garble(run / "model.safetensors")
    for args in (["eval", str(run), "--max-samples", "2"], ["chat", str(run), "--message", "hi"]):
        code, _, err = run_cli(args, capsys)
        assert code == 1, err
        assert error_line(err).startswith(f"error: the weights in {run} are damaged (Error while deserializing header")


def test_a_broken_chat_template_is_one_line(run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    config = json.loads((run / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for message in messages %}{{ message.content }"  # never closed
    (run / "tokenizer_config.json").write_text(json.dumps(config))
    code, _, err = run_cli(["chat", str(run), "--message", "hi", "--format", "chat-template"], capsys)
    assert code == 2, err
    assert error_line(err).startswith(f"error: the chat template of {run} cannot be applied (TemplateSyntaxError")


def huge(prompts, completions, **kwargs):
    return [10**400 for _ in completions]


def as_dict(prompts, completions, **kwargs):
    return {i: 1.0 for i in range(len(completions))}


@pytest.mark.parametrize(
    ("reward", "message"),
    [
        ("huge", "reward function 'huge' returned a number too large for a float (100000000000... with 401 digits)"),
        ("as_dict", "reward function 'as_dict' returned dict"),
    ],
)
def test_a_reward_of_the_wrong_kind_is_one_line_naming_it(reward, message, tmp_path, capsys):
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"), *FAST,
            "--rewards", f"[{__file__}:{reward}]"]  # fmt: skip  # a reward of your own: its file's path
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert error_line(err).startswith(f"error: {message}")
    assert not (tmp_path / "r").exists()  # the start failed: nothing left behind


def test_a_huge_data_file_fails_its_row_count_before_torch_is_imported(tmp_path):
    """One 50 MB line: the row count (fewer prompts than one rollout) is checked before the model loads
    and before its prompt is tokenized (it once took 98 s to get here)."""
    data = tmp_path / "big.jsonl"
    data.write_text(json.dumps({"prompt": "word " * 10_000_000, "references": ["a"]}) + "\n")
    code, err, torch = hfrl_importtime("train", "--task", str(data), "--model", "tiny", "-o", str(tmp_path / "r"))
    assert code == 2, err
    assert "error: the train dataset has 1 prompts, fewer than one rollout (16 x 1 processes)" in err
    assert not torch


def test_a_stop_every_process_takes_is_said_once(monkeypatch, capsys):
    """The sharding guard's stop on a process other than the first: exit code 2 and nothing printed (the
    first process prints the line); any other bad input prints its line."""
    from cli import app as cli_app
    from hfrl.trainers.sharding_guard import SaidByFirstProcess

    for err, printed in ((SaidByFirstProcess("ZeRO-3 on 2 processes ..."), ""), (ValueError("bad"), "error: bad\n")):

        def fail(args, err=err):
            raise err

        monkeypatch.setattr(cli_app, "app", fail)
        with pytest.raises(SystemExit) as stop:
            cli_app.main(["train"])
        assert stop.value.code == 2
        assert capsys.readouterr().err.split("(set HFRL_DEBUG")[0] == printed
