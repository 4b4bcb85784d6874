"""Length and diversity of generated text (whitespace tokens), as RL4LMs and GEM-metrics report them.

Corpus scores pool the n-grams of all completions; per-sample scores (where given) describe one
completion alone. An empty completion has length 0 and no n-grams (distinct-n 0).

    from hfrl.metrics.diversity import DistinctN
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hfrl.metrics.base import MetricResult, text_of


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _pooled(completions: list[Any], n: int) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for c in completions:
        counts.update(ngrams(text_of(c).split(), n))
    return counts


class MeanLength:
    """Mean completion length in whitespace tokens (per sample: each length).

    >>> MeanLength()(prompts=["", ""], completions=["a b c", "d"])
    {'mean_length': 2.0}
    """

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> MetricResult:
        lengths = [float(len(text_of(c).split())) for c in completions]
        return MetricResult({"mean_length": sum(lengths) / max(len(lengths), 1)}, {"mean_length": lengths})


class _NgramOrders:
    """A metric over n-grams of the orders ``n`` (one order or several)."""

    def __init__(self, n: tuple[int, ...] | list[int] | int = (1, 2)) -> None:
        self.n = (n,) if isinstance(n, int) else tuple(n)


class DistinctN(_NgramOrders):
    """Distinct-n: unique n-grams over all n-grams of the completions (per sample: within one completion).

    >>> DistinctN(n=(1, 2))(prompts=["", ""], completions=["a b a", "a b"])
    {'distinct_1': 0.4, 'distinct_2': 0.6666666666666666}
    """

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> MetricResult:
        corpus, per_sample = {}, {}
        for n in self.n:
            counts = _pooled(completions, n)
            total = sum(counts.values())
            corpus[f"distinct_{n}"] = len(counts) / total if total else 0.0  # |unique n-grams| / |n-grams|
            own = [ngrams(text_of(c).split(), n) for c in completions]
            per_sample[f"distinct_{n}"] = [len(set(g)) / len(g) if g else 0.0 for g in own]
        return MetricResult(corpus, per_sample)


class UniqueNgrams(_NgramOrders):
    """Unique-n: how many n-grams occur exactly once over all completions (GEM-metrics' ``unique-n``).

    >>> UniqueNgrams(n=(1, 2))(prompts=["", ""], completions=["a b a", "a c"])
    {'unique_1': 2, 'unique_2': 3}
    """

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> MetricResult:
        return MetricResult({f"unique_{n}": sum(1 for c in _pooled(completions, n).values() if c == 1) for n in self.n})


class VocabSize:
    """Vocabulary size: the number of distinct whitespace tokens over all completions.

    >>> VocabSize()(prompts=["", ""], completions=["a b a", "a c"])
    {'vocab_size': 3}
    """

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> MetricResult:
        return MetricResult({"vocab_size": len(_pooled(completions, 1))})


class NgramEntropy(_NgramOrders):
    """Entropy-n: Shannon entropy (bits) of the n-gram frequencies over all completions.

    >>> NgramEntropy(n=1)(prompts=["", ""], completions=["a b", "a c"])  # p = 1/2, 1/4, 1/4
    {'entropy_1': 1.5}
    """

    def __call__(self, prompts: list[Any], completions: list[str], **columns: Any) -> MetricResult:
        out = {}
        for n in self.n:
            counts = _pooled(completions, n)
            total = sum(counts.values())
            out[f"entropy_{n}"] = -sum(c / total * math.log2(c / total) for c in counts.values()) if total else 0.0
        return MetricResult(out)
