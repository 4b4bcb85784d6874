"""A reward's registry entry declares the dataset columns it reads (``inputs``, ``optional_inputs``); that
is a checked fact (issue 54.3):

- each registered reward reads exactly what it declares: tests/unit/test_rewards.py::
  test_every_reward_reads_exactly_the_columns_its_registry_entry_declares;
- a run whose train split lacks a column its rewards need is refused in one line, exit 2, before torch;
- every built-in task's train split has the columns its rewards (each named reward configuration's too)
  read, the tasks enrolled from ``TASKS``.

    python -m pytest -q tests/unit/test_reward_inputs.py
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

from hfrl.rewards import load_reward, missing_inputs_problem, reward_ids, reward_inputs
from hfrl.tasks import TASKS, describe_task, load_task, task_builder
from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES
from tests.cli.test_early_errors import RUNNER  # every case in one process: exit code, stderr, torch yet

WHERE = "the train split of task 'x'"


def test_the_refusal_names_the_reward_the_columns_and_what_to_change():
    answer = load_reward("exact_answer")
    assert missing_inputs_problem([answer], ["prompt", "references"], WHERE) == (
        "reward exact_answer reads column 'answer', which the train split of task 'x' lacks: add it or choose "
        "another reward"
    )
    assert missing_inputs_problem([load_reward("parent")], ["prompt"], WHERE) == (
        "reward parent reads columns 'references', 'table', which the train split of task 'x' lack: add them or "
        "choose another reward"
    )
    weighted = load_reward({"id": "weighted", "args": {"rewards": ["contains_date", "exact_answer"]}})
    assert missing_inputs_problem([weighted], ["prompt"], WHERE) == (
        "reward exact_answer (in weighted) reads column 'answer', which the train split of task 'x' lacks: add "
        "it or choose another reward"
    )
    assert missing_inputs_problem([answer, weighted], ["prompt", "answer"], WHERE) is None

    def mine(prompts, completions, **columns):
        return [0.0] * len(completions)

    assert reward_inputs(mine) is None  # your own reward: only its code knows what it reads
    assert missing_inputs_problem([mine], [], WHERE) is None
    # optional inputs are read when present, else the reward falls back on the prompt: no refusal
    assert reward_ids()["comet_critic"].optional_inputs == ("head", "relation")
    assert (
        missing_inputs_problem([load_reward({"id": "comet_critic", "args": {"model": "m"}})], ["prompt"], WHERE) is None
    )


# Runs each command line in this process, one after another: exit code, stderr, torch imported yet


def test_a_run_whose_train_split_lacks_a_rewards_column_is_one_line_before_torch(tmp_path, tiny_causal_dir):
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i}", "references": ["r"]}) + "\n" for i in range(64)))
    train = ["train", "--model", "tiny", "--num_iterations", "1"]
    weighted = "[{id: weighted, args: {rewards: [answer_format, exact_answer]}}]"
    cases = [
        ([*train, "--task", "numbers", "--rewards", "[exact_answer]"],
         "reward exact_answer reads column 'answer', which the train split of task 'numbers' lacks: add it or "
         "choose another reward"),
        ([*train, "--task", "numbers", "--alg", "grpo", "--rewards", weighted],
         "reward exact_answer (in weighted) reads column 'answer', which the train split of task 'numbers' lacks: "
         "add it or choose another reward"),
        ([*train, "--task", str(data), "--rewards", "[rouge, {id: parent}]"],  # your own data
         f"reward parent reads column 'table', which the train split of task '{data}' lacks: add it or choose "
         "another reward"),
    ]  # fmt: skip
    commands = [[*argv, "-o", str(tmp_path / f"run{i}")] for i, (argv, _) in enumerate(cases)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    for i, ((_, message), result) in enumerate(zip(cases, results, strict=True)):
        assert result["code"] == 2, result
        assert result["stderr"].splitlines() == [f"error: {message}", "(set HFRL_DEBUG=1 for the traceback)"]
        assert not result["torch"], f"{message}: torch was imported before the refusal"
        assert not (tmp_path / f"run{i}").exists()  # refused before the run's folder is made


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    """One tiny sequence classifier for every model argument of a task (its rewards are not run here)."""
    from hfrl.testing.tiny_classifiers import save_sequence_classifier

    return save_sequence_classifier(tmp_path_factory.mktemp("classifier"), "roberta", ["NEGATIVE", "POSITIVE"])


def _offline_arguments(name: str, classifier: str) -> dict:
    """A task's arguments for its fixtures, read off its builder: every model argument (``classifier``,
    ``judge``, ``*_model``) a local classifier, and the held-out sizes small enough for a fixture."""
    params = inspect.signature(task_builder(name)).parameters
    args = {p: classifier for p in params if p.endswith("_model") or p in ("classifier", "judge")}
    return args | {k: v for k, v in {"test_size": 2, "validation_size": 3}.items() if k in params}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_built_in_tasks_train_split_has_the_columns_its_rewards_read(name, classifier_dir, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    args = _offline_arguments(name, classifier_dir)
    named = describe_task(name, **args).declared.get("reward_configs") or {}
    for reward_config in [None, *named]:
        task = load_task(name, **args, **({"reward_config": reward_config} if reward_config else {}))
        columns = task.dataset["train"].column_names
        where = f"the train split of task {name!r}" + (f" (reward_config {reward_config})" if reward_config else "")
        assert missing_inputs_problem(task.reward_funcs, columns, where) is None
        for func in task.reward_funcs:
            known = reward_inputs(func)
            assert known is not None, f"task {name}: reward {func!r} is not from the registries"
            optional = reward_ids()[known[0]].optional_inputs if known[0] in reward_ids() else ()
            assert set(optional) <= set(columns), f"{where} lacks {known[0]}'s {optional}"
