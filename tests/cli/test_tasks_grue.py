"""The GRUE tasks on their fixtures, through the same loader as the Hub files: schema and preprocessing,
rewards and metrics on a few completions, two PPO iterations with a tiny model of the right kind, every
algorithm's default config, and ``hfrl train --task daily_dialog --alg nlpo`` offline."""

import math
import os

import pytest
import torch
import yaml

from hfrl.tasks import load_task
from hfrl.tasks.data import DATA_DIR_ENV, FIXTURES, data_files
from hfrl.testing import requires_wordnet, run_cli

GRUE = ["imdb", "common_gen", "cnn_dailymail", "totto", "narrative_qa", "iwslt2017", "wmt16", "daily_dialog"]


def _uses_meteor(name, sections=("rewards", "metrics")):
    """Whether the task's rewards (or metrics) compute METEOR, which needs WordNet."""
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml
    from hfrl.utils.registry import import_path

    spec = read_task_yaml(import_path(TASKS[name].partition(":")[0]).__file__)
    return "meteor" in yaml.safe_dump([spec.get(s) for s in sections])


def grue_params(sections=("rewards", "metrics")):
    """The GRUE tasks, those that compute METEOR skipped (saying why) where WordNet is missing."""
    return [pytest.param(n, marks=requires_wordnet()) if _uses_meteor(n, sections) else n for n in GRUE]


SEQ2SEQ = {"common_gen", "cnn_dailymail", "totto", "narrative_qa", "iwslt2017", "wmt16"}
# small PPO runs: the acceptance settings
FAST = dict(
    rollout_batch_size=4, mini_batch_size=2, num_ppo_epochs=1, max_new_tokens=4, max_prompt_length=64,
    num_iterations=2, eval_every=None, report_to="none", disable_tqdm=True, seed=0,
)  # fmt: skip


def _save_classifier(folder, labels):
    """A tiny BERT sequence classifier with hfrl's tiny tokenizer, saved like a Hub model."""
    from transformers import BertConfig, BertForSequenceClassification

    from hfrl.core.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels), id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
    )  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory):
    """Local stand-ins for the Hub classifiers (lvwerra/distilbert-imdb, the DailyDialog intent model)."""
    return {
        "imdb": _save_classifier(tmp_path_factory.mktemp("sentiment"), ["NEGATIVE", "POSITIVE"]),
        "daily_dialog": _save_classifier(
            tmp_path_factory.mktemp("intent"), ["inform", "question", "directive", "commissive"]
        ),
    }


def task_args(name, classifiers):
    """The fixture folder, and the local classifier where the task has a learned reward."""
    args = {"data_dir": str(FIXTURES / name)}
    if name == "imdb":
        args["classifier"] = classifiers["imdb"]
    if name == "daily_dialog":
        args["intent_model"] = classifiers["daily_dialog"]
    return args


@pytest.fixture(scope="module")
def tasks(classifiers):
    return {name: load_task(name, **task_args(name, classifiers)) for name in GRUE}


# ---- schema and preprocessing ----------------------------------------------------------------------
def _row(dataset, **match):
    rows = [r for r in dataset if all(r[k] == v for k, v in match.items())]
    assert rows, f"no row with {match}"
    return rows[0]


EXPECTED = {
    # task: (split, row selector, expected columns)
    "imdb": (
        "test",
        {"label": 1},
        {
            "prompt": "This movie was a wonderful surprise with great",  # 8 of the 17 words
            "references": ["This movie was a wonderful surprise with great acting and a story I will not forget soon."],
            "completion": " acting and a story I will not forget soon.",
        },
    ),
    "common_gen": (
        "train",
        {"concepts": ["kid", "ball", "kick"]},
        {
            "prompt": "generate a sentence with: kid ball kick.",
            "references": ["The kid kicks the ball across the yard."],
        },
    ),
    "cnn_dailymail": (
        "test",
        {"id": f"{200:040x}"},
        {
            "prompt": "Summarize: The football club won the cup for the second year in a row on Saturday. "
            "Fans filled the streets to celebrate the win.",
            "references": ["The club won the cup for the second year in a row."],
        },
    ),  # fmt: skip
    "totto": (
        "train",
        {"references": ["Mount Everest is 8,849 m high."]},
        {
            "prompt": "<table> <cell> 8,849 m <col_header> Value </col_header> </cell> </table>"
            "<page_title> Mount Everest </page_title> <section_title> Height </section_title> "
            "<table> <cell> 8,849 m <col_header> Value </col_header> </cell> </table>",
            "table": [["page_title", "Mount Everest"], ["section_title", "Height"], ["Value", "8,849 m"]],
        },
    ),
    "narrative_qa": (
        "train",
        {"references": ["lena.", "his apprentice lena."]},
        {
            "prompt": "who finds the broken gear? \\n old tomas repairs clocks in a village shop. when the church "
            "clock stops, the mayor asks him to fix it before the spring festival, and his apprentice lena finds "
            "the broken gear."
        },
    ),  # fmt: skip
    "iwslt2017": (
        "validation",
        {"references": ["Vielen Dank."]},
        {"prompt": "translate English to German: Thank you very much."},
    ),
    "wmt16": (
        "test",
        {"references": ["Die Welt verändert sich schnell."]},
        {"prompt": "translate English to German: The world is changing fast."},
    ),
    "daily_dialog": (
        "train",
        {"references": ["Great , let's meet at half past six . <EOU>"]},
        {
            # the 5 utterances before the 8th, joined by <EOU>, then " <EOU>"
            "prompt": "There is a new film at the cinema . <EOU>What kind of film is it ? <EOU>"
            "A comedy about two old friends . <EOU>Sounds fun . When does it start ? <EOU>"
            "At seven on Saturday evening .  <EOU>",
            "intent": 3,
            "emotion": 4,
        },
    ),
}


@pytest.mark.parametrize("name", GRUE)
def test_schema_and_preprocessed_example(tasks, name):
    task = tasks[name]
    assert set(task.dataset) == {"train", "validation", "test"}
    for split in task.dataset.values():
        assert {"prompt", "references"} <= set(split.column_names)
        assert all(isinstance(p, str) and p for p in split["prompt"])
        assert all(isinstance(r, list) and all(isinstance(x, str) for x in r) for r in split["references"])
    split, match, expected = EXPECTED[name]
    row = _row(task.dataset[split], **match)
    assert {k: row[k] for k in expected} == expected
    assert len(task.dataset["train"]) >= 4  # one rollout of the PPO test


def test_each_spec_declares_what_its_task_has(tasks, classifiers):
    """What resolving a run reads (hfrl.tasks.describe_task) is what the built task holds."""
    from hfrl.tasks import describe_task

    for name, task in tasks.items():
        spec = describe_task(name, **task_args(name, classifiers))
        assert (spec.name, spec.default_model, spec.configs) == (task.name, task.default_model, task.configs), name


def test_hidden_test_references_and_dialogue_counts(tasks):
    # CommonGen's hidden test targets become RL4LMs' placeholder; ToTTo's hidden test has none
    assert tasks["common_gen"].dataset["test"]["references"] == [["empty reference"]] * 3
    assert tasks["totto"].dataset["test"]["references"] == [[], []]
    # DailyDialog: train's dialogues of 8, 7, 7 utterances and 16 composed ones of 9 give 3 + 2 + 2 + 16 x 4
    # samples with 5 turns of context; validation's and test's one dialogue of 7, two each
    assert [len(tasks["daily_dialog"].dataset[s]) for s in ("train", "validation", "test")] == [71, 2, 2]
    # IMDB: the train file (64 reviews) is split 80/20 into train and validation, test untouched
    assert [len(tasks["imdb"].dataset[s]) for s in ("train", "validation", "test")] == [51, 13, 4]


def test_fixtures_hold_a_rollout_of_every_configured_algorithm(tasks):
    """The offline commands of docs/how-to/own-data.md run with the tasks' own settings: each fixture's train
    split holds one rollout of every online algorithm the task configures (tasks/fixtures/make_fixtures.py)."""
    from hfrl.tasks import describe_task

    for name, task in tasks.items():
        configs = describe_task(name).configs
        sizes = [c.get("rollout_batch_size") or configs.get("defaults", {}).get("rollout_batch_size") or 0
                 for alg, c in configs.items() if alg != "defaults"]  # fmt: skip
        assert len(task.dataset["train"]) >= max(sizes, default=0), (name, len(task.dataset["train"]), sizes)


def test_hub_files_are_pinned_parquet_and_fixtures_mirror_them():
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml
    from hfrl.utils.registry import import_path

    for name in GRUE:
        spec = read_task_yaml(import_path(TASKS[name].partition(":")[0]).__file__)["dataset"]
        hub = data_files(spec)
        assert set(hub) == {"train", "validation", "test"} or name == "imdb"
        for paths in hub.values():
            assert all(p.startswith(f"hf://datasets/{spec['path']}@") and p.endswith(".parquet") for p in paths)
        local = data_files(spec, data_dir=str(FIXTURES / name))
        assert all(__import__("glob").glob(p) for paths in local.values() for p in paths), name
    spec = {"path": "IWSLT/iwslt2017", "revision": "refs/convert/parquet", "files": {"train": "a/*.parquet"}}
    assert data_files(spec)["train"] == ["hf://datasets/IWSLT/iwslt2017@refs%2Fconvert%2Fparquet/a/*.parquet"]


# ---- rewards and metrics -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", grue_params())
def test_reward_and_metrics_on_completions(tasks, name, tiny_causal_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfrl.trainers.evaluation import NOT_REWARD_COLUMNS, Scoring, score_completions

    task = tasks[name]
    rows = [dict(r) for r in task.dataset["validation"].select(range(2))]
    prompts = [r["prompt"] for r in rows]
    completions = [rows[0]["references"][0], "a b c"]  # a perfect one and a poor one
    policy = AutoModelForCausalLM.from_pretrained(tiny_causal_dir) if name not in SEQ2SEQ else None
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir) if policy is not None else None
    extra = [{k: v for k, v in r.items() if k not in NOT_REWARD_COLUMNS} for r in rows]
    weights = [1.0] * len(task.reward_funcs)
    scoring = Scoring(task.reward_funcs, weights, task.metrics, policy=policy, tokenizer=tokenizer)
    scores, records = score_completions(prompts, completions, extra, scoring)
    assert len(records) == 2 and all(math.isfinite(r["reward"]) for r in records)
    assert all(math.isfinite(v) for v in scores.values()), scores
    assert records[0]["reward"] > records[1]["reward"], (name, records)  # the reference beats "a b c"
    for metric in task.metrics:
        assert any(k.startswith("eval_") for k in scores), metric
    assert "eval_mean_length" in scores and "eval_distinct_1" in scores


def test_task_rewards_follow_rl4lms(tasks):
    """A few rewards computed by hand."""
    cg = tasks["common_gen"]
    prompt = "generate a sentence with: dog frisbee catch throw."
    penalty = cg.reward_funcs[1]
    assert penalty(prompts=[prompt] * 2, completions=["dog frisbee catch throw", "A dog catches it."]) == [-1.0, 0.0]
    ter = tasks["iwslt2017"].reward_funcs[0]  # 1 - TER
    refs = [["Vielen Dank."], ["Die Welt verändert sich"]]  # 1 deletion / 4 words: TER 0.25
    assert ter(prompts=["", ""], completions=["Vielen Dank.", "Die Welt verändert"], references=refs) == [1.0, 0.75]
    rouge = tasks["cnn_dailymail"].reward_funcs[0]  # ROUGE-1 F: P = 2/2, R = 2/4 -> 2/3
    assert rouge(prompts=[""], completions=["club won"], references=[["The club won cups"]]) == [pytest.approx(2 / 3)]


def test_daily_dialog_reward_configurations(classifiers):
    fixtures = str(FIXTURES / "daily_dialog")
    grue = load_task("daily_dialog", data_dir=fixtures, intent_model=classifiers["daily_dialog"])
    openrl = load_task(
        "daily_dialog", data_dir=fixtures, intent_model=classifiers["daily_dialog"], reward_config="openrl"
    )
    assert grue.reward_funcs[0].weights == [0.75, 0.25] and openrl.reward_funcs[0].weights == [0.5, 0.5]
    intent = openrl.reward_funcs[0].rewards[0]
    assert intent.metric.model == classifiers["daily_dialog"] and intent.metric.label_offset == -1
    from hfrl.trainers.schema import config_schema

    ppo, ppo_openrl = (task.config_for("ppo", config_schema("ppo").sections) for task in (grue, openrl))
    assert (ppo["kl_coef"], ppo["kl_target"]) == (0.2, 0.5)
    assert (ppo_openrl["kl_coef"], ppo_openrl["kl_target"]) == (0.2, 0.05)
    from hfrl.utils.registry import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown reward configuration of task 'daily_dialog' 'openr'"):
        load_task("daily_dialog", data_dir=fixtures, reward_config="openr")
    # the Hub classifier stays the default
    default = load_task("daily_dialog", data_dir=fixtures)
    assert default.reward_funcs[0].rewards[0].metric.model == "rajkumarrrk/roberta-daily-dialog-intent-classifier"


def test_optional_metrics_on_request():
    """RL4LMs' metrics that need extra packages or downloads (BERTScore, CIDEr, SPICE) only on request."""
    fixtures = str(FIXTURES / "common_gen")
    assert "spice" not in load_task("common_gen", data_dir=fixtures).metrics
    assert {"cider", "spice", "bertscore", "meteor"} <= set(
        load_task("common_gen", data_dir=fixtures, metrics="all").metrics
    )
    assert list(load_task("common_gen", data_dir=fixtures, metrics=["bleu"]).metrics) == ["bleu"]


# ---- training --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", grue_params(("rewards",)))
def test_ppo_two_iterations(name, classifiers, tmp_path):
    from hfrl.runs.experiment import build_trainer, resolve_run

    model = "tiny-t5" if name in SEQ2SEQ else "tiny"
    run = resolve_run(
        name,
        "ppo",
        model,
        overrides=dict(FAST),
        output_dir=str(tmp_path / "run"),
        task_args=task_args(name, classifiers),
    )
    assert run["generation_kwargs"]["do_sample"] is True  # the task's rollout settings reach the config
    trainer = build_trainer(run)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert [h["iteration"] for h in logs] == [1, 2] and all(math.isfinite(h["reward"]) for h in logs)


@pytest.mark.parametrize("name", GRUE)
def test_every_algorithm_config_resolves(name, classifiers, tmp_path):
    """Each section of the task's YAML names an algorithm or a config class the algorithms inherit
    from (``online``, ``offline``), and every algorithm's merged settings are a valid config (GRUE
    settings for PPO / NLPO; TRPO inherits ``online`` where the task has no section of its own)."""
    from hfrl.runs.experiment import algorithm_trainer, resolve_run, split_run
    from hfrl.trainers import ALGORITHMS

    task = load_task(name, **task_args(name, classifiers))
    sections = [a for a in task.configs if a != "defaults"]
    for section in sections:
        assert section in ALGORITHMS or section in ("online", "offline"), (name, section)
    for alg in {a for a in sections if a in ALGORITHMS} | {"ppo", "nlpo", "a2c", "trpo", "grpo", "sft"}:
        run = resolve_run(name, alg, output_dir=str(tmp_path / alg), task_args=task_args(name, classifiers))
        _, fields = split_run(run)
        config = algorithm_trainer(alg).config_class(**fields)
        assert config.output_dir == str(tmp_path / alg)
    ppo = resolve_run(name, "ppo", output_dir=str(tmp_path / "p"), task_args=task_args(name, classifiers))
    assert ppo["num_ppo_epochs"] == 5 and ppo["learning_rate"] in (1e-6, 2e-6) and ppo["kl_target"] > 0


def test_grue_table_settings(classifiers, tmp_path):
    """docs/algorithms.md §10 for a few cells: model, KL, lengths, rollout -> eval generation, NLPO mask."""
    from hfrl.runs.experiment import resolve_run

    def run(name, alg):
        return resolve_run(name, alg, output_dir=str(tmp_path), task_args=task_args(name, classifiers))

    imdb = run("imdb", "ppo")
    assert imdb["model"] == "lvwerra/gpt2-imdb" and (imdb["kl_coef"], imdb["kl_target"]) == (0.1, 0.1)
    assert (imdb["max_prompt_length"], imdb["max_new_tokens"], imdb["num_iterations"]) == (64, 48, 50)
    assert run("imdb", "nlpo")["mask_update_every"] == 5
    cg = run("common_gen", "ppo")
    assert cg["eval_generation_kwargs"]["num_beams"] == 5 and cg["generation_kwargs"]["top_k"] == 0
    assert cg["num_iterations"] == 200 and run("common_gen", "nlpo")["num_iterations"] == 100
    cnn = run("cnn_dailymail", "nlpo")
    assert cnn["rewards"] == ["meteor"] and cnn["eval_generation_kwargs"]["temperature"] == 0.7
    assert "rewards" not in run("cnn_dailymail", "ppo")  # ROUGE-1, the task's own reward
    assert run("iwslt2017", "nlpo")["top_mask"] == 0.5 and run("narrative_qa", "ppo")["kl_target"] == 1.0
    dd = run("daily_dialog", "nlpo")
    assert dd["model"] == "openai-community/gpt2" and dd["generation_kwargs"]["top_k"] == 20
    assert (dd["max_prompt_length"], dd["max_new_tokens"], dd["num_iterations"]) == (128, 20, 100)
    assert "learning_rate" not in run("totto", "trpo")  # TRPO's critic keeps sb3-contrib's 1e-3


# ---- the command line, offline ---------------------------------------------------------------------------
@requires_wordnet()  # its reward: 0.75 intent + 0.25 METEOR
def test_cli_daily_dialog_nlpo_offline(classifiers, tmp_path, capsys, monkeypatch):
    """``hfrl train --task daily_dialog --alg nlpo`` with HF_HUB_OFFLINE=1: data from a fixture-backed
    HFRL_DATA_DIR, the intent reward's classifier replaced by a local one, the built-in tiny model."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    out = tmp_path / "run"
    flags = [f"--{k}={'null' if v is None else v}" for k, v in FAST.items()]
    code, stdout, err = run_cli(
        [
            "train",
            "--task",
            "daily_dialog",
            "--alg",
            "nlpo",
            "--model",
            "tiny",
            "--output-dir",
            str(out),
            "--task-arg",
            f"intent_model={classifiers['daily_dialog']}",
            *flags,
        ],
        capsys,
    )
    assert code == 0, err
    assert "reward: " in stdout and " in the first iteration" in stdout
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["task"] == "daily_dialog" and saved["alg"] == "nlpo"
    assert saved["task_args"] == {"intent_model": classifiers["daily_dialog"]}
    assert saved["top_mask"] == 0.9 and saved["kl_target"] == 0.5 and saved["max_new_tokens"] == 4
    assert os.path.isfile(out / "model.safetensors")


def test_cli_daily_dialog_offline_says_what_is_missing(tmp_path, capsys, monkeypatch):
    """Without a local copy the Hub data (and the Hub model) cannot load offline: one line, before anything
    loads, naming the asset and the offline alternative (hfrl train's pre-flight: hfrl check's detection)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    code, _, err = run_cli(["train", "--task", "daily_dialog", "--alg", "nlpo", "--output-dir", str(tmp_path)], capsys)
    assert code == 1 and len(err.splitlines()) == 2  # the message and the HFRL_DEBUG hint
    assert err.startswith(
        "error: cannot start: dataset OpenRL/daily_dialog@1668faf is not cached and the Hub cannot be reached: "
        f"download it where it can, or point {DATA_DIR_ENV} (or --task-arg data_dir) at a copy (and "
    )
    assert "`hfrl check --task daily_dialog --alg nlpo --model openai-community/gpt2` lists what the run needs" in err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # nothing was written
    monkeypatch.setenv(DATA_DIR_ENV, str(FIXTURES))
    code, _, err = run_cli(["train", "--task", "daily_dialog", "--alg", "nlpo", "--output-dir", str(tmp_path)], capsys)
    assert code == 1 and err.startswith(  # the GRUE default model
        "error: cannot start: model openai-community/gpt2@607a30d is not cached and the Hub cannot be reached: "
        "download it where it can (`hf download openai-community/gpt2`), or pass a local folder"
    )


def test_list_tasks_shows_dataset_model_reward_metrics(capsys):
    import json

    code, out, _ = run_cli(["list", "tasks", "--json"], capsys)
    assert code == 0
    entries = {entry["name"]: entry for entry in json.loads(out)}
    dialog = entries["daily_dialog"]
    assert dialog["dataset"] == "OpenRL/daily_dialog@1668faf0c0" and dialog["model"] == "openai-community/gpt2"
    assert dialog["rewards"] == ["weighted(0.75 intent_accuracy + 0.25 meteor)"]
    assert dialog["metrics"][0] == "intent_accuracy"
    assert set(GRUE) <= set(entries) and "FILE|DIR|HUB_ID" in entries
    code, table, _ = run_cli(["list", "tasks"], capsys)  # the table: every task, within 100 columns
    assert code == 0 and max(len(line) for line in table.splitlines()) <= 100
    assert all(any(line.startswith(f"{name} ") for line in table.splitlines()) for name in GRUE)
