"""A run's configuration values, checked and given their types before anything heavy is imported:
the run keys (``task``, ``alg``, ``model``...) and every config field, from the command line or a file.

YAML 1.1 reads ``5e-4`` as a string, and a file may hold anything: each field gets the type its
annotation in the algorithm's config names (:mod:`hfrl.trainers.schema`, read without torch), or a
one-line error naming the field.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any

from hfrl.core.model_args import MODEL_KEYS
from hfrl.rewards import reward_weights_problem, spec_problem
from hfrl.trainers.config_checks import YES_NO, generate_kwargs, non_finite
from hfrl.trainers.field_rules import check_online, check_trl_groups
from hfrl.trainers.schema import (
    CODE,
    KERNEL,
    ConfigSchema,
    FieldInfo,
    cached_facts,
    config_schema,
    model_config_fields,
)
from hfrl.utils.bounded import bound_problem
from hfrl.utils.registry import is_code_path

# Run-level keys of a config file; the rest are config fields. `eval_test`: evaluate on the task's
# test split before and after training (eval/test-base.json, eval/test.json; shown in the card).
# `task_args`: keyword arguments of the task's builder (`prompt_column`, `data_dir`, `reward_config`...).
# `run_id`: the run's identity, recorded in its checkpoints (a new one for every new run; kept by --resume).
RUN_KEYS = ("task", "alg", "model", "rewards", "eval_test", "task_args", "run_id", "preset")
# The run keys' kinds: a name is text, task_args a mapping, rewards one spec or a list of them.
RUN_KEY_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "task": ((str,), "a task name or a data path (text)"),
    "alg": ((str,), "an algorithm name (text)"),
    "model": ((str,), "a model name or path (text)"),
    "rewards": ((list, str, dict), "a reward id, {id, args} or a list of them"),
    "eval_test": ((bool,), "true or false"),
    "task_args": ((dict,), "a mapping of argument: value"),
    "run_id": ((str, type(None)), "text"),
    "preset": ((str, type(None)), "a preset name (text: hfrl list presets)"),
}


def check_run_keys(run: dict[str, Any], source: str = "command line") -> None:
    """A one-line ``ValueError`` naming the first run key of ``run`` whose value is of the wrong kind
    (``task: {a: 1}``, ``alg: 3``, ``model: [x]``).

    >>> check_run_keys({"task": "numbers", "alg": 3}, "config file c.yaml")
    Traceback (most recent call last):
    ValueError: config file c.yaml: alg takes an algorithm name (text), got 3

    and each reward spec (:func:`hfrl.rewards.spec_problem`):

    >>> check_run_keys({"rewards": [{"id": "increasing_numbers", "arg": {"min_tokens": 2}}]}, "command line")
    Traceback (most recent call last):
    ValueError: command line: rewards[0] holds id and args, not 'arg'
    """
    for key, (kinds, what) in RUN_KEY_TYPES.items():
        if key in run and (not isinstance(run[key], kinds) or (kinds == (str,) and not run[key])):
            raise ValueError(f"{source}: {key} takes {what}, got {run[key]!r}")
    rewards = run.get("rewards")
    for i, spec in enumerate(rewards if isinstance(rewards, list) else [] if rewards is None else [rewards]):
        problem = spec_problem(spec, f"rewards[{i}]")
        if problem:
            raise ValueError(f"{source}: {problem}")


def coerce_numbers(fields: dict[str, Any], schema: ConfigSchema) -> dict[str, Any]:
    """Each field's value as its config takes it, read the way transformers' ``HfArgumentParser``
    reads the dataclass (:class:`hfrl.trainers.schema.FieldInfo`: ``parse``, ``choices``, ``many``,
    ``optional``), from a value parsed as YAML (a command line's ``--field VALUE`` or a config file's):
    numbers for numeric fields (YAML 1.1 reads ``5e-4`` as text), true / false (and yes / no / on /
    off) for boolean ones, one of the choices for an enum, a mapping for a ``dict`` field, a list for
    a list field, text for a text field. Anything else is a one-line error naming the field, and so is
    a number outside the field's range (:class:`~hfrl.trainers.schema.FieldInfo`'s ``bounds``, the
    ones its config's ``__post_init__`` checks) or a bad ``generate`` keyword argument.

    >>> ppo = config_schema("ppo")
    >>> coerce_numbers({"learning_rate": "5e-4", "num_iterations": "10", "disable_tqdm": "yes"}, ppo)
    {'learning_rate': 0.0005, 'num_iterations': 10, 'disable_tqdm': True}
    >>> coerce_numbers({"learning_rate": "abc"}, ppo)
    Traceback (most recent call last):
    ValueError: --learning_rate takes a number, got 'abc'
    >>> coerce_numbers({"save_strategy": "stesp"}, ppo)
    Traceback (most recent call last):
    ValueError: --save_strategy takes one of no, steps, epoch, best, got 'stesp'; did you mean 'steps'?

    NaN and infinity are refused, at any depth (they pass every comparison a bound makes):

    >>> coerce_numbers({"kl_coef": "nan"}, ppo)
    Traceback (most recent call last):
    ValueError: --kl_coef takes a finite number, got nan

    A field that takes a mapping (or a list) gets one, or the same kind of error:

    >>> coerce_numbers({"generation_kwargs": 5}, ppo)
    Traceback (most recent call last):
    ValueError: --generation_kwargs takes a mapping such as {top_k: 20}, got 5

    Ranges, as the config's ``__post_init__`` checks them, but before torch is imported:

    >>> coerce_numbers({"num_iterations": -3}, ppo)
    Traceback (most recent call last):
    ValueError: --num_iterations must be >= 1, got -3
    >>> coerce_numbers({"num_iterations": "1e30"}, ppo)
    Traceback (most recent call last):
    ValueError: --num_iterations must be <= 10000000 (a larger value cannot be meant: check it for a typo), got 1e30
    >>> coerce_numbers({"generation_kwargs": {"top_k": -1}}, ppo)
    Traceback (most recent call last):
    ValueError: --generation_kwargs.top_k must be >= 0 (0: no top-k cut), got -1
    """
    infos = dict(schema.fields)
    if any(key in MODEL_KEYS and key not in infos for key in fields):  # LoRA / quantization flags
        infos = {**model_config_fields(), **infos}
    out = {key: _value(key, value, infos[key]) if key in infos else value for key, value in fields.items()}
    for key, value in out.items():
        place = non_finite(value, key)
        if place:
            raise ValueError(f"--{place} takes a finite number, got {value!r}")
    return out


def _value(key: str, value: Any, info: FieldInfo) -> Any:
    """One field's value (see :func:`coerce_numbers`)."""
    if value is None:
        if info.optional or info.default is None:
            return None
        raise ValueError(f"--{key} takes {_kind(info)}, not null (its default: {info.default!r})")
    if info.many:
        if info.parse in ("float", "int"):  # reward_weights: [1, 0.5], "1,0.5", "1 0.5" or one number
            return _number_list(key, value, float if info.parse == "float" else int)
        if isinstance(value, (bool, int, float, dict)):
            raise ValueError(f"--{key} takes a list such as [a, b], got {value!r}")
        return value  # a list, or one text (peft's target_modules: all-linear)
    if info.parse == "dict":
        if not isinstance(value, dict):
            raise ValueError(f"--{key} takes a mapping such as {{top_k: 20}}, got {value!r}")
        return generate_kwargs(value, f"--{key}") if info.generate else value
    if info.parse == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in YES_NO:
            return YES_NO[value.lower()]
        raise ValueError(f"--{key} takes true or false, got {value!r}")
    if info.parse in ("float", "int"):
        number = _number(key, value, info.parse)
        problem = bound_problem(number, info.bounds, info.optional or info.default is None)
        if problem:
            raise ValueError(f"--{key} {problem}, got {value if isinstance(value, str) else repr(value)}")
        return number
    if info.choices is not None:
        if isinstance(value, list):  # report_to: one name or a list of them
            return [_choice(key, item, info) for item in value]
        return _choice(key, value, info)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # text: an all-digit revision or name stays text
    return value  # text, or a structure a text field also takes (TrainingArguments' `dict | str` fields)


# a Hub kernel as attn_implementation: owner/name[@revision][:function] (transformers' hub_kernels.is_kernel)
_KERNEL = re.compile(r"[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?")
_ALSO = {CODE: "or a 'module:attr' path to your own", KERNEL: "or a Hub kernel (owner/name)"}


def _choice(key: str, value: Any, info: FieldInfo) -> str:
    """One of the field's choices (or what its ``also`` admits besides them), else a one-line error with
    the choices and the closest one.

    >>> _choice("policy_loss", "gspo", config_schema("ppo").fields["policy_loss"])
    'gspo'
    >>> _choice("policy_loss", "gpso", config_schema("ppo").fields["policy_loss"])
    Traceback (most recent call last):
    ValueError: --policy_loss takes one of ppo_clip, a2c, gspo, ... path to your own, got 'gpso'; did you mean 'gspo'?
    """
    text, choices = str(getattr(value, "value", value)), info.choices or ()
    if text in choices or (info.also == CODE and is_code_path(text)):
        return text
    if info.also == KERNEL and _KERNEL.fullmatch(text):
        return text
    close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
    listed = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
    also = f" {_ALSO[info.also]}" if info.also in _ALSO else ""
    guess = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"--{key} takes one of {listed}{also}, got {value!r}{guess}")


def _kind(info: FieldInfo) -> str:
    if info.many:
        return "a list"
    return {"float": "a number", "int": "a whole number", "bool": "true or false", "dict": "a mapping"}.get(
        info.parse, "a value"
    )


def _number(key: str, value: Any, parse: str) -> float | int:
    """A numeric field's value: a number, or text that reads as one (``5e-4``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"--{key} takes a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"--{key} takes a number, got {value!r}") from None
    if parse == "int":
        if not number.is_integer():
            raise ValueError(f"--{key} takes a whole number, got {value!r}")
        return int(number)
    return number


def _number_list(key: str, value: Any, cast: type) -> list[float]:
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


def check_fields(fields: dict[str, Any], schema: ConfigSchema, rewards: int | None = None) -> None:
    """The rules between a run's fields (:mod:`hfrl.trainers.field_rules`), as its config's
    ``__post_init__`` applies them, but before torch is imported: ``fields`` (given their types by
    :func:`coerce_numbers`) over the schema's defaults, with the advantage estimator's and policy loss's
    facts read from the schema; and one ``reward_weights`` entry per reward function (``rewards``: how
    many the run has, None when only building the task tells). A one-line ``ValueError``.

    >>> check_fields({"num_generations": 3, "rollout_batch_size": 5, "mini_batch_size": 4}, config_schema("ppo"))
    Traceback (most recent call last):
    ValueError: rollout_batch_size (5) x num_generations (3) must be a multiple of mini_batch_size (4); change one ...
    >>> check_fields({"advantage_estimator": "rloo"}, config_schema("ppo"))
    Traceback (most recent call last):
    ValueError: advantage_estimator rloo compares the completions of each prompt: set num_generations >= 2 (e.g. ...
    >>> check_fields({"reward_weights": [1.0, 2.0]}, config_schema("grpo"), rewards=1)
    Traceback (most recent call last):
    ValueError: reward_weights has 2 entries for 1 reward functions: give one weight per reward
    """
    values = {**schema.defaults(), **fields}
    if rewards is not None and "reward_weights" in schema.names:
        problem = reward_weights_problem(values.get("reward_weights"), rewards)
        if problem:
            raise ValueError(problem)
    if {"advantage_estimator", "policy_loss", "critic_warmup_iterations"} <= schema.names:  # the online core
        estimator = cached_facts("estimators", str(values["advantage_estimator"]))
        check_online(values, estimator, cached_facts("policy_losses", str(values["policy_loss"])))
    elif {"num_generations", "steps_per_generation"} <= schema.names:  # TRL's GRPO and RLOO
        check_trl_groups(values, int(os.environ.get("WORLD_SIZE", "1")))


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


__all__ = ["RUN_KEYS", "RUN_KEY_TYPES", "check_config", "check_fields", "check_run_keys", "coerce_numbers"]
