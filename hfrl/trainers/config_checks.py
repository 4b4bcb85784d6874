"""Checks every config makes of its values, whatever the algorithm (called from each config's
``__post_init__``, and by ``hfrl train`` before torch is imported)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def non_finite(value: Any, where: str) -> str | None:
    """Where ``value`` holds a NaN or an infinite number (``where``, ``where[1]``, ``where.temperature``),
    at any depth, or None. NaN passes every comparison a bound makes (``nan < 0`` is False): a NaN
    ``kl_coef`` or ``max_abs_reward`` would silently turn a check or a bound off.

    >>> non_finite(float("nan"), "kl_coef"), non_finite([1.0, float("inf")], "reward_weights")
    ('kl_coef', 'reward_weights[1]')
    >>> non_finite({"temperature": float("nan")}, "generation_kwargs"), non_finite(0.5, "x")
    ('generation_kwargs.temperature', None)
    """
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    if isinstance(value, dict):
        items: Any = ((f"{where}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for place, item in items:
        found = non_finite(item, place)
        if found:
            return found
    return None


def check_finite(config: Any) -> None:
    """A one-line ``ValueError`` naming the first field of ``config`` (a dataclass) that holds a NaN or
    an infinite number."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name, None)
        place = non_finite(value, f.name)
        if place:
            raise ValueError(f"{place} must be a finite number, got {value!r}")


__all__ = ["check_finite", "non_finite"]
