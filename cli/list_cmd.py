"""``hfrl list``: what hfrl knows by name.

hfrl list tasks
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from hfrl.cli._options import AlgOpt

HELP = """List the registered tasks, algorithms (and the online ones' advantage estimators), rewards or
metrics, or an algorithm's config fields.

\b
Examples:
  hfrl list tasks
  hfrl list rewards
  hfrl list fields --alg nlpo    # every --FIELD of hfrl train --alg nlpo, with default and help
"""


class What(StrEnum):
    tasks = "tasks"
    algs = "algs"
    rewards = "rewards"
    metrics = "metrics"
    fields = "fields"


def _rows(what: What) -> list[tuple[str, str]]:
    from hfrl.utils.registry import describe, import_path

    if what is What.tasks:
        return _task_rows()
    if what is What.algs:
        from hfrl.core.estimators import ESTIMATORS
        from hfrl.trainers import ALGORITHMS, SUMMARIES
        from hfrl.utils.registry import describe_path

        algs = [(name, SUMMARIES.get(name) or describe(import_path(path))) for name, path in ALGORITHMS.items()]
        # ppo / nlpo / a2c / trpo take any of them (docs/algorithms.md §13)
        estimators = [(f"--advantage_estimator {name}", describe_path(path)) for name, path in ESTIMATORS.items()]
        return algs + estimators
    from hfrl.rewards import catalogue

    items = catalogue.rewards() if what is What.rewards else catalogue.metrics()
    return [(item.name, _item_text(item)) for item in items]


def _item_text(item) -> str:
    """A reward's or metric's description, then what it reads, its range and what it needs."""
    details = [f"reads {', '.join(item.inputs)}" if item.inputs else "", f"range {item.range}" if item.range else "",
               f"needs {', '.join(item.needs)}" if item.needs else ""]  # fmt: skip
    shown = "; ".join(d for d in details if d)
    return f"{item.description}" + (f" [{shown}]" if shown else "")


def _task_rows() -> list[tuple[str, str]]:
    """Each task: description, Hub dataset (and revision), default model, rewards, metrics, configs."""
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml, spec_id
    from hfrl.utils.registry import import_path

    rows = []
    for name, path in TASKS.items():
        spec = read_task_yaml(import_path(path.partition(":")[0]).__file__)
        dataset = spec.get("dataset") or {}
        source = dataset.get("source") or (
            f"{dataset['path']}@{str(dataset.get('revision', 'main'))[:10]}" if dataset else "built in"
        )  # `source`: data that is not on the Hub (a local folder in its publisher's layout)
        rewards = ", ".join(_reward_text(r) for r in spec.get("rewards", []))
        metrics = ", ".join(spec_id(m) for m in spec.get("metrics", []))
        algs = ", ".join(k for k in spec.get("configs", {}) if k != "defaults")
        rows.append(
            (
                name,
                f"{spec.get('description', '')} dataset: {source}; model: {spec.get('default_model')}; "
                f"reward: {rewards}; metrics: {metrics}; configs: {algs}",
            )
        )
    rows.append(
        (
            "FILE|DIR|HUB_ID",
            "Your own data (.jsonl/.json/.csv/.tsv/.parquet file, folder of them, Hub dataset id): "
            "--prompt-column, --references-column; reward rouge (rougeL) unless --rewards",
        )
    )
    return rows


def _reward_text(spec) -> str:
    """``weighted(0.75 intent_accuracy + 0.25 meteor)`` for a weighted sum, else the id."""
    from hfrl.tasks.base import spec_id

    if isinstance(spec, dict) and spec.get("id") == "weighted":
        parts = [f"{r.get('weight', 1) if isinstance(r, dict) else 1} {spec_id(r)}" for r in spec["args"]["rewards"]]
        return f"weighted({' + '.join(parts)})"
    return spec_id(spec)


def list_(
    what: Annotated[What, typer.Argument(help="tasks, algs, rewards, metrics, or fields (with --alg)")],
    alg: AlgOpt = None,
) -> None:
    from hfrl.trainers.schema import option_rows

    rows = option_rows(alg or "ppo") if what is What.fields else _rows(what)
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        typer.echo(f"{name.ljust(width)}  {text}")
