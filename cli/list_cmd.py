"""``hfrl list``: what hfrl knows by name.

hfrl list tasks
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

HELP = """List the registered tasks, algorithms, rewards or metrics.

\b
Examples:
  hfrl list tasks
  hfrl list rewards
"""


class What(str, Enum):
    tasks = "tasks"
    algs = "algs"
    rewards = "rewards"
    metrics = "metrics"


def _rows(what: What) -> list[tuple[str, str]]:
    from hfrl.registry import describe, import_path

    if what is What.tasks:
        return _task_rows()
    if what is What.algs:
        from hfrl.trainers import ALGORITHMS as registry
    elif what is What.rewards:
        from hfrl.rewards import REWARDS as registry
    else:
        from hfrl.metrics import METRICS as registry
    return [(name, describe(import_path(path))) for name, path in registry.items()]


def _task_rows() -> list[tuple[str, str]]:
    """Each task: description, Hub dataset (and revision), default model, rewards, metrics, configs."""
    from hfrl.registry import import_path
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml, spec_id

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


def list_(what: Annotated[What, typer.Argument(help="tasks, algs, rewards or metrics")]) -> None:
    rows = _rows(what)
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        typer.echo(f"{name.ljust(width)}  {text}")
