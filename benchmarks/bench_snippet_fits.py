"""movie_snippets' reward classifier fitted two ways by ``hfrl train --alg reward`` (issue 38): on the
ratings (binary cross-entropy to each snippet's share of positive raters) and on pairs built from them
(Bradley-Terry). Each fit, on train half ``a``, is scored on the test split: held-out pair accuracy,
and sign agreement and Pearson's r of the classifier reward's score with each snippet's mean rating
(VADER's beside them). Needs the prepared data (``python -m hfrl.tasks.movie_snippets prepare``).

    OMP_NUM_THREADS=2 python benchmarks/bench_snippet_fits.py --threads 2   # ~15 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import pyarrow.parquet as pq

from hfrl.tasks import movie_snippets, snippets_reward

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", nargs="+", default=list(snippets_reward.FITS), choices=snippets_reward.FITS)
    parser.add_argument("--half", default="a", choices=snippets_reward.HALVES)
    parser.add_argument("--epochs", type=int, default=snippets_reward.SETTINGS["epochs"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="/tmp/hfrl-snippet-fits")
    parser.add_argument("--results", default=str(HERE / "results-snippet-fits.json"))
    args = parser.parse_args()
    test = pq.read_table(Path(movie_snippets.data_folder()) / "test.parquet").to_pydict()
    rows = {}
    for fit in args.fits:
        settings = {"fit": fit, "epochs": args.epochs}
        report = snippets_reward.train_classifiers(
            Path(args.out) / fit, [], test, settings=settings, halves={"reward": args.half}, threads=args.threads
        )
        rows[fit] = {**report["classifiers"]["reward"], "settings": report["settings"]}
        rows["vader"] = {"test": report["vader_test"]}
        print(fit, json.dumps(rows[fit]), flush=True)
    results = {"threads": args.threads, "machine": platform.processor() or platform.machine(), "fits": rows}
    Path(args.results).write_text(json.dumps(results, indent=1) + "\n")
    print(f"-> {args.results}")


if __name__ == "__main__":
    main()
