"""Task ``arith_chains``: a multi-step arithmetic problem whose credit sits in its steps.

Each problem is a start number and ``steps`` operations (add, subtract, multiply), generated from a
seed; the prompt shows one worked example, then the problem, and the completion works it out one step
per sentence before ``Answer: N`` (48-96 tokens for 4-6 steps). The reward is exact match of the final
answer (``exact_answer``), plus a small reward for the ``Answer: N`` format (``answer_format``, weight
``format_weight``; 0 leaves it out). A wrong step anywhere makes the answer wrong: the reward comes
at the end of a chain of tokens that each decide it, the credit-assignment problem a critic is for.

    hfrl train --task arith_chains --alg ppo --model smollm2
    hfrl train --task arith_chains --alg ppo --model smollm2 --task-arg steps=6
"""

from __future__ import annotations

import random
from collections.abc import Set
from typing import Any

from hfrl.tasks.base import Task, read_task_yaml, task_from_yaml

MAX_PROBLEMS = 10**6  # problems per split
OPERATIONS = ("add", "subtract", "multiply")
START_MAX, OPERAND_MAX, MULTIPLIERS = 20, 9, (2, 3)  # start 1-20; add or subtract 1-9; multiply by 2-3
EXAMPLE = (
    "Work out each problem one step at a time, then give the answer.\n\n"
    "Start with 3. Add 4. Multiply by 2. Subtract 5.\n"
    "Steps: 3 + 4 = 7. 7 * 2 = 14. 14 - 5 = 9.\n"
    "Answer: 9\n\n"
)


def problem(rng: random.Random, steps: int) -> dict[str, Any]:
    """One problem: its prompt, its answer (text, as the dataset holds it) and the worked solution
    (``references``: what a completion that gets it right looks like).

    >>> row = problem(random.Random(0), 2)
    >>> row["prompt"].splitlines()[-2:], row["answer"], row["references"]
    (['Start with 13. Subtract 1. Subtract 9.', 'Steps:'], '3', [' 13 - 1 = 12. 12 - 9 = 3.\\nAnswer: 3'])
    """
    value = rng.randint(1, START_MAX)
    words, work = [f"Start with {value}."], []
    for _ in range(steps):
        operation = rng.choice(OPERATIONS)
        if operation == "multiply":
            operand = rng.randint(*MULTIPLIERS)
            words.append(f"Multiply by {operand}.")
            result, sign = value * operand, "*"
        else:
            operand = rng.randint(1, OPERAND_MAX)
            words.append(f"{operation.capitalize()} {operand}.")
            result, sign = (value + operand, "+") if operation == "add" else (value - operand, "-")
        work.append(f"{value} {sign} {operand} = {result}.")
        value = result
    prompt = EXAMPLE + " ".join(words) + "\nSteps:"
    return {"prompt": prompt, "answer": str(value), "references": [" " + " ".join(work) + f"\nAnswer: {value}"]}


def problems(count: int, steps: int, seed: int, exclude: Set[str] = frozenset()) -> list[dict[str, Any]]:
    """``count`` distinct problems from ``seed``, none of whose prompts is in ``exclude``."""
    rng, seen = random.Random(seed), set(exclude)
    rows: list[dict[str, Any]] = []
    while len(rows) < count:
        row = problem(rng, steps)
        if row["prompt"] not in seen:
            seen.add(row["prompt"])
            rows.append(row)
    return rows


def distinct_problems(steps: int) -> int:
    """How many different problems of ``steps`` operations there are (the splits share none).

    >>> distinct_problems(1), distinct_problems(2)
    (400, 8000)
    """
    return START_MAX * (2 * OPERAND_MAX + len(MULTIPLIERS)) ** steps


def dataset(train_size: int, eval_size: int, steps: int, seed: int) -> Any:
    """Train, validation and test splits of distinct problems (no prompt in two splits)."""
    for name, n in (("train_size", train_size), ("eval_size", eval_size)):
        if not 1 <= n <= MAX_PROBLEMS:
            raise ValueError(f"task argument {name} must be in [1, {MAX_PROBLEMS}] (problems per split), got {n}")
    if not 1 <= steps <= 12:
        raise ValueError(f"task argument steps must be in [1, 12] (operations per problem), got {steps}")
    if (wanted := train_size + 2 * eval_size) > (distinct := distinct_problems(steps)):
        raise ValueError(
            f"task argument steps={steps} has {distinct} distinct problems, fewer than train_size + 2 * eval_size "
            f"= {wanted}: lower train_size or eval_size, or raise steps"
        )
    from datasets import Dataset, DatasetDict

    train = problems(train_size, steps, seed)
    validation = problems(eval_size, steps, seed + 1, {r["prompt"] for r in train})
    test = problems(eval_size, steps, seed + 2, {r["prompt"] for r in train + validation})
    return DatasetDict({name: Dataset.from_list(rows) for name, rows in
                        (("train", train), ("validation", validation), ("test", test))})  # fmt: skip


def task_spec(format_weight: float = 0.1, **task_args: Any) -> dict[str, Any]:
    """The task's YAML as ``format_weight`` shapes it: rewards ``exact_answer`` and ``answer_format``
    weighted 1 and ``format_weight``, or exact match alone for 0 (what resolving a run reads)."""
    if not 0 <= format_weight <= 1:
        raise ValueError(f"task argument format_weight must be in [0, 1], got {format_weight}")
    spec = read_task_yaml(__file__)
    defaults = spec.setdefault("configs", {}).setdefault("defaults", {})
    if format_weight:
        spec["rewards"], defaults["reward_weights"] = ["exact_answer", "answer_format"], [1.0, format_weight]
    else:
        spec["rewards"], defaults["reward_weights"] = ["exact_answer"], [1.0]
    return spec


def build(
    train_size: int = 2048, eval_size: int = 128, steps: int = 4, format_weight: float = 0.1, seed: int = 0,
    **overrides: Any,
) -> Task:  # fmt: skip
    """Generated problems of ``steps`` operations (``seed``: the problems); reward ``exact_answer``,
    plus ``answer_format`` weighted ``format_weight`` (0: exact match alone)."""
    spec = task_spec(format_weight)
    return task_from_yaml(__file__, dataset(train_size, eval_size, steps, seed), spec=spec, **overrides)
