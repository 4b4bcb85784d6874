"""Input that once hung a command or ended it with a traceback (issue 52, items 6-9 and 15) stops it
with one line: chat templates that build huge strings, more new tokens than the model has positions,
a library's panic, a regular expression that backtracks for ever, files of the wrong kind, a SIGTERM
before training starts and a disk that fills up while a checkpoint is written."""

from __future__ import annotations

import json
import os
import time

import pytest

from hfrl.testing import run_cli

FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--max_new_tokens", "4",
        "--disable_tqdm", "true", "--report_to", "none"]  # fmt: skip


def error_line(err: str) -> str:
    """The CLI's one error line (libraries may have drawn progress bars on stderr before it)."""
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    return lines[0]


# ---- item 9: files and names of the wrong kind --------------------------------------------------------
def test_a_python_file_as_task_data_is_one_line(tmp_path, monkeypatch, capsys):
    """``data/x.py`` looks like a Hub id (owner/name): it was read as a data file (KeyError: '.py')."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.py").write_text("x = 1\n")
    code, _, err = run_cli(["train", "--alg", "reward", "--task", "data/x.py", "--model", "tiny"], capsys)
    assert code == 2, err
    assert error_line(err).startswith("error: data/x.py is not a data file (.jsonl, .json, .csv, .tsv, .parquet)")
    assert "FILE.py:build" in err


@pytest.mark.parametrize("alg", ["reward", "dpo"])
def test_pair_data_whose_chosen_is_a_number_is_one_line(alg, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": "a", "chosen": 1, "rejected": "b"}, {"prompt": "c", "chosen": 2, "rejected": "d"}]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, _, err = run_cli(["train", "--alg", alg, "--task", str(data), "--model", "tiny", "-o", str(tmp_path / "r")],
                           capsys)  # fmt: skip
    assert code == 2, err
    message = f"{data}: column 'chosen' holds int64 values; it takes text (or a list of chat messages)"
    assert error_line(err) == f"error: {message}"


def test_a_policy_loss_path_that_is_no_policy_loss_is_one_line_and_runs_nothing(tmp_path, monkeypatch, capsys):
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"), *FAST,
            "--policy_loss", "os:system"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    line = error_line(err)  # os.system is a function here (the stand-in that records calls)
    assert line.startswith("error: policy loss 'os:system' is a function, not a policy loss class (a subclass of")
    assert not called
    # read from a file, the same name is refused before it is even imported (the trust gate)
    config = tmp_path / "c.yaml"
    config.write_text("task: numbers\nmodel: tiny\npolicy_loss: os:system\n")
    code, _, err = run_cli(["train", "--config", str(config), "-o", str(tmp_path / "r2")], capsys)
    assert code == 2, err
    assert "names code to run (policy_loss: 'os:system')" in error_line(err)


def test_a_fifo_as_config_is_refused_before_it_is_opened(tmp_path, capsys):
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)  # no writer: open() would wait for ever
    start = time.monotonic()
    code, _, err = run_cli(["train", "--config", str(fifo), "-o", str(tmp_path / "r")], capsys)
    assert code == 2, err
    assert error_line(err) == f"error: config file {fifo} is not a regular file (a FIFO or a device); give a YAML file"
    assert time.monotonic() - start < 30
