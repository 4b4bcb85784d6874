"""Every metric with a per-sample score is a reward, through one adapter: ROUGE, BLEU, chrF, TER, METEOR,
BERTScore, BLEURT, CIDEr, SPICE, PARENT, the CommonGen repeat penalty, learned classifiers, VADER
sentiment, intent accuracy and ``evaluate`` modules (the list: :data:`hfrl.metrics.METRICS`, whose
entries say which per-sample score a reward takes).

A reward named by a metric's id takes the metric's own arguments, plus ``reward_key`` (which
per-sample score, when the metric has several) and ``missing`` (the reward where a score is
undefined, a sample without references: None by default, which TRL and hfrl read as "no reward for
this sample"). It is picklable (settings only; models live in a per-process cache) and has TRL's
signature ``reward(prompts, completions, **columns) -> list[float]``; dataset columns such as
``references`` or ``table`` arrive as keyword arguments.

    from hfrl.rewards import load_reward
    load_reward({"id": "rouge", "args": {"rouge_type": "rougeL"}})
    MetricReward.from_id("rouge", rouge_type="rougeL")  # the same
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from hfrl.metrics.base import text_of

# TER: lower is better, a reward is higher-is-better
TRANSFORMS: dict[str, Callable[[float], float]] = {"1 - x": lambda value: 1.0 - value}


class MetricReward:
    """The per-sample score of a metric (a registered id, or a ``module:attr`` path) as a reward.

    >>> MetricReward.from_id("rouge", rouge_type="rouge1")(prompts=[""], completions=["the cat sat"],
    ...                                                    references=[["the cat"]])  # P = 2/3, R = 1
    [0.8]
    >>> MetricReward.from_id("ter")(prompts=[""], completions=["the cat sat"],
    ...                             references=[["the cat sat on the mat"]])  # 1 - 3 edits / 6 words
    [0.5]
    >>> MetricReward.from_id("bleu")(prompts=[""], completions=["the cat sat on the mat"],
    ...                              references=[["the cat sat on the mat"]])
    [1.0]
    """

    def __init__(self, metric: str, reward_key: str | None = None, missing: float | None = None, **args: Any):
        from hfrl.metrics import METRICS, load_metric

        entry = METRICS.get(metric)
        if entry is not None and entry.reward is None:
            rewards = sorted(k for k, e in METRICS.items() if e.reward is not None)
            raise ValueError(
                f"metric {metric!r} has no per-sample score, so it is no reward; the metrics that are: "
                f"{', '.join(rewards)}"
            )
        args, reward_key = _legacy(metric, args, reward_key)
        self.__name__ = metric.rpartition(":")[2] if ":" in metric else metric  # the reward's name in the logs
        self.metric_id = metric  # its registry entry says what it reads (hfrl.rewards.reward_inputs)
        self.metric = load_metric({"id": metric, "args": args})
        self.default_key = entry.reward if entry is not None else ""
        self.reward_key, self.missing = reward_key, missing
        self.transform = TRANSFORMS[entry.reward_transform] if entry is not None and entry.reward_transform else None

    @classmethod
    def from_id(cls, metric: str, reward_key: str | None = None, **args: Any) -> MetricReward:
        """The reward of metric ``metric`` built with its ``args`` (see the class)."""
        return cls(metric, reward_key, **args)

    def key(self, outputs: list[str]) -> str:
        """Which per-sample score is the reward: ``reward_key``; else the metric's only one; else the one
        its registry entry names."""
        if self.reward_key is not None:
            if self.reward_key not in outputs:
                raise ValueError(f"reward {self.__name__}: reward_key {self.reward_key!r} is not one of {outputs}")
            return self.reward_key
        if len(outputs) == 1:
            return outputs[0]
        if self.default_key in outputs:
            return self.default_key
        raise ValueError(
            f"reward {self.__name__}: the metric gives several per-sample scores {outputs}; set reward_key to one"
        )

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        completions = [text_of(c) for c in completions]
        if hasattr(self.metric, "scores"):  # skips corpus statistics that a reward does not need
            per_sample = self.metric.scores(prompts, completions, **columns)
        else:
            per_sample = self.metric(prompts, completions, **columns).per_sample
        if not per_sample:
            raise ValueError(f"metric {self.__name__!r} gave no per-sample scores: use it as a metric, not a reward")
        values = per_sample[self.key(sorted(per_sample))]
        transform = self.transform or (lambda value: value)
        return [self.missing if v is None or math.isnan(v) else transform(float(v)) for v in values]


def _legacy(metric: str, args: dict[str, Any], reward_key: str | None) -> tuple[dict[str, Any], str | None]:
    """The arguments the per-metric reward classes took before this adapter: ``key`` (an ``evaluate``
    module's output) and BERTScore's ``score`` (f1, precision or recall) name the reward's score."""
    args = dict(args)
    if "score" in args and metric == "bertscore":
        score = args.pop("score")
        if score not in ("f1", "precision", "recall"):
            raise ValueError(f"bertscore: score must be f1, precision or recall, got {score!r}")
        reward_key = reward_key or f"bertscore_{score}"
    if "key" in args and metric == "evaluate":
        reward_key = reward_key or args.pop("key")
    return args, reward_key


def metric_reward_arguments(metric: str) -> list[str]:
    """The arguments a metric's reward takes: the metric's own, ``reward_key`` and ``missing``."""
    from hfrl.metrics import METRICS
    from hfrl.utils.registry import import_path, path_of

    params = inspect.signature(import_path(path_of(METRICS[metric]))).parameters
    own = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return [*own, "reward_key", "missing"]


__all__ = ["MetricReward", "metric_reward_arguments"]
