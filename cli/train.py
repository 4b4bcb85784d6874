"""``hfrl train``: train a model on a task with an algorithm.

hfrl train --task numbers --alg ppo --model tiny --output-dir runs/numbers
hfrl train --task my.jsonl --prompt-column question --references-column answers --model tiny
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from hfrl.cli._options import (
    AlgOpt,
    BaseModelOpt,
    ModelOpt,
    OutputDirOpt,
    SeedOpt,
    TaskArgOpt,
    TaskOpt,
    TrustCodeOpt,
    parse_task_args,
)

HELP = """Train a model on a task with an RL algorithm.

The task is a registered name (hfrl list tasks), your own data (a .jsonl / .json / .csv / .tsv /
.parquet file, a folder of them or a Hub dataset id, with --prompt-column / --references-column)
or a module:attr path to your own task. --task-arg KEY=VALUE passes an argument to the task
(e.g. data_dir=DIR, reward_config=openrl, revision=COMMIT); in a config file: task_args: {...}.
The env variable HFRL_DATA_DIR=DIR makes the GRUE tasks read DIR/<task>/ instead of the Hub.

Any config field can be overridden after the named options, as --FIELD VALUE or --FIELD=VALUE
(values are read as YAML: 1e-3, true, null, [1, 2], {top_k: 20}). `hfrl list fields --alg ALG`
lists the algorithm's fields with their defaults (hfrl.PPOConfig, trl.GRPOConfig for --alg grpo,
...); every transformers.TrainingArguments field works too, e.g. --report_to tensorboard (or wandb,
trackio; default none) and --logging_dir DIR. LoRA and 4/8-bit loading take TRL's ModelConfig flags:
--use_peft --lora_r 16 --lora_alpha 32 --lora_dropout 0.05 --lora_target_modules "[q_proj, v_proj]".
TRL's script names work too: --model_name_or_path is --model, --dataset_name is --task (a Hub
dataset id or a data file), --dataset_config its subset.
Precedence: task defaults < --preset < --config < flags.

Without --output-dir a run writes runs/TASK-ALG, or the first free of runs/TASK-ALG-2, -3, ... when
that holds a run (never over another run). Before anything loads, the run is checked as `hfrl check`
does: offline, what is neither cached nor local stops it at once, and so does a missing WordNet (for a
METEOR reward) or a --report_to package.

Online algorithms count in iterations (one rollout and its updates): --num_iterations, --save_every,
--eval_every. Checkpoints and logging steps keep the Trainer's optimizer-step numbering: iteration k
ends at step k x steps_per_iteration (num_ppo_epochs x rollout_batch_size / mini_batch_size), and
each log entry carries its `iteration`.

\b
Examples:
  hfrl train --task numbers --alg ppo --model tiny
  hfrl train --task numbers --alg ppo --model tiny --learning_rate 5e-4 --num_iterations 50
  hfrl train --config runs/numbers-ppo/config.yaml -o runs/numbers-again --save_every 10
  hfrl train --task numbers --output-dir runs/n --resume
  hfrl train --task numbers --resume      # the newest checkpointed run of runs/numbers-ppo, -2, ...
  hfrl train --model_name_or_path tiny --dataset_name numbers --alg grpo   # TRL's script names
  hfrl train --task numbers --eval-test   # test-split metrics before/after, in the model card
  hfrl train --task numbers --alg ppo --preset vapo   # VAPO's techniques over the task's tuning
  hfrl train --task daily_dialog --alg nlpo --task-arg reward_config=openrl
  hfrl train --task my.jsonl --alg ppo --model tiny --prompt-column question
  hfrl train --task numbers --alg grpo --model tiny --max_steps 20
  hfrl train --task numbers --alg ppo --model tiny --use_peft --lora_r 8 --report_to tensorboard
  hfrl train --task hh --alg ppo --model timdettmers/qlora-hh-rlhf-7b --base-model huggyllama/llama-7b
"""

ConfigOpt = Annotated[str | None, typer.Option("--config", "-c", help="YAML file of config fields.")]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the run in the output dir from its last complete checkpoint, with its own config.yaml "
        "(flags may change only when and how it saves, evaluates and logs, and --num_iterations).",
    ),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite_output_dir",
        "--overwrite-output-dir",
        help="Replace the run already in the output dir (by default a new run never overwrites another).",
    ),
]
PromptColumnOpt = Annotated[
    str | None, typer.Option("--prompt-column", help="Own data: the column holding the prompts (default prompt).")
]
ReferencesColumnOpt = Annotated[
    str | None,
    typer.Option("--references-column", help="Own data: the column holding the references (default references)."),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        help="CPU threads for torch (default: 1 for a model under 50M parameters on the CPU when OMP_NUM_THREADS "
        "is unset, else one per core).",
    ),
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="A named set of settings over the task's (hfrl list presets: vapo, sao, vc_ppo, rl4lms); --config and "
        "flags still win.",
    ),
]
EvalTestOpt = Annotated[
    bool, typer.Option("--eval-test", help="Evaluate on the task's test split before and after training.")
]


def help_text(alg: str = "ppo") -> str:
    """The command's help: :data:`HELP`, then ``alg``'s fields as ``hfrl list fields`` lists them (one
    source: :func:`hfrl.trainers.schema.option_rows`, read without importing torch)."""
    from hfrl.trainers.schema import option_rows

    rows = option_rows(alg)
    width = max(len(name) for name, _ in rows)
    fields = "\n".join(f"  {name.ljust(width)}  {text}" for name, text in rows)
    return f"{HELP}\n\b\nFields of --alg {alg} (hfrl list fields --alg ALG for another algorithm's):\n{fields}\n"


def train(
    ctx: typer.Context,
    task: TaskOpt = None,
    alg: AlgOpt = None,
    model: ModelOpt = None,
    base_model: BaseModelOpt = None,
    config: ConfigOpt = None,
    output_dir: OutputDirOpt = None,
    seed: SeedOpt = None,
    resume: ResumeOpt = False,
    preset: PresetOpt = None,
    eval_test: EvalTestOpt = False,
    prompt_column: PromptColumnOpt = None,
    references_column: ReferencesColumnOpt = None,
    task_arg: TaskArgOpt = None,
    threads: ThreadsOpt = None,
    trust_code: TrustCodeOpt = False,
    overwrite_output_dir: OverwriteOpt = False,
) -> None:
    options = {k: v for k, v in locals().items() if k not in ("ctx", "trust_code")}  # the parameters, as given
    from hfrl.utils.trust import trusted_code

    # the named options, as the fields they would be: "did you mean" candidates for a mistyped override (--modle)
    options["named"] = {o[2:].replace("-", "_"): o for p in ctx.command.params for o in p.opts if o.startswith("--")}
    with trusted_code(trust_code), _sigterm_before_start() as starting:  # --trust-code: the user's one switch
        _train(list(ctx.args), starting=starting, **options)


class _StoppedBeforeStart(BaseException):  # no Exception: a library's `except Exception` does not swallow it
    pass


@contextlib.contextmanager
def _sigterm_before_start() -> Iterator[Callable[[], None]]:
    """Until training starts (the function it yields is called; :func:`stop_on_sigterm` takes over),
    SIGTERM stops the command with one line and exit code 143: loading a model or a data set takes
    minutes, and Python's default died without a word. The run folder rolls back what the start wrote
    (:class:`~hfrl.runs.run_folder.RunFolder`): nothing was saved. Afterwards, SIGTERM is Python's default."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # Python takes signals on its main thread
        yield lambda: None
        return
    started = [False]

    def handle(signum: int, frame: object) -> None:
        if started[0]:  # after training (the final save): as if hfrl had not caught it
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        raise _StoppedBeforeStart

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield lambda: started.__setitem__(0, True)
    except _StoppedBeforeStart:
        if os.environ.get("RANK", "0") in ("", "0"):  # the first process of a launch says it
            typer.echo("stopped by SIGTERM before training started: nothing was saved (the output folder is as it was)")
        raise typer.Exit(143) from None  # 128 + SIGTERM, as after an iteration
    finally:
        signal.signal(signal.SIGTERM, previous)


def _train(
    extra: list[str], *, threads: int | None, resume: bool, overwrite_output_dir: bool,
    starting: Callable[[], None] = lambda: None, **asked: Any,
) -> None:  # fmt: skip
    """The command: the launch checked, the run resolved from the command line, then trained
    (:func:`hfrl.runs.train_run.train_run`: the folder, the trainer, SIGTERM, the closing lines)."""
    from hfrl.runs.train_run import StoppedBySigterm, check_launch, train_run

    check_launch(threads)  # rank variables, devices, --threads: one line each, before anything else
    run = _resolve(extra, resume=resume, **asked)
    try:
        train_run(run, resume=resume, overwrite=overwrite_output_dir, threads=threads, starting=starting,
                  say=typer.echo)  # fmt: skip
    except StoppedBySigterm as stop:
        raise typer.Exit(stop.exit_code) from None  # what a job scheduler expects of a terminated process


def _resolve(
    extra: list[str], *, named: dict[str, str], task: str | None, alg: str | None, model: str | None,
    base_model: str | None, config: str | None, output_dir: str | None, seed: int | None, resume: bool,
    preset: str | None, eval_test: bool, prompt_column: str | None, references_column: str | None,
    task_arg: list[str] | None,
) -> dict[str, Any]:  # fmt: skip
    """The run the command line names (a new one, or the one ``--resume`` continues), checked as
    ``hfrl check`` checks it before anything loads; what resolving changed is said."""
    from hfrl.runs import experiment
    from hfrl.runs.train_run import resume_folder
    from hfrl.utils.trust import check_command_line

    if output_dir is not None and not output_dir.strip():
        raise ValueError("--output-dir is empty: give the run's folder (default: runs/TASK-ALG)")
    task_args = parse_task_args(task_arg or [])
    task_args.update(
        {k: v for k, v in (("prompt_column", prompt_column), ("references_column", references_column)) if v}
    )
    overrides = check_command_line(experiment.parse_overrides(extra))
    reward_model_flag(overrides)
    task, model = trl_script_names(overrides, task, model, task_args)
    check_command_line({"task_arg": task_args})
    if base_model:  # the config field base_model: the base a PEFT adapter given as --model loads onto
        overrides["base_model"] = base_model
    if preset:  # a run key: config.yaml records it beside the values it set
        overrides["preset"] = preset
    if resume:
        out = output_dir or resume_folder(task, alg, model, say=typer.echo)
        asked = {"task": task, "alg": alg, "model": model, "seed": seed, "task_args": task_args}
        run = experiment.resolve_resume(out, config_file=config, overrides=overrides, **asked)
    else:
        run = experiment.resolve_run(task, alg, model, config, overrides, output_dir, seed, task_args=task_args,
                                     options=named)  # fmt: skip
    for note in getattr(run, "notes", ()):  # what resolving changed (a preset's warm-up fitted to the run)
        typer.echo(note)
    if eval_test:
        run["eval_test"] = True
    _preflight(run)
    return run


def reward_model_flag(overrides: dict[str, Any]) -> None:
    """``--reward_model RUN_OR_ID`` (TRL's scripts: ``--reward_model_path``): the ``reward_model``
    reward on that model, in place of the task's rewards, or beside those of ``--rewards``.

    >>> o = {"reward_model": "runs/hh-reward"}; reward_model_flag(o); o
    {'rewards': [{'id': 'reward_model', 'args': {'model': 'runs/hh-reward'}}]}
    """
    for name in ("reward_model", "reward_model_path"):
        if name not in overrides:
            continue
        model = overrides.pop(name)
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"--{name} takes a reward model: an hfrl train --alg reward run folder or a Hub id")
        given = overrides.get("rewards") or []
        given = given if isinstance(given, list) else [given]
        overrides["rewards"] = [*given, {"id": "reward_model", "args": {"model": model}}]


def _preflight(run: dict[str, Any]) -> None:
    """What would stop the run, said before anything loads (:func:`hfrl.cli.check.run_problems`): the
    first problem, and how to list them all."""
    from hfrl.cli.check import run_problems

    problems = run_problems(run)
    if problems:
        import shlex

        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        check = ["hfrl", "check", "--task", str(run["task"]), "--alg", str(run["alg"]), "--model", str(run["model"])]
        check += [f"--task-arg={k}={v}" for k, v in (run.get("task_args") or {}).items()]
        raise RuntimeError(f"cannot start: {problems[0]}{more}; `{shlex.join(check)}` lists what the run needs")


# TRL's example scripts' flags (trl.ModelConfig, trl.ScriptArguments) -> hfrl train's options
TRL_SCRIPT_NAMES = {"model_name_or_path": "--model", "dataset_name": "--task", "dataset_config": "--task-arg subset="}


def trl_script_names(
    overrides: dict[str, Any], task: str | None, model: str | None, task_args: dict[str, Any]
) -> tuple[str | None, str | None]:
    """TRL's script flags taken for what they name: ``--model_name_or_path`` is ``--model``,
    ``--dataset_name`` is ``--task`` (a Hub dataset id, a data file or folder, or an hfrl task),
    ``--dataset_config`` the own-data task's ``subset``. Removed from ``overrides``; ``(task, model)``.

    >>> over, args = {"model_name_or_path": "gpt2", "dataset_name": "me/data", "dataset_config": "en"}, {}
    >>> trl_script_names(over, None, None, args), over, args
    (('me/data', 'gpt2'), {}, {'subset': 'en'})
    """
    for name, ours, current in (("model_name_or_path", "--model", model), ("dataset_name", "--task", task)):
        if name not in overrides:
            continue
        value = overrides.pop(name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"--{name} (TRL's name for {ours}) takes a name or a path, got {value!r}")
        if current is not None and current != value:
            raise ValueError(f"--{name} is TRL's name for {ours}: give one of them ({current!r} or {value!r})")
        if name == "model_name_or_path":
            model = value
        else:
            task = value
    if "dataset_config" in overrides:
        task_args.setdefault("subset", overrides.pop("dataset_config"))
    return task, model
