"""Bad input is refused in under a second, in one line, and reading it is bounded: the range of every
config number (and of `generate`'s keyword arguments) is checked before torch is imported; a YAML file
or value that would expand to billions of values, nest 20,000 levels or hold 50 MB is refused while it
is read (as `--config` and as a run's config.yaml); a chat template that never ends is stopped; task
arguments and reward specs of the wrong kind are one line naming them."""

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
from tests.cli.test_bad_input import FAST, error_line, hfrl_importtime
from tests.unit.test_bounded import billion_laughs

TRAIN = ["train", "--task", "numbers", "--model", "tiny"]
CAP = "(a larger value cannot be meant: check it for a typo)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--num_iterations", "-3"], "--num_iterations must be >= 1, got -3"),
        (["--num_iterations", "1e30"], f"--num_iterations must be <= 10000000 {CAP}, got 1e30"),
        (["--learning_rate", "-1"], "--learning_rate must be >= 0, got -1"),
        (["--gamma", "-0.1"], "--gamma must be in [0, 1] or None, got -0.1"),
        (["--lam", "2"], "--lam must be in [0, 1], got 2"),
        (["--mini_batch_size", "0"], "--mini_batch_size must be >= 1, got 0"),
        (["--logging_steps", "-1"], "--logging_steps must be > 0 (below 1: a fraction of the run), got -1"),
        (["--per_device_eval_batch_size", "0"], "--per_device_eval_batch_size must be >= 1, got 0"),
        (["--max_new_tokens", "0"], "--max_new_tokens must be >= 1, got 0"),
        (["--truncation_side", "middle"], "--truncation_side takes one of left, right, got 'middle'"),
        (["--generation_kwargs", "{top_k: -1}"], "--generation_kwargs.top_k must be >= 0 (0: no top-k cut), got -1"),
        (["--generation_kwargs", "{max_new_tokens: 1e30}"],
         f"--generation_kwargs.max_new_tokens must be <= 1000000 {CAP}, got 1e30"),
        (["--generation_kwargs", "{top_p: 1.5}"], "--generation_kwargs.top_p must be in (0, 1], got 1.5"),
        (["--generation_kwargs", "{do_sample: true, temperature: 0}"],
         "--generation_kwargs.temperature must be > 0 when sampling (do_sample true), got 0; for greedy decoding set "
         "do_sample: false"),
        (["--eval_generation_kwargs", "{num_beams: 0}"],
         "--eval_generation_kwargs.num_beams must be >= 1 (1: no beam search), got 0"),
        (["--alg", "nlpo", "--top_mask", "0"], "--top_mask must be in (0, 1], got 0"),
        (["--alg", "trpo", "--target_kl", "0"], "--target_kl must be > 0, got 0"),
        (["--alg", "a_lol", "--ppo_clip", "2"],
         "--ppo_clip must be in (0, 1] (rho is clamped to [1 - c, 1 + c]), got 2"),
        (["--alg", "a_lol", "--sampling", "best"],
         "--sampling takes one of none, good_priority, good_random, got 'best'"),
        (["--alg", "grpo", "--max_prompt_length", "0"], "--max_prompt_length must be >= 1 or None, got 0"),
    ],
)  # fmt: skip
def test_out_of_range_numbers_are_refused_before_torch_is_imported(extra, message, tmp_path):
    code, err, torch = hfrl_importtime(*TRAIN, "-o", str(tmp_path / "r"), *extra)
    assert code == 2, err
    assert error_line(err) == f"error: {message}"
    assert not torch, f"hfrl train {' '.join(extra)} imported torch"
    assert not (tmp_path / "r").exists()


def test_a_config_file_out_of_range_names_the_file_before_torch_is_imported(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("task: numbers\nmodel: tiny\nnum_iterations: -3\n")
    code, err, torch = hfrl_importtime("train", "--config", str(config), "-o", str(tmp_path / "r"))
    assert code == 2 and not torch, err
    assert error_line(err) == f"error: config file {config}: num_iterations must be >= 1, got -3"


# ---- bounded parsing -------------------------------------------------------------------------------
HOSTILE = {
    "billion laughs": (billion_laughs(), "YAML whose aliases (*name) expand to more than 10000 values (line 5); "
                       "write the values out, or use fewer aliases"),
    "50 MB value": ("x: " + "a" * (50 << 20) + "\n", "is 50.0 MiB, over the limit of 1 MiB; a config holds field: "
                    "value lines: keep data in data files (--task FILE) and long text in files"),
    "20,000-deep list": ("x: " + "[" * 20_000 + "]" * 20_000 + "\n", "YAML nested deeper than 100 levels (line 1); "
                         "flatten it: a config nests a few levels"),
}  # fmt: skip


def hfrl(*args: str, timeout: float) -> tuple[int, str]:
    """``hfrl ARGS`` in a process of its own that cannot hang the tests: (exit code, stderr)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "hfrl.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)  # fmt: skip
    return proc.returncode, proc.stderr


def refusal(path: Path, problem: str) -> str:
    """The one line for a hostile file: 'config file PATH is ...' or 'config file PATH: ...'."""
    return f"error: config file {path}{' ' if problem.startswith('is ') else ': '}{problem}"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_config_file_is_refused_while_it_is_read(name, tmp_path):
    text, problem = HOSTILE[name]
    config = tmp_path / "c.yaml"
    config.write_text(text)
    code, err = hfrl("train", "--config", str(config), "-o", str(tmp_path / "r"), timeout=30)
    assert code == 2, err
    assert error_line(err) == refusal(config, problem)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real run directory from `hfrl train` (tiny model, one iteration)."""
    from hfrl.cli.app import main

    out = tmp_path_factory.mktemp("bounded") / "run"
    with pytest.raises(SystemExit) as exc:
        main([*TRAIN, "-o", str(out), *FAST])
    assert exc.value.code in (0, None)
    return out


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_run_config_is_refused_by_eval(name, run_dir, tmp_path):
    """`hfrl eval` imports torch before it opens the run (some 10 s on 2 CPU cores): the limit is 60 s,
    against minutes (50 MB) or forever (billion laughs) before."""
    text, problem = HOSTILE[name]
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "config.yaml").write_text(text)
    code, err = hfrl("eval", str(run), "--max-samples", "2", timeout=60)
    assert code == 2, err
    assert error_line(err) == refusal(run / "config.yaml", problem)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--generation_kwargs", billion_laughs().strip().replace("\n", ", ").join("{}")],
         "YAML whose aliases (*name) expand to more than 10000 values (line 1)"),
        (["--task-arg", "size=" + "[" * 20_000], "error: --task-arg size: YAML nested deeper than 100 levels (line 1)"),
        (["--learning_rate", "[1"], "error: --learning_rate: invalid YAML: "),
        (["--task-arg", "size=[1"], "error: --task-arg size: invalid YAML: "),
    ],
)  # fmt: skip
def test_a_hostile_or_broken_command_line_value_is_one_line(extra, message, tmp_path):
    code, err = hfrl(*TRAIN, "-o", str(tmp_path / "r"), *FAST, *extra, timeout=30)
    assert code == 2, err
    assert message in error_line(err)


# ---- a chat template that never ends ---------------------------------------------------------------
LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}"


@pytest.mark.parametrize("where", ["tokenizer_config.json", "chat_template.jinja"])
def test_a_chat_template_that_never_ends_is_stopped(where, run_dir, tmp_path, capsys, monkeypatch):
    from hfrl.trainers import evaluation

    monkeypatch.setattr(evaluation, "CHAT_TEMPLATE_SECONDS", 1.0)
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    if where == "chat_template.jinja":
        (run / where).write_text(LOOP)
    else:
        config = json.loads((run / where).read_text())
        (run / where).write_text(json.dumps({**config, "chat_template": LOOP}))
    code, _, err = run_cli(["chat", str(run), "--message", "hi"], capsys)
    assert code == 2, err
    assert error_line(err) == (
        f"error: the chat template of {run} did not finish within 1 s (a loop that never ends?); fix chat_template in "
        "its tokenizer_config.json or chat_template.jinja (or chat with --format plain / eou)"
    )


# ---- values of the wrong kind: one line naming them ---------------------------------------------------
@pytest.fixture(scope="module")
def own_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "references": ["r"]}) + "\n" for i in range(8)))
    return path


@pytest.mark.parametrize(
    ("task", "arg", "message"),
    [
        ("numbers", "train_size=abc", "task 'numbers': argument train_size takes a whole number, got 'abc'"),
        ("numbers", "eval_size=[1]", "task 'numbers': argument eval_size takes a whole number, got [1]"),
        ("numbers", "train_size=1e13", "task argument train_size must be in [1, 1000000] (prompts per split), "
         "got 10000000000000"),
        ("own", "max_samples=abc", "argument max_samples takes a whole number or null, got 'abc'"),
        ("own", "test_size=[1]", "argument test_size takes a number or a whole number or null, got [1]"),
        ("own", "train_size=abc", "unknown argument of task"),
    ],
)  # fmt: skip
def test_a_task_argument_of_the_wrong_kind_is_one_line(task, arg, message, own_data, tmp_path, capsys):
    name = str(own_data) if task == "own" else task
    code, _, err = run_cli(["train", "--task", name, "--model", "tiny", "-o", str(tmp_path / "r"), "--task-arg", arg,
                            *FAST], capsys)  # fmt: skip
    assert code == 2, err
    assert message in error_line(err)
    assert not (tmp_path / "r").exists()


def test_a_number_written_as_text_is_a_number_for_a_task_argument():
    """YAML 1.1 reads 1e3 as text; a task argument annotated int takes it as 1000, as a config field does."""
    from hfrl.tasks import describe_task, load_task

    assert len(load_task("numbers", train_size="1e3", eval_size=2.0).dataset["train"]) == 1000
    assert describe_task("numbers", train_size="1e3").name == "numbers"


REWARDS = [
    ("[{id: 5}]", "rewards[0].id takes a reward id (text: hfrl list rewards, or module:attr), got 5"),
    ("[{id: [a]}]", "rewards[0].id takes a reward id (text: hfrl list rewards, or module:attr), got ['a']"),
    ("[{id: increasing_numbers, args: [1, 2]}]",
     "rewards[0].args takes a mapping of argument: value, such as {min_tokens: 20}, got [1, 2] (reward "
     "'increasing_numbers')"),
    ("[increasing_numbers, {id: increasing_numbers, arg: {min_tokens: 2}}]", "rewards[1] holds id and args, not 'arg'"),
    ("[3]", "rewards[0] takes a reward id (text: hfrl list rewards, or module:attr) or {id: ID, args: {argument: "
     "value}}, got 3"),
]  # fmt: skip


@pytest.mark.parametrize(("rewards", "message"), REWARDS)
@pytest.mark.parametrize("source", ["command line", "config file"])
def test_a_reward_spec_of_the_wrong_kind_is_one_line(source, rewards, message, tmp_path, capsys):
    out = ["-o", str(tmp_path / "r"), *FAST]
    if source == "config file":
        config = tmp_path / "c.yaml"
        config.write_text(f"task: numbers\nmodel: tiny\nrewards: {rewards}\n")
        args, where = ["train", "--config", str(config), *out], f"config file {config}"
    else:
        args, where = [*TRAIN, "--rewards", rewards, *out], "command line"
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert error_line(err) == f"error: {where}: {message}"


def test_a_reward_spec_of_the_wrong_kind_is_one_line_in_python():
    from hfrl.rewards import load_reward

    with pytest.raises(ValueError, match=r"^reward spec\.id takes a reward id \(text"):
        load_reward({"id": 5})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"eval_generation_kwargs": {"num_beams": 0}}, "eval_generation_kwargs.num_beams must be >= 1 (1: no beam "
         "search), got 0"),
        ({"generation_kwargs": {"max_new_tokens": "1e30"}}, f"generation_kwargs.max_new_tokens must be <= 1000000 "
         f"{CAP}, got 1e30"),
        ({"num_iterations": -3}, "num_iterations must be >= 1, got -3"),
        ({"rewards": [{"id": 5}]}, "rewards[0].id takes a reward id (text: hfrl list rewards, or module:attr), got 5"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["train --config", "eval"])
def test_a_run_config_out_of_range_is_one_line(command, edit, message, run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **edit}))
    args = {
        "train --config": ["train", "--config", str(run / "config.yaml"), "-o", str(tmp_path / "again")],
        "eval": ["eval", str(run), "--max-samples", "2"],
    }[command]
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert error_line(err) == f"error: config file {run / 'config.yaml'}: {message}"
