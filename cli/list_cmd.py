"""``hfrl list``: what hfrl knows by name.

hfrl list tasks
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hfrl.cli._options import AlgOpt

if TYPE_CHECKING:
    from hfrl.rewards.catalogue import Item

HELP = """List the registered tasks, algorithms (and the online ones' policy losses and advantage
estimators), rewards or metrics, the presets (hfrl train --preset NAME), or an algorithm's config fields.

\b
Examples:
  hfrl list tasks
  hfrl list tasks --json         # the same as JSON: name, description, dataset, model, rewards, metrics, configs
  hfrl list rewards
  hfrl list presets              # named sets of settings: VAPO, SAO, VC-PPO, RL4LMs' layout
  hfrl list fields --alg nlpo    # every --FIELD of hfrl train --alg nlpo, with default and help
"""


class What(StrEnum):
    tasks = "tasks"
    algs = "algs"
    rewards = "rewards"
    metrics = "metrics"
    presets = "presets"
    fields = "fields"


def _rows(what: What) -> list[tuple[str, str]]:
    from hfrl.utils.registry import describe, import_path

    if what is What.tasks:
        return _task_rows()
    if what is What.presets:
        from hfrl.trainers.presets import preset_names, read_preset

        presets = [read_preset(name) for name in preset_names()]
        return [(p.name, f"{p.description}. Sets " + ", ".join(f"{k} {v}" for k, v in p.settings.items()))
                for p in presets]  # fmt: skip
    if what is What.algs:
        from hfrl.core.estimators import ESTIMATORS
        from hfrl.core.policy_losses import POLICY_LOSSES
        from hfrl.trainers import ALGORITHMS, SUMMARIES
        from hfrl.utils.registry import describe_path

        algs = [(name, SUMMARIES.get(name) or describe(import_path(path))) for name, path in ALGORITHMS.items()]
        # ppo / nlpo / a2c / trpo take any of them (docs/algorithms.md §13, §15)
        losses = [(f"--policy_loss {name}", describe_path(path)) for name, path in POLICY_LOSSES.items()]
        estimators = [(f"--advantage_estimator {name}", describe_path(path)) for name, path in ESTIMATORS.items()]
        return algs + losses + estimators
    from hfrl.rewards import catalogue

    items = catalogue.rewards() if what is What.rewards else catalogue.metrics()
    return [(item.name, _item_text(item)) for item in items]


def _item_text(item: Item) -> str:
    """A reward's or metric's description, then what it reads, its range and what it needs."""
    details = [f"reads {', '.join(item.inputs)}" if item.inputs else "", f"range {item.range}" if item.range else "",
               f"needs {', '.join(item.needs)}" if item.needs else ""]  # fmt: skip
    shown = "; ".join(d for d in details if d)
    return f"{item.description}" + (f" [{shown}]" if shown else "")


def _task_rows() -> list[tuple[str, str]]:
    """Each task: description, Hub dataset (and revision), default model, rewards, metrics, configs."""
    return [(entry["name"], _task_text(entry)) for entry in task_entries()]


def _task_text(entry: dict[str, Any]) -> str:
    if "note" in entry:
        return entry["note"]
    return (
        f"{entry['description']} dataset: {entry['dataset']}; model: {entry['model']}; "
        f"reward: {', '.join(entry['rewards'])}; metrics: {', '.join(entry['metrics'])}; "
        f"configs: {', '.join(entry['configs'])}"
    )


def task_entries() -> list[dict[str, Any]]:
    """Each registered task as a mapping (``hfrl list tasks --json``), then your own data."""
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml, spec_id
    from hfrl.utils.registry import import_path

    entries: list[dict[str, Any]] = []
    for name, path in TASKS.items():
        spec = read_task_yaml(import_path(path.partition(":")[0]).__file__)
        dataset = spec.get("dataset") or {}
        source = dataset.get("source") or (
            f"{dataset['path']}@{str(dataset.get('revision', 'main'))[:10]}" if dataset else "built in"
        )  # `source`: data that is not on the Hub (a local folder in its publisher's layout)
        entries.append(
            {
                "name": name,
                "description": spec.get("description", ""),
                "dataset": source,
                "model": spec.get("default_model"),
                "rewards": [_reward_text(r) for r in spec.get("rewards", [])],
                "metrics": [spec_id(m) for m in spec.get("metrics", [])],
                "configs": [k for k in spec.get("configs", {}) if k != "defaults"],
            }
        )
    entries.append(
        {
            "name": "FILE|DIR|HUB_ID",
            "note": "Your own data (.jsonl/.json/.csv/.tsv/.parquet file, folder of them, Hub dataset id): "
            "--prompt-column, --references-column; reward rouge (rougeL) unless --rewards",
        }
    )
    return entries


def _reward_text(spec: str | dict[str, Any]) -> str:
    """``weighted(0.75 intent_accuracy + 0.25 meteor)`` for a weighted sum, else the id."""
    from hfrl.tasks.base import spec_id

    if isinstance(spec, dict) and spec.get("id") == "weighted":
        parts = [f"{r.get('weight', 1) if isinstance(r, dict) else 1} {spec_id(r)}" for r in spec["args"]["rewards"]]
        return f"weighted({' + '.join(parts)})"
    return spec_id(spec)


JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON document instead of the table.")]


def terminal_width() -> int:
    """The width to wrap to: the terminal's, kept within 60-100 columns (100 when it is not a terminal)."""
    import shutil

    return max(60, min(shutil.get_terminal_size(fallback=(100, 24)).columns, 100))


def format_rows(rows: list[tuple[str, str]], width: int) -> str:
    """Name, then the text wrapped beside it; a name too long for the column gets a line of its own.

    >>> print(format_rows([("ppo", "online: clipped-ratio policy updates with a value head."), ("x", "y")], 40))
    ppo  online: clipped-ratio policy
         updates with a value head.
    x    y
    """
    import textwrap

    column = min(max(len(name) for name, _ in rows), 24)
    indent = " " * (column + 2)
    lines = []
    for name, text in rows:
        if len(name) > column:
            lines.append(name)
            first = indent
        else:
            first = name.ljust(column) + "  "
        lines.append(textwrap.fill(text, width, initial_indent=first, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False))  # fmt: skip
    return "\n".join(lines)


def _what(name: str) -> What:
    """The list named ``name``; another name is one line with the closest (a plain text argument, not the
    enum: click's usage error for an enum has no "did you mean").

    >>> _what("algo")
    Traceback (most recent call last):
    hfrl.utils.registry.UnknownNameError: unknown list 'algo'; did you mean 'algs'? (known: algs, fields, ...)
    """
    from hfrl.utils.registry import unknown

    if name in What.__members__:
        return What(name)
    raise unknown("list", name, [w.value for w in What])


def list_(
    what: Annotated[str, typer.Argument(help="tasks, algs, rewards, metrics, presets, or fields (with --alg)")],
    alg: AlgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from hfrl.trainers.schema import option_rows

    chosen = _what(what)
    if as_json:
        import json

        if chosen is What.tasks:
            data: Any = task_entries()
        else:
            rows = option_rows(alg or "ppo") if chosen is What.fields else _rows(chosen)
            data = [{"name": name, "description": text} for name, text in rows]
        typer.echo(json.dumps(data, indent=1))
        return
    rows = option_rows(alg or "ppo") if chosen is What.fields else _rows(chosen)
    typer.echo(format_rows(rows, terminal_width()))
