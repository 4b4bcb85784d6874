"""Any Hugging Face ``evaluate`` module as an hfrl metric (and, when it yields per-sample scores, as a
reward): a Hub name (``"rouge"``, ``"bleu"``, ``"user/metric"``) or a local module path (a folder or a
``.py`` file, which also works offline).

The module loads once per process. Its numeric outputs become corpus scores; a list with one number
per completion is a per-sample score (its mean is its corpus score) unless ``per_sample_keys`` names
the per-sample outputs explicitly. ``references`` passes each sample's reference list (``all``), its
first reference (``first``, for modules that take one string per prediction) or nothing (``none``).

    from hfrl.metrics.hf_evaluate import EvaluateMetric
    EvaluateMetric(path="tests/fixtures/metrics/word_match")
"""

from __future__ import annotations

import math
from decimal import Decimal
from numbers import Real
from typing import Any

from hfrl.metrics.base import NAN, MetricResult, cached, nanmean, reference_lists, text_of


def load_module(path: str, config_name: str | None = None, **load_args: Any) -> Any:
    """``evaluate.load`` once per process (``import evaluate`` alone costs seconds, so it is lazy)."""

    def build() -> Any:
        import evaluate

        return evaluate.load(path, config_name, **load_args)

    return cached(("evaluate", path, config_name, tuple(sorted(load_args.items()))), build)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (Real, Decimal)):
        try:
            import numpy as np

            if isinstance(value, np.generic) and np.issubdtype(value.dtype, np.number):
                return float(value)
        except ImportError:
            pass
        return None
    return float(value)


class EvaluateMetric:
    """An ``evaluate`` module (Hub name or local path) as a metric; per-sample outputs become rewards.

    >>> metric = EvaluateMetric(path="path/to/word_match", references="first")
    >>> metric(prompts=[""], completions=["a b"], references=[["a c"]])  # doctest: +SKIP
    {'word_match': 0.5, 'scores': 0.5}
    """

    name = "evaluate"

    def __init__(
        self,
        path: str,
        config_name: str | None = None,
        compute_args: dict[str, Any] | None = None,
        references: str = "all",
        per_sample_keys: list[str] | None = None,
        load_args: dict[str, Any] | None = None,
    ) -> None:
        if references not in ("all", "first", "none"):
            raise ValueError(f"evaluate: references must be all, first or none, got {references!r}")
        self.path, self.config_name, self.compute_args = path, config_name, dict(compute_args or {})
        self.references, self.per_sample_keys, self.load_args = references, per_sample_keys, dict(load_args or {})

    def __call__(
        self, prompts: list[Any], completions: list[Any], references: Any = None, **columns: Any
    ) -> MetricResult:
        completions = [text_of(c) for c in completions]
        n = len(completions)
        module = load_module(self.path, self.config_name, **self.load_args)
        kwargs = dict(self.compute_args)
        if self.references != "none":
            refs = reference_lists(references, n, f"evaluate module {self.path!r}")
            if any(not r for r in refs):
                raise ValueError(f"evaluate module {self.path!r}: every sample needs a non-empty reference")
            kwargs["references"] = [r[0] for r in refs] if self.references == "first" else refs
        raw = module.compute(predictions=completions, **kwargs) or {}
        corpus, per_sample = {}, {}
        for key, value in raw.items():
            if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
                values = value.tolist() if hasattr(value, "tolist") else list(value)
                numbers = [_number(v) for v in values] if isinstance(values, list) else []
                wanted = key in self.per_sample_keys if self.per_sample_keys is not None else len(numbers) == n
                if wanted and len(numbers) == n and all(v is not None for v in numbers):
                    per_sample[key] = [float(v) for v in numbers]  # type: ignore[arg-type]
                    corpus[key] = nanmean(per_sample[key])
                continue
            number = _number(value)
            if number is not None:
                corpus[key] = number if not math.isnan(number) else NAN
        missing = [k for k in self.per_sample_keys or [] if k not in per_sample]
        if missing:
            raise ValueError(
                f"evaluate module {self.path!r} returned no per-sample {missing}; its outputs: {sorted(raw)}"
            )
        return MetricResult(corpus, per_sample)
