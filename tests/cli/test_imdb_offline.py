"""The offline IMDB shape: the shipped review openings (``data=openings``) and VADER's sentiment as
the reward (``reward=vader``), through the imdb task's own loading code; SmolLM2's settings."""

import pytest

from hfrl.tasks import load_task


@pytest.fixture(scope="module")
def task():
    return load_task("imdb", data="openings", reward="vader")


def test_openings_load_through_the_imdb_task_code(task):
    sizes = {split: len(task.dataset[split]) for split in ("train", "validation", "test")}
    assert sizes == {"train": 256, "validation": 64, "test": 80}
    prompts = [p for split in sizes for p in task.dataset[split]["prompt"]]
    assert len(set(prompts)) == 400  # every opening distinct
    row = task.dataset["train"][0]
    review = row["references"][0]
    assert review == row["prompt"] + row["completion"] and set(task.dataset["train"]["label"]) == {0, 1}
    assert len(row["prompt"].split()) == len(review.split()) // 2  # the first half of the words, as for IMDB


def test_vader_is_the_reward_and_the_sentiment_metric(task):
    assert [f.__name__ for f in task.reward_funcs] == ["vader_sentiment"]
    assert task.reward_funcs[0](prompts=["It was bad"], completions=[" good"]) == [0.4404]  # the completion
    metric = task.metrics["vader_sentiment"](prompts=["It was bad"], completions=[" good"])
    assert metric == {"sentiment": 0.4404}
    from hfrl.trainers.schema import config_schema

    ppo = task.config_for("ppo", config_schema("ppo").sections)  # SmolLM2's (benchmarks/real_model.py), not gpt2-imdb's
    assert ppo["max_new_tokens"] == ppo["generation_kwargs"]["min_new_tokens"]
    assert ppo["generation_kwargs"]["top_k"] == 50 and ppo["kl_target"] > 0


def test_hub_data_and_classifier_stay_the_default():
    from hfrl.tasks.base import read_task_yaml
    from hfrl.tasks.imdb import __file__ as imdb_file

    spec = read_task_yaml(imdb_file)
    assert spec["dataset"]["path"] == "stanfordnlp/imdb" and spec["rewards"][0]["id"] == "learned_classifier"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"data": "disk"}, "imdb: data must be one of hub, openings, got 'disk'"),
        ({"reward": "vadr"}, "imdb: reward must be one of classifier, vader, got 'vadr'"),
        ({"data": "openings", "data_dir": "/x"}, "imdb: give data=openings or data_dir, not both"),
        ({"reward": "vader", "classifier": "x"}, "imdb: reward=vader uses no classifier; drop the classifier argument"),
    ],
)
def test_bad_arguments_say_what_to_change(args, message):
    with pytest.raises(ValueError) as err:
        load_task("imdb", **args)
    assert str(err.value) == message


def test_one_command_trains_offline(tiny_causal_dir, tmp_path, capsys):
    from hfrl.testing import run_cli

    out = tmp_path / "run"
    code, stdout, err = run_cli(
        ["train", "--task", "imdb", "--alg", "ppo", "--model", "tiny", "--task-arg", "data=openings",
         "--task-arg", "reward=vader", "--output-dir", str(out), "--num_iterations", "1", "--max_new_tokens", "4",
         "--generation_kwargs", "{do_sample: true, top_k: 50, min_new_tokens: 4}", "--disable_tqdm", "true"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "reward: " in stdout and " in the first iteration" in stdout
    card = (out / "README.md").read_text()  # the card shows the shape the run used
    assert "**Reward.** `vader_sentiment`" in card and "stanfordnlp/imdb" not in card
