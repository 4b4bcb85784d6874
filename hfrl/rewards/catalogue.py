"""What hfrl offers as rewards and metrics, from the registries alone (one source: each entry's
``Entry`` for inputs, range and needs; its class's docstring and signature for description and
arguments). Feeds ``hfrl list rewards|metrics`` and the docs' catalogue page.

    python -m hfrl.rewards.catalogue > docs/reference/rewards-and-metrics.md
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any

from hfrl.utils.registry import Entry, describe, import_path

NEEDS = {  # what an entry's `needs` mean, for people
    "wordnet": "WordNet (METEOR): apt-get install wordnet-base wordnet-sense-index, or nltk's downloader",
    "model": "a model from the Hub (downloaded once; offline: a local copy through its model argument)",
    "java": "Java",
    "corenlp": "the Stanford CoreNLP jars (SPICE)",
    "code": "an evaluate module's script (runs code: named in a file, it needs --trust-code)",
}


@dataclass(frozen=True)
class Item:
    """One reward or metric as a person reads it."""

    name: str
    kind: str  # "reward", "metric", or "metric and reward"
    description: str
    arguments: list[str]
    inputs: list[str]
    range: str
    needs: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _arguments(obj: Any) -> list[str]:
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    shown = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("prompts", "completions", "kwargs", "columns"):
            continue
        shown.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return shown


def _item(name: str, entry: Entry, kind: str, extra_arguments: tuple[str, ...] = ()) -> Item:
    obj = import_path(entry.path)
    arguments = _arguments(obj) if inspect.isclass(obj) else []
    inputs = [*entry.inputs, *(f"{column} (when present)" for column in entry.optional_inputs)]
    return Item(name, kind, describe(obj), [*arguments, *extra_arguments], inputs, entry.range,
                list(entry.needs))  # fmt: skip


def rewards() -> list[Item]:
    """Every reward id: hfrl's own rewards, then every metric with a per-sample score."""
    from hfrl.metrics import METRICS
    from hfrl.rewards import REWARDS

    own = [_item(name, entry, "reward") for name, entry in REWARDS.items()]
    from_metrics = [
        _item(name, entry, "metric and reward", ("reward_key=None", "missing=None"))
        for name, entry in METRICS.items()
        if entry.reward is not None
    ]
    return sorted(own + from_metrics, key=lambda item: item.name)


def metrics() -> list[Item]:
    """Every metric id (every reward id is a metric too: its per-sample values and their mean)."""
    from hfrl.metrics import METRICS

    return sorted(
        (_item(name, e, "metric and reward" if e.reward is not None else "metric") for name, e in METRICS.items()),
        key=lambda item: item.name,
    )


def markdown() -> str:
    """The catalogue page: one table of rewards, one of metrics, and what each need means."""
    lines = [
        "# Rewards and metrics",
        "",
        "Generated from hfrl's registries (`python -m hfrl.rewards.catalogue`): every reward is a plain TRL reward",
        "function, named in a task or on the command line by its id with arguments (`{id: rouge, args:",
        "{rouge_type: rougeL}}`). Every metric with a per-sample score is a reward of the same id, and every reward",
        "is a metric (its per-sample values and their mean).",
        "",
    ]
    for title, items in (("Rewards", rewards()), ("Metrics", metrics())):
        lines += [
            f"## {title}",
            "",
            "| id | what | arguments | reads | range | needs |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for item in items:
            cells = [f"`{item.name}`", item.description, ", ".join(f"`{a}`" for a in item.arguments),
                     ", ".join(item.inputs), item.range, ", ".join(item.needs)]  # fmt: skip
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    lines += ["## What `needs` means", ""] + [f"- `{key}`: {text}" for key, text in NEEDS.items()] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")


__all__ = ["NEEDS", "Item", "markdown", "metrics", "rewards"]
