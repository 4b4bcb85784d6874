"""Your own data as a task: files, folders, column options, a custom task class, and clear errors."""

import json

import pytest
import yaml

from hfrl.tasks import load_task
from hfrl.testing import run_cli
from hfrl.utils.registry import UnknownNameError

FAST = ["--rollout_batch_size", "4", "--mini_batch_size", "2", "--num_ppo_epochs", "1", "--max_new_tokens", "4",
        "--num_iterations", "2", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
ROWS = [
    {"prompt": "The movie was", "references": ["a good film."], "topic": "film"},
    {"prompt": "Count: 1 2 3", "references": ["4 5 6", "4 5"], "topic": "numbers"},
    {"prompt": "The date is", "references": "2021-01-01", "topic": "dates"},  # a string is one reference
    {"prompt": "A story about", "references": ["a dog and a cat."], "topic": "story"},
]


def error_line(err):
    """The CLI's one error line (stderr may also hold progress bars of the data loading before it)."""
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_jsonl_ppo_with_tiny_model(tmp_path, capsys):
    data = write_jsonl(tmp_path / "my.jsonl", ROWS)
    out = tmp_path / "run"
    code, stdout, err = run_cli(
        ["train", "--task", str(data), "--alg", "ppo", "--model", "tiny", "--output-dir", str(out), *FAST], capsys
    )
    assert code == 0, err
    assert " in the first iteration" in stdout
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["task"] == str(data) and saved["model"] == "tiny" and saved["max_new_tokens"] == 4


def test_file_schema_and_default_reward(tmp_path):
    task = load_task(str(write_jsonl(tmp_path / "my.jsonl", ROWS)))
    train = task.dataset["train"]
    assert list(task.dataset) == ["train"] and task.name == "my"
    assert train["references"] == [["a good film."], ["4 5 6", "4 5"], ["2021-01-01"], ["a dog and a cat."]]
    assert train["topic"][0] == "film"  # extra columns stay: rewards get them as keyword arguments
    rouge = task.reward_funcs[0]  # ROUGE-L against the best reference
    assert rouge(prompts=["", ""], completions=["4 5", "a cat"], references=train["references"][1:3]) == [1.0, 0.0]
    assert task.default_model == "openai-community/gpt2" and {"rouge", "bleu"} <= set(task.metrics)


def test_csv_with_named_columns_and_parquet(tmp_path):
    csv = tmp_path / "qa.csv"
    csv.write_text("question,answer,id\nWho wrote it?,Ada,1\nWhen?,In 1843,2\n")
    task = load_task(str(csv), prompt_column="question", references_column="answer")
    assert task.dataset["train"]["prompt"] == ["Who wrote it?", "When?"]
    assert task.dataset["train"]["references"] == [["Ada"], ["In 1843"]]
    assert "question" not in task.dataset["train"].column_names and task.dataset["train"]["id"] == [1, 2]

    from datasets import Dataset

    Dataset.from_list([{"prompt": r["prompt"], "references": [r["topic"]]} for r in ROWS]).to_parquet(
        str(tmp_path / "d.parquet")
    )
    assert load_task(str(tmp_path / "d.parquet")).dataset["train"]["references"][0] == ["film"]


def test_folder_splits_and_max_samples(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", ROWS)
    write_jsonl(folder / "dev.jsonl", ROWS[:2])
    write_jsonl(folder / "test-00000.jsonl", ROWS[2:])
    task = load_task(str(folder), max_samples=3)
    assert {k: len(v) for k, v in task.dataset.items()} == {"train": 3, "validation": 2, "test": 2}


def test_missing_columns_fail_with_the_columns_the_file_has(tmp_path, capsys):
    data = write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": "a"}])
    code, _, err = run_cli(["train", "--task", str(data), "--model", "tiny", "--output-dir", str(tmp_path)], capsys)
    assert code == 2 and error_line(err) == (
        f"error: {data}: no prompt column 'prompt' (its columns: question, answer); name it with --prompt-column"
    )
    code, _, err = run_cli(
        ["train", "--task", str(data), "--prompt-column", "question", "--model", "tiny", "--output-dir", str(tmp_path)],
        capsys,
    )
    assert code == 2 and "no references column 'references' (its columns: question, answer)" in error_line(err)
    with pytest.raises(ValueError, match="no references column 'refs'"):
        load_task(str(data), prompt_column="question", references_column="refs")


def test_rewards_without_references_and_task_args_from_the_command_line(tmp_path, capsys):
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"text": p} for p in ("a", "b", "c", "d")])
    task = load_task(str(data), prompt_column="text", rewards=["contains_date"])
    assert task.dataset["train"]["references"] == [[]] * 4 and task.reward_funcs[0].__name__ == "contains_date"
    out = tmp_path / "run"
    code, _, err = run_cli(
        [
            "train",
            "--task",
            str(data),
            "--model",
            "tiny",
            "--output-dir",
            str(out),
            "--task-arg",
            "prompt_column=text",
            "--rewards",
            "[contains_date]",
            *FAST,
        ],
        capsys,
    )
    assert code == 0, err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["task_args"] == {"prompt_column": "text"} and saved["rewards"] == ["contains_date"]


def test_custom_task_class_by_module_path(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_tasks.py").write_text(
        "from datasets import Dataset, DatasetDict\n"
        "from hfrl.tasks import Task\n"
        "def reward(prompts, completions, **kw):\n"
        "    return [float(len(c)) for c in completions]\n"
        "def build(n=4):\n"
        "    ds = Dataset.from_dict({'prompt': ['x'] * n, 'references': [[]] * n})\n"
        "    return Task(name='mine', dataset=DatasetDict(train=ds), reward_funcs=[reward],\n"
        "                configs={'ppo': {'learning_rate': 1e-3}})\n"
        "READY = build(8)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert len(load_task("my_tasks:build", n=5).dataset["train"]) == 5
    assert len(load_task("my_tasks:READY").dataset["train"]) == 8
    with pytest.raises(UnknownNameError, match=r"unknown argument of task 'my_tasks:build' 'm'.*known: n\)"):
        load_task("my_tasks:build", m=5)
    out = tmp_path / "run"
    code, _, err = run_cli(
        ["train", "--task", "my_tasks:build", "--model", "tiny", "--output-dir", str(out), *FAST], capsys
    )
    assert code == 0, err
    assert yaml.safe_load((out / "config.yaml").read_text())["learning_rate"] == 1e-3  # the task's own config


def test_bad_task_names_and_arguments(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="no such data file or folder: nope.jsonl"):
        load_task("nope.jsonl")
    with pytest.raises(UnknownNameError, match=r"unknown task 'numbrs'; did you mean 'numbers'\?"):
        load_task("numbrs")
    with pytest.raises(UnknownNameError, match=r"unknown argument of task 'daily_dialog' 'context'"):
        load_task("daily_dialog", context=3)
    code, _, err = run_cli(["train", "--task", "numbers", "--task-arg", "oops", "--output-dir", str(tmp_path)], capsys)
    assert code == 2 and error_line(err) == "error: --task-arg takes KEY=VALUE, got 'oops'"
    (tmp_path / "mixed").mkdir()
    write_jsonl(tmp_path / "mixed" / "train.jsonl", ROWS)
    (tmp_path / "mixed" / "test.csv").write_text("prompt\nx\n")
    with pytest.raises(ValueError, match="mixes data formats"):
        load_task(str(tmp_path / "mixed"))


def test_hub_dataset_id_offline_is_one_clear_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli(["train", "--task", "someone/their-data", "--output-dir", str(tmp_path)], capsys)
    assert code == 1 and error_line(err).startswith(  # said before anything loads (hfrl train's pre-flight)
        "error: cannot start: dataset someone/their-data is not cached and the Hub cannot be reached: download it "
        "where it can, or give a local data file or folder as --task"
    )


def test_a_task_is_built_once_per_train_command(tmp_path, monkeypatch, capsys):
    """hfrl train reads the task's spec to resolve the run, then builds it once (registered tasks); a
    builder function of your own is built while resolving and that task is the one trained on."""
    import hfrl.tasks.numbers as numbers

    calls = []

    def counted(**kwargs):
        calls.append(kwargs)
        return build(**kwargs)

    build = numbers.build
    monkeypatch.setattr(numbers, "build", counted)
    args = ["train", "--task", "numbers", "--model", "tiny", "--task-arg", "train_size=8", "--eval-test"]
    code, _, err = run_cli([*args, "--output-dir", str(tmp_path / "a"), *FAST], capsys)
    assert code == 0, err
    assert calls == [{"train_size": 8}]

    (tmp_path / "counted_tasks.py").write_text(
        "import hfrl.tasks.numbers as numbers\n"
        "CALLS = []\n"
        "def build(**kwargs):\n"
        "    CALLS.append(kwargs)\n"
        "    return numbers.build(**kwargs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["train", "--task", "counted_tasks:build", "--model", "tiny", "--output-dir", str(tmp_path / "b")]
    code, _, err = run_cli([*args, *FAST], capsys)
    assert code == 0, err
    import counted_tasks

    assert counted_tasks.CALLS == [{}]


def test_own_task_run_gets_its_card_and_says_how_to_evaluate(tmp_path, capsys, monkeypatch):
    """A run of your own task's code (named by its file) writes its model card and reward curve: the
    card names the task and its rewards as text and runs none of it; every command that opens the run
    reads its config and so asks for --trust-code, which the next-command lines carry; a config asking
    a library to load code is refused even for the card."""
    from hfrl.cards import write_card
    from hfrl.runs.run_dir import open_run
    from hfrl.utils.trust import UntrustedCodeError

    marker = tmp_path / "built"
    (tmp_path / "my_tasks.py").write_text(
        "import pathlib\n"
        "from datasets import Dataset, DatasetDict\n"
        "from hfrl.tasks import Task\n"
        "def digits(prompts, completions, **kwargs):\n"
        "    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]\n"
        "def build(n=8):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n"
        "    rows = Dataset.from_dict({'prompt': [f'{i} {i + 1}' for i in range(n)]})\n"
        "    return Task(name='digits', dataset=DatasetDict(train=rows), reward_funcs=[digits])\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["train", "--task", "my_tasks.py:build", "--model", "tiny", *FAST], capsys)
    assert code == 0, err
    run = tmp_path / "runs" / "my_tasks-build-ppo"  # no colon: a valid Hub repo name
    card = (run / "README.md").read_text()
    assert "`my_tasks.py:build` to maximise `digits`" in card and (run / "reward_curve.png").is_file()
    assert "could not be written" not in err
    assert f"saved to {run.relative_to(tmp_path)}: the model, config.yaml, the model card README.md" in out
    assert "next: hfrl eval runs/my_tasks-build-ppo --split train --trust-code   (--trust-code: it runs" in out
    assert "hfrl chat runs/my_tasks-build-ppo --trust-code" in out
    assert "hfrl push runs/my_tasks-build-ppo --repo-id YOUR_NAME/my_tasks-build-ppo --trust-code" in out

    marker.unlink()
    (run / "README.md").unlink()
    write_card(run)  # what the old failure message suggested: now it works, and runs no code
    assert "`digits`" not in (run / "README.md").read_text() and not marker.exists()
    for command in (["chat", str(run), "--message", "1 2"], ["eval", str(run), "--split", "train"]):
        code, _, err = run_cli(command, capsys)
        assert code == 2 and "names code to run (task: 'my_tasks.py:build')" in err and not marker.exists()
    code, out, err = run_cli(["chat", str(run), "--message", "1 2", "--trust-code"], capsys)
    assert code == 0 and "bot>" in out, err

    config = run / "config.yaml"
    config.write_text(config.read_text() + "model_init_kwargs: {trust_remote_code: true}\n")
    with pytest.raises(UntrustedCodeError, match="model_init_kwargs.trust_remote_code"):
        open_run(run, names_as_text=True)
