"""Which hfrl runs a model came from: the two-stage recipe of the A-LoL work (an ``nll`` run gives
the reference policy, an A-LoL run starts from it) leaves a chain of run directories, each naming
its starting model in ``config.yaml``. The card of a later stage names the earlier ones.

    from hfrl.cards.lineage import lineage_text
    lineage_text("runs/reddit_pos-nll")
    # ' (the reference policy: hfrl run `runs/reddit_pos-nll`, NLL (behaviour cloning) on the task
    #   `reddit_pos`, from microsoft/DialoGPT-medium)'
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from hfrl.cards.algorithm import algorithm_name
from hfrl.runs.run_config import CONFIG_NAME, load_yaml

# Another run's config.yaml is data (docs/concepts/trust.md): the card pastes its names into Markdown, so
# it takes only plain names (a task, an algorithm, a Hub id, a path), never text that renders (a heading,
# a link, a <script> tag, a backtick that ends the code span, a line break).
PLAIN_NAME = re.compile(r"[\w./~\\][\w .+~@:/\\-]*")


def plain_name(value: Any) -> str | None:
    """``value`` as text when it is a plain name that a card may show, else None.

    >>> [plain_name(v) for v in ("runs/hh-reward", "HuggingFaceTB/SmolLM2-135M", "# Heading", "<script>")]
    ['runs/hh-reward', 'HuggingFaceTB/SmolLM2-135M', None, None]
    """
    text = str(value) if value is not None else ""
    return text if PLAIN_NAME.fullmatch(text) else None


def parent_run(model: str | None) -> dict[str, Any] | None:
    """``{"path", "task", "alg", "model"}`` when ``model`` is an hfrl run directory (``config.yaml``
    with ``alg`` and ``model``), else None. Its values are :func:`plain_name` s: a task that is not one
    is left out, an algorithm or model that is not one makes the folder no run the card names."""
    path = os.path.join(str(model), CONFIG_NAME) if model else ""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path) as fh:
            config = load_yaml(fh.read()) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict):
        return None
    alg, parent = plain_name(config.get("alg")), plain_name(config.get("model"))
    if alg is None or parent is None:
        return None
    return {"path": str(model), "task": plain_name(config.get("task")), "alg": alg, "model": parent}


def lineage(model: str | None, limit: int = 8) -> list[dict[str, Any]]:
    """The chain of hfrl runs behind ``model``, nearest first (at most ``limit``: a guard against cycles)."""
    chain: list[dict[str, Any]] = []
    run = parent_run(model)
    while run is not None and len(chain) < limit:
        chain.append(run)
        run = parent_run(run["model"])
    return chain


def lineage_text(model: str | None) -> str:
    """`` (the reference policy: hfrl run ..., ALG on the task ..., from ...)`` for a model trained by
    earlier hfrl runs, else ``""``."""
    chain = lineage(model)
    if not chain:
        return ""
    stages = [
        f"hfrl run `{run['path']}`, {algorithm_name(run['alg'])}"
        + (f" on the task `{run['task']}`" if run["task"] else "")
        for run in chain
    ]
    return f" (the reference policy: {'; which started from '.join(stages)}, from {chain[-1]['model']})"


def reward_model_text(rewards: Any) -> str:
    """``, rewarded by the reward model hfrl run `runs/hh-reward` (Reward on the task `hh`, from tiny)``
    for each ``reward_model`` reward among a run's ``rewards`` (a run folder: its own lineage; a Hub
    id: a link), else ``""``."""
    specs = rewards if isinstance(rewards, list) else [rewards] if rewards else []
    found = []
    for spec in specs:
        if not isinstance(spec, dict) or spec.get("id") != "reward_model":
            continue
        model = plain_name((spec.get("args") or {}).get("model")) or ""  # a card shows plain names only
        run = parent_run(model)
        if run is not None:
            on = f" on the task `{run['task']}`" if run["task"] else ""
            found.append(f"hfrl run `{model}` ({algorithm_name(run['alg'])}{on}, from {run['model']}"
                         f"{lineage_text(run['model'])})")  # fmt: skip
        elif model.count("/") == 1 and not os.path.exists(model):
            found.append(f"[{model}](https://huggingface.co/{model})")
        elif model:
            found.append(f"`{model}`")
    return f", rewarded by the reward model {' and '.join(found)}" if found else ""


def root_model(model: str | None) -> str | None:
    """The model the first run of the chain started from (``model`` itself when it is not a run)."""
    chain = lineage(model)
    return chain[-1]["model"] if chain else model


__all__ = ["lineage", "lineage_text", "parent_run", "plain_name", "reward_model_text", "root_model"]
