"""Rewards of RL4LMs' synthetic tasks, exactly as RL4LMs computes them (docs/algorithms.md §9)."""

from __future__ import annotations

import re

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def increasing_numbers_score(text: str, min_tokens: int = 20) -> float:
    """Length of the strictly increasing run of numbers from the first number, over
    ``max(number of whitespace tokens, min_tokens / 2)``; 0 without numbers.

    >>> increasing_numbers_score("1 2 3 x 2 9")    # run 1 < 2 < 3, stops at 2; 6 tokens, floor 10
    0.3
    >>> increasing_numbers_score("no numbers here")
    0.0
    """
    tokens = text.split()
    numbers = [float(t) for t in tokens if _is_number(t)]
    if not numbers:
        return 0.0
    count, previous = 1, numbers[0]
    for number in numbers[1:]:
        if number <= previous:
            break
        count, previous = count + 1, number
    return count / max(len(tokens), min_tokens / 2)


class IncreasingNumbers:
    """Reward of the ``numbers`` task (RL4LMs ``IncreasingNumbersinText``).

    >>> IncreasingNumbers(min_tokens=20)(prompts=["", ""], completions=["1 2 3", "5 4"])
    [0.3, 0.1]
    """

    __name__ = "increasing_numbers"

    def __init__(self, min_tokens: int = 20) -> None:
        self.min_tokens = min_tokens

    def __call__(self, prompts: list, completions: list[str], **kwargs) -> list[float]:
        return [increasing_numbers_score(c, self.min_tokens) for c in completions]


def contains_date(prompts: list, completions: list[str], **kwargs) -> list[float]:
    """1.0 when a completion contains a date ``YYYY-MM-DD``, else 0.0 (RL4LMs' dates task).

    >>> contains_date(prompts=["", ""], completions=["on 2021-03-04 we", "no date"])
    [1.0, 0.0]
    """
    return [1.0 if _DATE.search(c) else 0.0 for c in completions]
