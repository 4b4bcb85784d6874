"""A run's configuration values, checked and given their types before anything heavy is imported:
the run keys (``task``, ``alg``, ``model``...) and every config field, from the command line or a file.

YAML 1.1 reads ``5e-4`` as a string, and a file may hold anything: each field gets the type its
annotation in the algorithm's config names (:mod:`hfrl.trainers.schema`, read without torch), or a
one-line error naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from hfrl.core.model_args import MODEL_KEYS
from hfrl.trainers.config_checks import non_finite
from hfrl.trainers.schema import ConfigSchema, config_schema, model_config_fields

# Run-level keys of a config file; the rest are config fields. `eval_test`: evaluate on the task's
# test split before and after training (eval/test-base.json, eval/test.json; shown in the card).
# `task_args`: keyword arguments of the task's builder (`prompt_column`, `data_dir`, `reward_config`...).
# `run_id`: the run's identity, recorded in its checkpoints (a new one for every new run; kept by --resume).
RUN_KEYS = ("task", "alg", "model", "rewards", "eval_test", "task_args", "run_id")
# The run keys' kinds: a name is text, task_args a mapping, rewards one spec or a list of them.
RUN_KEY_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "task": ((str,), "a task name or a data path (text)"),
    "alg": ((str,), "an algorithm name (text)"),
    "model": ((str,), "a model name or path (text)"),
    "rewards": ((list, str, dict), "a reward id, {id, args} or a list of them"),
    "eval_test": ((bool,), "true or false"),
    "task_args": ((dict,), "a mapping of argument: value"),
    "run_id": ((str, type(None)), "text"),
}


def check_run_keys(run: dict[str, Any], source: str = "command line") -> None:
    """A one-line ``ValueError`` naming the first run key of ``run`` whose value is of the wrong kind
    (``task: {a: 1}``, ``alg: 3``, ``model: [x]``).

    >>> check_run_keys({"task": "numbers", "alg": 3}, "config file c.yaml")
    Traceback (most recent call last):
    ValueError: config file c.yaml: alg takes an algorithm name (text), got 3
    """
    for key, (kinds, what) in RUN_KEY_TYPES.items():
        if key in run and (not isinstance(run[key], kinds) or (kinds == (str,) and not run[key])):
            raise ValueError(f"{source}: {key} takes {what}, got {run[key]!r}")


_YES_NO = {"yes": True, "y": True, "on": True, "no": False, "n": False, "off": False}


def _check_structure(key: str, value: Any, kind: str) -> bool:
    """For a field whose type is only a mapping or only a list (``dict[str, Any] | None``, ``list[str]``):
    fail on a value of another kind (a number for a list of module names; a list for keyword arguments),
    which would otherwise surface later as a TypeError deep inside a library. A list field also takes
    one text value (peft's ``target_modules="all-linear"``). True when ``kind`` is such a type."""
    while "[" in kind:
        kind = re.sub(r"\[[^\[\]]*\]", "", kind)  # dict[str, list[int]] | None -> dict | None
    alternatives = {t.strip() for t in kind.split("|")}
    shape = alternatives - {"None"}
    if shape == {"dict"}:
        if not isinstance(value, dict) and (value is not None or "None" not in alternatives):
            raise ValueError(f"--{key} takes a mapping such as {{top_k: 20}}, got {value!r}")
        return True
    if shape == {"list"}:
        if isinstance(value, (bool, int, float, dict)) or (value is None and "None" not in alternatives):
            raise ValueError(f"--{key} takes a list such as [a, b], got {value!r}")
        return True
    return False


def coerce_numbers(fields: dict[str, Any], schema: ConfigSchema) -> dict[str, Any]:
    """YAML 1.1 reads ``5e-4`` as a string; give numeric fields their numbers back, and boolean fields
    (not string ones such as ``save_strategy: no``) their yes / no / on / off. A value a numeric or
    boolean field cannot take is a one-line error naming the field.

    >>> ppo = config_schema("ppo")
    >>> coerce_numbers({"learning_rate": "5e-4", "num_iterations": "10", "disable_tqdm": "yes"}, ppo)
    {'learning_rate': 0.0005, 'num_iterations': 10, 'disable_tqdm': True}
    >>> coerce_numbers({"learning_rate": "abc"}, ppo)
    Traceback (most recent call last):
    ValueError: --learning_rate takes a number, got 'abc'

    NaN and infinity are refused, at any depth (they pass every comparison a bound makes):

    >>> coerce_numbers({"kl_coef": "nan"}, ppo)
    Traceback (most recent call last):
    ValueError: --kl_coef takes a finite number, got nan

    A field that takes only a mapping (or only a list) gets one, or the same kind of error:

    >>> coerce_numbers({"generation_kwargs": 5}, ppo)
    Traceback (most recent call last):
    ValueError: --generation_kwargs takes a mapping such as {top_k: 20}, got 5
    """
    annotations = {name: f.type for name, f in schema.fields.items()}
    if any(key in MODEL_KEYS and key not in annotations for key in fields):  # LoRA / quantization flags
        annotations = {**{name: f.type for name, f in model_config_fields().items()}, **annotations}
    out = dict(fields)
    for key, value in fields.items():
        kind = annotations.get(key, "")
        numbers = re.search(r"list\[(float|int)\]", kind)
        if numbers and value is not None:  # reward_weights: [1, 0.5], "1,0.5", "1 0.5" or one number
            out[key] = _number_list(key, value, float if numbers.group(1) == "float" else int)
            continue
        if _check_structure(key, value, kind):
            continue
        if any(t in kind for t in ("str", "dict", "list", "Any")) or not any(
            t in kind for t in ("bool", "float", "int")
        ):
            continue  # a field that takes text or structures, or one this rule does not know: as given
        numeric = "float" in kind or "int" in kind
        if isinstance(value, (list, dict)) or (isinstance(value, bool) and numeric and "bool" not in kind):
            raise ValueError(f"--{key} takes {'a number' if numeric else 'true or false'}, got {value!r}")
        if not isinstance(value, str):
            continue
        if "bool" in kind and value.lower() in _YES_NO:
            out[key] = _YES_NO[value.lower()]
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--{key} takes {'a number' if numeric else 'true or false'}, got {value!r}") from None
        if not numeric:
            raise ValueError(f"--{key} takes true or false, got {value!r}")
        out[key] = int(number) if "float" not in kind and number.is_integer() else number
    for key, value in out.items():
        place = non_finite(value, key)
        if place:
            raise ValueError(f"--{place} takes a finite number, got {value!r}")
    return out


def _number_list(key: str, value: Any, cast: type) -> list:
    """A list-of-numbers field's value: a list, one number, or numbers in one text separated by commas
    or spaces; anything else is a one-line error naming the field.

    >>> _number_list("reward_weights", "1, 0.5", float), _number_list("reward_weights", 2, float)
    ([1.0, 0.5], [2.0])
    >>> _number_list("reward_weights", "abc", float)
    Traceback (most recent call last):
    ValueError: --reward_weights takes a list of numbers such as [1.0, 0.5], got 'abc'
    """
    items = re.split(r"[,\s]+", value.strip().strip("[]").strip()) if isinstance(value, str) else value
    if not isinstance(items, list):
        items = [items]
    try:
        numbers = [float(item) for item in items if not isinstance(item, bool)]
    except (TypeError, ValueError):  # None, a list, a mapping, a word
        numbers = []
    if len(numbers) != len(items) or (cast is int and not all(n.is_integer() for n in numbers)):
        raise ValueError(f"--{key} takes a list of numbers such as [1.0, 0.5], got {value!r}")
    return [cast(n) for n in numbers]


def check_config(config: dict[str, Any], source: str) -> dict[str, Any]:
    """A run's ``config.yaml`` (read by ``hfrl eval / chat / export / push``) with its run keys checked
    and its fields given their types (:func:`coerce_numbers`), or a one-line ``ValueError`` naming
    ``source`` and the field. Fields of an algorithm that is not registered are left as they are."""
    check_run_keys(config, source)
    from hfrl.trainers import ALGORITHMS

    alg = config.get("alg", "ppo")
    if alg not in ALGORITHMS:
        return config
    fields = {k: v for k, v in config.items() if k not in RUN_KEYS}
    try:
        return {**config, **coerce_numbers(fields, config_schema(alg))}
    except ValueError as err:
        raise ValueError(f"{source}: {str(err).removeprefix('--')}") from None


__all__ = ["RUN_KEYS", "RUN_KEY_TYPES", "check_config", "check_run_keys", "coerce_numbers"]
