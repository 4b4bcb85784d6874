"""A task's shared ``defaults`` (hfrl's online fields) in the names of TRL's configs: what the TRL
adapters' ``translate_task_defaults`` apply. Plain functions with no heavy import, so that a command
line is checked against them before torch is imported (:mod:`hfrl.trainers.schema`)."""

from __future__ import annotations

from typing import Any

_GENERATION_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def online_defaults_to_trl(defaults: dict[str, Any]) -> dict[str, Any]:
    """A task's ``defaults`` (hfrl's online fields) in GRPO / RLOO's names.

    >>> online_defaults_to_trl({"max_new_tokens": 20, "generation_kwargs": {"do_sample": True, "top_k": 20,
    ...                         "min_new_tokens": 2}, "kl_coef": 0.1, "max_prompt_length": 64})
    {'max_completion_length': 20, 'top_k': 20, 'generation_kwargs': {'min_new_tokens': 2}, 'max_prompt_length': 64}
    """
    out: dict[str, Any] = {}
    if "max_new_tokens" in defaults:
        out["max_completion_length"] = defaults["max_new_tokens"]
    generation = {k: v for k, v in (defaults.get("generation_kwargs") or {}).items() if k != "do_sample"}
    out.update({k: generation.pop(k) for k in _GENERATION_FIELDS if k in generation})
    if generation:
        out["generation_kwargs"] = generation
    for key in ("max_prompt_length", "truncation_side", "reward_weights", "seed"):
        if key in defaults:
            out[key] = defaults[key]
    return out


def lengths_to_max_length(defaults: dict[str, Any]) -> dict[str, Any]:
    """A task's ``defaults`` in SFT / DPO's names: ``max_length`` = prompt + completion tokens (TRL
    keeps the start of longer sequences).

    >>> lengths_to_max_length({"max_prompt_length": 128, "max_new_tokens": 20, "truncation_side": "left"})
    {'max_length': 148}
    """
    out: dict[str, Any] = {}
    if defaults.get("max_prompt_length") and defaults.get("max_new_tokens"):
        out["max_length"] = int(defaults["max_prompt_length"]) + int(defaults["max_new_tokens"])
    if "seed" in defaults:
        out["seed"] = defaults["seed"]
    return out


__all__ = ["lengths_to_max_length", "online_defaults_to_trl"]
