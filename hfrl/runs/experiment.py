"""From names to a configured trainer: the run configuration behind ``hfrl train``.

Precedence: the task's defaults for the algorithm < the ``--config`` YAML file < command-line
overrides. The resolved configuration is written to ``<output_dir>/config.yaml`` and can be passed
back with ``--config`` to repeat the run.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

from hfrl.core.model_args import MODEL_KEYS
from hfrl.runs.run_config import CONFIG_NAME, STATE_NAME, config_text, load_yaml, read_config_file, task_kwargs
from hfrl.tasks.base import Task, TaskSpec
from hfrl.trainers import algorithm_trainer
from hfrl.utils.registry import UnknownNameError, unknown

# Run-level keys of a config file; the rest are config fields. `eval_test`: evaluate on the task's
# test split before and after training (eval/test-base.json, eval/test.json; shown in the card).
# `task_args`: keyword arguments of the task's builder (`prompt_column`, `data_dir`, `reward_config`...).
RUN_KEYS = ("task", "alg", "model", "rewards", "eval_test", "task_args")


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """``["--learning_rate", "1e-3", "--kl-target=0.5"]`` -> ``{"learning_rate": 0.001, "kl_target": 0.5}``.

    Values are read as YAML (numbers, booleans, ``null``, lists ``[1, 2]``, mappings ``{top_k: 20}``);
    a flag with no value is ``true``.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(f"unexpected argument {token!r}; overrides are written --field value or --field=value")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = "true"
        out[key.replace("-", "_")] = load_yaml(value) if value != "" else ""
        i += 1
    return out


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


def coerce_numbers(fields: dict[str, Any], config_class: type) -> dict[str, Any]:
    """YAML 1.1 reads ``5e-4`` as a string; give numeric fields their numbers back, and boolean fields
    (not string ones such as ``save_strategy: no``) their yes / no / on / off. A value a numeric or
    boolean field cannot take is a one-line error naming the field.

    >>> from hfrl import PPOConfig
    >>> coerce_numbers({"learning_rate": "5e-4", "num_iterations": "10", "disable_tqdm": "yes"}, PPOConfig)
    {'learning_rate': 0.0005, 'num_iterations': 10, 'disable_tqdm': True}
    >>> coerce_numbers({"learning_rate": "abc"}, PPOConfig)
    Traceback (most recent call last):
    ValueError: --learning_rate takes a number, got 'abc'

    A field that takes only a mapping (or only a list) gets one, or the same kind of error:

    >>> coerce_numbers({"generation_kwargs": 5}, PPOConfig)
    Traceback (most recent call last):
    ValueError: --generation_kwargs takes a mapping such as {top_k: 20}, got 5
    """
    annotations = {f.name: str(f.type) for f in dataclasses.fields(config_class)}
    if any(key in MODEL_KEYS and key not in annotations for key in fields):  # LoRA / quantization flags
        from trl import ModelConfig

        annotations = {**{f.name: str(f.type) for f in dataclasses.fields(ModelConfig)}, **annotations}
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


def config_fields(config_class: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config_class) if f.init}


def task_config(task_obj: Task | TaskSpec, alg: str, trainer_class: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run-level keys, config fields) that the task declares for ``alg``.

    The task's ``defaults`` section is shared by algorithms whose configs differ: only the fields the
    algorithm's config has are kept (after the trainer's ``translate_task_defaults``, when it has one:
    TRL's trainers name things differently). Every key of the algorithm's own section must be a field.
    """
    fields = config_fields(trainer_class.config_class)
    defaults = dict(task_obj.configs.get("defaults") or {})
    translate = getattr(trainer_class, "translate_task_defaults", None)
    if translate is not None:
        defaults = translate(defaults)
    own = dict(task_obj.configs.get(alg) or {})
    for key in own:
        if key not in fields and key not in RUN_KEYS:
            hint = f"; the fields are those of {trainer_class.config_class.__name__}"
            raise unknown(f"config key (in task {task_obj.name!r}, section {alg!r})", key, fields, hint=hint)
    merged = {**{k: v for k, v in defaults.items() if k in fields or k in RUN_KEYS}, **own}
    return {k: merged.pop(k) for k in RUN_KEYS if k in merged}, merged


class ResolvedRun(dict):
    """A resolved run: the flat configuration (a dict, what ``config.yaml`` holds), and ``task``, the
    task when resolving had to build it (a builder function of your own: only building it tells its
    defaults), with the arguments it was built with (``task_kwargs``): :func:`build_trainer` reuses
    it rather than build it again."""

    task: Task | None = None
    task_kwargs: dict[str, Any] | None = None


def resolve_run(
    task: str | None = None,
    alg: str | None = None,
    model: str | None = None,
    config_file: str | os.PathLike | None = None,
    overrides: dict[str, Any] | None = None,
    output_dir: str | None = None,
    seed: int | None = None,
    task_args: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge task defaults, the config file and overrides into one flat run configuration.

    ``task_args`` (the builder's keyword arguments, e.g. ``prompt_column``) are merged over the
    config file's ``task_args``. The task's defaults are read from its spec, without building it
    (:func:`hfrl.tasks.describe_task`): :func:`build_trainer` builds it, once.
    """
    from hfrl.tasks import describe_task, load_task

    file_cfg = read_config_file(config_file) if config_file else {}
    overrides = dict(overrides or {})
    run = {k: file_cfg.pop(k) for k in RUN_KEYS if k in file_cfg}
    run.update({k: overrides.pop(k) for k in RUN_KEYS if k in overrides})
    for key, value in (("task", task), ("alg", alg), ("model", model)):
        if value is not None:
            run[key] = value
    if task_args:
        run["task_args"] = {**(run.get("task_args") or {}), **task_args}
    if "task" not in run:
        raise ValueError("no task given: pass --task NAME (see `hfrl list tasks`) or set `task:` in --config")
    run["task"] = str(run["task"])
    run.setdefault("alg", "ppo")
    from hfrl.tasks import check_task_name
    from hfrl.trainers import ALGORITHMS

    check_task_name(run["task"])  # names first: an unknown one fails before torch is imported
    if run["alg"] not in ALGORITHMS and ":" not in str(run["alg"]):
        raise unknown("algorithm", str(run["alg"]), ALGORITHMS, hint=", or a 'module:attr' path to your own algorithm")
    trainer_class = algorithm_trainer(run["alg"])
    built, built_with = None, task_kwargs(run)
    spec = describe_task(run["task"], **built_with)
    if spec is None:  # your own builder function: its defaults are known once it is built
        built = load_task(run["task"], **built_with)
        spec = TaskSpec.of(built)
    model_from_task = "model" not in run
    run.setdefault("model", spec.default_model)

    fields = config_fields(trainer_class.config_class)
    for source, cfg in ((f"config file {config_file}", file_cfg), ("command line", overrides)):
        for key in cfg:
            if key not in fields and key not in MODEL_KEYS:
                hint = f"; the fields are those of {trainer_class.config_class.__name__} and trl.ModelConfig's (LoRA)"
                raise unknown(f"config key (from the {source})", key, fields | set(MODEL_KEYS), hint=hint)
    task_run, task_fields = task_config(spec, run["alg"], trainer_class)
    for key, value in task_run.items():  # e.g. a task's own rewards for one algorithm: lowest precedence
        if key == "task_args" and isinstance(value, dict):  # merged under the user's task arguments
            run[key] = {**value, **(run.get("task_args") or {})}
        run.setdefault(key, value)
    # the task's own model, a bare PEFT adapter: with the base the task names for it (lowest precedence)
    base = spec.default_base_model if model_from_task and "base_model" in fields else None
    task_fields = {**task_fields, "base_model": base} if base else task_fields
    merged = coerce_numbers({**task_fields, **file_cfg, **overrides}, trainer_class.config_class)
    if output_dir is not None:
        merged["output_dir"] = output_dir
    merged.setdefault("output_dir", default_output_dir(run["task"], run["alg"]))
    if seed is not None:
        merged["seed"] = seed
    if "algorithm" in fields:  # one trainer, several algorithms (the A-LoL family): the name picks it
        merged.setdefault("algorithm", run["alg"])
    resolved = ResolvedRun({**run, **merged})
    resolved.task, resolved.task_kwargs = built, built_with
    return resolved


def default_output_dir(task: str, alg: str) -> str:
    """``runs/TASK-ALG``; for a data file its whole name (``my.jsonl`` and ``my.csv`` are two runs).

    >>> default_output_dir("numbers", "ppo"), default_output_dir("data/my.jsonl", "ppo")
    ('runs/numbers-ppo', 'runs/my.jsonl-ppo')
    """
    return os.path.join("runs", f"{Path(str(task).rstrip('/')).name}-{alg}")


# What --resume may change: when and how a run is saved, evaluated, logged and batched for speed,
# and how long it goes on. Anything else changes what a step means and needs a new run.
RESUMABLE = frozenset(
    {
        "num_iterations", "max_steps", "num_train_epochs", "save_every", "save_steps", "save_strategy",
        "save_total_limit", "save_only_model", "eval_every", "eval_steps", "eval_strategy", "eval_test",
        "logging_steps", "logging_dir", "logging_first_step", "report_to", "run_name", "disable_tqdm",
        "log_completions", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo", "hub_token",
        "hub_revision", "dataloader_num_workers", "generation_batch_size", "scoring_batch_size",
        "per_device_eval_batch_size", "use_cpu", "resume_from_checkpoint",
    }
)  # fmt: skip


def resolve_resume(output_dir: str | os.PathLike, **asked: Any) -> dict[str, Any]:
    """The run in ``output_dir`` as its own ``config.yaml`` resolved it, with what the command asks
    (``asked``: :func:`resolve_run`'s keyword arguments, ``task``, ``alg``, ``model``, ``config_file``,
    ``overrides``, ``seed``, ``task_args``) that may change on resume (:data:`RESUMABLE`: more
    iterations, other checkpoints or logging). A command that would change anything else (the
    algorithm, task, model, rollout size, learning rate...) stops with the differences: resuming it
    would mean another run."""
    config_file, overrides, task_args = (asked.pop(k, None) for k in ("config_file", "overrides", "task_args"))
    extra = set(asked) - {"task", "alg", "model", "seed"}
    if extra:
        raise TypeError(f"resolve_resume() got unexpected keyword arguments {sorted(extra)}")
    named = {k: v for k, v in asked.items() if v is not None}
    path = Path(output_dir) / CONFIG_NAME
    if not path.is_file():
        raise ValueError(f"--resume: {output_dir} holds no run to resume (no {CONFIG_NAME}); train without --resume")
    saved = read_config_file(path)
    asked = dict(read_config_file(config_file)) if config_file else {}
    asked.update(overrides or {})
    asked.update(named)
    if task_args:
        asked["task_args"] = {**(saved.get("task_args") or {}), **task_args}
    asked.pop("output_dir", None)  # the run's own folder: --output-dir or the config's names it
    config_class = algorithm_trainer(str(saved.get("alg", "ppo"))).config_class
    defaults = {f.name: f.default for f in dataclasses.fields(config_class) if f.default is not dataclasses.MISSING}
    asked = coerce_numbers(asked, config_class)
    changed = {k: v for k, v in asked.items() if saved.get(k, defaults.get(k)) != v}
    unsafe = {k: v for k, v in changed.items() if k not in RESUMABLE}
    if unsafe:
        diff = ", ".join(f"{k} {saved.get(k, defaults.get(k))!r} -> {v!r}" for k, v in sorted(unsafe.items()))
        raise ValueError(
            f"--resume: the run in {output_dir} differs from this command ({diff}); resume it with its own settings "
            f"(only {', '.join(sorted(RESUMABLE - {'resume_from_checkpoint', 'hub_token'})[:6])}, ... may change) "
            "or start a new run with another --output-dir"
        )
    return resolve_run(config_file=path, overrides=changed, output_dir=str(output_dir))


def prepare_output_dir(output_dir: str | os.PathLike, overwrite: bool = False) -> None:
    """Where a new run writes: not a file, and not another run's folder (its config.yaml, checkpoints
    or model) unless ``overwrite``, which clears it (its checkpoints would be resumed otherwise)."""
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--output-dir {output_dir} is a file; give a directory")
    if not path.is_dir():
        return
    marks = [p.name for p in sorted(path.iterdir()) if p.name in RUN_FILES or p.name.startswith("checkpoint-")]
    if not marks:
        return
    if not overwrite:
        raise ValueError(
            f"{output_dir} holds another run ({', '.join(marks[:4])}{', ...' if len(marks) > 4 else ''}): --resume "
            "continues it, --overwrite_output_dir replaces it, or give a new --output-dir"
        )
    import shutil

    shutil.rmtree(path)


RUN_FILES = (CONFIG_NAME, STATE_NAME, "model.safetensors", "adapter_model.safetensors")


def split_run(run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run-level keys, config fields)."""
    return {k: run[k] for k in RUN_KEYS if k in run}, {k: v for k, v in run.items() if k not in RUN_KEYS}


def build_trainer(run: dict[str, Any], **trainer_kwargs: Any):
    """The trainer for a resolved run: task dataset, rewards and metrics, model, config."""
    from hfrl.core.model_args import model_loading, split_model_fields
    from hfrl.tasks import load_task

    run_keys, fields = split_run(run)
    trainer_class = algorithm_trainer(run_keys["alg"])
    kwargs = task_kwargs(run_keys)
    task = getattr(run, "task", None)  # built while resolving (your own builder), when its arguments still hold
    if task is None or getattr(run, "task_kwargs", None) != kwargs:
        task = load_task(run_keys["task"], **kwargs)
    peft_config, init_kwargs = model_loading(
        run_keys["model"], split_model_fields(fields, config_fields(trainer_class.config_class))
    )
    if init_kwargs:
        fields["model_init_kwargs"] = {**(fields.get("model_init_kwargs") or {}), **init_kwargs}
    if peft_config is not None:
        trainer_kwargs.setdefault("peft_config", peft_config)
    args = trainer_class.config_class(**fields)
    if run_keys.get("eval_test"):
        from hfrl.runs.run_eval import EvalBeforeAfter

        callbacks = list(trainer_kwargs.pop("callbacks", None) or [])
        evaluator = EvalBeforeAfter(run_keys["task"], "test", loaded=task)  # the task built above: loaded once
        trainer_kwargs["callbacks"] = [*callbacks, evaluator]
    return trainer_class(
        model=run_keys["model"],
        args=args,
        reward_funcs=task.reward_funcs,
        train_dataset=task.dataset["train"],
        eval_dataset=task.dataset.get("validation"),
        metrics=task.metrics,
        **trainer_kwargs,
    )


def save_run_config(run: dict[str, Any], trainer) -> str:
    """``config.yaml``: the run keys, then every field of the algorithm's own config (its resolved
    values) and every TrainingArguments field that was set explicitly."""
    run_keys, explicit = split_run(run)
    args = trainer.args
    own = {f.name for f in dataclasses.fields(type(args))} - {
        f.name for f in dataclasses.fields(__import__("transformers").TrainingArguments)
    }
    resolved = {  # ModelConfig flags are not args: their values are the run's
        name: getattr(args, name) if hasattr(args, name) else explicit[name] for name in sorted(own | set(explicit))
    }
    path = os.path.join(args.output_dir, CONFIG_NAME)
    os.makedirs(args.output_dir, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(config_text({**run_keys, **resolved}, path))  # never a secret: pushed with the model
    return path


def last_checkpoint(output_dir: str) -> str:
    """The newest *complete* checkpoint of a run (``--resume``); newer incomplete ones (a write cut
    short by a kill) are named in one warning line (:mod:`hfrl.trainers.checkpoints`)."""
    from hfrl.trainers.checkpoints import newest_complete_checkpoint

    checkpoint = newest_complete_checkpoint(output_dir)
    if checkpoint is None:
        raise ValueError(f"--resume: no checkpoint-* folder in {output_dir}; train with --save_every N first")
    return checkpoint


__all__ = [
    "ResolvedRun",
    "UnknownNameError",
    "build_trainer",
    "last_checkpoint",
    "parse_overrides",
    "resolve_run",
    "save_run_config",
    "task_config",
]
