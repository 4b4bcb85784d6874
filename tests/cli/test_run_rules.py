"""What a command may do to a run directory: --resume continues only the run that is there, with its
own settings; a new run never overwrites another; a failed start leaves the old run as it was. And
every bad input is one line that says what to change."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from hfrl.testing import run_cli

FAST = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


@pytest.fixture
def saved_run(tmp_path, capsys):
    """PPO on numbers with settings that differ from the task's defaults (its rate, constant instead of
    annealed), a checkpoint per iteration."""
    out = tmp_path / "run"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST, "--learning_rate", "5e-4",
            "--lr_scheduler_type", "constant", "--num_iterations", "2", "--save_every", "1"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    return out


def one_line(err: str) -> str:
    """hfrl's message: one line, then the HFRL_DEBUG hint (after whatever libraries printed)."""
    lines = err.strip().splitlines()
    assert lines[-1] == "(set HFRL_DEBUG=1 for the traceback)" and lines[-2].startswith("error: "), err
    return lines[-2]


def test_resume_continues_with_the_runs_own_settings(saved_run, capsys):
    before = yaml.safe_load((saved_run / "config.yaml").read_text())
    # only the task and the folder named, and more iterations: nothing falls back to the task defaults
    code, _, err = run_cli(["train", "--task", "numbers", "-o", str(saved_run), "--resume", "--num_iterations", "3",
                            "--disable_tqdm", "true"], capsys)  # fmt: skip
    assert code == 0, err
    after = yaml.safe_load((saved_run / "config.yaml").read_text())
    assert after == {**before, "num_iterations": 3}
    assert (after["learning_rate"], after["rollout_batch_size"]) == (5e-4, 8)  # not the task's 2e-3 / 64
    assert after["lr_scheduler_type"] == "constant"  # not the task's linear
    logs = [h for h in json.loads((saved_run / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert [h["iteration"] for h in logs] == [1, 2, 3] and logs[-1]["learning_rate"] == 5e-4


@pytest.mark.parametrize(
    ("flags", "diff"),
    [
        (["--alg", "a2c"], "alg 'ppo' -> 'a2c'"),
        (["--rollout_batch_size", "4"], "rollout_batch_size 8 -> 4"),
        (["--learning_rate", "1e-3", "--model", "tiny-t5"], "learning_rate 0.0005 -> 0.001, model 'tiny' -> 'tiny-t5'"),
    ],
    ids=["algorithm", "rollout", "two"],
)
def test_resume_refuses_another_run(flags, diff, saved_run, capsys):
    config = (saved_run / "config.yaml").read_bytes()
    code, _, err = run_cli(["train", "--task", "numbers", "-o", str(saved_run), "--resume", *flags], capsys)
    assert code == 2
    line = one_line(err)
    assert line.startswith(f"error: --resume: the run in {saved_run} differs from this command ({diff}); resume it")
    assert "another --output-dir" in line
    assert (saved_run / "config.yaml").read_bytes() == config  # and nothing was trained or rewritten


def test_resume_without_a_run_or_a_checkpoint(tmp_path, capsys):
    code, _, err = run_cli(["train", "--task", "numbers", "-o", str(tmp_path / "x"), "--resume"], capsys)
    assert code == 2 and one_line(err) == (
        f"error: --resume: {tmp_path / 'x'} holds no run to resume (no config.yaml); train without --resume"
    )


def test_a_new_run_never_overwrites_another(saved_run, capsys):
    files = {p: p.read_bytes() for p in saved_run.rglob("*") if p.is_file()}
    # the README's "repeat a run": --config of the run itself, which names its folder
    code, _, err = run_cli(["train", "--config", str(saved_run / "config.yaml"), "--disable_tqdm", "true"], capsys)
    assert code == 2
    assert one_line(err) == (
        f"error: {saved_run} holds another run (checkpoint-2, checkpoint-4, config.yaml, model.safetensors, ...): "
        "--resume continues it, --overwrite_output_dir replaces it, or give a new --output-dir"
    )
    assert {p: p.read_bytes() for p in saved_run.rglob("*") if p.is_file()} == files  # config and card untouched
    code, _, err = run_cli(["train", "--config", str(saved_run / "config.yaml"), "--num_iterations", "1",
                            "--overwrite_output_dir", "--disable_tqdm", "true"], capsys)  # fmt: skip
    assert code == 0, err
    assert not (saved_run / "checkpoint-4").exists()  # the old run's checkpoints are gone, not resumed later


def test_a_failed_start_leaves_the_run_as_it_was(saved_run, capsys):
    files = {p: p.read_bytes() for p in saved_run.rglob("*") if p.is_file()}
    for flags in (["--learning_rate", "abc"], ["--rollout_batch_size", "3"], ["--task", "nosuch"]):
        code, _, _ = run_cli(["train", "--config", str(saved_run / "config.yaml"), *flags], capsys)
        assert code == 2
        code, _, _ = run_cli(["train", "--task", "numbers", "-o", str(saved_run), "--resume", *flags], capsys)
        assert code == 2
    assert {p: p.read_bytes() for p in saved_run.rglob("*") if p.is_file()} == files


def test_own_data_files_get_their_own_folders(tmp_path):
    """runs/my-ppo for my.jsonl and my.csv alike (named after the file, not its extension): the second
    run takes the next number, as any second run of a task does."""
    from hfrl.runs.experiment import default_output_dir
    from hfrl.runs.run_folder import RunFolder

    base = tmp_path / default_output_dir("data/my.jsonl", "ppo")
    assert default_output_dir("data/my.csv", "ppo") == default_output_dir("data/my.jsonl", "ppo") == "runs/my-ppo"
    base.mkdir(parents=True)
    (base / "config.yaml").write_text("task: data/my.jsonl\n")
    with RunFolder(base, number=True) as folder:
        assert folder.path == base.with_name("my-ppo-2")
    with RunFolder(base, number=True) as first, RunFolder(base, number=True) as second:  # another command holds -2
        assert (first.path.name, second.path.name) == ("my-ppo-2", "my-ppo-3")


# ---- bad input: one line each -------------------------------------------------------------------
def test_bad_inputs_are_one_line(tmp_path, capsys):
    def error(args):
        code, _, err = run_cli(["train", *args, "-o", str(tmp_path / "run")], capsys)
        assert code == 2, err
        return one_line(err)

    numbers = ["--task", "numbers", "--model", "tiny"]
    assert error([*numbers, "--learning_rate", "abc"]) == "error: --learning_rate takes a number, got 'abc'"
    assert error([*numbers, "--num_iterations", "abc"]) == "error: --num_iterations takes a number, got 'abc'"
    assert error([*numbers, "--disable_tqdm", "maybe"]) == "error: --disable_tqdm takes true or false, got 'maybe'"

    empty, broken, latin = tmp_path / "empty.jsonl", tmp_path / "broken.jsonl", tmp_path / "latin.csv"
    empty.write_text("")
    broken.write_text('{"prompt": "a"\n{not json\n')
    latin.write_bytes(b"prompt,references\ncaf\xe9,x\n")
    tiny = ["--model", "tiny"]  # (own data's default model is a Hub model, which the pre-flight checks first)
    assert error(["--task", str(empty), *tiny]) == f"error: data file {empty} is empty: it holds no rows"
    assert error(["--task", str(broken), *tiny]).startswith(
        f"error: data file {broken} cannot be read as json: JSON parse"
    )
    assert error(["--task", str(latin), *tiny]) == (
        f"error: data file {latin} is not UTF-8 text (byte 0xe9 at position 3); save it as UTF-8"
    )

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    assert error(["--task", "numbers", "--model", str(model)]).startswith(
        f"error: model folder {model}: config.json: invalid JSON at line 1, column 2"
    )
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    code, _, err = run_cli(["train", *numbers, "-o", str(a_file)], capsys)
    assert code == 2 and one_line(err) == f"error: --output-dir {a_file} is a file; give a directory"


def test_unknown_names_fail_before_torch_is_imported():
    """(An unknown --task took 6-8 s: torch, transformers and TRL were imported before the name was checked.)"""
    script = (
        "import sys\nfrom hfrl.cli.app import main\n"
        "for args in (['train', '--task', 'nosuch'], ['train', '--task', 'numbers', '--alg', 'nosuch']):\n"
        "    try:\n        main(args)\n    except SystemExit as e:\n        assert e.code == 2, e.code\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False" and "unknown task 'nosuch'" in out.stderr
