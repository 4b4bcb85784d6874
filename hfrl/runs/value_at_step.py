"""Where the critic helps, per step: the critic's value at each step boundary of a worked solution
(``arith_chains``: `` 13 - 1 = 12. 12 - 9 = 3.\\nAnswer: 3``) against the final answer's correctness,
on held-out prompts, from a run folder.

    python -m hfrl.runs.value_at_step runs/arith-ppo [--split test] [--max-samples 64]

    from hfrl.runs.value_at_step import value_at_step
    table = value_at_step("runs/arith-ppo")     # rows: start, after step 1, ..., before Answer:

The run's policy and critic are loaded from the folder as ``critic_from`` loads a critic
(:func:`hfrl.trainers.online.critic_from.load_critic`); completions of the split's prompts are generated
with the run's evaluation settings (greedy by default), and the critic reads the generated tokens
themselves. A boundary is a character offset of the completion: ``start`` (0: the prompt alone), the
end of each ``= N.`` step, and the start of ``Answer:``; the value there is ``V`` of the state once the
tokens that end at or before it are written (``values[k]``, ``k`` those tokens: the value at index ``t``
is read before token ``t``, :func:`hfrl.core.policies.completion_forward`). A boundary inside a token
moves to that token's start; one at the completion's end has no value and is left out. Each row gives
the mean value and the count of completions whose final answer was right, and of those whose was
wrong: a critic that learned credit at the steps separates them before ``Answer:``, not only at the end.

At the end of an ``arith_chains`` run with a critic, ``hfrl train`` writes ``value_at_step.json`` into
the run folder, and the card shows the table (:func:`hfrl.runs.hub.write_critic_section`). Tested in
``tests/cli/test_value_at_step.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

VALUE_AT_STEP_NAME = "value_at_step.json"
TASKS = ("arith_chains",)  # tasks whose completions are worked solutions of "= N." steps, then "Answer:"
DEFAULT_SAMPLES = 64  # the end of a run: the split's first prompts
ANSWER = "Answer:"
_STEP_END = re.compile(r"=\s*-?\d+\.")  # a step's result and its full stop: "13 - 1 = 12."


def step_boundaries(text: str) -> list[tuple[str, int]]:
    """``[(label, character offset)]`` of a worked solution: ``start`` (0), ``after step k`` (the end of
    the k-th ``= N.`` before ``Answer:``) and ``before Answer:`` (where ``Answer:`` starts; none without it).

    >>> step_boundaries(" 13 - 1 = 12. 12 - 9 = 3.\\nAnswer: 3")
    [('start', 0), ('after step 1', 13), ('after step 2', 25), ('before Answer:', 26)]
    """
    answer = text.find(ANSWER)
    work = text if answer < 0 else text[:answer]
    out = [("start", 0)]
    out += [(f"after step {k}", m.end()) for k, m in enumerate(_STEP_END.finditer(work), 1)]
    if answer >= 0:
        out.append((f"before {ANSWER}", answer))
    return out


def token_ends(tokenizer: Any, ids: list[int]) -> list[int]:
    """The character offset where each token of ``ids`` ends in their decoded text (prefixes decoded
    as the completion is: special tokens skipped, no clean-up of spaces)."""
    return [
        len(tokenizer.decode(ids[: j + 1], skip_special_tokens=True, clean_up_tokenization_spaces=False))
        for j in range(len(ids))
    ]


def boundary_positions(text: str, ends: list[int]) -> list[tuple[str, int]]:
    """``[(label, token index)]``: for each boundary of :func:`step_boundaries`, how many tokens end at
    or before it (the index of the value read there); a boundary after the last token is left out.

    >>> boundary_positions(" 1 + 2 = 3.\\nAnswer: 3", [2, 4, 6, 8, 10, 11, 12, 19, 21])
    [('start', 0), ('after step 1', 6), ('before Answer:', 7)]
    """
    out = []
    for label, offset in step_boundaries(text):
        k = sum(1 for end in ends if end <= offset)
        if k < len(ends):
            out.append((label, k))
    return out


def value_at_step(
    run_dir: str | os.PathLike[str],
    split: str = "test",
    max_samples: int | None = DEFAULT_SAMPLES,
    batch_size: int = 8,
) -> dict[str, Any]:
    """The table of a run folder on its task's ``split`` (the first ``max_samples`` prompts): ``rows``,
    one per boundary label in order, each ``{"boundary", "right": {"count", "mean_value"}, "wrong": {...}}``,
    with ``num_prompts``, ``right`` (how many were right), ``split`` and ``task``."""
    import torch

    from hfrl.core.policies import ActorCritic
    from hfrl.core.rollout import generate_completions, pad
    from hfrl.rewards.arithmetic import exact_answer
    from hfrl.runs.run_config import task_kwargs
    from hfrl.runs.run_dir import open_run
    from hfrl.tasks import load_task
    from hfrl.trainers.evaluation import encode_prompt, eval_mode, eval_settings, generation_kwargs
    from hfrl.trainers.online.critic_from import CRITIC_DIR, VALUE_HEAD_NAME, load_critic
    from hfrl.trainers.schema import config_schema

    run = open_run(run_dir)
    if run.path is None or not (run.path / VALUE_HEAD_NAME).is_file():
        raise ValueError(f"value at step: {run_dir} holds no critic ({VALUE_HEAD_NAME}); give a run trained with one")
    if run.task not in TASKS:
        raise ValueError(
            f"value at step: {run_dir} is a run of task {run.task!r}; the table reads worked solutions of "
            f"{', '.join(TASKS)}"
        )
    if run.is_seq2seq:
        raise ValueError(f"value at step: {run_dir} is a seq2seq run; the table reads a causal policy's critic")
    task = load_task(run.task, **task_kwargs(run.config))
    if split not in task.dataset:
        raise ValueError(f"value at step: task {run.task} has no split {split!r}; one of {', '.join(task.dataset)}")
    data = task.dataset[split]
    data = data.select(range(min(max_samples, len(data)))) if max_samples is not None else data
    alg = run.alg or "ppo"
    settings = eval_settings(task.config_for(alg, config_schema(alg).sections), run.config)

    lm, tokenizer = run.load()
    model = ActorCritic(lm, separate_critic=(run.path / CRITIC_DIR).is_dir())
    load_critic(model, str(run.path))
    model.eval()
    kwargs = generation_kwargs(settings)
    values_at: dict[str, dict[bool, list[float]]] = {}
    right_count = 0
    for start in range(0, len(data), batch_size):
        batch = data.select(range(start, min(start + batch_size, len(data))))
        prompts = list(batch["prompt"])
        ids = [
            encode_prompt(tokenizer, p, settings.get("max_prompt_length"), settings.get("truncation_side", "left"))
            for p in prompts
        ]
        query_ids, query_mask = pad(ids, tokenizer.pad_token_id, "left")
        with eval_mode(lm), torch.no_grad():
            sampled = generate_completions(
                lm, query_ids, query_mask, kwargs, tokenizer.pad_token_id, tokenizer=tokenizer
            )  # the tokenizer: a task's stop strings need it
            _, values = model(
                sampled.query_ids, sampled.query_mask, sampled.response_ids, sampled.response_mask, values_only=True
            )
        assert values is not None  # a critic was loaded
        rows = [r[m.bool()].tolist() for r, m in zip(sampled.response_ids, sampled.response_mask, strict=True)]
        texts = [tokenizer.decode(r, skip_special_tokens=True, clean_up_tokenization_spaces=False) for r in rows]
        right = [score == 1.0 for score in exact_answer(prompts, texts, answer=list(batch["answer"]))]
        right_count += sum(right)
        for i, (row, text) in enumerate(zip(rows, texts, strict=True)):
            for label, k in boundary_positions(text, token_ends(tokenizer, row)):
                values_at.setdefault(label, {True: [], False: []})[right[i]].append(float(values[i, k]))
    table_rows = [
        {
            "boundary": label,
            **{
                name: {"count": len(v), "mean_value": sum(v) / len(v) if v else None}
                for name, v in (("right", values_at[label][True]), ("wrong", values_at[label][False]))
            },
        }
        for label in sorted(values_at, key=_order)
    ]
    return {"task": run.task, "split": split, "num_prompts": len(data), "right": right_count, "rows": table_rows}


def _order(label: str) -> tuple[int, int]:
    if label == "start":
        return (0, 0)
    if label.startswith("after step "):
        return (1, int(label.rsplit(" ", 1)[1]))
    return (2, 0)


def table_markdown(table: dict[str, Any]) -> str:
    """The table as the card shows it (a Markdown section)."""

    def cell(v: float | None) -> str:
        return "" if v is None else f"{v:.3f}"

    lines = [
        "### Value at each step",
        "",
        f"The critic's value at each step boundary of greedy completions of {table['num_prompts']} held-out prompts "
        f"({table['split']} split; {table['right']} answered right), for completions whose final answer was right "
        "and wrong (`python -m hfrl.runs.value_at_step RUN`).",
        "",
        "| boundary | right: n | right: mean value | wrong: n | wrong: mean value | right - wrong |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in table["rows"]:
        r, w = row["right"]["mean_value"], row["wrong"]["mean_value"]
        gap = r - w if r is not None and w is not None else None
        lines.append(
            f"| {row['boundary']} | {row['right']['count']} | {cell(r)} | {row['wrong']['count']} | {cell(w)} | "
            f"{cell(gap)} |"
        )
    return "\n".join(lines) + "\n"


def write_value_at_step(run_dir: str | os.PathLike[str], **kwargs: Any) -> Path:
    """:func:`value_at_step` saved as ``value_at_step.json`` in the run folder; returns its path."""
    from hfrl.utils.cache import write_atomic

    path = Path(run_dir) / VALUE_AT_STEP_NAME
    write_atomic(path, json.dumps(value_at_step(run_dir, **kwargs), indent=2) + "\n")
    return path


def read_table_markdown(run_dir: str | os.PathLike[str]) -> str | None:
    """The card's table from the run folder's ``value_at_step.json``, or None when there is none (or it is
    not the file hfrl wrote)."""
    from hfrl.runs.run_dir import read_json_mapping

    path = Path(run_dir) / VALUE_AT_STEP_NAME
    if not path.is_file():
        return None
    try:
        return table_markdown(read_json_mapping(path))
    except (ValueError, KeyError, TypeError):
        return None


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hfrl.runs.value_at_step", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-samples", type=int, default=DEFAULT_SAMPLES)
    args = parser.parse_args(argv)
    try:
        path = write_value_at_step(args.run_dir, split=args.split, max_samples=args.max_samples)
    except ValueError as err:
        parser.exit(1, f"error: {err}\n")
    print(table_markdown(json.loads(path.read_text())), end="")
    print(f"saved to {path}")


if __name__ == "__main__":
    main()


__all__ = [
    "VALUE_AT_STEP_NAME",
    "boundary_positions",
    "read_table_markdown",
    "step_boundaries",
    "table_markdown",
    "token_ends",
    "value_at_step",
    "write_value_at_step",
]
