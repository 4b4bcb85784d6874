"""Rewards of the ``arith_chains`` task: an exact-match check of the final answer, and its format.

A completion's answer is the integer after the first ``Answer:`` in it (``Answer: -12``); anything else
(no ``Answer:``, a word or a fraction after it) has none. The checker compares it with the problem's
``answer`` column.
"""

from __future__ import annotations

import re
from typing import Any

ANSWER = re.compile(r"Answer:[ \t\n\r]*(-?[0-9]+)(?![0-9./])")  # ASCII: no "Answer: ٧", no U+001C


def final_answer(completion: str) -> int | None:
    """The integer after the first ``Answer:``, or None (malformed: missing, or not a whole number).

    >>> final_answer(" 3 + 4 = 7.\\nAnswer: 7"), final_answer("Answer: 7.5"), final_answer("the answer is 7")
    (7, None, None)
    """
    match = ANSWER.search(completion)
    return int(match.group(1)) if match else None


def exact_answer(prompts: list[Any], completions: list[str], answer: list[Any], **kwargs: Any) -> list[float]:
    """1.0 when the completion's final answer equals the problem's ``answer``, else 0.0 (a wrong or
    malformed answer alike).

    >>> exact_answer(["", "", ""], ["Answer: 14", "Answer: 15", "14"], answer=["14", "14", "14"])
    [1.0, 0.0, 0.0]
    """
    return [1.0 if final_answer(c) == int(a) else 0.0 for c, a in zip(completions, answer, strict=True)]


def answer_format(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float]:
    """1.0 when the completion ends its work with ``Answer: <integer>``, right or wrong, else 0.0.

    >>> answer_format(["", ""], [" 2 + 2 = 4.\\nAnswer: 4", "four"])
    [1.0, 0.0]
    """
    return [0.0 if final_answer(c) is None else 1.0 for c in completions]


__all__ = ["answer_format", "exact_answer", "final_answer"]
