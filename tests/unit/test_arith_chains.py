"""The multi-step arithmetic task (issue 36): its checker on right, wrong and malformed answers, its
problems (worked solutions that the checker accepts, distinct splits) and its task arguments."""

from __future__ import annotations

import random

import pytest

from hfrl.rewards.arithmetic import answer_format, exact_answer, final_answer
from hfrl.tasks.arith_chains import build, dataset, problem, task_spec


@pytest.mark.parametrize(
    ("completion", "answer", "exact", "formatted"),
    [
        (" 3 + 4 = 7. 7 * 2 = 14.\nAnswer: 14", "14", 1.0, 1.0),  # right
        (" 3 + 4 = 7. 7 * 2 = 14.\nAnswer: 14\n\nAnd more text after it.", "14", 1.0, 1.0),  # right, then chatter
        (" 3 - 20 = -17.\nAnswer: -17", "-17", 1.0, 1.0),  # a negative answer
        (" 3 + 4 = 7. 7 * 2 = 15.\nAnswer: 15", "14", 0.0, 1.0),  # wrong
        ("Answer: 14 Answer: 15", "15", 0.0, 1.0),  # the first answer counts
        (" 3 + 4 = 7. 7 * 2 = 14.", "14", 0.0, 0.0),  # malformed: no answer
        ("Answer: fourteen", "14", 0.0, 0.0),  # malformed: not a number
        ("Answer: 14.5", "14", 0.0, 0.0),  # malformed: not a whole number
        ("answer: 14", "14", 0.0, 0.0),  # malformed: the format is exact
        ("", "14", 0.0, 0.0),
    ],
)  # fmt: skip
def test_the_checker_on_right_wrong_and_malformed_answers(completion, answer, exact, formatted):
    assert exact_answer([""], [completion], answer=[answer]) == [exact]
    assert answer_format([""], [completion]) == [formatted]


def test_every_worked_solution_is_right():
    rng = random.Random(3)
    for steps in (1, 4, 6):
        for _ in range(50):
            row = problem(rng, steps)
            assert exact_answer([row["prompt"]], row["references"], answer=[row["answer"]]) == [1.0]
            assert row["references"][0].count(" = ") == steps and row["prompt"].endswith("\nSteps:")
            assert final_answer(row["references"][0]) == int(row["answer"])


def test_the_splits_share_no_problem_and_follow_the_seed():
    data = dataset(train_size=64, eval_size=16, steps=2, seed=5)
    prompts = {split: set(data[split]["prompt"]) for split in data}
    assert {split: len(p) for split, p in prompts.items()} == {"train": 64, "validation": 16, "test": 16}
    assert not prompts["train"] & prompts["test"] and not prompts["validation"] & prompts["test"]
    assert dataset(64, 16, 2, 5)["test"]["prompt"] == data["test"]["prompt"]  # the same seed, the same problems
    assert dataset(64, 16, 2, 6)["test"]["prompt"] != data["test"]["prompt"]


def test_the_format_reward_is_a_task_argument():
    assert task_spec()["rewards"] == ["exact_answer", "answer_format"]
    assert task_spec()["configs"]["defaults"]["reward_weights"] == [1.0, 0.1]
    assert task_spec(format_weight=0)["rewards"] == ["exact_answer"]
    assert task_spec(format_weight=0)["configs"]["defaults"]["reward_weights"] == [1.0]
    with pytest.raises(ValueError, match=r"task argument format_weight must be in \[0, 1\], got 2"):
        task_spec(format_weight=2)
    with pytest.raises(ValueError, match=r"task argument steps must be in \[1, 12\]"):
        dataset(4, 4, steps=0, seed=0)


def test_more_problems_than_exist_is_refused_not_a_hang():
    """One step has 400 distinct problems (start 1-20 times 20 choices): the default 2048 + 2 x 128 used to
    loop forever looking for a new one."""
    message = (r"^task argument steps=1 has 400 distinct problems, fewer than train_size \+ 2 \* eval_size = 2304: "
               r"lower train_size or eval_size, or raise steps or operand_max$")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        dataset(2048, 128, steps=1, seed=0)
    data = dataset(398, 1, steps=1, seed=0)  # every one of the 400
    assert len(set(data["train"]["prompt"]) | set(data["validation"]["prompt"]) | set(data["test"]["prompt"])) == 400


def test_an_easier_family_draws_only_its_operations_and_operands():
    """``operations`` and ``operand_max`` (an easier family for a small model): every step is one of the named
    operations with an operand in range, the worked solution is still right, and the count of distinct problems
    follows (start 1-20 times 3 choices per step)."""
    data = dataset(train_size=64, eval_size=8, steps=3, seed=1, operations=["add"], operand_max=3)
    for row in data["train"]:
        words = row["prompt"].splitlines()[-2].split(". ")[1:]
        assert len(words) == 3 and all(w.rstrip(".") in {"Add 1", "Add 2", "Add 3"} for w in words)
        assert exact_answer([row["prompt"]], row["references"], answer=[row["answer"]]) == [1.0]
    with pytest.raises(ValueError, match=r"^task argument steps=1 has 60 distinct problems, fewer than"):
        dataset(64, 1, steps=1, seed=0, operations=["add"], operand_max=3)
    default = dataset(8, 2, steps=2, seed=5)  # the default family draws what it drew before the arguments existed
    assert default["train"]["prompt"] == dataset(8, 2, 2, 5, ["add", "subtract", "multiply"], 9)["train"]["prompt"]


@pytest.mark.parametrize(
    ("operations", "operand_max", "message"),
    [
        (["divide"], 3, "task argument operations must be a non-empty list of add, subtract, multiply, got ['divide']"),
        ([], 3, "task argument operations must be a non-empty list of add, subtract, multiply, got []"),
        (5, 3, "task argument operations must be a non-empty list of add, subtract, multiply, got 5"),
        (["add"], 0, "task argument operand_max must be a whole number in [1, 99], got 0"),
        (["add"], 2.5, "task argument operand_max must be a whole number in [1, 99], got 2.5"),
        (["add"], True, "task argument operand_max must be a whole number in [1, 99], got True"),
    ],
)  # fmt: skip
def test_a_bad_family_is_refused_in_one_line(operations, operand_max, message):
    with pytest.raises(ValueError) as caught:
        dataset(8, 2, steps=2, seed=0, operations=operations, operand_max=operand_max)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("completion", "answer", "exact", "formatted"),
    [
        (" 7 + 3 = 10. 10 - 2 = 8. 8 - 3 = 5.\nAnswer: 5\n\n", "5", 1.0, 1.0),  # right, stopped at the blank line
        (" 2 - 3 = -1. -1 - 2 = -3. -3 + 1 = -2.\nAnswer: -2\n\n", "-2", 1.0, 1.0),  # right, below zero
        (" 2 - 3 = -1. -1 - 2 = -3. -3 + 1 = -2.\nAnswer: 2\n\n", "-2", 0.0, 1.0),  # wrong: the sign
        (" 7 + 3 = 10. 10 - 2 = 8.\n\n", "5", 0.0, 0.0),  # malformed: stopped before an answer
        (" 7 + 3 = 10.\nAnswer: - 5\n\n", "-5", 0.0, 0.0),  # malformed: a sign apart from its number
    ],
)  # fmt: skip
def test_the_harder_familys_checker_on_right_wrong_and_malformed_answers(completion, answer, exact, formatted):
    assert exact_answer([""], [completion], answer=[answer]) == [exact]
    assert answer_format([""], [completion]) == [formatted]


def test_the_harder_family_is_three_additions_or_subtractions_of_1_to_3():
    task = build(train_size=64, eval_size=256, family="addsub3")
    assert len(task.dataset["test"]) == 256  # the benchmark's figure: 256 held-out problems
    negative = 0
    for row in task.dataset["train"]:
        words = row["prompt"].splitlines()[-2].split(". ")[1:]
        assert len(words) == 3 and all(w.rstrip(".").split()[0] in {"Add", "Subtract"} for w in words)
        assert all(1 <= int(w.rstrip(".").split()[1]) <= 3 for w in words)
        assert exact_answer([row["prompt"]], row["references"], answer=[row["answer"]]) == [1.0]
        negative += int(row["answer"]) < 0
    assert negative > 0  # subtraction takes some below zero: the checker's sign matters
    assert task.configs["defaults"]["generation_kwargs"]["stop_strings"] == ["\n\n"]
    with pytest.raises(ValueError, match=r"^task argument family=addsub3 sets steps: give the family or steps, not"):
        build(train_size=8, eval_size=2, steps=5, family="addsub3")
    with pytest.raises(ValueError, match=r"^task argument family must be one of add2, addsub3, got 'x'"):
        build(train_size=8, eval_size=2, family="x")
