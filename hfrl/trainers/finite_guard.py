"""A NaN or infinite loss or gradient stops the run before the optimizer step writes it into the weights.
:class:`NonFiniteError` is the error (a ``FloatingPointError``: ``hfrl train`` exits with code 1 and its
one-line message); :func:`non_finite_error` builds it, naming the iteration (the trainers' loss terms,
:class:`~hfrl.trainers.trainer_mixin.TrainerMixin`'s check of the Trainer's gradient norm).
"""

from __future__ import annotations

import math
from typing import Any


class NonFiniteError(FloatingPointError):
    """A loss or gradient that is NaN or infinite: the run stops before the optimizer step."""


def step_text(args: Any, global_step: int) -> str:
    """``iteration N`` (a trainer with ``steps_per_iteration``) or ``step N``, counted from 1.

    >>> from types import SimpleNamespace
    >>> step_text(SimpleNamespace(steps_per_iteration=4), 9), step_text(SimpleNamespace(), 9)
    ('iteration 3', 'step 10')
    """
    per = getattr(args, "steps_per_iteration", None)
    return f"iteration {global_step // per + 1}" if per else f"step {global_step + 1}"


def non_finite_error(args: Any, global_step: int, what: str) -> NonFiniteError:
    """The error for a NaN / inf ``what`` (loss terms, gradient norm) at the current step."""
    return NonFiniteError(
        f"{step_text(args, global_step)}: {what}, before the optimizer step (nothing of it was applied or saved): "
        f"lower learning_rate (now {args.learning_rate:g}) or check the rewards' scale"
    )


def is_finite(norm: Any) -> bool:
    """Whether a gradient norm (a tensor, a number, or None: no clipping) is finite."""
    return norm is None or math.isfinite(float(norm))


__all__ = ["NonFiniteError", "is_finite", "non_finite_error", "step_text"]
