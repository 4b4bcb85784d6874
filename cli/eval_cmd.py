"""``hfrl eval``: evaluate a run or a model on a task split; predictions and metrics saved beside it.

hfrl eval runs/numbers-ppo --split test
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from hfrl.cli._options import BaseModelOpt, ModelArg, OutputDirOpt, SeedOpt, TaskOpt, TrustCodeOpt

if TYPE_CHECKING:
    from hfrl.runs.run_dir import Run

HELP = """Evaluate a run (or any model) on a task split with the task's evaluation settings.

Generates a completion for every prompt of the split (greedy unless the run's eval_generation_kwargs
say otherwise), computes the task's rewards and metrics, saves eval/SPLIT.json and
predictions/SPLIT.jsonl in the run directory, and prints a table. --base evaluates the model the run
started from instead (eval/SPLIT-base.json): the "before" column of the model card.

\b
Examples:
  hfrl eval runs/numbers-ppo --split test
  hfrl eval runs/numbers-ppo --split test --base
  hfrl eval tiny --task numbers --max-samples 16 --output-dir runs/eval-tiny
"""

SplitOpt = Annotated[str, typer.Option("--split", "-s", help="Dataset split of the task.")]
BaseOpt = Annotated[bool, typer.Option("--base", help="Evaluate the run's base model (before training).")]
MaxOpt = Annotated[int | None, typer.Option("--max-samples", "-n", help="Evaluate only the first N prompts.")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", "-b", help="Prompts per generate call.")]


def eval_(
    model: ModelArg,
    task: TaskOpt = None,
    split: SplitOpt = "test",
    base: BaseOpt = False,
    base_model: BaseModelOpt = None,
    max_samples: MaxOpt = None,
    batch_size: BatchOpt = None,
    output_dir: OutputDirOpt = None,
    seed: SeedOpt = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    from hfrl.runs.run_config import BASE_SUFFIX
    from hfrl.runs.run_dir import open_run, refuse_scorer
    from hfrl.utils.trust import trusted_code

    for flag, count in (("--batch-size", batch_size), ("--max-samples", max_samples)):
        if count is not None and count < 1:  # before torch (hfrl.runs.run_eval.load_split checks it too)
            raise ValueError(f"{flag} must be >= 1, got {count}")
    if task is not None:
        from hfrl.tasks import check_task_name

        check_task_name(task)  # an unknown name: one line before torch, as hfrl train says it
    with trusted_code(trust_code):
        run = open_run(model)  # the folder and its config.yaml checked before torch is imported
        refuse_scorer(run, "eval", task)  # a reward model: one line before torch, too
        _check_declared_split(run, task, split)
        from hfrl.runs.run_eval import evaluate, format_table

        result = evaluate(run, task, split, base, output_dir, max_samples, batch_size, base_model, seed or 0)
    columns = {"before" if base else "after": result.report}
    other = result.metrics_path.with_name(split + ("" if base else BASE_SUFFIX) + ".json")
    if other.is_file():  # the other side of before/after, from an earlier run of hfrl eval
        import json

        columns["after" if base else "before"] = json.loads(other.read_text())
    typer.echo(
        f"{result.report['model']} on {result.report['task']} / {split} ({result.report['num_samples']} prompts)"
    )
    typer.echo(format_table(columns))
    typer.echo(f"saved {result.metrics_path} and {result.predictions_path}")


def _check_declared_split(run: Run, task: str | None, split: str) -> None:
    """A split that the task's YAML declares it does not have (``splits``): one line before torch; the
    built dataset is the last word (:func:`hfrl.runs.run_eval.load_split`)."""
    from hfrl.runs.run_config import task_kwargs
    from hfrl.tasks import describe_task
    from hfrl.trainers.field_rules import split_problem

    name = task or run.task
    if not name:
        return
    spec = describe_task(name, **(task_kwargs(run.config) if name == run.task else {}))
    splits = spec.declared.get("splits") if spec is not None else None
    problem = split_problem(name, split, splits) if isinstance(splits, list) else None
    if problem:
        raise ValueError(problem)
