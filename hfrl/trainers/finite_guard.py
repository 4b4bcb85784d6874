"""A NaN or infinite loss or gradient stops the run before the optimizer step writes it into the weights.

:class:`NonFiniteError` is the error (a ``FloatingPointError``: ``hfrl train`` exits with code 1 and its
one-line message); :class:`FiniteGuardMixin` checks the Trainer's gradient norm and builds the error for
a trainer's own checks (its loss terms: :meth:`FiniteGuardMixin.non_finite`), naming the iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the mixin's attributes and super() calls are the Trainer's
    from transformers import Trainer as _Trainer
else:
    _Trainer = object


class NonFiniteError(FloatingPointError):
    """A loss or gradient that is NaN or infinite: the run stops before the optimizer step."""


class FiniteGuardMixin(_Trainer):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases)."""

    def _iteration_text(self) -> str:
        """``iteration N`` (a trainer with ``steps_per_iteration``) or ``step N``, counted from 1."""
        per = getattr(self.args, "steps_per_iteration", None)
        step = self.state.global_step
        return f"iteration {step // per + 1}" if per else f"step {step + 1}"

    def non_finite(self, what: str) -> NonFiniteError:
        """The error for a NaN / inf ``what`` (loss terms, gradient norm) at the current step."""
        return NonFiniteError(
            f"{self._iteration_text()}: {what}, before the optimizer step (nothing of it was applied or saved): "
            f"lower learning_rate (now {self.args.learning_rate:g}) or check the rewards' scale"
        )

    def _get_grad_norm(self, model: Any, grad_norm: Any = None) -> Any:
        """The Trainer's gradient norm, checked: a NaN or infinite norm stops the run before
        ``optimizer.step()`` would write it into the weights."""
        norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        value = float(norm) if norm is not None else 0.0
        if value != value or value in (float("inf"), float("-inf")):
            raise self.non_finite(f"the gradient norm is {value}")
        return norm


__all__ = ["FiniteGuardMixin", "NonFiniteError"]
