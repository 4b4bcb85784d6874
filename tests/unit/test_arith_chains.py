"""The multi-step arithmetic task (issue 36): its checker on right, wrong and malformed answers, its
problems (worked solutions that the checker accepts, distinct splits) and its task arguments."""

from __future__ import annotations

import random

import pytest

from hfrl.rewards.arithmetic import answer_format, exact_answer, final_answer
from hfrl.tasks.arith_chains import dataset, problem, task_spec


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
    with pytest.raises(ValueError, match=r"^task argument steps=1 has 400 distinct problems, fewer than train_size \+ "
                       r"2 \* eval_size = 2304: lower train_size or eval_size, or raise steps$"):  # fmt: skip
        dataset(2048, 128, steps=1, seed=0)
    data = dataset(398, 1, steps=1, seed=0)  # every one of the 400
    assert len(set(data["train"]["prompt"]) | set(data["validation"]["prompt"]) | set(data["test"]["prompt"])) == 400
