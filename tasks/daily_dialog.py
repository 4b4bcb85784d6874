"""GRUE task ``daily_dialog``: the next utterance of an everyday dialogue, with the intent the human
speaker had (RL4LMs' DailyDialog).

Data: ``OpenRL/daily_dialog`` (a Parquet copy of ``daily_dialog``: ``dialog``, ``act`` 1-4 and
``emotion`` per utterance), pinned commit. Samples (RL4LMs): for every utterance with at least
``context_size`` (5) utterances before it, ``prompt`` = the last ``context_size`` utterances joined by
``<EOU>`` and followed by `` <EOU>``, ``references = [utterance + "<EOU>"]``; the utterance's
``intent`` (act, 1-4) and ``emotion`` are kept as columns.

Reward (GRUE): ``0.75 x intent match + 0.25 x METEOR``; ``reward_config="openrl"`` gives OpenRL's
(adaptive KL 0.2 -> 0.05, ``0.5 x intent + 0.5 x METEOR``). ``intent_model`` replaces the intent
classifier (a Hub id or local folder) in the reward and the metric.

    hfrl train --task daily_dialog --alg nlpo
    hfrl train --task daily_dialog --alg ppo --task-arg reward_config=openrl
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hfrl.tasks.base import Task, apply_reward_config, read_task_yaml, with_model
from hfrl.tasks.data import build_parquet_task

EOU = "<EOU>"
CLASSIFIER_IDS = ("intent_accuracy",)


def dialog_samples(batch: dict[str, list[Any]], context_size: int = 5) -> dict[str, list[Any]]:
    """Dialogues -> one sample per utterance that has ``context_size`` utterances before it.

    >>> out = dialog_samples({"dialog": [["a", "b", "c"]], "act": [[2, 1, 3]], "emotion": [[0, 0, 4]]}, 2)
    >>> out["prompt"], out["references"], out["intent"]
    (['a<EOU>b <EOU>'], [['c<EOU>']], [3])
    """
    out: dict[str, list[Any]] = {"prompt": [], "references": [], "intent": [], "emotion": []}
    for dialog, acts, emotions in zip(batch["dialog"], batch["act"], batch["emotion"], strict=True):
        for i, (utterance, act, emotion) in enumerate(zip(dialog, acts, emotions, strict=True)):
            if i < context_size:
                continue
            out["prompt"].append(EOU.join(dialog[i - context_size : i]) + " " + EOU)
            out["references"].append([utterance + EOU])
            out["intent"].append(int(act))
            out["emotion"].append(int(emotion))
    return out


def build(
    data_dir: str | None = None,
    revision: str | None = None,
    max_samples: int | None = None,
    context_size: int = 5,
    reward_config: str | None = None,
    intent_model: str | None = None,
    **overrides: Any,
) -> Task:
    """The DailyDialog task; ``reward_config``: ``rl4lms`` (default) or ``openrl``."""
    if context_size < 1:
        raise ValueError(f"daily_dialog: context_size must be >= 1, got {context_size}")
    spec = apply_reward_config(read_task_yaml(__file__), reward_config)
    spec["rewards"] = with_model(spec["rewards"], CLASSIFIER_IDS, intent_model)
    spec["metrics"] = with_model(spec["metrics"], CLASSIFIER_IDS, intent_model)
    return build_parquet_task(
        __file__,
        partial(dialog_samples, context_size=context_size),
        spec=spec,
        data_dir=data_dir,
        revision=revision,
        max_samples=max_samples,
        **overrides,
    )
