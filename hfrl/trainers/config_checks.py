"""Checks every config makes of its values, whatever the algorithm (called from each config's
``__post_init__``, and by ``hfrl train`` before torch is imported): finite numbers, ranges, and the
keyword arguments of ``generate``.

**Ranges** are declared once, by the class that owns the field, in its ``field_bounds`` class attribute
(``{field: bounds}``, merged along the class's MRO by :func:`hfrl.trainers.schema.declared_bounds`; a
subclass may change a field's bounds), and for ``transformers.TrainingArguments``' own fields in
:data:`hfrl.trainers.schema.TRAINING_ARGUMENTS_BOUNDS`. Bounds are a mapping with any of
(:func:`hfrl.utils.bounded.bound_problem` reads them):

- ``ge`` / ``gt``: the value must be >= / > this number; ``le`` / ``lt``: <= / < this number;
- ``cap``: a limit on what can be meant (a larger value is a typo, such as ``1e30`` iterations:
  ``MAX_COUNT``, ``MAX_BATCH``, ``MAX_TOKENS`` of :mod:`hfrl.utils.bounded`);
- ``note``: why, shown in the error in parentheses.

(Not in the field's ``metadata``: ``HfArgumentParser`` passes every metadata key to argparse, which
refuses keys it does not know.) A field of ``generate`` keyword arguments is named in the class's
``generate_fields``; its keys are checked against :data:`GENERATE_KWARGS`. The same bounds reach the
command line through the schema (:class:`hfrl.trainers.schema.FieldInfo`), so ``--num_iterations -3``
fails in a fraction of a second, before torch is imported, with the message ``__post_init__`` gives.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from hfrl.trainers.schema import declared_bounds, generate_fields
from hfrl.utils.bounded import MAX_BATCH, MAX_COUNT, MAX_TOKENS, bound_problem

YES_NO = {"yes": True, "y": True, "on": True, "true": True, "no": False, "n": False, "off": False, "false": False}


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


def check_bounds(config: Any) -> None:
    """A one-line ``ValueError`` for the first field of ``config`` (a dataclass) outside its declared
    bounds, and the ``generate`` keyword arguments of its :func:`generate_fields` checked (and numbers
    given as text, ``1e-3``, made numbers)."""
    bounds = declared_bounds(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name, None)
        problem = bound_problem(value, bounds.get(f.name), optional=_optional(_annotation(type(config), f.name)))
        if problem:
            raise ValueError(f"{f.name} {problem}, got {value}")
    for name in sorted(generate_fields(type(config))):
        if isinstance(getattr(config, name, None), dict):
            setattr(config, name, generate_kwargs(getattr(config, name), name))


def _annotation(cls: type, name: str) -> Any:
    """A field's annotation as its class wrote it: ``dataclasses.fields(...)[i].type`` is not, since
    transformers' ``HfArgumentParser`` replaces an ``int | None`` field's type by ``int`` in place."""
    for klass in cls.__mro__:
        annotations = vars(klass).get("__annotations__", {})
        if name in annotations:
            return annotations[name]
    return None


def _optional(annotation: Any) -> bool:
    """Whether a field's annotation allows None: as written (``"int | None"``, ``"Optional[int]"``) or as
    transformers' ``HfArgumentParser`` leaves it once it has resolved it (``typing.Optional[int]``).

    >>> _optional("int | None"), _optional("Optional[int]"), _optional(int | None), _optional("int")
    (True, True, True, False)
    """
    import typing

    if isinstance(annotation, str):
        return "None" in annotation or "Optional[" in annotation
    return type(None) in typing.get_args(annotation)


def check_values(config: Any) -> None:
    """:func:`check_finite`, then :func:`check_bounds`: what every hfrl config checks first, once: the
    first ``__post_init__`` along the MRO that calls it checks the values as given, before the config
    derives others from them (``max_steps = num_iterations x steps_per_iteration`` may pass a cap)."""
    if vars(config).get("_values_checked"):
        return
    check_finite(config)
    check_bounds(config)
    config._values_checked = True


# The keyword arguments of ``generate`` that hfrl checks, with the ranges of transformers' logits processors
# (generation/logits_process.py), which refuse a bad one only once generation runs, after the model has
# loaded: TopKLogitsWarper's "top_k has to be a strictly positive integer" for vLLM's "no cut", top_k -1.
GENERATE_KWARGS: dict[str, tuple[str, dict[str, Any]]] = {
    "max_new_tokens": ("int", {"ge": 1, "cap": MAX_TOKENS}),
    "min_new_tokens": ("int", {"ge": 0, "cap": MAX_TOKENS}),
    "max_length": ("int", {"ge": 1, "cap": MAX_TOKENS}),
    "min_length": ("int", {"ge": 0, "cap": MAX_TOKENS}),
    "do_sample": ("bool", {}),
    "temperature": ("float", {"ge": 0}),  # and > 0 when sampling: generate_kwargs
    "top_k": ("int", {"ge": 0, "note": "0: no top-k cut"}),
    "top_p": ("float", {"gt": 0, "le": 1}),  # TopPLogitsWarper; 1: no top-p cut
    "min_p": ("float", {"ge": 0, "le": 1}),  # MinPLogitsWarper
    "typical_p": ("float", {"gt": 0, "le": 1}),  # TypicalLogitsWarper; 1: off
    "epsilon_cutoff": ("float", {"ge": 0, "lt": 1}),  # EpsilonLogitsWarper; 0: off
    "eta_cutoff": ("float", {"ge": 0, "lt": 1}),  # EtaLogitsWarper; 0: off
    "repetition_penalty": ("float", {"gt": 0, "note": "1: no penalty"}),
    "encoder_repetition_penalty": ("float", {"gt": 0, "note": "1: no penalty"}),
    "no_repeat_ngram_size": ("int", {"ge": 0, "note": "0: off"}),
    "encoder_no_repeat_ngram_size": ("int", {"ge": 0, "note": "0: off"}),
    "num_beams": ("int", {"ge": 1, "cap": MAX_BATCH, "note": "1: no beam search"}),
    "num_beam_groups": ("int", {"ge": 1}),
    "diversity_penalty": ("float", {"ge": 0}),
    "num_return_sequences": ("int", {"ge": 1, "cap": MAX_BATCH}),
    "length_penalty": ("float", {}),
    "penalty_alpha": ("float", {"ge": 0}),
    "max_time": ("float", {"gt": 0}),
}


def _kwarg(kind: str, value: Any) -> Any:
    """``value`` as a ``kind`` (``int``, ``float``, ``bool``): numbers and booleans as they are, text that
    reads as one (``5e-4``, ``yes``) made one, else None."""
    if kind == "bool":
        text = value.lower() if isinstance(value, str) else None
        return value if isinstance(value, bool) else YES_NO.get(text) if text is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if kind == "int":
        return int(number) if number.is_integer() else None
    return number if isinstance(value, str) else value


def generate_kwargs(kwargs: dict[str, Any], where: str) -> dict[str, Any]:
    """``generate`` keyword arguments (``where``: the field, ``generation_kwargs``) checked against
    :data:`GENERATE_KWARGS`, those given as text made numbers (YAML 1.1 reads ``5e-1`` as text); any
    other key is passed on as it is. A one-line ``ValueError`` naming ``where.key``.

    >>> generate_kwargs({"top_k": "0", "temperature": "7e-1", "do_sample": True}, "generation_kwargs")
    {'top_k': 0, 'temperature': 0.7, 'do_sample': True}
    >>> generate_kwargs({"top_k": -1}, "--generation_kwargs")
    Traceback (most recent call last):
    ValueError: --generation_kwargs.top_k must be >= 0 (0: no top-k cut), got -1
    >>> generate_kwargs({"max_new_tokens": "1e30"}, "eval_generation_kwargs")
    Traceback (most recent call last):
    ValueError: eval_generation_kwargs.max_new_tokens must be <= 1000000 (a larger value cannot be meant: ...), got 1e30
    >>> generate_kwargs({"do_sample": True, "temperature": 0}, "generation_kwargs")
    Traceback (most recent call last):
    ValueError: generation_kwargs.temperature must be > 0 when sampling (do_sample true), got 0; for greedy ...
    """
    out = dict(kwargs)
    for key, value in kwargs.items():
        if key not in GENERATE_KWARGS or value is None:
            continue
        kind, bounds = GENERATE_KWARGS[key]
        made = _kwarg(kind, value)
        if made is None:
            what = {"int": "a whole number", "float": "a number", "bool": "true or false"}[kind]
            raise ValueError(f"{where}.{key} takes {what}, got {value!r}")
        shown = value if isinstance(value, str) else repr(made)
        problem = bound_problem(made, bounds)
        if problem:
            raise ValueError(f"{where}.{key} {problem}, got {shown}")
        out[key] = made
    sampling = out.get("do_sample") is not False  # absent: the model's generation_config decides, maybe sampling
    if sampling and isinstance(out.get("temperature"), (int, float)) and out["temperature"] <= 0:
        raise ValueError(
            f"{where}.temperature must be > 0 when sampling (do_sample true), got {out['temperature']}; for greedy "
            "decoding set do_sample: false"
        )
    return out


_LOWERED: set[str] = set()  # the notes already said in this process


def fit_min_new_tokens(kwargs: dict[str, Any], max_new_tokens: int, where: str, cap_name: str) -> dict[str, Any]:
    """``generate`` keyword arguments (``where``: their field) whose ``min_new_tokens`` is at most the
    completion cap (``kwargs``' own ``max_new_tokens``, else ``max_new_tokens``, named ``cap_name``).

    A larger one (numbers' 20 under ``--max_new_tokens 8``) is clipped to the cap and said once, in one
    line, rather than refused: the user asked for short completions, and ``generate`` would stop at the
    cap anyway, warning "Unfeasible length constraints" twice a call (TRL's configs clip it alike:
    :mod:`hfrl.trainers.trl_adapters`). ``min_length``, which counts the prompt of a causal model, is
    fitted at generation (:func:`hfrl.core.rollout.generate.generate_completions`).

    >>> fit_min_new_tokens({"min_new_tokens": 20, "top_k": 0}, 8, "generation_kwargs", "max_new_tokens")
    {'min_new_tokens': 8, 'top_k': 0}
    >>> fit_min_new_tokens({"min_new_tokens": 4}, 8, "generation_kwargs", "max_new_tokens")
    {'min_new_tokens': 4}
    """
    least = kwargs.get("min_new_tokens")
    cap = kwargs.get("max_new_tokens") or max_new_tokens
    if isinstance(least, bool) or not isinstance(least, int) or not isinstance(cap, int) or least <= cap:
        return kwargs
    if "max_new_tokens" in kwargs:
        cap_name = f"{where}.max_new_tokens"
    # worded as TRL's configs' note (hfrl.trainers.trl_adapters)
    note = f"min_new_tokens {least} ({where}) is above {cap_name} {cap}: clipped to {cap}"
    if note not in _LOWERED:  # once a process: a config can be built more than once
        _LOWERED.add(note)
        logging.getLogger(__name__).warning(note)
    return {**kwargs, "min_new_tokens": cap}


__all__ = [
    "GENERATE_KWARGS",
    "MAX_BATCH",
    "MAX_COUNT",
    "MAX_TOKENS",
    "YES_NO",
    "check_bounds",
    "check_finite",
    "check_values",
    "fit_min_new_tokens",
    "generate_kwargs",
    "non_finite",
]
