"""A run directory is data: a config.yaml (or --config file) that names code never runs it.

Every command that opens a run (eval, export, chat, push, train --config) is tried on runs whose
config names a shell command through a task (os:system), a reward (subprocess:Popen), a metric and an
`evaluate` module: exit 2, one line, and the marker file the code would create never appears. With
--trust-code (the user's opt-in) a file may name code. Secrets never reach the disk.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """A real run directory from `hfrl train` (tiny model, one iteration)."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("security") / "run"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST])
    assert exc.value.code in (0, None)
    return out


def payloads(marker: Path) -> dict[str, dict]:
    """config.yaml edits that would each create ``marker`` if hfrl ran what the file names."""
    touch = f"touch {marker}"
    script = marker.parent / "evil_metric.py"
    script.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    return {
        "task": {"task": "os:system", "task_args": {"command": touch}},
        "reward": {"rewards": [{"id": "subprocess:Popen", "args": {"args": ["touch", str(marker)]}}]},
        "metric": {"task_args": {"metrics": [{"id": "subprocess:Popen", "args": {"args": ["touch", str(marker)]}}]}},
        "evaluate-module": {"rewards": [{"id": "evaluate", "args": {"path": str(script)}}]},
        "algorithm": {"alg": "os:system"},
    }


def poisoned(clean_run: Path, tmp_path: Path, edit: dict) -> Path:
    run = tmp_path / "downloaded-run"
    shutil.copytree(clean_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    return run


COMMANDS = {
    "eval": lambda run, tmp: ["eval", str(run), "--max-samples", "2"],
    "export": lambda run, tmp: ["export", str(run), "--out", str(tmp / "exported")],
    "chat": lambda run, tmp: ["chat", str(run), "--message", "hi"],
    "push": lambda run, tmp: ["push", str(run), "--repo-id", "me/run"],
    "train --config": lambda run, tmp: ["train", "--config", str(run / "config.yaml"), "-o", str(tmp / "again"), *FAST],
}


@pytest.mark.parametrize("payload", ["task", "reward", "metric", "evaluate-module", "algorithm"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_run_that_names_code_is_refused(command, payload, clean_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    marker = tmp_path / "MARKER"
    run = poisoned(clean_run, tmp_path, payloads(marker)[payload])
    code, _, err = run_cli(COMMANDS[command](run, tmp_path), capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 2, err  # one line, and the HFRL_DEBUG hint
    assert err.startswith(f"error: config file {run / 'config.yaml'} names code to run")
    assert "pass --trust-code if you trust this file" in err
    assert not marker.exists()


def test_a_file_may_name_code_when_the_user_trusts_it(clean_run, tmp_path, capsys):
    """The opt-in: the user's own reward, named by a module path in a config file."""
    run = poisoned(clean_run, tmp_path, {"rewards": ["hfrl.testing:digit_reward"]})
    args = ["eval", str(run), "--max-samples", "2"]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "names code to run (rewards[0]: 'hfrl.testing:digit_reward')" in err
    code, out, err = run_cli([*args, "--trust-code"], capsys)
    assert code == 0, err
    assert "digit_reward" in out


def test_a_name_typed_on_the_command_line_is_the_users_choice(tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "--rewards", "[hfrl.testing:digit_reward]",
                            "-o", str(tmp_path / "run"), *FAST], capsys)  # fmt: skip
    assert code == 0, err


def test_task_yaml_names_rewards_by_registry_id_only(tmp_path, monkeypatch):
    """A task's YAML is a file too: a module path in it is refused (the shipped ones use registry ids)."""
    import hfrl.tasks.base as base
    from hfrl.utils.registry import UnknownNameError

    yaml_file = tmp_path / "mytask.yaml"
    yaml_file.write_text("name: mytask\nrewards: [{id: 'subprocess:Popen', args: {args: [touch, x]}}]\n")
    with pytest.raises(UnknownNameError, match=r"task file .*mytask.yaml names code to run \(rewards\[0\].id"):
        base.read_task_yaml(str(tmp_path / "mytask.py"))
    from hfrl.utils.trust import trusted_code

    with trusted_code():
        assert base.read_task_yaml(str(tmp_path / "mytask.py"))["name"] == "mytask"


SECRET = "hf_NeverOnDisk0123456789abcdefXYZ"


@pytest.mark.parametrize(
    "extra",
    [
        ["--save_every", "1", "--num_iterations", "2", "--rollout_batch_size", "4", "--mini_batch_size", "4"],
        ["--alg", "grpo", "--max_steps", "2", "--save_steps", "1", "--per_device_train_batch_size", "4",
         "--num_generations", "2", "--max_completion_length", "4"],  # TRL's trainer and its checkpoints
    ],
    ids=["ppo", "grpo"],
)  # fmt: skip
def test_the_hub_token_never_reaches_the_disk(extra, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--hub_token", SECRET]
    args += ["--disable_tqdm", "true", "--report_to", "none"]
    code, _, err = run_cli([*args, *extra], capsys)
    assert code == 0, err
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in files) and any("checkpoint-" in str(p) for p in files)
    for path in files:
        data = path.read_bytes()
        assert SECRET.encode() not in data, path
        printable = subprocess.run(["strings", "-n", "8", str(path)], capture_output=True, text=True).stdout
        assert SECRET not in printable, path


@pytest.mark.parametrize(
    "extra",
    [
        ["--task", "numbers", "--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4",
         "--max_new_tokens", "4"],
        ["--task", "numbers", "--alg", "grpo", "--max_steps", "1", "--per_device_train_batch_size", "4",
         "--num_generations", "2", "--max_completion_length", "4", "--logging_steps", "1"],
        ["--task", "hh", "--task-arg", "pairs=true", "--alg", "reward", "--max_steps", "1",
         "--per_device_train_batch_size", "4", "--logging_steps", "1", "--save_strategy", "no"],
    ],
    ids=["ppo", "grpo", "reward"],
)  # fmt: skip
def test_a_token_in_model_init_kwargs_never_reaches_tensorboard(extra, tmp_path, capsys, monkeypatch):
    """TensorBoard's callback writes the arguments (``args.to_json_string()``) into its event file: without
    the token that ``--model_init_kwargs`` holds, as every other file of the run."""
    pytest.importorskip("tensorboard")
    from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES

    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))  # the hh pairs, offline
    out = tmp_path / "run"
    args = ["train", "--model", "tiny", "-o", str(out), "--model_init_kwargs", f"{{token: {SECRET}}}"]
    code, _, err = run_cli([*args, "--disable_tqdm", "true", "--report_to", "tensorboard", *extra], capsys)
    assert code == 0, err
    events = list(out.rglob("events.out.tfevents.*"))
    assert events and any(b"model_init_kwargs" in p.read_bytes() for p in events)  # the arguments were logged
    for path in (p for p in out.rglob("*") if p.is_file()):
        assert SECRET.encode() not in path.read_bytes(), path
