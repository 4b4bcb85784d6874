"""Loading a checkpoint into a model with tied weights, without transformers' false alarm about them.

safetensors stores a tied ``lm_head.weight`` once, under the embedding's name, and transformers 5 lists
it as missing when the Trainer loads a checkpoint back (the best model at the end of training):
:func:`without_tied_keys` drops the tied keys from the Trainer's check, and re-ties them instead.
"""

from __future__ import annotations

from typing import Any


def without_tied_keys(model: Any, load_result: Any) -> Any:
    """``load_result`` (the Trainer's ``load_state_dict`` result) without the tied keys among its missing
    ones; those are re-tied in ``model`` (hfrl's online wrapper: its policy)."""
    inner: Any = getattr(model, "policy", model)
    tied = set(getattr(inner, "all_tied_weights_keys", None) or {})
    prefix = "policy." if inner is not model else ""
    missing = [k for k in load_result.missing_keys if k.removeprefix(prefix) not in tied]
    if len(missing) < len(load_result.missing_keys):
        inner.tie_weights()
    return load_result._replace(missing_keys=missing)


__all__ = ["without_tied_keys"]
