"""Shared preprocessing of the GRUE translation tasks (``iwslt2017``, ``wmt16``): English -> German
with T5's task prefix, as RL4LMs' ``IWSLT2017EnDe`` and ``WMT`` data pools build them."""

from __future__ import annotations

from typing import Any

PREFIX = "translate English to German: "


def en_de(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``translation: {de, en}`` rows -> prompts (English with T5's prefix) and references (German).

    >>> en_de({"translation": [{"de": "Hallo Welt.", "en": "Hello world."}]})
    {'prompt': ['translate English to German: Hello world.'], 'references': [['Hallo Welt.']]}
    """
    return {
        "prompt": [PREFIX + pair["en"] for pair in batch["translation"]],
        "references": [[pair["de"]] for pair in batch["translation"]],
    }
