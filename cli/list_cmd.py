"""``hfrl list``: what hfrl knows by name.

hfrl list tasks
"""

from __future__ import annotations

from enum import Enum
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


class What(str, Enum):
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
    if what is What.rewards:
        from hfrl.rewards import REWARDS as registry
    else:
        from hfrl.metrics import METRICS as registry
    return [(name, describe(import_path(path))) for name, path in registry.items()]


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


def _field_rows(alg: str) -> list[tuple[str, str]]:
    """The algorithm's own config fields (default and help), TRL's ModelConfig flags, and where the
    inherited ``TrainingArguments`` fields are documented."""
    import dataclasses

    from transformers import TrainingArguments

    from hfrl.core.model_args import MODEL_KEYS
    from hfrl.trainers import algorithm_trainer

    config_class = algorithm_trainer(alg).config_class
    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    rows = []
    for f in dataclasses.fields(config_class):
        if not f.init or (f.name in inherited and f.default == _default(TrainingArguments, f.name)):
            continue  # TrainingArguments' own, unchanged: listed once below
        help_text = " ".join(str(f.metadata.get("help", "")).split())
        rows.append((f"--{f.name}", f"{help_text} (default: {_default(config_class, f.name)!r})"))
    rows.append(("--use_peft ...", f"trl.ModelConfig's flags for LoRA and 4/8-bit loading: {', '.join(MODEL_KEYS)}"))
    rows.append(
        (
            "...",
            "and every transformers.TrainingArguments field (report_to, logging_dir, seed, bf16, save_total_limit, "
            "...): https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments",
        )
    )
    return rows


def _default(config_class: type, name: str) -> object:
    import dataclasses

    field = next(f for f in dataclasses.fields(config_class) if f.name == name)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def list_(
    what: Annotated[What, typer.Argument(help="tasks, algs, rewards, metrics, or fields (with --alg)")],
    alg: AlgOpt = None,
) -> None:
    rows = _field_rows(alg or "ppo") if what is What.fields else _rows(what)
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        typer.echo(f"{name.ljust(width)}  {text}")
