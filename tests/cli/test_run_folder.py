"""A run is never lost or mixed: a command that fails to start leaves its folder byte for byte as it
was (a replaced run included), two commands never share a folder, and a path read from a file never
chooses to write over a folder of the user's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


def snapshot(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` (folders by their presence)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return out


@pytest.fixture(scope="module")
def precious(tmp_path_factory) -> Path:
    """A finished run with a checkpoint: what the failing commands below must not lose."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("folders") / "precious"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--save_every", "1", *FAST])
    assert exc.value.code in (0, None)
    return out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mini_batch_size", "7"], "mini_batch_size"),  # found while building the trainer
        (["--model", "./typo"], "typo"),  # the model cannot be found
        (["--generation_kwargs", "{do_sample: true, temperature: 0.0}"], "temperature"),  # at the first generate
    ],
    ids=["bad-value", "missing-model", "first-generate"],
)
def test_a_replacement_that_fails_to_start_keeps_the_old_run(extra, message, precious, capsys):
    before = snapshot(precious)
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(precious), "--overwrite_output_dir", *FAST]
    code, _, err = run_cli([*args, *extra], capsys)
    assert code in (1, 2), err
    assert message in err, err
    assert snapshot(precious) == before


@pytest.mark.parametrize(
    "extra",
    [["--rollout_batch_size", "1024", "--mini_batch_size", "1024"],  # fewer prompts than one rollout
     ["--generation_kwargs", "{do_sample: true, temperature: 0.0}"]],  # fails at the first generate
    ids=["too-few-prompts", "first-generate"],
)  # fmt: skip
def test_a_failed_start_leaves_no_trace_so_the_corrected_command_runs(extra, tmp_path, capsys):
    out = tmp_path / "runs" / "new"
    base = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST]
    code, _, err = run_cli([*base, *extra], capsys)
    assert code in (1, 2), err
    assert not out.exists() and not (tmp_path / "runs").exists()  # the folders the command made are gone
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(kept), *FAST, *extra], capsys)
    assert code in (1, 2) and snapshot(kept) == {"notes.txt": hashlib.sha256(b"mine").hexdigest()}
    code, _, err = run_cli(base, capsys)  # the corrected command: no "holds another run"
    assert code == 0, err


def test_a_replacement_that_starts_deletes_the_old_run(precious, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(precious, run)
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(run), "--overwrite_output_dir",
                            *FAST], capsys)  # fmt: skip
    assert code == 0, err
    assert not list(run.glob("checkpoint-*")) and not (run / ".hfrl-replaced").exists()


def test_a_path_from_a_file_only_chooses_a_new_or_empty_folder(precious, tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project")
    config = yaml.safe_load((precious / "config.yaml").read_text())
    downloaded = tmp_path / "downloaded.yaml"
    downloaded.write_text(yaml.safe_dump({**config, "output_dir": str(project)}))
    code, _, err = run_cli(["train", "--config", str(downloaded), *FAST], capsys)
    assert code == 2, err
    assert f"names output_dir {project}, which is not empty (README.md)" in err
    assert snapshot(project) == {"README.md": hashlib.sha256(b"my project").hexdigest()}
    downloaded.write_text(yaml.safe_dump({**config, "output_dir": str(tmp_path / "fresh")}))
    code, _, err = run_cli(["train", "--config", str(downloaded), *FAST], capsys)
    assert code == 0, err
    assert (tmp_path / "fresh" / "config.yaml").is_file()


def wait_until_locked(folder: Path, timeout: float = 120) -> None:
    """Until another process holds ``folder``'s lock (RunFolder's flock)."""
    import fcntl

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except FileNotFoundError:
            time.sleep(0.1)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        finally:
            os.close(fd)  # releases it if this test took it
        time.sleep(0.1)
    raise AssertionError(f"no process locked {folder}")


def hfrl(*args: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "hfrl.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_two_commands_never_share_a_folder(tmp_path):
    """Two real processes on one folder: the second stops at once with one line; the folder holds one
    whole run (config, weights and log of the same run)."""
    out = tmp_path / "shared"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST]
    first = hfrl(*args, "--num_iterations", "150", "--seed", "1")  # still running when the second starts
    wait_until_locked(out)
    second = hfrl(*args, "--seed", "2")
    _, err2 = second.communicate(timeout=300)
    _, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 1, err2
    assert f"{out} is in use by another hfrl command" in err2
    assert yaml.safe_load((out / "config.yaml").read_text())["seed"] == 1
    lines = (out / "iterations.jsonl").read_text().splitlines()
    assert len([line for line in lines if '"reward"' in line]) == 150


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_two_resumes_never_race(precious, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(precious, run)
    first = hfrl("train", "--resume", "-o", str(run), "--num_iterations", "150")
    wait_until_locked(run)
    second = hfrl("train", "--resume", "-o", str(run), "--num_iterations", "150")
    _, err2 = second.communicate(timeout=300)
    _, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 1 and f"{run} is in use by another hfrl command" in err2, err2
