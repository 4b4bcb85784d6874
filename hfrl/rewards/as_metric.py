"""A reward used as a metric: its per-sample values, and their mean (NaN and None left out) as the
corpus score.

    from hfrl.rewards.as_metric import RewardMetric
    RewardMetric(contains_date)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hfrl.metrics.base import NAN, MetricResult, nanmean


class RewardMetric:
    """A reward function as a metric: its per-sample values, and their mean (NaN and None left out) as
    the corpus score. (By id or ``{id, args}``: :func:`hfrl.rewards.load_task_metric`.)

    >>> from hfrl.rewards.synthetic import contains_date
    >>> RewardMetric(contains_date)(prompts=["", ""], completions=["2020-01-01", "no"])
    {'contains_date': 0.5}
    """

    name = "reward"

    def __init__(self, reward: Callable[..., Any], key: str | None = None) -> None:
        if not callable(reward):
            raise ValueError(f"RewardMetric takes a reward function, got {reward!r}; by id: load_task_metric")
        self.reward = reward
        self.key = key

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> MetricResult:
        from hfrl.rewards.combine import reward_name

        key = self.key or reward_name(self.reward)
        values = list(self.reward(prompts=prompts, completions=completions, **columns))
        if len(values) != len(completions):
            raise ValueError(
                f"reward function {key!r} returned {len(values)} values for {len(completions)} completions"
            )
        if values and isinstance(values[0], (list, tuple)):  # token-level: the sum over tokens
            values = [sum(v) for v in values]
        per_sample = [NAN if v is None else float(v) for v in values]
        return MetricResult({key: nanmean(per_sample)}, {key: per_sample})
