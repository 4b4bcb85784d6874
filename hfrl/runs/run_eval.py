"""``hfrl eval``: generate on a task split with the task's evaluation settings, compute its rewards
and metrics, save predictions (jsonl) and metrics (json) beside the run.

    hfrl eval runs/numbers-ppo --split test          # after training  -> eval/test.json
    hfrl eval runs/numbers-ppo --split test --base   # the base model  -> eval/test-base.json

    from hfrl.runs.run_eval import evaluate
    report = evaluate("runs/numbers-ppo", split="test")

``EvalBeforeAfter`` does the same inside training: pass ``callbacks=[EvalBeforeAfter("numbers")]``
to a trainer and the test split is evaluated before the first and after the last iteration.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from transformers import TrainerCallback

from hfrl.runs.run_config import BASE_SUFFIX, EVAL_DIR, PREDICTIONS_DIR, task_kwargs
from hfrl.runs.run_dir import Run, open_run, refuse_scorer
from hfrl.trainers.evaluation import EVAL_FIELDS, completer, eval_mode, eval_settings, generation_kwargs
from hfrl.trainers.field_rules import split_problem
from hfrl.utils.cache import write_atomic

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from hfrl.tasks import Task


def _completer(lm: Any, tokenizer: Any, settings: dict[str, Any]) -> Callable[[Any], list[str]]:
    """:func:`hfrl.trainers.evaluation.completer` with the evaluation settings (greedy by default)."""
    return completer(
        lm,
        tokenizer,
        generation_kwargs(settings),
        settings.get("max_prompt_length"),
        settings.get("truncation_side", "left"),
    )


def generate_completions(
    lm: Any, tokenizer: Any, prompts: list[Any], settings: dict[str, Any], batch_size: int
) -> list[str]:
    """Completions of ``prompts`` with the evaluation generation settings (``hfrl chat``)."""
    complete = _completer(lm, tokenizer, settings)
    with eval_mode(lm):
        return [
            c for i in range(0, len(prompts), batch_size) for c in complete({"prompt": prompts[i : i + batch_size]})
        ]


def evaluate_model(
    lm: Any,
    tokenizer: Any,
    dataset: Any,
    reward_funcs: Sequence[Callable[..., Any]],
    metrics: dict[str, Callable[..., Any]],
    settings: dict[str, Any],
    batch_size: int | None = None,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """``(metrics, records)`` of ``lm`` on ``dataset`` (a split with a ``prompt`` column); metric
    names without a prefix (``reward``, ``rewards/<name>``, the task's metrics)."""
    from hfrl.trainers.evaluation import Scoring, generate_and_score

    weights = settings.get("reward_weights") or [1.0] * len(reward_funcs)
    if len(weights) != len(reward_funcs):
        raise ValueError(f"reward_weights has {len(weights)} entries for {len(reward_funcs)} reward functions")
    batch_size = batch_size or settings.get("per_device_eval_batch_size") or 8
    with eval_mode(lm):
        scoring = Scoring(reward_funcs, weights, metrics, policy=lm, tokenizer=tokenizer)
        scores, records = generate_and_score(
            dataset, _completer(lm, tokenizer, settings), scoring, batch_size=batch_size
        )
    return {k.removeprefix("eval_"): v for k, v in scores.items()}, records


def load_split(task: Task, split: str, max_samples: int | None = None) -> Any:
    problem = split_problem(task.name, split, list(task.dataset))  # hfrl eval checks declared splits before torch
    if problem:
        own = "" if split != "test" or "test" in task.dataset else (
            "; your own data: give a folder holding train.jsonl and test.jsonl (or .csv ...), or hold rows out of "
            "train when training with --task-arg test_size=0.1 (a fraction or a row count)"
        )  # fmt: skip
        raise ValueError(problem + own)
    dataset = task.dataset[split]
    if max_samples is not None:
        if max_samples < 1:
            raise ValueError(f"--max-samples must be >= 1, got {max_samples}")
        dataset = dataset.select(range(min(max_samples, len(dataset))))
    if len(dataset) == 0:
        raise ValueError(f"split {split!r} of task {task.name!r} is empty")
    return dataset


def save_eval(
    output_dir: str | os.PathLike[str],
    split: str,
    report: dict[str, Any],
    records: list[dict[str, Any]],
    base: bool = False,
) -> tuple[Path, Path]:
    """``eval/{split}[-base].json`` and ``predictions/{split}[-base].jsonl`` under ``output_dir``."""
    stem = split + (BASE_SUFFIX if base else "")
    out = Path(output_dir)
    (out / EVAL_DIR).mkdir(parents=True, exist_ok=True)
    (out / PREDICTIONS_DIR).mkdir(parents=True, exist_ok=True)
    metrics_path, predictions_path = out / EVAL_DIR / f"{stem}.json", out / PREDICTIONS_DIR / f"{stem}.jsonl"
    # written beside, then renamed over: a link in their place is replaced, never written through
    write_atomic(metrics_path, json.dumps(report, indent=2, default=str) + "\n")
    write_atomic(predictions_path, "".join(json.dumps(r, default=str) + "\n" for r in records))
    return metrics_path, predictions_path


def heldout_pairs(trainer: Any, task: str) -> str | None:
    """A reward model's accuracy on the task's held-out preference pairs or scored texts (test, else validation), saved
    as ``eval/{split}.json`` in the run folder (the card's results and model-index); the line that
    says it, or None when the task has no held-out pairs."""
    data = trainer.run_facts.dataset or {}
    split = next((s for s in ("test", "validation") if s in data and len(data[s])), None)
    if split is None:
        return None
    scores = trainer.pair_accuracy(data[split])
    if "rows" in scores:  # scored texts (hfrl.trainers.reward_scores)
        metrics = {"score_accuracy": scores["accuracy"], "pearson": scores["pearson"]}
        line = (f"held-out scored texts ({split}, {scores['rows']}): the reward is on the score's side of 0.5 in "
                f"{scores['accuracy']:.1%}, Pearson r {scores['pearson']:.3f}")  # fmt: skip
    else:
        metrics = {"pair_accuracy": scores["accuracy"], "margin": scores["margin"]}
        line = (f"held-out pairs ({split}, {scores['pairs']}): the chosen text scores higher in "
                f"{scores['accuracy']:.1%} (chance 50%), mean margin {scores['margin']:.3f}")  # fmt: skip
    count = scores.get("pairs", scores.get("rows"))
    report = {"model": trainer.args.output_dir, "task": task, "split": split, "num_samples": count,
              "metrics": metrics}  # fmt: skip
    save_eval(trainer.args.output_dir, split, report, [])
    return line


@dataclass
class EvalReport:
    metrics: dict[str, float]
    report: dict[str, Any]  # what eval/{split}.json holds
    metrics_path: Path
    predictions_path: Path


def _default_output_dir(run: Run) -> Path:
    if run.path is not None:
        return run.path
    name = Path(run.name).stem if run.name.lower().endswith(".gguf") else run.name  # a GGUF file: its name
    return Path("runs") / ("eval-" + re.sub(r"[^\w.-]+", "-", name).strip("-"))


def evaluate(
    model: str | os.PathLike[str] | Run,
    task: str | None = None,
    split: str = "test",
    base: bool = False,
    output_dir: str | os.PathLike[str] | None = None,
    max_samples: int | None = None,
    batch_size: int | None = None,
    base_model: str | None = None,
    seed: int = 0,
) -> EvalReport:
    """Evaluate a run (or any model) on ``task``'s ``split`` and save the results beside it.

    ``task`` defaults to the run's own (config.yaml). ``base=True`` evaluates the model the run
    started from instead (``base_model`` overrides which), saved as ``eval/{split}-base.json``: the
    "before" column of the model card. Settings: OnlineConfig defaults < the task's config for the
    run's algorithm < the run's config.yaml (when ``task`` is the run's own).
    """
    import torch

    from hfrl.tasks import load_task
    from hfrl.utils.folders import check_folder

    if output_dir is not None and not str(output_dir).strip():
        raise ValueError("--output-dir is empty: give the folder to write eval/ and predictions/ into")
    run = model if isinstance(model, Run) else open_run(model)
    refuse_scorer(run, "eval", task)  # a reward model generates nothing: the task's classifier would score noise
    model = run.name  # as the messages name it
    if output_dir is not None:
        check_folder(output_dir, "output folder")  # before generating: nothing is written through a link out
    task_name = task or run.task
    if not task_name:
        raise ValueError(f"no task for {model}: pass --task NAME (see `hfrl list tasks`)")
    own_task = task_name == run.task  # the run's config (rewards, eval settings) applies to its own task only

    # the run's task arguments and rewards (own data, a local classifier, ...) apply to its own task only
    task_obj = load_task(task_name, **(task_kwargs(run.config) if own_task else {}))
    dataset = load_split(task_obj, split, max_samples)
    from hfrl.trainers.schema import config_schema

    alg = run.alg or "ppo"
    settings = eval_settings(task_obj.config_for(alg, config_schema(alg).sections), run.config if own_task else {})

    target = run
    if base:
        start = base_model or (run.base_model if run.path is not None else None)
        if not start:
            raise ValueError(
                f"--base: {model} does not say which model it started from (no config.yaml, no adapter); "
                "pass --base-model NAME"
            )
        target, base_model = open_run(start), None
    lm, tokenizer = target.load(base_model=base_model)
    torch.manual_seed(seed)  # only matters when the eval settings sample
    metrics, records = evaluate_model(
        lm, tokenizer, dataset, task_obj.reward_funcs, task_obj.metrics, settings, batch_size
    )
    report = {
        "model": target.name,
        "task": task_name,
        "split": split,
        "num_samples": len(records),
        "generation_kwargs": generation_kwargs(settings),
        "metrics": metrics,
    }
    out = Path(output_dir) if output_dir is not None else _default_output_dir(run)
    metrics_path, predictions_path = save_eval(out, split, report, records, base=base)
    if run.path is not None and out.resolve() == run.path.resolve() and (run.path / "README.md").is_file():
        from hfrl.cards import write_card
        from hfrl.rewards.combine import reward_name

        # the run's card shows the new results (its table and model-index); the rewards of a task of the
        # user's own code are named by the task object loaded here (the card reads no code)
        rewards = [reward_name(f) for f in task_obj.reward_funcs] if own_task else None
        write_card(run.path, rewards=rewards)
        from hfrl.runs.hub import add_critic_section

        add_critic_section(run.path, rewards=rewards)  # what the critic predicts, as the trainer wrote it
    return EvalReport(metrics, report, metrics_path, predictions_path)


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """A plain-text table of one split's ``{"before": report, "after": report}`` (either optional)."""
    columns = [c for c in ("before", "after") if c in results]
    names: list[str] = []
    for c in columns:
        names += [k for k in results[c]["metrics"] if k not in names]
    header = ["metric", *columns] + (["change"] if len(columns) == 2 else [])
    lines = [header]
    for name in names:
        values = [results[c]["metrics"].get(name) for c in columns]
        row = [name, *(_fmt(v) for v in values)]
        if len(columns) == 2:
            row.append(_fmt(values[1] - values[0], sign=True) if None not in values else "")
        lines.append(row)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def _fmt(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if sign else f"{value:.4f}"


class EvalBeforeAfter(TrainerCallback):
    """Evaluate the policy on a task split before training starts (``eval/{split}-base.json``) and
    when it ends (``eval/{split}.json``), with the trainer's evaluation settings; the model card
    shows both. Not run before training when resuming from a checkpoint.

    Every process generates on the whole split (no sharding); only the main process writes.
    """

    def __init__(
        self,
        task: str,
        split: str = "test",
        max_samples: int | None = None,
        task_kwargs: dict[str, Any] | None = None,
        loaded: Task | None = None,
    ) -> None:
        """``task_kwargs``: the run's task_args and rewards; ``loaded``: the task already built with
        them (``build_trainer`` passes its own: the task is loaded once per run)."""
        from hfrl.tasks import load_task

        self.task_name = task
        self.task = loaded if loaded is not None else load_task(task, **(task_kwargs or {}))
        self.split = split
        self.dataset = load_split(self.task, split, max_samples)

    def _run(self, args: TrainingArguments, state: TrainerState, model: Any, processing_class: Any, base: bool) -> None:
        policy = getattr(model, "policy", model)
        settings = eval_settings({k: getattr(args, k) for k in EVAL_FIELDS if hasattr(args, k)})
        metrics, records = evaluate_model(
            policy, processing_class, self.dataset, self.task.reward_funcs, self.task.metrics, settings
        )
        if state.is_world_process_zero:
            report = {
                "model": "base"
                if base
                else f"iteration {state.global_step // max(getattr(args, 'steps_per_iteration', 1), 1)}",
                "task": self.task_name,
                "split": self.split,
                "num_samples": len(records),
                "generation_kwargs": generation_kwargs(settings),
                "metrics": metrics,
            }
            # output_dir: never None once TrainingArguments.__post_init__ has run (its default, "trainer_output")
            save_eval(cast(str, args.output_dir), self.split, report, records, base=base)

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        if state.global_step == 0:
            self._run(args, state, model, processing_class, base=True)

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        processing_class: Any = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._run(args, state, model, processing_class, base=False)
        except Exception as err:  # noqa: BLE001 - training is done: the model must still be saved
            from transformers.utils import logging

            logging.get_logger(__name__).warning(
                f"the evaluation on {self.task_name}'s {self.split} split after training failed ({err}); the model "
                f"is saved as usual: evaluate it later with `hfrl eval {args.output_dir} --split {self.split}`"
            )


__all__ = ["EvalBeforeAfter", "EvalReport", "eval_settings", "evaluate", "evaluate_model", "format_table"]
