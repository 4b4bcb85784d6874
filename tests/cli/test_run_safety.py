"""Runs are never lost or silently wrong (issue 34): an overwrite killed mid-start keeps the old run for
the next command, only an hfrl run is ever overwritten, rank variables no launcher set are refused,
tampered checkpoints are not resumed, SIGTERM ends a run with a complete checkpoint, and no message
shows a token."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--rollout_batch_size", "4", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip  # one optimizer step per iteration
SECRET = "hf_SafetyTestToken0123456789abcdefXYZ"


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` and its SHA-256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    """A finished run with two checkpoints (iterations 1 and 2)."""
    out = tmp_path_factory.mktemp("safety") / "run"
    from hfrl.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--num_iterations", "2",
              "--save_every", "1", "--lr_scheduler_type", "constant", *FAST])  # fmt: skip
    assert exc.value.code in (0, None)
    return out


def copy(run: Path, tmp_path: Path, name: str = "run") -> Path:
    dest = tmp_path / name
    shutil.copytree(run, dest, symlinks=True)
    return dest


# ---- an overwrite killed before its run started ----------------------------------------------------
def _child(argv: list[str], write_fd: int) -> None:
    """``hfrl train ARGV`` that announces, then sleeps, once it has moved the old run aside and written
    the new run's config.yaml (its trainer built, no optimizer step taken)."""
    from hfrl.cli.app import main
    from hfrl.runs import experiment

    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    save_run_config = experiment.save_run_config

    def paused(run, trainer):
        save_run_config(run, trainer)
        os.write(write_fd, b"WRITTEN\n")
        time.sleep(600)

    experiment.save_run_config = paused
    main(["train", *argv])


def killed_while_replacing(run: Path) -> None:
    """``hfrl train -o RUN --overwrite_output_dir`` SIGKILLed after it moved the old run aside."""
    read_fd, write_fd = os.pipe()
    argv = ["--task", "numbers", "--model", "tiny", "-o", str(run), "--overwrite_output_dir", "--num_iterations", "1",
            *FAST]  # fmt: skip
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(argv, write_fd))
    proc.start()
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        assert pipe.readline().strip() == "WRITTEN"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    assert (run / ".hfrl-replaced").is_dir() and (run / "config.yaml").is_file()  # the new run's, not started


NEXT = {
    "train": lambda run, tmp: [
        "train",
        "--task",
        "numbers",
        "--model",
        "tiny",
        "-o",
        str(run),
        "--num_iterations",
        "1",
        *FAST,
    ],  # fmt: skip
    "eval": lambda run, tmp: ["eval", str(run), "--max-samples", "2"],
    "export": lambda run, tmp: ["export", str(run), "--out", str(tmp / "exported")],
}


@pytest.mark.parametrize("command", list(NEXT))
def test_a_killed_overwrite_keeps_the_old_run_for_the_next_command(command, old_run, tmp_path, capsys, caplog):
    run = copy(old_run, tmp_path)
    before = snapshot(run)
    killed_while_replacing(run)
    with caplog.at_level("WARNING", logger="hfrl.runs.run_folder"):
        code, _, err = run_cli(NEXT[command](run, tmp_path), capsys)
    assert f"{run}: restored the run that an interrupted --overwrite_output_dir had moved aside" in caplog.text
    if command == "train":  # the old run is back, so this is "holds another run", as it would have been
        assert code == 2 and "holds another run" in error_line(err), err
    else:
        assert code == 0, err
    after = {k: v for k, v in snapshot(run).items() if not k.startswith(("eval/", "predictions/", "README.md"))}
    assert after == {k: v for k, v in before.items() if not k.startswith(("eval/", "predictions/", "README.md"))}
    assert not (run / ".hfrl-replaced").exists()


def test_resume_after_a_killed_overwrite_continues_the_old_run(old_run, tmp_path, capsys):
    """--resume restores the run a killed --overwrite_output_dir start moved aside, as eval and train do,
    and continues it (it said "holds no run to resume" and left the run hidden in .hfrl-replaced/)."""
    run = copy(old_run, tmp_path)
    killed_while_replacing(run)
    code, said = resume(run, capsys)
    assert code == 0, said
    assert f"{run}: restored the run that an interrupted --overwrite_output_dir had moved aside" in said
    assert not (run / ".hfrl-replaced").exists() and (run / "checkpoint-2").is_dir()
    logged = [json.loads(line) for line in (run / "iterations.jsonl").read_text().splitlines()]
    assert [e["iteration"] for e in logged if "reward" in e] == [1, 2, 3]  # the old run's two, then one more


def stopped_run(old_run: Path, folder: Path) -> Path:
    """A run killed before its first checkpoint (--save_every 5, killed at iteration 2): its config.yaml
    and the log of the iterations it ran, nothing else."""
    folder.mkdir(parents=True)
    shutil.copy(old_run / "config.yaml", folder)
    shutil.copy(old_run / "iterations.jsonl", folder)
    return folder


def test_a_run_stopped_before_its_first_checkpoint_starts_again_in_its_folder(
    old_run, tmp_path, capsys, caplog, monkeypatch
):
    """--resume says the run stopped before its first checkpoint (it said: train with --save_every N first),
    and the same command without --resume starts it again in that folder (it said the folder held another
    run, or went on to runs/numbers-ppo-2)."""
    monkeypatch.chdir(tmp_path)
    stub = stopped_run(old_run, Path("runs/numbers-ppo"))
    said = (
        "error: --resume: runs/numbers-ppo holds a run that stopped before its first checkpoint, so there is "
        "nothing to resume; run the same command without --resume to start it again in that folder"
    )
    command = ["train", "--task", "numbers", "--model", "tiny"]
    for where in ([], ["-o", "runs/numbers-ppo"]):
        code, out, err = run_cli([*command, *where, "--resume"], capsys)
        assert code == 2 and error_line(err) == said, out + err
    with caplog.at_level("WARNING", logger="hfrl.runs.run_folder"):
        code, out, err = run_cli([*command, "--num_iterations", "1", *FAST], capsys)
    assert code == 0, err
    assert "runs/numbers-ppo: the run there stopped before its first checkpoint (nothing of it to resume): " \
           "this run starts in its place" in caplog.text  # fmt: skip
    assert not Path("runs/numbers-ppo-2").exists() and not (stub / ".hfrl-replaced").exists()
    assert (stub / "model.safetensors").is_file()
    logged = [json.loads(line) for line in (stub / "iterations.jsonl").read_text().splitlines()]
    assert [e["iteration"] for e in logged if "reward" in e] == [1]  # the new run's log, not the stopped one's
    named = stopped_run(old_run, tmp_path / "named")  # a folder named with -o: the same
    code, out, err = run_cli([*command, "-o", str(named), "--num_iterations", "1", *FAST], capsys)
    assert code == 0 and (named / "model.safetensors").is_file(), err


def test_overwrite_replaces_only_an_hfrl_run(tmp_path, capsys):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "config.yaml").write_text("other_tool: {lr: 3}\n")
    (project / "notes.md").write_text("my notes\n")
    (project / "src" / "main.py").write_text("print('hi')\n")
    before = snapshot(project)
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(project),
                            "--overwrite_output_dir", "--num_iterations", "1", *FAST], capsys)  # fmt: skip
    assert code == 2
    assert error_line(err) == (
        f"error: --overwrite_output_dir replaces an hfrl run only, and {project} holds none (no config.yaml written "
        "by hfrl train; it holds .git, config.yaml, notes.md, src): give a new or empty --output-dir, or empty this "
        "one yourself"
    )
    assert snapshot(project) == before and (project / ".git").is_dir()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "1"}, "RANK=1 is set, but no launcher started this process (WORLD_SIZE is unset, MASTER_ADDR is "
                        "unset); unset RANK for a single process, or start several with accelerate launch or torchrun"),
        ({"LOCAL_RANK": "1", "WORLD_SIZE": "2"}, "LOCAL_RANK=1, WORLD_SIZE=2 is set, but no launcher started this "
                                                 "process (MASTER_ADDR is unset)"),
    ],
)  # fmt: skip
def test_rank_variables_without_a_launcher_are_refused(env, message, old_run, tmp_path, capsys, monkeypatch):
    run = copy(old_run, tmp_path)
    before = snapshot(run)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(run), "--num_iterations", "1",
                            *FAST], capsys)  # fmt: skip
    assert code == 2 and error_line(err).startswith(f"error: {message}"), err
    assert snapshot(run) == before


def test_an_empty_output_dir_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("x")
    for args in (["train", "--task", "numbers", "--model", "tiny", "-o", "", "--num_iterations", "1", *FAST],
                 ["eval", "tiny", "--task", "numbers", "-n", "2", "-o", ""]):  # fmt: skip
        code, _, err = run_cli(args, capsys)
        assert code == 2 and "--output-dir is empty" in error_line(err), err
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]


# ---- checkpoints are verified before they are read -------------------------------------------------
RESUME = ["--resume", "--num_iterations", "3"]


def resume(run: Path, capsys, *extra: str) -> tuple[int, str]:
    """``hfrl train -o RUN --resume ...``: (exit code, what it printed and logged, warnings included)."""
    import logging

    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logged: list[str] = []
    logging.getLogger("hfrl").addHandler(handler)
    try:
        code, out, err = run_cli(["train", "-o", str(run), *RESUME, *extra], capsys)
    finally:
        logging.getLogger("hfrl").removeHandler(handler)
    return code, "\n".join([*logged, out, err])


def test_a_checkpoint_with_flipped_bytes_is_skipped(old_run, tmp_path, capsys):
    run = copy(old_run, tmp_path)
    weights = run / "checkpoint-2" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF  # same size, other bytes
    weights.write_bytes(bytes(data))
    named = copy(run, tmp_path, "named")
    code, said = resume(run, capsys)
    assert code == 0, said
    assert ("skipped checkpoint-2: damaged: model.safetensors changed after the checkpoint was written (its SHA-256 "
            "differs); resuming from checkpoint-1") in said  # fmt: skip
    code, said = resume(named, capsys, "--resume_from_checkpoint", str(named / "checkpoint-2"))
    assert code == 2 and "its SHA-256 differs" in error_line(said)


def test_files_added_to_a_complete_checkpoint_refuse_it(old_run, tmp_path, capsys):
    """A shard index and a zeroed shard, not in the manifest, would be loaded instead of the real weights."""
    run = copy(old_run, tmp_path)
    newest = run / "checkpoint-2"
    (newest / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"transformer.wte.weight": "model-00001-of-00001.safetensors"}})
    )
    shutil.copy(newest / "model.safetensors", newest / "model-00001-of-00001.safetensors")
    code, said = resume(run, capsys)
    assert code == 0, said
    assert ("skipped checkpoint-2: damaged: it holds files added after it was written (model-00001-of-00001."
            "safetensors, model.safetensors.index.json)") in said  # fmt: skip


def test_a_checkpoint_without_the_runs_identity_is_foreign_unless_named(old_run, tmp_path, capsys):
    """A marker as an older hfrl wrote it (no run entry) is another run's, unless --resume names it."""
    run = copy(old_run, tmp_path)
    for folder in ("checkpoint-1", "checkpoint-2"):
        marker = run / folder / "checkpoint_complete.json"
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({"files": data["files"], "sha256": data["sha256"]}))
    code, said = resume(run, capsys)
    assert code == 2, said
    assert "it was written by an older hfrl that did not record which run wrote it; name it to resume from it " \
           f"anyway: --resume --resume_from_checkpoint {run / 'checkpoint-2'}" in error_line(said)  # fmt: skip
    code, said = resume(run, capsys, "--resume_from_checkpoint", str(run / "checkpoint-2"))
    assert code == 0, said


@pytest.mark.parametrize(
    ("edit", "shown"),
    [
        ({"task_args": {"train_size": 16}}, "task_args None -> {'train_size': 16}"),
        ({"rewards": ["increasing_numbers"]}, "rewards None -> ['increasing_numbers']"),
        ({"preset": "vapo"}, "preset None -> 'vapo'"),  # it would relabel the card
    ],
)  # fmt: skip
def test_an_edited_run_definition_is_not_resumed(edit, shown, old_run, tmp_path, capsys):
    run = copy(old_run, tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text("# hfrl run configuration\n" + yaml.safe_dump({**config, **edit}))
    code, said = resume(run, capsys)
    assert code == 2, said
    assert f"it was written with other settings ({shown}" in error_line(said)


def test_a_checkpoint_without_the_preset_in_its_identity_still_resumes(old_run, tmp_path, capsys):
    """A marker written before the preset was part of the run's definition is the same run's."""
    from hfrl.trainers.checkpoints import mark_complete

    run = copy(old_run, tmp_path)
    marker = json.loads((run / "checkpoint-2" / "checkpoint_complete.json").read_text())
    del marker["run"]["definition"]["preset"]
    mark_complete(str(run / "checkpoint-2"), marker["run"])
    code, said = resume(run, capsys)
    assert code == 0, said


def test_a_nan_in_online_state_is_refused_before_an_iteration(old_run, tmp_path, capsys):
    """A NaN KL coefficient in a complete checkpoint's online_state.json: one line, before any iteration
    (it surfaced as a NaN loss one iteration later)."""
    from hfrl.trainers.checkpoints import mark_complete

    run = copy(old_run, tmp_path)
    folder = run / "checkpoint-2"
    state = json.loads((folder / "online_state.json").read_text())
    state["kl_controller"]["value"] = float("nan")
    (folder / "online_state.json").write_text(json.dumps(state))
    mark_complete(str(folder), json.loads((folder / "checkpoint_complete.json").read_text())["run"])
    lines = (run / "iterations.jsonl").read_text()
    code, said = resume(run, capsys)
    assert code == 2, said
    assert error_line(said) == (
        f"error: cannot resume from {folder}: online_state.json holds kl_controller.value = nan (a number must be "
        "finite); resume from an earlier checkpoint (--resume_from_checkpoint PATH) or start the run again"
    )
    assert (run / "iterations.jsonl").read_text() == lines and not (run / "checkpoint-3").exists()


def test_a_resume_refusal_never_shows_a_token(old_run, tmp_path, capsys):
    run = copy(old_run, tmp_path)
    code, said = resume(run, capsys, "--model_init_kwargs", f"{{token: {SECRET}, dtype: float16}}")
    assert code == 2 and "model_init_kwargs None -> {'token': '***', 'dtype': 'float16'}" in error_line(said), said
    assert SECRET not in said and SECRET[:12] not in said


def test_a_token_given_again_on_resume_changes_nothing(tmp_path, capsys):
    """config.yaml never holds the token, so a resume that passes it again is the same run."""
    run, token = tmp_path / "run", f"{{token: {SECRET}, dtype: float32}}"
    code, _, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(run), "--num_iterations", "1",
                            "--save_every", "1", "--model_init_kwargs", token, *FAST], capsys)  # fmt: skip
    assert code == 0, err
    code, said = resume(run, capsys, "--model_init_kwargs", token)
    assert code == 0 and SECRET not in said, said


def test_a_model_that_cannot_load_with_its_kwargs_is_one_line_without_the_token(tmp_path, capsys):
    code, out, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"),
                              "--model_init_kwargs", f"{{token: {SECRET}, dtype: bogus}}", *FAST], capsys)  # fmt: skip
    assert code == 2, err
    assert error_line(err).startswith("error: cannot load model ") and "(AttributeError: module 'torch' has no " \
        "attribute 'bogus'); check --model_init_kwargs (e.g. dtype: bfloat16, float32 or auto)" in err  # fmt: skip
    assert SECRET not in out + err and not (tmp_path / "r").exists()


# ---- SIGTERM: the run ends at an iteration with a complete checkpoint ------------------------------
@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_sigterm_ends_the_run_with_a_complete_checkpoint_and_it_resumes(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "hfrl.cli", "train", "--task", "numbers", "--model", "tiny", "-o", str(run), *FAST,
           "--num_iterations", "100000", "--lr_scheduler_type", "constant"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and not (
        (run / "iterations.jsonl").is_file() and (run / "iterations.jsonl").read_text().count("\n") >= 2
    ):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    checkpoints = sorted(run.glob("checkpoint-*"))
    assert len(checkpoints) == 1 and (checkpoints[0] / "checkpoint_complete.json").is_file()
    step = int(checkpoints[0].name.split("-")[1])  # FAST: one optimizer step per iteration
    assert f"stopped by SIGTERM after iteration {step} (step {step}): checkpoint-{step} is complete" in out
    from hfrl.trainers.checkpoints import checkpoint_problem

    assert checkpoint_problem(str(checkpoints[0])) is None
    resumed = subprocess.run(
        [*cmd[:-4], "--resume", "--num_iterations", str(step + 1)], env=env, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run / "trainer_state.json").read_text())["global_step"] == step + 1
