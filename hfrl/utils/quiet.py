"""What hfrl's dependencies print that a user cannot act on, kept off the console while hfrl drives them.

- **Warnings** (:func:`quiet_dependency_warnings`): TRL 1.16 and PEFT call transformers'
  ``gradient_checkpointing_enable`` / ``_disable`` and ``is_gradient_checkpointing``, which
  transformers 5 deprecates in favour of the ``activation_checkpointing`` names: GRPO, RLOO, A-LoL and
  LoRA runs printed FutureWarnings about code that is not the user's. Only those messages are filtered.
- **Log lines** (:func:`dropped_mask_note_quiet`, around a generation hfrl drives: TRL's GRPO / RLOO):
  transformers' "We strongly recommend passing in an ``attention_mask``", which its own ``generate``
  triggers after dropping an all-ones mask, at a decoding step whose one new token is the pad token.
- **Progress bars** (:func:`quiet_loading_bars`): transformers' ``Loading weights`` and ``Writing model
  shards`` bars, one per model loaded or saved (a run loads two or three, and saves at every
  checkpoint); drawn while the training bar is open they also left ``ESC [A`` residues in logs. The
  Hub's download bars and the training bar are kept.

:func:`quiet` does the warnings and the bars; it imports nothing heavy itself (transformers only when it is already
being used).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

DEPRECATED_BY_TRANSFORMERS = (
    "gradient_checkpointing_enable",
    "gradient_checkpointing_disable",
    "is_gradient_checkpointing",
)
QUIET_BARS = ("Loading weights", "Writing model shards")  # transformers' bars per model loaded / saved
UPSTREAM_NOTES = ("We strongly recommend passing in an `attention_mask`",)


def quiet_dependency_warnings() -> None:
    """Ignore transformers' deprecation warnings about the checkpointing methods TRL and PEFT call."""
    for name in DEPRECATED_BY_TRANSFORMERS:
        warnings.filterwarnings("ignore", message=f"`{name}` is deprecated", category=FutureWarning)


class _UpstreamNotes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(message.startswith(note) for note in UPSTREAM_NOTES)


_NOTES = _UpstreamNotes()


@contextlib.contextmanager
def dropped_mask_note_quiet() -> Iterator[None]:
    """Inside: transformers' "strongly recommend passing in an attention_mask" note is not shown."""
    log = logging.getLogger("transformers.modeling_utils")
    log.addFilter(_NOTES)
    try:
        yield
    finally:
        log.removeFilter(_NOTES)


def _quiet_bar(factory: Any, args: tuple, kwargs: dict) -> Any:
    """transformers' tqdm hook: its per-model loading and saving bars disabled, the others as they are."""
    if kwargs.get("desc") in QUIET_BARS:
        kwargs = {**kwargs, "disable": True}
    return factory(*args, **kwargs)


def quiet_loading_bars() -> None:
    """Disable transformers' ``Loading weights`` / ``Writing model shards`` bars (its ``set_tqdm_hook``;
    a transformers without it keeps them)."""
    from transformers.utils import logging as hf_logging

    if hasattr(hf_logging, "set_tqdm_hook"):
        hf_logging.set_tqdm_hook(_quiet_bar)


def quiet() -> None:
    """:func:`quiet_dependency_warnings` and :func:`quiet_loading_bars`."""
    quiet_dependency_warnings()
    quiet_loading_bars()


__all__ = [
    "DEPRECATED_BY_TRANSFORMERS",
    "QUIET_BARS",
    "dropped_mask_note_quiet",
    "quiet",
    "quiet_dependency_warnings",
    "quiet_loading_bars",
]
