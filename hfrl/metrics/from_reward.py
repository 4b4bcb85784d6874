"""A reward used as a metric: its per-sample values, and their mean (NaN and None left out) as the
corpus score.

    from hfrl.metrics.from_reward import RewardMetric
    RewardMetric(reward="contains_date")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hfrl.metrics.base import NAN, MetricResult, nanmean


class RewardMetric:
    """Any reward (id, ``{id, args}``, ``module:attr`` or callable) as a metric: per-sample values and mean.

    >>> RewardMetric(reward="contains_date")(prompts=["", ""], completions=["2020-01-01", "no"])
    {'contains_date': 0.5}
    """

    name = "reward"

    def __init__(self, reward: str | dict[str, Any] | Callable, key: str | None = None) -> None:
        self.reward = reward
        self.key = key

    def __call__(self, prompts: list, completions: list, **columns) -> MetricResult:
        from hfrl.rewards import load_reward
        from hfrl.rewards.combine import reward_name

        func = load_reward(self.reward)
        key = self.key or reward_name(func)
        values = list(func(prompts=prompts, completions=completions, **columns))
        if len(values) != len(completions):
            raise ValueError(
                f"reward function {key!r} returned {len(values)} values for {len(completions)} completions"
            )
        if values and isinstance(values[0], (list, tuple)):  # token-level: the sum over tokens
            values = [sum(v) for v in values]
        per_sample = [NAN if v is None else float(v) for v in values]
        return MetricResult({key: nanmean(per_sample)}, {key: per_sample})
