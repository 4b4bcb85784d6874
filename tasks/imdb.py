"""GRUE task ``imdb``: continue the first half of an IMDB review so that it reads as positive (RL4LMs).

Data: ``stanfordnlp/imdb`` at a pinned commit (the maintained Parquet repository; the old ``imdb``
loading script no longer runs), ``plain_text/*{train,test}*.parquet``. As in RL4LMs the train file is
split 80/20 into train and validation (seeded here, unseeded there) and each split keeps at most
``max_samples`` reviews (RL4LMs: 2000). Columns: ``prompt`` (the first half of the review's
whitespace-separated words), ``references`` (the whole review, for ``causal_perplexity``),
``completion`` (the second half: the supervised and offline target) and ``label`` (0 negative, 1 positive).
Reward: P(positive) from ``lvwerra/distilbert-imdb`` on prompt + completion; ``classifier`` swaps in
another sequence classifier (a Hub id or a local folder, e.g. a small one for offline tests).

Offline (no Hub), the same task code runs on what the package ships: ``data=openings`` reads
``fixtures/imdb_openings`` (400 short reviews written for hfrl in the Hub files' schema, 400 distinct
openings: 256 train, 64 validation, 80 test prompts; ``tasks/fixtures/make_imdb_openings.py``) and
``reward=vader`` scores the completion with VADER's compound sentiment in [-1, 1] (the
``vader_sentiment`` reward and metric) instead of the classifier, with the settings tuned for the
built-in SmolLM2-135M-Instruct (``reward_configs: vader`` in imdb.yaml; ``benchmarks/real_model.py``).

    hfrl train --task imdb --alg ppo
    hfrl train --task imdb --alg nlpo --task-arg classifier=path/to/classifier
    hfrl train --task imdb --alg ppo --model smollm2 --task-arg data=openings --task-arg reward=vader
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfrl.tasks.base import Task, apply_reward_config, read_task_yaml, spec_id, with_model
from hfrl.tasks.data import FIXTURES, build_parquet_task

if TYPE_CHECKING:
    from datasets import DatasetDict

CLASSIFIER_IDS = ("learned_classifier",)
VADER_METRIC = {"id": "vader_sentiment", "args": {"key": "sentiment"}}
DATA = {"hub": None, "openings": FIXTURES / "imdb_openings"}  # data= -> the local folder (None: Hub / HFRL_DATA_DIR)
REWARDS = ("classifier", "vader")


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Reviews -> prompt (first half of the words), references (the review), completion (second half).

    >>> preprocess({"text": ["a b c d e"], "label": [1]})
    {'prompt': ['a b'], 'references': [['a b c d e']], 'completion': [' c d e'], 'label': [1]}
    """
    prompts, completions = [], []
    for text in batch["text"]:
        words = text.split(" ")
        half = int(len(words) * 0.5)  # RL4LMs: 50% of the words are the prompt
        prompts.append(" ".join(words[:half]))
        completions.append(" " + " ".join(words[half:]))
    return {
        "prompt": prompts,
        "references": [[text] for text in batch["text"]],
        "completion": completions,
        "label": list(batch["label"]),
    }


def split_validation(raw: DatasetDict, seed: int = 0) -> DatasetDict:
    """Train -> 80% train and 20% validation (RL4LMs), test unchanged."""
    from datasets import DatasetDict

    parts = raw["train"].train_test_split(test_size=0.2, seed=seed)
    return DatasetDict(train=parts["train"], validation=parts["test"], test=raw["test"])


def task_spec(
    classifier: str | None = None, data: str = "hub", reward: str = "classifier", **_: object
) -> dict[str, Any]:
    """imdb.yaml with the task arguments applied (what ``build`` loads and what a model card shows):
    ``classifier`` swaps the sentiment classifier, ``reward=vader`` VADER's sentiment for it (reward,
    metric and SmolLM2's settings), ``data=openings`` the shipped openings for the Hub data."""
    if data not in DATA:
        raise ValueError(f"imdb: data must be one of {', '.join(DATA)}, got {data!r}")
    if reward not in REWARDS:
        raise ValueError(f"imdb: reward must be one of {', '.join(REWARDS)}, got {reward!r}")
    if reward == "vader" and classifier is not None:
        raise ValueError("imdb: reward=vader uses no classifier; drop the classifier argument")
    spec: dict[str, Any] = read_task_yaml(__file__)
    if reward == "vader":
        spec = apply_reward_config(spec, "vader")
        spec["metrics"] = [VADER_METRIC if spec_id(m) in CLASSIFIER_IDS else m for m in spec["metrics"]]
    if data != "hub":  # not the Hub dataset: no Hub id for cards
        spec["dataset"] = {**spec["dataset"], "path": None, "revision": None}
    spec["rewards"] = with_model(spec["rewards"], CLASSIFIER_IDS, classifier)
    spec["metrics"] = with_model(spec["metrics"], CLASSIFIER_IDS, classifier)
    return spec


def build(
    data_dir: str | None = None,
    revision: str | None = None,
    max_samples: int | None = 2000,
    classifier: str | None = None,
    data: str = "hub",
    reward: str = "classifier",
    **overrides: Any,
) -> Task:
    """The IMDB task; ``classifier`` replaces the sentiment classifier of the reward and metric,
    ``data=openings`` reads the shipped review openings, ``reward=vader`` scores with VADER."""
    spec = task_spec(classifier, data, reward)
    if data != "hub" and data_dir is not None:
        raise ValueError(f"imdb: give data={data} or data_dir, not both")
    return build_parquet_task(
        __file__,
        preprocess,
        spec=spec,
        data_dir=DATA[data] or data_dir,
        revision=revision,
        max_samples=max_samples,
        split_raw=split_validation,
        **overrides,
    )
