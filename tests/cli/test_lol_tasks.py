"""The Leftover-Lunch tasks (``reddit_pos``, ``reddit_neg``, ``wow``, ``faithdial``, ``faithdial_wow``,
``comet``): their shipped fixtures in the publishers' layouts load through the same code as the real
data, every task trains with the tiny model for ``nll``, then ``a_lol`` from that reference (the
two-stage recipe: the second card names the first), and ``ppo``, with tiny local classifiers for
every reward; ``hfrl list tasks`` shows their data and rewards; configs cover the offline family."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from hfrl.tasks import load_task
from hfrl.tasks.data import FIXTURES
from hfrl.testing import run_cli

LOL_TASKS = ("reddit_pos", "reddit_neg", "wow", "faithdial", "faithdial_wow", "comet")
REDDIT_SIZES = {"test_size": 2, "validation_size": 3}  # the fixture has 12 usable comments per file
CLASSIFIER_ARGS = {
    "reddit_pos": ("fluency_model", "safety_model", "engagement_model", "upvote_model"),
    "reddit_neg": ("fluency_model", "safety_model", "engagement_model", "upvote_model"),
    "wow": ("faithfulness_model", "fluency_model", "engagement_model"),
    "faithdial": ("faithfulness_model", "fluency_model", "engagement_model"),
    "faithdial_wow": ("faithfulness_model", "fluency_model", "engagement_model"),
    "comet": ("critic_model",),
}


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory):
    from hfrl.testing.tiny_classifiers import save_lol_classifiers

    return save_lol_classifiers(tmp_path_factory.mktemp("lol-classifiers"))


@pytest.fixture
def fixtures(monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))


def task_args(task: str, classifiers: dict[str, str]) -> dict:
    args = {name: classifiers[name] for name in CLASSIFIER_ARGS[task]}
    return {**args, **(REDDIT_SIZES if task.startswith("reddit") else {})}


# ---- data ---------------------------------------------------------------------------------------
def test_reddit_fixture_through_the_kaggle_layout(fixtures, classifiers):
    pos = load_task("reddit_pos", **task_args("reddit_pos", classifiers))
    neg = load_task("reddit_neg", **task_args("reddit_neg", classifiers))
    # 13 rows per file: one too long (pos) or empty (neg) is dropped; 2 test + 3 validation of each side
    assert {s: len(d) for s, d in pos.dataset.items()} == {"train": 7, "validation": 6, "test": 4}
    assert list(pos.dataset["test"]["prompt"]) == list(neg.dataset["test"]["prompt"])  # both evaluated on both sides
    assert set(pos.dataset["train"]["completion"]).isdisjoint(neg.dataset["train"]["completion"])
    assert all(p.endswith("<|endoftext|>") for p in pos.dataset["train"]["prompt"])
    everything = [c for split in pos.dataset.values() for c in split["completion"]]
    assert not any("http" in c for c in everything) and any("<URL>" in c for c in everything)
    assert [type(f).__name__ for f in pos.reward_funcs] == [
        "CoLAFluency", "OffensiveSafety", "DialogRPTDepth", "DialogRPTUpdown", "TfidfDiversity",
    ]  # fmt: skip
    assert pos.reward_funcs[-1].idf is not None  # the diversity reward is fitted on the training comments
    dropped = load_task("reddit_pos", safety_model="none", **REDDIT_SIZES)
    assert "OffensiveSafety" not in [type(f).__name__ for f in dropped.reward_funcs]


def test_knowledge_dialogue_fixtures(fixtures, classifiers):
    from hfrl.runs.experiment import task_config
    from hfrl.trainers.schema import config_schema

    wow, faithdial, both = (load_task(t, **task_args(t, classifiers)) for t in ("wow", "faithdial", "faithdial_wow"))
    # WoW: 4 training dialogues with 2 grounded wizard turns each (the ungrounded one is skipped), 2 validation
    assert {s: len(d) for s, d in wow.dataset.items()} == {"train": 8, "validation": 4, "test": 4}
    assert {s: len(d) for s, d in faithdial.dataset.items()} == {"train": 8, "validation": 4, "test": 4}
    assert {s: len(d) for s, d in both.dataset.items()} == {"train": 16, "validation": 8, "test": 4}
    assert list(wow.dataset["test"]["completion"]) == list(
        faithdial.dataset["test"]["completion"]
    )  # FaithDial's test split
    row = faithdial.dataset["train"][0]
    assert row["prompt"] == (
        "Knowledge: Blue is one of the three primary colours of pigments in painting.<|endoftext|>"
        "I really like the colour blue.<|endoftext|>"
    )
    assert row["knowledge"] == "Blue is one of the three primary colours of pigments in painting."
    _, spec = task_config(faithdial, "a_lol", config_schema("a_lol"))  # the `offline` section, inherited
    assert spec["max_value"] == 4.0 and faithdial.default_model == "microsoft/DialoGPT-medium"


def test_faithdial_is_pinned_on_the_hub():
    from hfrl.tasks.base import read_task_yaml
    from hfrl.tasks.data import data_files
    from hfrl.tasks.knowledge_dialogue import __file__ as module

    source = read_task_yaml(module)["faithdial"]
    assert re.fullmatch(r"[0-9a-f]{40}", source["revision"])  # a commit of refs/convert/parquet, not a branch
    assert data_files(source)["train"] == [
        f"hf://datasets/McGill-NLP/FaithDial@{source['revision']}/plain_text/train/0000.parquet"
    ]


def test_comet_fixture(fixtures, classifiers):
    task = load_task("comet", **task_args("comet", classifiers))
    train = task.dataset["train"]
    assert {s: len(d) for s, d in task.dataset.items()} == {"train": 16, "validation": 5, "test": 4}
    assert train[0]["prompt"] == "<head> PersonX buys a new car </head> <relation> xWant </relation> [GEN] "
    assert (train[0]["completion"], train[0]["reward"]) == ("to drive it", 0.95)  # the critic's stored score
    assert "reward" not in task.dataset["validation"].column_names
    assert (
        "reward"
        not in load_task("comet", use_data_scores=False, **task_args("comet", classifiers))
        .dataset["train"]
        .column_names
    )
    atomic2020 = FIXTURES / "comet" / "atomic2020" / "test.tsv"
    test = load_task("comet", atomic2020_test=str(atomic2020), **task_args("comet", classifiers)).dataset["test"]
    assert list(test["references"]) == [["to feed it", "to play with it"], ["proud"]]  # grouped by (head, relation)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("reddit_pos", r"task 'reddit_pos': no comments_positive.csv in /nowhere \(data_dir\); get it from "
         r"https://www.kaggle.com/code/danofer/reddit-comments-scores-nlp/input"),
        ("wow", r"task 'wow': no train.json in /nowhere \(data_dir\); get it from "
         r"http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz"),
        ("comet", r"task 'comet': no ATOMIC10X.jsonl in /nowhere \(data_dir\); get it from https://storage"),
    ],
)  # fmt: skip
def test_missing_data_says_where_to_get_it(classifiers, task, message, monkeypatch):
    monkeypatch.setenv("HFRL_DATA_DIR", str(FIXTURES))  # FaithDial (wow's test split) from the fixture
    with pytest.raises(FileNotFoundError, match=message):
        load_task(task, data_dir="/nowhere", **task_args(task, classifiers))


def test_missing_classifier_folders_say_what_to_pass(fixtures):
    with pytest.raises(ValueError, match="pass --task-arg safety_model=FOLDER .* or --task-arg safety_model=none"):
        load_task("reddit_neg", **REDDIT_SIZES)
    with pytest.raises(ValueError, match="task 'comet': the COMET critic is a local folder: pass --task-arg"):
        load_task("comet")


def test_list_tasks_shows_data_and_rewards(capsys):
    import json

    from hfrl.cli.list_cmd import _task_text

    code, out, _ = run_cli(["list", "tasks", "--json"], capsys)
    assert code == 0
    rows = {entry["name"]: _task_text(entry) for entry in json.loads(out)}
    assert "Kaggle 'Reddit comment scores'" in rows["reddit_pos"]
    assert "cola_fluency, offensive_safety, dialogrpt_depth, dialogrpt_updown, tfidf_diversity" in rows["reddit_neg"]
    assert "McGill-NLP/FaithDial@5e87cf8107" in rows["faithdial"] and "faithcritic" in rows["faithdial_wow"]
    assert "wizard_of_wikipedia" in rows["wow"] and "ATOMIC10X.jsonl" in rows["comet"]
    assert "reward: comet_critic" in rows["comet"]


def test_every_offline_algorithm_has_a_config(fixtures, classifiers):
    from hfrl.core.losses import ALOL_ALGORITHMS
    from hfrl.runs.experiment import resolve_run
    from hfrl.tasks import describe_task

    max_values = {"reddit_pos": 5.0, "reddit_neg": 5.0, "wow": 4.0, "faithdial": 4.0, "faithdial_wow": 4.0, "comet": 1}
    for task in LOL_TASKS:
        built = load_task(task, **task_args(task, classifiers))
        spec = describe_task(task, **task_args(task, classifiers))  # what resolving a run reads
        assert (spec.name, spec.default_model, spec.configs) == (built.name, built.default_model, built.configs)
        for alg in ALOL_ALGORITHMS:  # each inherits the task's `offline` section, then its own
            run = resolve_run(task, alg, "tiny", task_args=task_args(task, classifiers))
            assert run["algorithm"] == alg and run["max_value"] == max_values[task], (task, alg)
            assert run["learning_rate"] == 2e-5 or alg not in ("nll", "a_lol"), (task, alg)
    assert "pro" in load_task("comet", **task_args("comet", classifiers)).configs


def test_the_docs_list_each_task_with_its_command():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "own-data.md").read_text()
    for task in LOL_TASKS:
        assert f"| `{task}` |" in page and f"hfrl train --task {task} --alg a_lol --model runs/{task}-nll" in page


# ---- training: nll, then a_lol from it, then ppo ------------------------------------------------
COMMON = ["--report_to", "none", "--disable_tqdm", "true", "--max_new_tokens", "6", "--max_prompt_length", "48"]
OFFLINE = [
    "--max_completion_length", "12", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
    "--num_train_epochs", "1", "--value_epochs", "10", "--value_learning_rate", "0.01", "--seed", "0",
]  # fmt: skip
ONLINE = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "2", "--num_ppo_epochs", "1"]


@pytest.mark.parametrize("task", LOL_TASKS)
def test_trains_nll_then_a_lol_from_it_then_ppo(task, fixtures, classifiers, tmp_path, capsys):
    args = [x for key, value in task_args(task, classifiers).items() for x in ("--task-arg", f"{key}={value}")]
    cache = ["--preparation_cache_dir", str(tmp_path / "cache")]
    runs = {alg: tmp_path / alg for alg in ("nll", "a_lol", "ppo")}
    stages = [
        ("nll", "tiny", OFFLINE + cache),
        ("a_lol", str(runs["nll"]), OFFLINE + cache),  # the reference policy: the nll run
        ("ppo", "tiny", ONLINE + ["--eval_every", "null"]),
    ]
    for alg, model, extra in stages:
        cli = ["train", "--task", task, "--alg", alg, "--model", model, "--output-dir", str(runs[alg])]
        code, out, err = run_cli([*cli, *args, *COMMON, *extra], capsys)
        assert code == 0, err
        assert os.path.isfile(runs[alg] / "model.safetensors")
    state = json.loads((runs["a_lol"] / "trainer_state.json").read_text())
    prepared = state["log_history"][0]
    assert 0 < prepared["prepare/positive_fraction"] <= 1 and "prepare/value_mse" in prepared
    saved = yaml.safe_load((runs["a_lol"] / "config.yaml").read_text())
    assert (saved["model"], saved["algorithm"]) == (str(runs["nll"]), "a_lol")
    card = (runs["a_lol"] / "README.md").read_text()
    assert f"(the reference policy: hfrl run `{runs['nll']}`, NLL (behaviour cloning) on the task `{task}`" in card
    ppo = json.loads((runs["ppo"] / "trainer_state.json").read_text())["log_history"]
    rewards = [h for h in ppo if "reward" in h]
    names = {key.removeprefix("rewards/") for key in rewards[0] if key.startswith("rewards/")}
    family = "comet" if task == "comet" else "reddit" if task.startswith("reddit") else "knowledge"
    assert (
        names
        == {
            "comet": {"comet_critic"},
            "reddit": {"fluency", "safety", "engagement", "upvote", "diversity"},
            "knowledge": {"faithfulness", "fluency", "engagement", "diversity"},
        }[family]
    )  # one reward function per attribute, each logged
    assert len(rewards) == 1 and rewards[0]["num_completions"] == 4
