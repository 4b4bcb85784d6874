"""What hfrl's dependencies print that a user cannot act on, kept off the console while hfrl drives them.

- **Warnings** (:func:`quiet_dependency_warnings`): TRL 1.16 and PEFT call transformers'
  ``gradient_checkpointing_enable`` / ``_disable`` and ``is_gradient_checkpointing``, which
  transformers 5 deprecates in favour of the ``activation_checkpointing`` names: GRPO, RLOO, A-LoL and
  LoRA runs printed FutureWarnings about code that is not the user's; DeepSpeed's ZeRO-3 calls
  ``torch.distributed.all_gather_into_tensor`` / ``reduce_scatter_tensor``, which torch deprecates
  (hundreds of lines a run). Only those messages are filtered.
- **Log lines** (:func:`dropped_mask_note_quiet`, around a generation hfrl drives: TRL's GRPO / RLOO):
  transformers' "We strongly recommend passing in an ``attention_mask``", which its own ``generate``
  triggers after dropping an all-ones mask, at a decoding step whose one new token is the pad token.
- **DeepSpeed's CPU note** (:func:`quiet_deepspeed_cpu_note`): with deepspeed installed (the dev extra),
  accelerate's ``unwrap_model`` imports it in every ``Trainer.__init__``, and on a machine without a GPU
  its accelerator detection opened every run (and each process of a launch) with "[WARNING] ... Setting
  accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.". It falls back
  to the CPU only where hfrl found no device either (:func:`hfrl.trainers.devices.has_accelerator`: CUDA,
  MPS, XPU, which DeepSpeed detects too), and hfrl's start line says what the run uses.
- **A new head's load report** (:func:`new_head_report_as_one_line`): a reward model fitted from a causal
  LM (``hfrl train --alg reward``) gets a new ``score`` head, as it must, and transformers 5 printed a
  boxed "LOAD REPORT ... score.weight | MISSING" table for it; a report of nothing but a new
  classification head (and the causal LM's unused ``lm_head``) is one hfrl line instead. Any other
  report (a weight missing from the body) is shown as transformers writes it.
- **datasets' bars** (:func:`quiet_dataset_bars`, while a task loads): "Generating train split" (and
  "Map") bars for each file of a task's data, the fixtures' included: a few lines of bars per run before
  its start line. ``HF_DATASETS_DISABLE_PROGRESS_BARS=0`` keeps them.
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
import os
import re
import sys
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


DEPRECATED_BY_TORCH = ("torch.distributed.all_gather_into_tensor", "torch.distributed.reduce_scatter_tensor")


def quiet_dependency_warnings() -> None:
    """Ignore transformers' deprecation warnings about the checkpointing methods TRL and PEFT call, and
    torch's about the collectives DeepSpeed's ZeRO-3 calls (two a call, per process: a 10-iteration run
    printed 646 lines of them)."""
    for name in DEPRECATED_BY_TRANSFORMERS + DEPRECATED_BY_TORCH:
        warnings.filterwarnings("ignore", message=f"`{re.escape(name)}` is deprecated", category=FutureWarning)


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


NEW_HEADS = ("score", "classifier")  # the heads *ForSequenceClassification adds (GPT-2, Llama...; BERT, RoBERTa)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def new_head_line(report: str) -> str | None:
    r"""The one line that says what a transformers load report of only a new classification head says, or
    None for any other report.

    >>> table = "M LOAD REPORT from: x\nKey | Status | \n--+--+-\nscore.weight | MISSING | \n\nNotes:\n- MISSING: ..."
    >>> new_head_line(table)
    'M: a new score head (score.weight), initialised (the checkpoint has none)'
    """
    if " LOAD REPORT" not in report:
        return None
    text = _ANSI.sub("", report)
    model = text.split(" LOAD REPORT", 1)[0].split()[-1]
    new, unused = [], []
    for line in text.split("\n\n", 1)[0].splitlines()[3:]:  # the table's rows, after the header
        if line.count("|") < 2:
            return None
        key, status = (cell.strip() for cell in line.split("|")[:2])
        top = key.split(".", 1)[0]
        if status in ("MISSING", "MISMATCH") and top in NEW_HEADS:
            new.append(key)
        elif status == "UNEXPECTED" and top == "lm_head":  # a causal LM's head, which a classifier drops
            unused.append(key)
        else:
            return None
    if not new:
        return None
    head = new[0].split(".", 1)[0]
    dropped = f"; the checkpoint's {', '.join(unused)} is not used" if unused else ""
    return f"{model}: a new {head} head ({', '.join(new)}), initialised (the checkpoint has none){dropped}"


class _NewHeadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        line = new_head_line(record.getMessage())
        if line is None:
            return True
        logging.getLogger("hfrl").warning(line)
        return False


_NEW_HEAD = _NewHeadReport()


def new_head_report_as_one_line() -> None:
    """A transformers load report of only a new classification head becomes :func:`new_head_line`'s line."""
    log = logging.getLogger("transformers.modeling_utils")
    if _NEW_HEAD not in log.filters:
        log.addFilter(_NEW_HEAD)


@contextlib.contextmanager
def quiet_dataset_bars() -> Iterator[None]:
    """Inside: ``datasets``' progress bars off (``datasets.disable_progress_bars``), on again after if they
    were; as they are where the user set ``HF_DATASETS_DISABLE_PROGRESS_BARS`` (which ``datasets`` lets win).
    The Hub's download bars (``huggingface_hub``'s) are not ``datasets``' and stay."""
    import datasets

    if "HF_DATASETS_DISABLE_PROGRESS_BARS" in os.environ or datasets.utils.are_progress_bars_disabled():
        yield
        return
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.enable_progress_bars()


@contextlib.contextmanager
def own_line() -> Iterator[None]:
    """Inside: a line written to the console (a warning) gets a line of its own while a progress bar is
    drawn: the bars are cleared first and drawn again after (tqdm's ``external_write_mode``). Written
    next to the training bar, metric 'intent_accuracy''s skip line was glued to the bar's line, and the
    bar's next refresh (a carriage return) wrote over the end of the wrapped line, its URL."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stderr):
        yield


def _quiet_bar(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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
    """:func:`quiet_dependency_warnings`, :func:`quiet_deepspeed_cpu_note`, :func:`new_head_report_as_one_line`
    and :func:`quiet_loading_bars`."""
    quiet_dependency_warnings()
    quiet_deepspeed_cpu_note()
    new_head_report_as_one_line()
    quiet_loading_bars()


__all__ = [
    "DEEPSPEED_NOTES",
    "DEPRECATED_BY_TORCH",
    "DEPRECATED_BY_TRANSFORMERS",
    "QUIET_BARS",
    "dropped_mask_note_quiet",
    "new_head_line",
    "new_head_report_as_one_line",
    "own_line",
    "quiet",
    "quiet_dataset_bars",
    "quiet_deepspeed_cpu_note",
    "quiet_dependency_warnings",
    "quiet_loading_bars",
]
