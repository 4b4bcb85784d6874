"""Loading a checkpoint into a model with tied weights, without transformers' false alarm about them.

safetensors stores a tied ``lm_head.weight`` once, under the embedding's name, and transformers 5 lists
it as missing when the Trainer loads a checkpoint back (the best model at the end of training):
:class:`TiedWeightsMixin` drops the tied keys from the Trainer's check and re-ties them instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the mixin's attributes and super() calls are the Trainer's
    from transformers import Trainer as _Trainer
else:
    _Trainer = object


class TiedWeightsMixin(_Trainer):
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases)."""

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """The Trainer's check after loading a checkpoint (the best model at the end), without its
        false alarm for tied weights: safetensors stores a tied ``lm_head.weight`` once, under the
        embedding's name, and transformers 5 lists it as missing. Tied keys are re-tied instead."""
        model: Any = getattr(self.model, "policy", self.model)  # hfrl's online wrapper: its policy
        tied = set(getattr(model, "all_tied_weights_keys", None) or {})
        prefix = "policy." if model is not self.model else ""
        missing = [k for k in load_result.missing_keys if k.removeprefix(prefix) not in tied]
        if len(missing) < len(load_result.missing_keys):
            model.tie_weights()
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))


__all__ = ["TiedWeightsMixin"]
