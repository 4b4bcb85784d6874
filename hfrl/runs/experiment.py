"""From names to a configured trainer: the run configuration behind ``hfrl train``.

Precedence: the task's defaults for the algorithm < the ``--config`` YAML file < command-line
overrides. The resolved configuration is written to ``<output_dir>/config.yaml`` and can be passed
back with ``--config`` to repeat the run.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hfrl.core.model_args import MODEL_KEYS
from hfrl.runs.config_values import RUN_KEYS, check_fields, check_run_keys, coerce_numbers
from hfrl.runs.run_config import CONFIG_NAME, config_text, load_yaml, read_config_file, task_kwargs
from hfrl.tasks.base import Task, TaskSpec, merge_sections
from hfrl.trainers import algorithm_trainer
from hfrl.trainers.checkpoints import RESUMABLE, RUN_DEFINITION
from hfrl.trainers.field_rules import reward_columns_problem
from hfrl.trainers.run_facts import RunFacts
from hfrl.trainers.schema import ConfigSchema, config_schema, estimator_needs_critic
from hfrl.utils.registry import UnknownNameError, is_code_path, unknown


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
        out[key.replace("-", "_")] = load_yaml(value, f"--{key}") if value != "" else ""
        i += 1
    return out


def config_fields(config_class: type) -> set[str]:
    return {f.name for f in dataclasses.fields(config_class) if f.init}


def task_config(
    task_obj: Task | TaskSpec, alg: str, schema: ConfigSchema, chosen: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run-level keys, config fields) that the task declares for ``alg``: the one merge of its YAML
    ``configs`` (:func:`hfrl.tasks.base.merge_sections`, which ``Task.config_for`` calls too), with each
    key checked to be a field. The sections along the config classes, each over the one before (``schema.sections``:
    ``defaults`` < ``online`` < ``ppo`` < ``nlpo``; ``defaults`` < ``offline`` < ``a_lol_seq``), then the
    algorithm's own section when its name is none of those (an A-LoL variant; TRL's ``grpo``), then the
    ``critic_free`` section when the run's ``advantage_estimator`` (the user's, in ``chosen``, else the
    task's) is a registered one without a critic (``rloo``, ``group_norm``...: settings in reward units,
    such as the entropy bonus, tuned for whitened GAE advantages), then the section of its
    ``policy_loss`` when the task has one (``gspo``: PPO's tuning, then GSPO's own). A new algorithm or
    loss trains every task with its parent's tuning.

    The ``defaults`` section is shared by algorithms whose configs differ: only the fields the
    algorithm's config has are kept (after the trainer's ``translate_task_defaults``, when it has one:
    TRL's trainers name things differently). Every key of the other sections must be a field.
    """
    fields = schema.names
    merged = merge_sections(
        task_obj.configs, alg, schema.sections, chosen=chosen, fields={*fields, *RUN_KEYS},
        translate=schema.translate_defaults, read=lambda section: _section(task_obj, section, fields, schema),
        needs_critic=estimator_needs_critic,  # the schema's cached facts: no torch
    )  # fmt: skip
    return {k: merged.pop(k) for k in RUN_KEYS if k in merged}, merged


def _section(task_obj: Task | TaskSpec, section: str, fields: set[str], schema: ConfigSchema) -> dict[str, Any]:
    """One section of the task's ``configs``, each key a field of the algorithm's config or a run key."""
    own = dict(task_obj.configs.get(section) or {})
    for key in own:
        if key not in fields and key not in RUN_KEYS:
            hint = f"; the fields are those of {schema.name}"
            raise unknown(f"config key (in task {task_obj.name!r}, section {section!r})", key, fields, hint=hint)
    return own


class ResolvedRun(dict[str, Any]):
    """A resolved run: the flat configuration (a dict, what ``config.yaml`` holds), and ``task``, the
    task when resolving had to build it (a builder function of your own: only building it tells its
    defaults), with the arguments it was built with (``task_kwargs``): :func:`build_trainer` reuses
    it rather than build it again."""

    task: Task | None = None
    task_kwargs: dict[str, Any] | None = None
    output_dir_from: str | None = None  # the file that named output_dir, when no command-line option did
    output_dir_default: bool = False  # nothing named output_dir: runs/TASK-ALG, numbered when taken
    notes: tuple[str, ...] = ()  # what resolving changed, a line each (a preset's warm-up fitted to the run)


def resolve_run(
    task: str | None = None,
    alg: str | None = None,
    model: str | None = None,
    config_file: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    output_dir: str | None = None,
    seed: int | None = None,
    task_args: dict[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Merge task defaults, the config file and overrides into one flat run configuration.

    ``options``: the command's named options (``{"model": "--model", ...}``), candidates for the "did
    you mean" of a mistyped override (``--modle``) besides the config's fields.

    ``task_args`` (the builder's keyword arguments, e.g. ``prompt_column``) are merged over the
    config file's ``task_args``. The task's defaults are read from its spec, without building it
    (:func:`hfrl.tasks.describe_task`): :func:`build_trainer` builds it, once.
    """
    from hfrl.tasks import describe_task, load_task

    file_cfg = read_config_file(config_file) if config_file else {}
    overrides = dict(overrides or {})
    run = {k: file_cfg.pop(k) for k in RUN_KEYS if k in file_cfg}
    check_run_keys(run, f"config file {config_file}")
    named = {k: overrides.pop(k) for k in RUN_KEYS if k in overrides}
    check_run_keys(named)
    run.update(named)
    run["run_id"] = uuid.uuid4().hex[:16]  # a new run, even when repeating another's config.yaml
    given = {key: value for key, value in (("task", task), ("alg", alg), ("model", model)) if value is not None}
    check_run_keys(given)  # --model '': one line now, not a Hub lookup of no name after torch
    run.update(given)
    if task_args:
        run["task_args"] = {**(run.get("task_args") or {}), **task_args}
    if "task" not in run:
        raise ValueError("no task given: pass --task NAME (see `hfrl list tasks`) or set `task:` in --config")
    run["task"] = str(run["task"])
    run.setdefault("alg", "ppo")
    from hfrl.tasks import check_task_name
    from hfrl.trainers import ALGORITHMS

    check_task_name(run["task"])  # names first: an unknown one fails before torch is imported
    if run["alg"] not in ALGORITHMS and not is_code_path(run["alg"]):
        raise unknown("algorithm", str(run["alg"]), ALGORITHMS, hint=", or a 'module:attr' path to your own algorithm")
    schema = config_schema(run["alg"])  # the config's fields, read without importing torch
    built, built_with = None, task_kwargs(run)
    spec = describe_task(run["task"], **built_with)
    if spec is None:  # your own builder function: its defaults are known once it is built
        built = load_task(run["task"], **built_with)
        spec = TaskSpec.of(built)
    model_from_task = "model" not in run
    run.setdefault("model", spec.default_model)
    from hfrl.utils.hub_access import missing_local_path

    if missing_local_path(str(run["model"])):  # said at once, not after the Hub's retries for an "owner/name"
        source = (
            "--model"
            if model is not None
            else f"model (from {'config file ' + str(config_file) if config_file else 'the task'})"
        )
        raise FileNotFoundError(
            f"{source} {run['model']}: no such folder or file; give a model folder, a .gguf file, a Hub id "
            "(owner/name) or a built-in model (tiny, tiny-t5, smollm2)"
        )

    fields = schema.names
    for source, cfg in ((f"config file {config_file}", file_cfg), ("command line", overrides)):
        for key in cfg:
            if key not in fields and key not in MODEL_KEYS:
                hint = f"; the fields are those of {schema.name} and trl.ModelConfig's (LoRA)"
                known = fields | set(MODEL_KEYS)
                option = option_typo(key, known, options or {}) if source == "command line" else None
                if option:  # --modle: the named option --model, not the field vllm_mode
                    raise UnknownNameError(f"unknown option --{key}; did you mean {option!r}? (hfrl train --help)")
                raise unknown(f"config key (from the {source})", key, known, hint=hint)
    chosen = {**preset_fields(run.get("preset"), schema), **file_cfg, **overrides}  # what the user chose
    task_run, task_fields = task_config(spec, run["alg"], schema, chosen)
    columns = spec.declared.get("columns")  # what the task's YAML says its dataset holds
    if run["alg"] == "reward" and isinstance(columns, list) and reward_columns_problem(columns):
        raise ValueError(reward_columns_problem(columns))  # the trainer's rule, before the data and torch load
    for key, value in task_run.items():  # e.g. a task's own rewards for one algorithm: lowest precedence
        if key == "task_args" and isinstance(value, dict):  # merged under the user's task arguments
            run[key] = {**value, **(run.get("task_args") or {})}
        run.setdefault(key, value)
    # the task's own model, a bare PEFT adapter: with the base the task names for it (lowest precedence)
    base = spec.default_base_model if model_from_task and "base_model" in fields else None
    task_fields = {**task_fields, "base_model": base} if base else task_fields
    try:
        file_cfg = coerce_numbers(file_cfg, schema)
    except ValueError as err:  # the file and its field, not a command-line option
        raise ValueError(f"config file {config_file}: {str(err).removeprefix('--')}") from None
    seeded = {"seed": seed} if seed is not None else {}  # --seed: checked with the other fields
    preset = preset_fields(run.get("preset"), schema)  # over the task's tuning, under the file and flags
    merged = coerce_numbers({**task_fields, **preset, **file_cfg, **overrides, **seeded}, schema)
    chosen_warmup = "critic_warmup_iterations" in file_cfg or "critic_warmup_iterations" in overrides
    notes = [] if chosen_warmup else fit_preset_warmup(merged, run.get("preset"), schema)
    check_fields(merged, schema, reward_count(run, spec, built))  # as the config's __post_init__, before torch
    from_file = None  # the file whose output_dir chose the folder (RunFolder: a new or empty one only)
    if output_dir is not None:
        merged["output_dir"] = output_dir
    elif "output_dir" in file_cfg and "output_dir" not in overrides:
        from_file = f"config file {config_file}"
    defaulted = "output_dir" not in merged
    merged.setdefault("output_dir", default_output_dir(run["task"], run["alg"]))
    if "algorithm" in fields:  # one trainer, several algorithms (the A-LoL family): the name picks it
        merged.setdefault("algorithm", run["alg"])
    resolved = ResolvedRun({**run, **merged})
    resolved.task, resolved.task_kwargs, resolved.output_dir_from = built, built_with, from_file
    resolved.output_dir_default = defaulted
    resolved.notes = tuple(notes)
    return resolved


#: the largest share of num_iterations a preset's critic warm-up takes (docs/algorithms.md §16)
PRESET_WARMUP_SHARE = 0.5


def fit_preset_warmup(fields: dict[str, Any], preset: str | None, schema: ConfigSchema) -> list[str]:
    """A preset's ``critic_warmup_iterations`` at most :data:`PRESET_WARMUP_SHARE` of the run's
    ``num_iterations`` (``fields`` changed in place), and the line that says so: the papers' warm-ups
    (VAPO's and VC-PPO's 50) are sized for runs of thousands of iterations, and would leave a short run's
    policy few or no iterations (the policy keeps at least half the run: numbers' measured 100-iteration
    VAPO run keeps its 50). A warm-up the config file or the command line gives is kept as given.

    >>> fields = {"critic_warmup_iterations": 50, "num_iterations": 20}
    >>> fit_preset_warmup(fields, "vapo", config_schema("ppo")), fields["critic_warmup_iterations"]
    (['preset vapo: critic_warmup_iterations 50 -> 10, half of num_iterations 20 (set ... to choose)'], 10)
    """
    if not preset or "critic_warmup_iterations" not in preset_fields(preset, schema):
        return []
    warmup = fields.get("critic_warmup_iterations")
    iterations = fields.get("num_iterations", schema.defaults().get("num_iterations"))
    if not isinstance(warmup, int) or not isinstance(iterations, int):
        return []
    fitted = int(iterations * PRESET_WARMUP_SHARE)
    if warmup <= fitted:
        return []
    fields["critic_warmup_iterations"] = fitted
    return [
        f"preset {preset}: critic_warmup_iterations {warmup} -> {fitted}, half of num_iterations {iterations} "
        "(set --critic_warmup_iterations to choose)"
    ]


def reward_count(run: Mapping[str, Any], spec: TaskSpec, built: Task | None) -> int | None:
    """How many reward functions the run will have: its ``rewards`` (the command line's, the config
    file's or the task's for the algorithm), else the task's (a built task's own, a declared task's
    YAML); None when that is not known before building."""
    rewards = run.get("rewards")
    if rewards is None:
        if built is not None:
            return len(built.reward_funcs)
        rewards = spec.declared.get("rewards")
        if rewards is None:
            return None
    return len(rewards) if isinstance(rewards, list) else 1


def option_typo(key: str, fields: set[str], options: Mapping[str, str]) -> str | None:
    """The named option (``--model``) that the unknown override ``key`` is closest to, when it is closer to
    one than to any field; None otherwise.

    >>> option_typo("modle", {"vllm_mode", "learning_rate"}, {"model": "--model", "output_dir": "--output-dir"})
    '--model'
    >>> option_typo("lerning_rate", {"vllm_mode", "learning_rate"}, {"model": "--model"}) is None
    True
    """
    import difflib

    close = difflib.get_close_matches(key, [*fields, *options], n=1, cutoff=0.5)
    return options[close[0]] if close and close[0] in options and close[0] not in fields else None


def preset_fields(name: str | None, schema: ConfigSchema) -> dict[str, Any]:
    """The settings of the preset ``name`` (:mod:`hfrl.trainers.presets`; none for None), each a field
    of the algorithm's config, else one line naming it."""
    if not name:
        return {}
    from hfrl.trainers.presets import read_preset

    preset = read_preset(str(name))
    for key in preset.settings:
        if key not in schema.names:
            raise ValueError(
                f"preset {preset.name} sets {key}, which {schema.name} has no field for: a preset tunes the online "
                "core with a critic (--alg ppo, nlpo, a2c)"
            )
    return dict(preset.settings)


DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")  # own data (hfrl.tasks.own_data.FORMATS)


def default_output_dir(task: str, alg: str) -> str:
    """``runs/TASK-ALG``; for a data file its name without the extension, for your own task's builder
    (``my_tasks.py:build``, ``pkg.tasks:build``) its module and name (no colon: a folder name that is
    also a valid Hub repo name). A run that finds this folder taken numbers its own (``runs/TASK-ALG-2``
    ...: :class:`~hfrl.runs.run_folder.RunFolder`), so ``my.jsonl`` and ``my.csv`` are two runs all the same.

    >>> default_output_dir("numbers", "ppo"), default_output_dir("data/my.jsonl", "ppo")
    ('runs/numbers-ppo', 'runs/my-ppo')
    >>> default_output_dir("src/my_tasks.py:build", "ppo"), default_output_dir("pkg.tasks:build", "nlpo")
    ('runs/my_tasks-build-ppo', 'runs/tasks-build-nlpo')
    """
    if is_code_path(task):
        module, _, attr = str(task).partition(":")
        stem = Path(module).stem if module.endswith(".py") else module.rpartition(".")[2]
        return os.path.join("runs", "-".join(part for part in (stem, attr.replace(".", "-"), alg) if part))
    name = Path(str(task).rstrip("/"))
    return os.path.join("runs", f"{name.stem if name.suffix.lower() in DATA_SUFFIXES else name.name}-{alg}")


def resolve_resume(output_dir: str | os.PathLike[str], **asked: Any) -> dict[str, Any]:
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
    from hfrl.runs.run_folder import restore_replaced

    restore_replaced(output_dir)  # the run that a killed --overwrite_output_dir start moved aside is this one
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
    schema = config_schema(str(saved.get("alg", "ppo")))
    defaults = schema.defaults()
    asked = coerce_numbers(asked, schema)
    from hfrl.utils.secrets import masked, redacted

    changed = {k: v for k, v in asked.items() if saved.get(k, defaults.get(k)) != v}
    # config.yaml holds no secrets: a token given again (model_init_kwargs: {token: ...}) changes nothing
    unsafe = {k: v for k, v in changed.items() if k not in RESUMABLE and saved.get(k, defaults.get(k)) != redacted(v)}
    if unsafe:
        diff = ", ".join(
            f"{k} {masked(saved.get(k, defaults.get(k)))!r} -> {masked(v)!r}" for k, v in sorted(unsafe.items())
        )
        raise ValueError(
            f"--resume: the run in {output_dir} differs from this command ({diff}); resume it with its own settings "
            f"(only {', '.join(sorted(RESUMABLE - {'resume_from_checkpoint', 'hub_token'})[:6])}, ... may change) "
            "or start a new run with another --output-dir"
        )
    resumed = resolve_run(config_file=path, overrides=changed, output_dir=str(output_dir))
    resumed["run_id"] = saved.get("run_id")  # the same run (None for a run saved before hfrl recorded ids)
    return resumed


def split_run(run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run-level keys, config fields)."""
    return {k: run[k] for k in RUN_KEYS if k in run}, {k: v for k, v in run.items() if k not in RUN_KEYS}


def _check_prompt_count(task: Task, fields: dict[str, Any]) -> None:
    """An online run needs ``rollout_batch_size`` train prompts per process for one rollout (the trainer
    checks it too; here it is said before torch is imported and the prompts are tokenized)."""
    size = fields.get("rollout_batch_size")
    train = task.dataset.get("train") if hasattr(task.dataset, "get") else None
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if isinstance(size, int) and train is not None and len(train) < size * processes:
        raise ValueError(
            f"the train dataset has {len(train)} prompts, fewer than one rollout ({size} x {processes} processes); "
            "lower rollout_batch_size or add prompts"
        )


def _check_reward_inputs(task: Task, name: str, schema: ConfigSchema) -> None:
    """The columns the rewards read (their registry entries' ``inputs``), checked on the train split
    when the rewards score it: a config with ``reward_weights`` (the online and offline RL algorithms;
    SFT, DPO and a reward model keep the rewards for evaluation only)."""
    from hfrl.rewards import missing_inputs_problem

    train = task.dataset.get("train") if hasattr(task.dataset, "get") else None
    if train is None or "reward_weights" not in schema.names:
        return
    problem = missing_inputs_problem(task.reward_funcs, train.column_names, f"the train split of task {name!r}")
    if problem:
        raise ValueError(problem)


def build_trainer(run: dict[str, Any], **trainer_kwargs: Any) -> Any:
    """The trainer for a resolved run: task dataset, rewards and metrics, model, config; its ``run_facts``
    (:class:`~hfrl.trainers.run_facts.RunFacts`: the run's id and definition, the task's splits) set once."""
    from hfrl.core.model_args import model_loading, split_model_fields
    from hfrl.tasks import load_task

    run_keys, fields = split_run(run)
    kwargs = task_kwargs(run_keys)
    task = getattr(run, "task", None)  # built while resolving (your own builder), when its arguments still hold
    if task is None or getattr(run, "task_kwargs", None) != kwargs:
        task = load_task(run_keys["task"], **kwargs)
    schema = config_schema(run_keys["alg"])
    _check_prompt_count(task, {**schema.defaults(), **fields})  # before torch is imported
    _check_reward_inputs(task, run_keys["task"], schema)  # so are the rewards' columns
    trainer_class = algorithm_trainer(run_keys["alg"])
    peft_config, init_kwargs = model_loading(
        run_keys["model"], split_model_fields(fields, config_fields(trainer_class.config_class))
    )
    if init_kwargs:
        fields["model_init_kwargs"] = {**(fields.get("model_init_kwargs") or {}), **init_kwargs}
    if peft_config is not None:
        trainer_kwargs.setdefault("peft_config", peft_config)
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(trainer_class.config_class).parse_dict(fields)  # the fields checked above
    if run_keys.get("eval_test"):
        from hfrl.runs.run_eval import EvalBeforeAfter

        callbacks = list(trainer_kwargs.pop("callbacks", None) or [])
        evaluator = EvalBeforeAfter(run_keys["task"], "test", loaded=task)  # the task built above: loaded once
        trainer_kwargs["callbacks"] = [*callbacks, evaluator]
    trainer = trainer_class(
        model=run_keys["model"],
        args=args,
        reward_funcs=task.reward_funcs,
        train_dataset=task.dataset["train"],
        eval_dataset=task.dataset.get("validation"),
        metrics=task.metrics,
        **trainer_kwargs,
    )
    # the run's id is recorded in each checkpoint, checked on resume: the first process's, on every process (each
    # drew its own); so is what defines the run
    run["run_id"] = first_process_value(run_keys.get("run_id"))
    trainer.run_facts = RunFacts(
        run_id=run["run_id"],
        definition={k: run_keys.get(k) for k in RUN_DEFINITION},
        splits=tuple(task.dataset),  # what `hfrl eval RUN --split` can name (hfrl train's last lines)
        dataset=task.dataset,  # a reward model's held-out pairs (hfrl.runs.run_eval.heldout_pairs)
        reward_model=callable(getattr(trainer_class, "pair_accuracy", None)),
    )
    return trainer


def first_process_value(value: Any) -> Any:
    """``value`` as the first process has it, on every process (itself without a process group):
    a new run's id is drawn by each process, and config.yaml and the checkpoints must name one."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save_run_config(run: dict[str, Any], trainer: Any) -> str:
    """``config.yaml``: the run keys, then every field of the algorithm's own config (its resolved
    values) and every TrainingArguments field that was set explicitly. Fields the config derives from
    others (its class's ``derived_fields``: TRL's GRPO ``generation_batch_size`` / ``steps_per_generation``,
    which it refuses both set) are recorded as given, so that the file reads back as the same config."""
    run_keys, explicit = split_run(run)
    args = trainer.args
    own = {f.name for f in dataclasses.fields(type(args))} - {
        f.name for f in dataclasses.fields(__import__("transformers").TrainingArguments)
    }
    derived = set(getattr(type(args), "derived_fields", ()))  # set by the config itself: recorded as given
    resolved = {  # ModelConfig flags are not args: their values are the run's
        name: explicit.get(name) if name in derived or not hasattr(args, name) else getattr(args, name)
        for name in sorted(own | set(explicit))
    }
    path = os.path.join(args.output_dir, CONFIG_NAME)
    if not trainer.is_world_process_zero():
        return path  # written once (several processes writing one file could interleave)
    os.makedirs(args.output_dir, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(config_text({**run_keys, **resolved}, path))  # never a secret: pushed with the model
    return path


def last_checkpoint(output_dir: str) -> bool:
    """``True`` (the trainer takes the newest *complete* checkpoint of the run, checking its files and
    that this run wrote it: :mod:`hfrl.trainers.checkpoints`) once the run has a checkpoint at all."""
    from hfrl.trainers.checkpoints import checkpoints_newest_first

    if not checkpoints_newest_first(output_dir):
        from hfrl.runs.run_folder import stopped_before_checkpoint, stopped_early

        if stopped_before_checkpoint(output_dir):  # killed before --save_every came round: nothing to resume
            raise ValueError(stopped_early(output_dir))
        raise ValueError(f"--resume: no checkpoint-* folder in {output_dir}; train with --save_every N first")
    return True


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
