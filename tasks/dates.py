"""Synthetic task ``dates``: generate text that contains an ISO date (RL4LMs).

hfrl train --task dates --alg ppo --model tiny
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.base import Task, task_from_yaml
from hfrl.tasks.synthetic import empty_prompts


def build(train_size: int = 512, eval_size: int = 64, **overrides: Any) -> Task:
    """Empty prompts; reward ``contains_date``; 30 new tokens."""
    return task_from_yaml(__file__, empty_prompts(train_size, eval_size), **overrides)
