"""The metric contract and the helpers every metric shares.

A metric is a callable ``metric(prompts, completions, references=None, **columns) -> MetricResult``.
A :class:`MetricResult` *is* the dict of corpus scores (name -> float), so callers that expect a
dict of floats keep working; its ``per_sample`` attribute holds per-sample scores (name -> one float
per completion) when the metric has them. Per-sample scores may be NaN where a score is undefined
(a sample without references); corpus means ignore NaN.

    from hfrl.metrics.base import MetricResult, SampleMetric
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar, cast

NAN = float("nan")


class MetricResult(dict[str, Any]):
    """Corpus scores (this dict: name -> float) plus ``per_sample`` (name -> list of floats).

    >>> r = MetricResult({"x": 0.5}, per_sample={"x": [0.0, 1.0]})
    >>> r, r.per_sample["x"]
    ({'x': 0.5}, [0.0, 1.0])
    """

    def __init__(self, corpus: dict[str, float], per_sample: dict[str, list[float]] | None = None) -> None:
        super().__init__(corpus)
        self.per_sample: dict[str, list[float]] = dict(per_sample or {})

    def __reduce__(self) -> tuple[type[MetricResult], tuple[dict[str, float], dict[str, list[float]]]]:
        # keep per_sample through pickling (multiprocessing, checkpoints)
        return (type(self), (dict(self), self.per_sample))


def nanmean(values: Sequence[float]) -> float:
    """Mean of the values that are not NaN; NaN when there are none.

    >>> nanmean([1.0, float("nan"), 3.0])
    2.0
    """
    kept = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return sum(kept) / len(kept) if kept else NAN


def text_of(item: Any) -> str:
    """The text of a prompt or completion: a string, or TRL's conversational form (a list of
    ``{"role", "content"}`` messages, whose contents are joined by newlines)."""
    if item is None:
        return ""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        return str(item.get("content", ""))
    if isinstance(item, (list, tuple)):
        return "\n".join(text_of(m) for m in item)
    return str(item)


def last_turn(prompt: Any, separator: str | None = "<EOU>") -> str:
    """The last turn of a dialogue prompt: the last message of a conversational prompt, or the last
    non-empty piece of a string split on ``separator`` (DailyDialog's ``<EOU>``).

    >>> last_turn("hi <EOU> how are you? <EOU> ")
    'how are you?'
    """
    if isinstance(prompt, (list, tuple)) and prompt:
        return text_of(prompt[-1]).strip()
    text = text_of(prompt)
    pieces = [p.strip() for p in (text.split(separator) if separator else [text])]
    pieces = [p for p in pieces if p]
    return pieces[-1] if pieces else ""


def reference_lists(references: Any, n: int, metric: str) -> list[list[str]]:
    """``references`` as one list of non-empty strings per sample (a string counts as one reference).

    Fails with a clear message when the column is missing or has the wrong length.
    """
    if references is None:
        raise ValueError(
            f"{metric} needs reference texts: give the dataset a 'references' column (list[str] per sample)"
        )
    if len(references) != n:
        raise ValueError(f"{metric}: got {len(references)} reference lists for {n} completions")
    out = []
    for refs in references:
        refs = [refs] if isinstance(refs, str) or refs is None else list(refs)
        out.append([text_of(r) for r in refs if r is not None and text_of(r).strip()])
    return out


_CACHE: dict[Any, Any] = {}
_CACHE_LOCK = threading.RLock()


def cached(key: Any, build: Callable[[], Any]) -> Any:
    """``build()`` once per process for ``key`` (learned models, tokenizers, loaded modules), then reused.

    Instances of rewards and metrics keep only their settings, so they stay small and picklable;
    the heavy objects live here.
    """
    with _CACHE_LOCK:
        if key not in _CACHE:
            from hfrl.core.zero3 import loading_whole

            with loading_whole():  # a ZeRO-3 run: whole models (transformers would partition them as it loads)
                _CACHE[key] = build()
        return _CACHE[key]


def uncache(which: Callable[[Any], bool]) -> None:
    """Drop the objects :func:`cached` holds under each key ``which`` accepts."""
    with _CACHE_LOCK:
        for key in [key for key in _CACHE if which(key)]:
            del _CACHE[key]


def encoded(
    tokenizer: Any, texts: list[str], pairs: list[str] | None, max_length: int, device: Any, **kwargs: Any
) -> Any:
    """One padded batch of ``texts`` (with their second segments ``pairs``), each cut to
    ``max_length`` tokens, as tensors on ``device`` (``kwargs`` go to the tokenizer)."""
    batch = tokenizer(texts, pairs, padding=True, truncation=True, max_length=max_length, return_tensors="pt", **kwargs)
    return batch.to(device)


M = TypeVar("M")


def evaluating_on(model: M, device: Any) -> M:
    """``model.to(device).eval()``, typed as the model it was given: transformers 5.24 wraps
    ``PreTrainedModel.to`` in a decorator whose type loses its bound ``self``."""
    return cast(M, cast(Any, model).to(device).eval())


def default_device() -> str:
    """The device of this process: the one Accelerate assigned (so rewards run beside the trainer),
    else ``cuda`` when available, else ``cpu``."""
    try:
        from accelerate import PartialState

        return str(PartialState().device)
    except Exception:  # accelerate not initialisable here: fall back to torch's view
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


def require(module: str, package: str, what: str) -> ModuleType:
    """Import an optional dependency, or fail with the command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{what} needs the {package} package: pip install 'hfrl[metrics]' (or {package})") from err


class SampleMetric:
    """Base of metrics computed per sample: subclasses implement :meth:`scores` (name -> one float per
    completion, NaN where undefined); the corpus score is the NaN-ignoring mean unless
    :meth:`corpus` is overridden (BLEU, chrF and TER are corpus statistics, not means)."""

    name = "metric"

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        raise NotImplementedError

    def corpus(
        self,
        per_sample: dict[str, list[float]],
        prompts: list[Any],
        completions: list[str],
        references: Any,
        **columns: Any,
    ) -> dict[str, float]:
        return {k: nanmean(v) for k, v in per_sample.items()}

    def __call__(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> MetricResult:
        completions = [text_of(c) for c in completions]
        per_sample = self.scores(prompts, completions, references, **columns)
        return MetricResult(self.corpus(per_sample, prompts, completions, references, **columns), per_sample)
