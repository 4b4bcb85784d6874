"""Task ``arith_chains``: a multi-step arithmetic problem whose credit sits in its steps.

Each problem is a start number and ``steps`` operations (add, subtract, multiply), generated from a
seed; the prompt shows one worked example, then the problem, and the completion works it out one step
per sentence before ``Answer: N`` (48-96 tokens for 4-6 steps). The reward is exact match of the final
answer (``exact_answer``), plus a small reward for the ``Answer: N`` format (``answer_format``, weight
``format_weight``; 0 leaves it out). A wrong step anywhere makes the answer wrong: the reward comes
at the end of a chain of tokens that each decide it, the credit-assignment problem a critic is for.
``operations`` (a subset of add, subtract, multiply) and ``operand_max`` (added or subtracted numbers
1 to it) make an easier family for a small model, e.g. two additions of 1-5, which SmolLM2-135M solves
28% of the time before training (``benchmarks/RESULTS-real-arith-add.md``).

    hfrl train --task arith_chains --alg ppo --model smollm2
    hfrl train --task arith_chains --alg ppo --model smollm2 --task-arg steps=6
    hfrl train --task arith_chains --alg ppo --model smollm2 --task-arg steps=2 --task-arg "operations=[add]" \\
        --task-arg operand_max=5 --task-arg train_size=320 --task-arg eval_size=64 --lam 1.0
    hfrl train --task arith_chains --alg ppo --model smollm2 --task-arg family=addsub3 --max_new_tokens 64

A completion stops at the blank line after its answer (the task's ``stop_strings``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence, Set
from typing import Any

from hfrl.tasks.base import Task, read_task_yaml, task_from_yaml

MAX_PROBLEMS = 10**6  # problems per split
# Named families (``--task-arg family=NAME``), each measured on the base SmolLM2-135M-Instruct first (greedy exact
# match on 64 training prompts, benchmarks/bench_arith_base.py): ``add2``, two additions of 1-5 (28%,
# benchmarks/RESULTS-real-arith-add.md); ``addsub3``, three additions or subtractions of 1-3 (7.8%, sampled
# 4.7%, 64 new tokens: benchmarks/results-arith-base-addsub3.json), whose credit sits in three steps.
FAMILIES: dict[str, dict[str, Any]] = {
    "add2": {"steps": 2, "operations": ("add",), "operand_max": 5},
    "addsub3": {"steps": 3, "operations": ("add", "subtract"), "operand_max": 3},
}
OPERATIONS = ("add", "subtract", "multiply")
START_MAX, OPERAND_MAX, MULTIPLIERS = 20, 9, (2, 3)  # start 1-20; add or subtract 1-9; multiply by 2-3
INSTRUCTION = "Work out each problem one step at a time, then give the answer.\n\n"
EXAMPLE_STEPS = (("add", 4), ("multiply", 2), ("subtract", 5))  # the worked example: 3 + 4 = 7. 7 * 2 = 14. ...


def step(value: int, operation: str, operand: int) -> tuple[str, str, int]:
    """One operation: its words, its worked sentence and its result."""
    if operation == "multiply":
        return f"Multiply by {operand}.", f"{value} * {operand} = {value * operand}.", value * operand
    result, sign = (value + operand, "+") if operation == "add" else (value - operand, "-")
    return f"{operation.capitalize()} {operand}.", f"{value} {sign} {operand} = {result}.", result


def example(operations: Sequence[str] = OPERATIONS, operand_max: int = OPERAND_MAX) -> str:
    """The worked example the prompt opens with: three steps of the family's own operations (the
    default family's add 4, multiply by 2, subtract 5; another family's operations in their place, each
    operand within the family's range), so that the example shows only what the problems ask.

    >>> example().splitlines()[2:4]
    ['Start with 3. Add 4. Multiply by 2. Subtract 5.', 'Steps: 3 + 4 = 7. 7 * 2 = 14. 14 - 5 = 9.']
    >>> example(["add"], 3).splitlines()[2:5]
    ['Start with 3. Add 3. Add 2. Add 3.', 'Steps: 3 + 3 = 6. 6 + 2 = 8. 8 + 3 = 11.', 'Answer: 11']
    """
    value, words, work = 3, ["Start with 3."], []
    for operation, operand in EXAMPLE_STEPS:
        operation = operation if operation in operations else operations[0]
        operand = min(operand, MULTIPLIERS[-1] if operation == "multiply" else operand_max)
        said, worked, value = step(value, operation, operand)
        words.append(said)
        work.append(worked)
    return INSTRUCTION + " ".join(words) + "\nSteps: " + " ".join(work) + f"\nAnswer: {value}\n\n"


def problem(
    rng: random.Random, steps: int, operations: Sequence[str] = OPERATIONS, operand_max: int = OPERAND_MAX
) -> dict[str, Any]:
    """One problem: its prompt, its answer (text, as the dataset holds it) and the worked solution
    (``references``: what a completion that gets it right looks like).

    >>> row = problem(random.Random(0), 2)
    >>> row["prompt"].splitlines()[-2:], row["answer"], row["references"]
    (['Start with 13. Subtract 1. Subtract 9.', 'Steps:'], '3', [' 13 - 1 = 12. 12 - 9 = 3.\\nAnswer: 3'])
    """
    value = rng.randint(1, START_MAX)
    words, work = [f"Start with {value}."], []
    for _ in range(steps):
        operation = rng.choice(operations)
        operand = rng.randint(*MULTIPLIERS) if operation == "multiply" else rng.randint(1, operand_max)
        said, worked, value = step(value, operation, operand)
        words.append(said)
        work.append(worked)
    prompt = example(operations, operand_max) + " ".join(words) + "\nSteps:"
    return {"prompt": prompt, "answer": str(value), "references": [" " + " ".join(work) + f"\nAnswer: {value}"]}


def problems(count: int, steps: int, seed: int, exclude: Set[str] = frozenset(), **family: Any) -> list[dict[str, Any]]:
    """``count`` distinct problems from ``seed``, none of whose prompts is in ``exclude`` (``family``:
    ``operations`` and ``operand_max``, as ``problem`` takes them)."""
    rng, seen = random.Random(seed), set(exclude)
    rows: list[dict[str, Any]] = []
    while len(rows) < count:
        row = problem(rng, steps, **family)
        if row["prompt"] not in seen:
            seen.add(row["prompt"])
            rows.append(row)
    return rows


def distinct_problems(steps: int, operations: Sequence[str] = OPERATIONS, operand_max: int = OPERAND_MAX) -> int:
    """How many different problems of ``steps`` operations there are (the splits share none).

    >>> distinct_problems(1), distinct_problems(2), distinct_problems(2, ["add"], 3)
    (400, 8000, 180)
    """
    choices = sum(operand_max for o in ("add", "subtract") if o in operations)
    return START_MAX * (choices + len(MULTIPLIERS) * ("multiply" in operations)) ** steps


def check_family(operations: Any, operand_max: Any) -> tuple[str, ...]:
    """``operations`` as a tuple, or a one-line error naming what to change."""
    names = [operations] if isinstance(operations, str) else operations
    if not isinstance(names, list | tuple) or not names or any(o not in OPERATIONS for o in names):
        raise ValueError(
            f"task argument operations must be a non-empty list of {', '.join(OPERATIONS)}, got {operations!r}"
        )
    if isinstance(operand_max, bool) or not isinstance(operand_max, int) or not 1 <= operand_max <= 99:
        raise ValueError(f"task argument operand_max must be a whole number in [1, 99], got {operand_max!r}")
    return tuple(dict.fromkeys(names))


def dataset(
    train_size: int, eval_size: int, steps: int, seed: int,
    operations: Any = OPERATIONS, operand_max: Any = OPERAND_MAX,
) -> Any:  # fmt: skip
    """Train, validation and test splits of distinct problems (no prompt in two splits)."""
    family = {"operations": check_family(operations, operand_max), "operand_max": operand_max}
    for name, n in (("train_size", train_size), ("eval_size", eval_size)):
        if not 1 <= n <= MAX_PROBLEMS:
            raise ValueError(f"task argument {name} must be in [1, {MAX_PROBLEMS}] (problems per split), got {n}")
    if not 1 <= steps <= 12:
        raise ValueError(f"task argument steps must be in [1, 12] (operations per problem), got {steps}")
    if (wanted := train_size + 2 * eval_size) > (distinct := distinct_problems(steps, **family)):
        raise ValueError(
            f"task argument steps={steps} has {distinct} distinct problems, fewer than train_size + 2 * eval_size "
            f"= {wanted}: lower train_size or eval_size, or raise steps or operand_max"
        )
    from datasets import Dataset, DatasetDict

    train = problems(train_size, steps, seed, **family)
    validation = problems(eval_size, steps, seed + 1, {r["prompt"] for r in train}, **family)
    test = problems(eval_size, steps, seed + 2, {r["prompt"] for r in train + validation}, **family)
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


def family_arguments(family: str | None, steps: int, operations: Any, operand_max: Any) -> tuple[int, Any, Any]:
    """``steps``, ``operations`` and ``operand_max`` of the named ``family`` (:data:`FAMILIES`), or as given when
    it is None; a family beside its own arguments, or an unknown one, is one line.

    >>> family_arguments("addsub3", 4, OPERATIONS, OPERAND_MAX)
    (3, ('add', 'subtract'), 3)
    """
    if family is None:
        return steps, operations, operand_max
    if family not in FAMILIES:
        raise ValueError(f"task argument family must be one of {', '.join(FAMILIES)}, got {family!r}")
    ops = tuple(operations) if isinstance(operations, list | tuple) else operations
    given = [name for name, value, default in (("steps", steps, 4), ("operations", ops, OPERATIONS),
             ("operand_max", operand_max, OPERAND_MAX)) if value != default]  # fmt: skip
    if given:
        raise ValueError(
            f"task argument family={family} sets {', '.join(given)}: give the family or {given[0]}, not both"
        )
    chosen = FAMILIES[family]
    return chosen["steps"], chosen["operations"], chosen["operand_max"]


def build(
    train_size: int = 2048, eval_size: int = 128, steps: int = 4, format_weight: float = 0.1, seed: int = 0,
    operations: Any = OPERATIONS, operand_max: Any = OPERAND_MAX, family: str | None = None, **overrides: Any,
) -> Task:  # fmt: skip
    """Generated problems of ``steps`` operations (``seed``: the problems; ``operations`` and
    ``operand_max``: the family, or a named ``family`` of :data:`FAMILIES` for all three); reward
    ``exact_answer``, plus ``answer_format`` weighted ``format_weight`` (0: exact match alone)."""
    steps, operations, operand_max = family_arguments(family, steps, operations, operand_max)
    spec = task_spec(format_weight)
    data = dataset(train_size, eval_size, steps, seed, operations, operand_max)
    return task_from_yaml(__file__, data, spec=spec, **overrides)
