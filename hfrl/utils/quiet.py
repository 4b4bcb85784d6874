"""What hfrl's dependencies print that a user cannot act on, kept off the console while hfrl drives them.

- **Warnings** (:func:`quiet_dependency_warnings`): TRL 1.16 and PEFT call transformers'
  ``gradient_checkpointing_enable`` / ``_disable`` and ``is_gradient_checkpointing``, which
  transformers 5 deprecates in favour of the ``activation_checkpointing`` names: GRPO, RLOO, A-LoL and
  LoRA runs printed FutureWarnings about code that is not the user's. Only those messages are filtered.
- **Log lines** (:func:`dropped_mask_note_quiet`, around a generation hfrl drives: TRL's GRPO / RLOO):
  transformers' "We strongly recommend passing in an ``attention_mask``", which its own ``generate``
  triggers after dropping an all-ones mask, at a decoding step whose one new token is the pad token.
- **DeepSpeed's CPU note** (:func:`quiet_deepspeed_cpu_note`): with deepspeed installed (the dev extra),
  accelerate's ``unwrap_model`` imports it in every ``Trainer.__init__``, and on a machine without a GPU
  its accelerator detection opened every run (and each process of a launch) with "[WARNING] ... Setting
  accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.". It falls back
  to the CPU only where hfrl found no device either (:func:`hfrl.trainers.devices.has_accelerator`: CUDA,
  MPS, XPU, which DeepSpeed detects too), and hfrl's start line says what the run uses.
- **Progress bars** (:func:`quiet_loading_bars`): transformers' ``Loading weights`` and ``Writing model
  shards`` bars, one per model loaded or saved (a run loads two or three, and saves at every
  checkpoint); drawn while the training bar is open they also left ``ESC [A`` residues in logs. The
  Hub's download bars and the training bar are kept.

:func:`quiet` does the warnings, DeepSpeed's note and the bars; it imports nothing heavy itself
(transformers only when it is already being used).
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
DEEPSPEED_NOTES = ("Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.",)


def quiet_dependency_warnings() -> None:
    """Ignore transformers' deprecation warnings about the checkpointing methods TRL and PEFT call."""
    for name in DEPRECATED_BY_TRANSFORMERS:
        warnings.filterwarnings("ignore", message=f"`{name}` is deprecated", category=FutureWarning)


class _UpstreamNotes(logging.Filter):
    def __init__(self, notes: tuple[str, ...]) -> None:
        super().__init__()
        self.notes = notes

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(message.startswith(note) for note in self.notes)


_NOTES = _UpstreamNotes(UPSTREAM_NOTES)
_DEEPSPEED_NOTES = _UpstreamNotes(DEEPSPEED_NOTES)


def quiet_deepspeed_cpu_note() -> None:
    """Drop DeepSpeed's "Setting accelerator to CPU" note: a filter on its ``DeepSpeed`` logger, which
    deepspeed's ``LoggerFactory`` gets by name when it is imported later and keeps (it adds a handler)."""
    log = logging.getLogger("DeepSpeed")
    if _DEEPSPEED_NOTES not in log.filters:
        log.addFilter(_DEEPSPEED_NOTES)


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
    """:func:`quiet_dependency_warnings`, :func:`quiet_deepspeed_cpu_note` and :func:`quiet_loading_bars`."""
    quiet_dependency_warnings()
    quiet_deepspeed_cpu_note()
    quiet_loading_bars()


__all__ = [
    "DEEPSPEED_NOTES",
    "DEPRECATED_BY_TRANSFORMERS",
    "QUIET_BARS",
    "dropped_mask_note_quiet",
    "quiet",
    "quiet_deepspeed_cpu_note",
    "quiet_dependency_warnings",
    "quiet_loading_bars",
]
