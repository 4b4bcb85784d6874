"""Stop strings: a completion ends where a task-declared string (``generation_kwargs``' ``stop_strings``,
transformers' own setting; ``arith_chains``' blank line after ``Answer: N``) first appears in its text.

transformers' ``generate`` stops a row there when it is given the tokenizer, and pads the rest of the row;
:func:`stop_mask` finds the same token from the text, so that the completion mask, the rewards and the
update end with the stop string's last token, whatever the pad token is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

STOP_KEY = "stop_strings"  # transformers' GenerationConfig field (vLLM's SamplingParams calls it ``stop``)


def stop_strings(generation_kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The stop strings of ``generation_kwargs`` (one string or a list), or a one-line ``ValueError``.

    >>> stop_strings({"stop_strings": "\\n\\n"}), stop_strings({})
    (('\\n\\n',), ())
    """
    value = generation_kwargs.get(STOP_KEY)
    if value is None:
        return ()
    strings = (value,) if isinstance(value, str) else value
    if not isinstance(strings, list | tuple) or not all(isinstance(s, str) and s for s in strings):
        raise ValueError(f"generation_kwargs {STOP_KEY} must be a non-empty string or a list of them, got {value!r}")
    return tuple(strings)


def stop_index(ids: Sequence[int], tokenizer: Any, strings: Sequence[str]) -> int | None:
    """The index of the token at which one of ``strings`` first appears in the decoded text of ``ids``
    (that token included ends the completion), or None. A binary search over prefixes: whether a prefix's
    text holds a stop string only turns from no to yes as the prefix grows."""

    def holds(end: int) -> bool:
        text = tokenizer.decode(ids[:end], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        return any(s in text for s in strings)

    if not ids or not holds(len(ids)):
        return None
    low, high = 1, len(ids)  # holds(high); find the shortest prefix that holds
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low - 1


def stop_mask(response_ids: torch.Tensor, tokenizer: Any, strings: Sequence[str]) -> torch.Tensor:
    """1 up to and including the token that completes the first stop string of each row, 0 after it
    (all 1 in a row without one)."""
    mask = torch.ones_like(response_ids)
    if not strings:
        return mask
    for row, ids in enumerate(response_ids.tolist()):
        index = stop_index(ids, tokenizer, strings)
        if index is not None:
            mask[row, index + 1 :] = 0
    return mask


__all__ = ["STOP_KEY", "stop_index", "stop_mask", "stop_strings"]
