"""Composition: a weighted sum of rewards is a reward.

YAML: ``{id: weighted, args: {rewards: [{id: meteor, weight: 0.25}, {id: intent_accuracy, weight: 0.75}]}}``.
"""

from __future__ import annotations

from typing import Any


class WeightedSum:
    """``sum_i w_i * reward_i``; each reward an id, ``{id, args, weight}`` or a callable.

    A component that returns None or NaN for a sample adds 0 there (as in hfrl's trainers); a
    component that returns the wrong number of values fails with an error naming it.

    >>> total = WeightedSum(rewards=[{"id": "contains_date", "weight": 0.5}, "increasing_numbers"])
    >>> total(prompts=[""], completions=["2021-01-01 1 2"])
    [0.7]
    """

    __name__ = "weighted"

    def __init__(self, rewards: list[Any]) -> None:
        from hfrl.rewards import load_reward

        if not rewards:
            raise ValueError("weighted needs at least one reward in 'rewards'")
        self.weights = [float(r.get("weight", 1.0)) if isinstance(r, dict) else 1.0 for r in rewards]
        self.rewards = [
            load_reward({k: v for k, v in r.items() if k != "weight"} if isinstance(r, dict) else r) for r in rewards
        ]

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> list[float]:
        import torch

        from hfrl.rewards.combine import compute_rewards

        # compute_rewards checks each component (naming it: length, type, NaN / inf) and turns None into 0.
        mask = torch.ones(len(completions), 1)
        scores, token_rewards, _ = compute_rewards(self.rewards, self.weights, prompts, completions, mask, columns)
        if bool(token_rewards.any()):
            raise ValueError("weighted sums sequence-level rewards; one of its rewards returned per-token values")
        return [float(f"{t:.7g}") for t in scores.tolist()]  # float32 sums: keep float32's 7 significant digits
