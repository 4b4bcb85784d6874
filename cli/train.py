"""``hfrl train``: train a model on a task with an algorithm.

hfrl train --task numbers --alg ppo --model tiny --output-dir runs/numbers
hfrl train --task my.jsonl --prompt-column question --references-column answers --model tiny
"""

from __future__ import annotations

from typing import Annotated

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
Precedence: task defaults < --config < flags.

Online algorithms count in iterations (one rollout and its updates): --num_iterations, --save_every,
--eval_every. Checkpoints and logging steps keep the Trainer's optimizer-step numbering: iteration k
ends at step k x steps_per_iteration (num_ppo_epochs x rollout_batch_size / mini_batch_size), and
each log entry carries its `iteration`.

\b
Examples:
  hfrl train --task numbers --alg ppo --model tiny
  hfrl train --task numbers --alg ppo --model tiny --learning_rate 5e-4 --num_iterations 50
  hfrl train --config runs/numbers-ppo/config.yaml --save_every 10
  hfrl train --task numbers --output-dir runs/n --resume
  hfrl train --task numbers --eval-test   # test-split metrics before/after, in the model card
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

    with trusted_code(trust_code):  # the whole command: --trust-code is the user's one switch for code
        _train(list(ctx.args), **options)


def _train(
    extra: list[str], *, task, alg, model, base_model, config, output_dir, seed, resume, eval_test, prompt_column,
    references_column, task_arg, threads, overwrite_output_dir,
) -> None:  # fmt: skip
    from hfrl.runs import experiment
    from hfrl.runs.run_folder import RunFolder
    from hfrl.utils.trust import check_command_line

    task_args = parse_task_args(task_arg or [])
    task_args.update(
        {k: v for k, v in (("prompt_column", prompt_column), ("references_column", references_column)) if v}
    )
    overrides = check_command_line(experiment.parse_overrides(extra))
    check_command_line({"task_arg": task_args})
    if base_model:  # the config field base_model: the base a PEFT adapter given as --model loads onto
        overrides["base_model"] = base_model
    if resume:
        out = output_dir or _run_dir(task, alg)
        asked = {"task": task, "alg": alg, "model": model, "seed": seed, "task_args": task_args}
        run = experiment.resolve_resume(out, config_file=config, overrides=overrides, **asked)
    else:
        run = experiment.resolve_run(task, alg, model, config, overrides, output_dir, seed, task_args=task_args)
    if eval_test:
        run["eval_test"] = True
    folder = RunFolder(run["output_dir"], overwrite=overwrite_output_dir, resume=resume,
                       from_file=getattr(run, "output_dir_from", None))  # fmt: skip
    with folder:  # locked; a start that fails leaves it as it was; one run per folder
        checkpoint = (
            experiment.last_checkpoint(run["output_dir"]) if resume else run.pop("resume_from_checkpoint", None)
        )
        trainer = experiment.build_trainer(run)
        from hfrl.trainers.devices import set_cpu_threads

        set_cpu_threads(trainer.model, threads, use_cpu=trainer.args.use_cpu or trainer.args.device.type == "cpu")
        experiment.save_run_config(run, trainer)
        trainer.add_callback(folder.callback)
        trainer.train(resume_from_checkpoint=checkpoint)
        trainer.save_model()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    if trainer.is_world_process_zero() and rewards:
        last = rewards[-10:]
        typer.echo(
            f"reward: first iteration {rewards[0]:.3f}, mean of the last {len(last)} {sum(last) / len(last):.3f}; "
            f"saved to {trainer.args.output_dir}"
        )
    elif trainer.is_world_process_zero():  # no reward logged (SFT, DPO): the loss
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        loss = f"loss: first {losses[0]:.3f}, last {losses[-1]:.3f}; " if losses else ""
        typer.echo(f"{loss}saved to {trainer.args.output_dir}")


def _run_dir(task: str | None, alg: str | None) -> str:
    """The folder --resume continues without --output-dir: runs/TASK-ALG (a path read from a file never
    chooses the folder a command writes into)."""
    from hfrl.runs.experiment import default_output_dir

    if not task:
        raise ValueError("--resume: which run? pass --output-dir DIR (or --task, for runs/TASK-ALG)")
    return default_output_dir(task, alg or "ppo")


def parse_task_args(items: list[str]) -> dict:
    """``["reward_config=openrl", "max_samples=100"]`` -> ``{"reward_config": "openrl", "max_samples": 100}``
    (values read as YAML)."""
    from hfrl.runs.run_config import load_yaml

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--task-arg takes KEY=VALUE, got {item!r}")
        out[key.strip().replace("-", "_")] = load_yaml(value) if value != "" else ""
    return out
