"""``hfrl train``: train a model on a task with an algorithm.

hfrl train --task numbers --alg ppo --model tiny --output-dir runs/numbers
hfrl train --task my.jsonl --prompt-column question --references-column answers --model tiny
"""

from __future__ import annotations

from typing import Annotated

import typer

HELP = """Train a model on a task with an RL algorithm.

The task is a registered name (hfrl list tasks), your own data (a .jsonl / .json / .csv / .tsv /
.parquet file, a folder of them or a Hub dataset id, with --prompt-column / --references-column)
or a module:attr path to your own task. --task-arg KEY=VALUE passes an argument to the task
(e.g. data_dir=DIR, reward_config=openrl, revision=COMMIT); in a config file: task_args: {...}.
The env variable HFRL_DATA_DIR=DIR makes the GRUE tasks read DIR/<task>/ instead of the Hub.

Any config field can be overridden after the named options, as --FIELD VALUE or --FIELD=VALUE
(values are read as YAML: 1e-3, true, null, [1, 2], {top_k: 20}); see the fields of the
algorithm's config class (e.g. hfrl.PPOConfig, trl.GRPOConfig for --alg grpo). Precedence: task
defaults < --config < flags.

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
"""

TaskOpt = Annotated[str | None, typer.Option("--task", "-t", help="Task name (hfrl list tasks), or module:attr.")]
AlgOpt = Annotated[str | None, typer.Option("--alg", "-a", help="Algorithm (hfrl list algs). Default: ppo.")]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Hub id, local directory, .gguf file, or built-in tiny / tiny-t5 / smollm2."),
]
ConfigOpt = Annotated[str | None, typer.Option("--config", "-c", help="YAML file of config fields.")]
OutOpt = Annotated[str | None, typer.Option("--output-dir", "-o", help="Run directory (default runs/TASK-ALG).")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Random seed.")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Resume from the last checkpoint in the output dir.")]
PromptColumnOpt = Annotated[
    str | None, typer.Option("--prompt-column", help="Own data: the column holding the prompts (default prompt).")
]
ReferencesColumnOpt = Annotated[
    str | None,
    typer.Option("--references-column", help="Own data: the column holding the references (default references)."),
]
TaskArgOpt = Annotated[
    list[str] | None, typer.Option("--task-arg", help="KEY=VALUE argument of the task's builder (repeatable).")
]
EvalTestOpt = Annotated[
    bool, typer.Option("--eval-test", help="Evaluate on the task's test split before and after training.")
]


def train(
    ctx: typer.Context,
    task: TaskOpt = None,
    alg: AlgOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    output_dir: OutOpt = None,
    seed: SeedOpt = None,
    resume: ResumeOpt = False,
    eval_test: EvalTestOpt = False,
    prompt_column: PromptColumnOpt = None,
    references_column: ReferencesColumnOpt = None,
    task_arg: TaskArgOpt = None,
) -> None:
    from hfrl.experiment import build_trainer, last_checkpoint, parse_overrides, resolve_run, save_run_config

    task_args = parse_task_args(task_arg or [])
    task_args.update(
        {k: v for k, v in (("prompt_column", prompt_column), ("references_column", references_column)) if v}
    )
    overrides = parse_overrides(list(ctx.args))
    run = resolve_run(task, alg, model, config, overrides, output_dir, seed, task_args=task_args)
    if eval_test:
        run["eval_test"] = True
    checkpoint = last_checkpoint(run["output_dir"]) if resume else run.pop("resume_from_checkpoint", None)
    trainer = build_trainer(run)
    save_run_config(run, trainer)
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


def parse_task_args(items: list[str]) -> dict:
    """``["reward_config=openrl", "max_samples=100"]`` -> ``{"reward_config": "openrl", "max_samples": 100}``
    (values read as YAML)."""
    from hfrl.experiment import load_yaml

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--task-arg takes KEY=VALUE, got {item!r}")
        out[key.strip().replace("-", "_")] = load_yaml(value) if value != "" else ""
    return out
