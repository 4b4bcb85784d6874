"""Rewards of RL4LMs' synthetic tasks, exactly as RL4LMs computes them (docs/algorithms.md §9)."""

from __future__ import annotations

import re
from typing import Any

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)  # ASCII digits: not "٢٠٢١-٠٣-٠٤"
# hfrl's reading of a completion: tokens are separated by ASCII whitespace only, and a number is an
# ASCII decimal numeral. RL4LMs' str.split() also separates at the control characters U+001C-U+001F
# (and U+0085, U+2028, ...), and its float() also reads "nan", "inf", "1e5", "1_0" and non-ASCII digits:
# the README's tiny PPO run learned to emit U+001C as its separator (docs/algorithms.md §9).
_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")
_NUMERAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def increasing_numbers_score(text: str, min_tokens: int = 20, rl4lms_exact: bool = False) -> float:
    """Length of the strictly increasing run of numbers from the first number, over
    ``max(number of whitespace tokens, min_tokens / 2)``; 0 without numbers.

    Tokens are separated by ASCII whitespace and numbers are ASCII decimal numerals; with
    ``rl4lms_exact`` RL4LMs' own reading (``str.split()`` and ``float()``), which a control character
    such as U+001C passes as a separator.

    >>> increasing_numbers_score("1 2 3 x 2 9")    # run 1 < 2 < 3, stops at 2; 6 tokens, floor 10
    0.3
    >>> increasing_numbers_score("no numbers here")
    0.0
    >>> increasing_numbers_score("1\x1c2\x1c3"), increasing_numbers_score("1\x1c2\x1c3", rl4lms_exact=True)
    (0.0, 0.3)
    """
    if rl4lms_exact:
        tokens = text.split()
        numbers = [float(t) for t in tokens if _is_number(t)]
    else:
        tokens = [t for t in _ASCII_SPACE.split(text) if t]
        numbers = [float(t) for t in tokens if _NUMERAL.fullmatch(t)]
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

    def __init__(self, min_tokens: int = 20, rl4lms_exact: bool = False) -> None:
        self.min_tokens = min_tokens
        self.rl4lms_exact = rl4lms_exact

    def __call__(self, prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float]:
        return [increasing_numbers_score(c, self.min_tokens, self.rl4lms_exact) for c in completions]


def contains_date(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float]:
    """1.0 when a completion contains a date ``YYYY-MM-DD`` in ASCII digits, else 0.0 (RL4LMs' dates task).

    >>> contains_date(prompts=["", ""], completions=["on 2021-03-04 we", "no date"])
    [1.0, 0.0]
    """
    return [1.0 if _DATE.search(c) else 0.0 for c in completions]


__all__ = ["IncreasingNumbers", "contains_date", "increasing_numbers_score"]
