"""Synthetic task ``numbers``: generate a strictly increasing sequence of numbers (RL4LMs).

hfrl train --task numbers --alg ppo --model tiny
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.base import Task, task_from_yaml
from hfrl.tasks.synthetic import empty_prompts


def build(train_size: int = 512, eval_size: int = 64, **overrides: Any) -> Task:
    """Empty prompts; reward ``increasing_numbers`` (min_tokens 20); 20 new tokens."""
    return task_from_yaml(__file__, empty_prompts(train_size, eval_size), **overrides)
