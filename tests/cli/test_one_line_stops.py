"""Input that once hung a command or ended it with a traceback (issue 52, items 6-9 and 15) stops it
with one line: chat templates that build huge strings, more new tokens than the model has positions,
a library's panic, a regular expression that backtracks for ever, files of the wrong kind, a SIGTERM
before training starts and a disk that fills up while a checkpoint is written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

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


# ---- a LoRA run: chat templates, positions, adapter patterns ---------------------------------------------
@pytest.fixture(scope="module")
def lora_run(tmp_path_factory) -> Path:
    """`hfrl train --use_peft` (tiny model, one iteration): a run folder with an adapter and a tokenizer."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("stops") / "lora"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "numbers", "--model", "tiny", "-o", str(out), "--use_peft", "--lora_r", "4", *FAST])
    assert exc.value.code in (0, None)
    return out


def edited(run: Path, tmp_path: Path, name: str, **keys) -> Path:
    """A copy of ``run`` whose JSON file ``name`` has ``keys`` set (as a downloaded folder might)."""
    folder = tmp_path / "downloaded"
    shutil.copytree(run, folder)
    data = json.loads((folder / name).read_text())
    (folder / name).write_text(json.dumps({**data, **keys}))
    return folder


# item 6: one operation that SIGALRM cannot interrupt, and a 10 GB text built in a loop
@pytest.mark.parametrize(
    "template",
    ["{{ 'x' * 2000000000 }}", "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}"],
    ids=["one_huge_multiplication", "ten_gigabytes_in_a_loop"],
)
def test_a_chat_template_that_builds_a_huge_text_is_one_line_within_seconds(template, lora_run, tmp_path, capsys):
    folder = edited(lora_run, tmp_path, "tokenizer_config.json", chat_template=template)
    from hfrl.runs.chat import ChatSession

    session = ChatSession.from_pretrained(str(folder), format="chat-template")  # loaded before the clock starts
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"^the chat template of .* cannot be applied \(MemoryError|did not finish"):
        session.reply("hi")
    assert time.monotonic() - start < 15  # the budget is 5 s; it never answered in 90 s before
    code, _, err = run_cli(["chat", str(folder), "--message", "hi", "--format", "chat-template"], capsys)
    assert code == 2, err
    assert error_line(err).startswith(f"error: the chat template of {folder}")


def test_a_chat_template_that_loops_is_stopped_and_a_good_one_renders(lora_run, tmp_path):
    from hfrl.trainers.evaluation import apply_chat_template
    from hfrl.utils.forked import can_fork

    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    folder = edited(lora_run, tmp_path, "tokenizer_config.json", chat_template=loops)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    with pytest.raises(ValueError, match="did not finish within 5 s"):
        apply_chat_template(tokenizer, [{"role": "user", "content": "hi"}])
    tokenizer.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"
    assert apply_chat_template(tokenizer, [{"role": "user", "content": "hi"}]) == "<user>hi<assistant>"
    assert can_fork() == sys.platform.startswith("linux")


# item 7: more new tokens than tiny's 512 positions
@pytest.mark.parametrize("command", ["train", "chat", "eval"])
def test_more_new_tokens_than_the_model_has_positions_is_one_line(command, lora_run, tmp_path, capsys):
    if command == "train":
        fast = [a if a != "4" or FAST[i - 1] != "--max_new_tokens" else "600" for i, a in enumerate(FAST)]
        args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"), *fast]
    elif command == "chat":
        args = ["chat", str(lora_run), "--message", "hi", "--max-new-tokens", "600"]
    else:  # eval takes the run's own setting
        import yaml

        folder = tmp_path / "downloaded"
        shutil.copytree(lora_run, folder)
        config = yaml.safe_load((folder / "config.yaml").read_text())
        (folder / "config.yaml").write_text(yaml.safe_dump({**config, "max_new_tokens": 600}))
        args = ["eval", str(folder), "--max-samples", "2"]
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    line = error_line(err)
    assert line.startswith("error: max_new_tokens 600 after a prompt of "), line
    assert "positions, more than the 512 the model" in line
    if command == "train":
        assert not (tmp_path / "r").exists()  # the start failed: nothing left behind


# item 8: a library's panic, a pattern that backtracks for ever
def test_a_tokenizers_panic_is_one_line(lora_run, tmp_path, capsys):
    """A tokenizer.json whose pre-tokenizer Split regex backtracks: the tokenizers library panics, and
    pyo3's PanicException is a BaseException that passed the boundary's ``except Exception``."""
    split = {"type": "Split", "pattern": {"Regex": "(\\w+\\s?)*$"}, "behavior": "Isolated", "invert": False}
    folder = edited(lora_run, tmp_path, "tokenizer.json", pre_tokenizer=split)
    code, _, err = run_cli(["chat", str(folder), "--message", "the number of the day is " * 3 + "!"], capsys)
    assert code == 1, err
    assert error_line(err).startswith("error: a library stopped (PanicException: Onig: Regex search error"), err


def test_the_boundary_leaves_ctrl_c_and_exit_codes_alone(monkeypatch):
    from cli import app as cli_app

    for err in (KeyboardInterrupt(), SystemExit(3)):

        def fail(args, err=err):
            raise err

        monkeypatch.setattr(cli_app, "app", fail)
        with pytest.raises(type(err)):
            cli_app.main(["train"])


def test_an_adapter_pattern_that_backtracks_for_ever_is_one_line(lora_run, tmp_path, capsys):
    from hfrl.utils.bounded import time_budget

    folder = edited(lora_run, tmp_path, "adapter_config.json", target_modules="(.*)*Z")
    with time_budget(60, "no answer within 60 s"):  # PEFT matched it against every module name for hours
        code, _, err = run_cli(["eval", str(folder), "--max-samples", "2"], capsys)
    assert code == 2, err
    line = error_line(err)
    assert "adapter_config.json: target_modules '(.*)*Z' is a regular expression PEFT would match" in line, line
    assert line.endswith("may never finish (a repeat inside a repeat); list the module names, or write a plain "
                         "pattern such as '.*\\.(q_proj|v_proj)$'"), line  # fmt: skip


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (r".*\.(q_proj|v_proj)$", None),
        (r".*decoder.*(SelfAttention|EncDecAttention).*(q|k|v|o)$", None),  # PEFT's own example
        ("(.*)*Z", "a repeat inside a repeat"),
        (r"(\w|\w)*Z", "alternatives inside a repeat"),
        (".*.*.*.*Z", "4 repeats, more than 3"),
    ],
)
def test_regex_problem(pattern, problem):
    from hfrl.utils.bounded import regex_problem
    from hfrl.utils.trust import check_adapter_config

    assert regex_problem(pattern) == problem
    data = {"peft_type": "LORA", "target_modules": pattern}
    if problem is None:
        assert check_adapter_config(data, "a") == data
    else:
        with pytest.raises(ValueError, match=f"it may never finish \\({problem}\\)"):
            check_adapter_config(data, "a")


# ---- item 15: stopped before training, a full disk ---------------------------------------------------------
def test_sigterm_before_training_starts_is_one_line(tmp_path, monkeypatch, capsys):
    from hfrl.runs import experiment

    def refuse(signum, frame):  # the test's own guard: Python's default would end pytest
        raise RuntimeError("SIGTERM reached the default handler")

    previous = signal.signal(signal.SIGTERM, refuse)
    build = experiment.build_trainer

    def slow_build(run):  # SIGTERM while the model loads
        signal.raise_signal(signal.SIGTERM)
        return build(run)

    monkeypatch.setattr(experiment, "build_trainer", slow_build)
    try:
        code, out, err = run_cli(["train", "--task", "numbers", "--model", "tiny", "-o", str(tmp_path / "r"), *FAST],
                                 capsys)  # fmt: skip
    finally:
        assert signal.signal(signal.SIGTERM, previous) is refuse  # put back as it was
    assert code == 143, err
    assert out.strip().splitlines()[-1] == (
        "stopped by SIGTERM before training started: nothing was saved (the output folder is as it was)"
    )
    assert "Traceback" not in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "error",
    [OSError(28, "No space left on device"),
     RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1088 vs 988")],
    ids=["ENOSPC", "torch_zip_writer"],
)  # fmt: skip
def test_a_full_disk_while_writing_a_checkpoint_is_one_line(error, tmp_path, monkeypatch, capsys):
    import transformers

    save = transformers.Trainer._save_checkpoint
    calls = []

    def full_at_the_second(self, model, trial):  # checkpoint-1 is written, checkpoint-2 finds the disk full
        calls.append(self.state.global_step)
        if len(calls) == 2:
            raise error
        return save(self, model, trial)

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", full_at_the_second)
    out = tmp_path / "r"
    args = ["train", "--task", "numbers", "--model", "tiny", "-o", str(out), *FAST, "--num_iterations", "3",
            "--save_every", "1"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 1, err
    first, second = calls
    assert error_line(err) == (
        f"error: disk full while writing checkpoint-{second} ({str(error).splitlines()[0]}); the last complete one "
        f"is checkpoint-{first}: free some space, then continue with hfrl train -o {out} --resume"
    )
    assert (out / f"checkpoint-{first}" / "checkpoint_complete.json").is_file()  # the run folder is kept
