"""PARENT (Dhingra et al. 2019, "Handling Divergent Reference Texts when Evaluating Table-to-Text
Generation"): n-gram precision and recall against the reference *and* the table, so that a generation
is credited for correct facts from the table that the reference leaves out.

Word-overlap entailment model (paper §3, eq. 4): an n-gram is entailed by the table with probability
``w(g)`` = fraction of its tokens among the table's value tokens. For each order n:

- entailed precision ``P_n = sum_g c_G(g) [p(g) + (1 - p(g)) w(g)] / sum_g c_G(g)``, ``p(g) = min(1, c_R(g)/c_G(g))``
- entailed recall against the reference ``R_n = sum_g c_R(g) w(g) min(1, c_G(g)/c_R(g)) / sum_g c_R(g) w(g)``

``P`` and ``R_ref`` are geometric means over orders 1..N; recall against the table ``R_T`` is the mean over
records of ``LCS(value, generation) / |value|``; ``R = R_ref^(1-lambda) R_T^lambda``; ``F = 2PR / (P+R)``.
With several references the one giving the best F counts; the corpus score is the mean of the samples'
scores. Zero handling follows the authors' script (google-research/language, table_text_eval): an
order with no generated n-gram has precision 0, one with no weighted reference n-gram recall 1, zeros
above unigrams become ``smoothing``.

A table (the ``table`` column) is a list of ``[attribute, value]`` pairs, ``[head, relation, tail]``
triples, or a mapping ``{attribute: value}``; text is lowercased and split into words and punctuation.

    from hfrl.metrics.table import Parent
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from hfrl.metrics.base import NAN, SampleMetric, reference_lists

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: Any) -> list[str]:
    return _TOKEN.findall(str(text).lower())


def table_values(table: Any) -> list[list[str]]:
    """The value tokens of each record: ``value`` of a pair, ``head + tail`` of a triple."""
    if isinstance(table, dict):
        table = list(table.items())
    records = []
    for record in table or []:
        if isinstance(record, str):  # "attribute|||value", the authors' file format
            record = record.split("|||")
        record = list(record)
        if len(record) == 2:
            value = tokenize(record[1])
        elif len(record) == 3:
            value = tokenize(record[0]) + tokenize(record[2])
        else:
            raise ValueError(f"parent: a table record is [attribute, value] or [head, relation, tail], got {record!r}")
        if value:
            records.append(value)
    return records


def _counts(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        diagonal, row[0] = 0, 0
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], diagonal + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def _geometric_mean(values: list[float]) -> float:
    return 0.0 if any(v == 0.0 for v in values) else math.exp(sum(math.log(v) for v in values) / len(values))


def parent_scores(
    prediction: list[str],
    reference: list[str],
    records: list[list[str]],
    lambda_weight: float | None = 0.5,
    smoothing: float = 1e-5,
    max_order: int = 4,
) -> tuple[float, float, float]:
    """PARENT ``(precision, recall, f)`` of one tokenized prediction against one reference and a table."""
    values = {t for record in records for t in record}

    def entailed(gram: tuple[str, ...]) -> float:  # w(g), word overlap with the table
        return sum(t in values for t in gram) / len(gram)

    precisions, recalls = [], []
    for n in range(1, max_order + 1):
        pred, ref = _counts(prediction, n), _counts(reference, n)
        num = sum(c * (min(1.0, ref[g] / c) + (1.0 - min(1.0, ref[g] / c)) * entailed(g)) for g, c in pred.items())
        den = float(sum(pred.values()))
        precisions.append(num / den if den else 0.0)
        num = sum(c * entailed(g) * min(1.0, pred[g] / c) for g, c in ref.items())
        den = sum(c * entailed(g) for g, c in ref.items())
        recalls.append(num / den if den else 1.0)
    for n in range(1, max_order):  # orders above 1: a zero becomes `smoothing`
        precisions[n] = precisions[n] or smoothing
        recalls[n] = recalls[n] or smoothing
    precision = _geometric_mean(precisions)
    reference_recall = _geometric_mean(recalls) or smoothing
    table_recall = sum(_lcs(v, prediction) / len(v) for v in records) / len(records) or smoothing
    if lambda_weight is None:  # the paper's heuristic: trust the table as much as the reference ignores it
        lambda_weight = 1.0 - sum(_lcs(v, reference) / len(v) for v in records) / len(records)
    recall = math.exp((1.0 - lambda_weight) * math.log(reference_recall) + lambda_weight * math.log(table_recall))
    return precision, recall, 2.0 * precision * recall / (precision + recall + 1e-8)


class Parent(SampleMetric):
    """PARENT precision, recall and F for table-to-text (Dhingra et al. 2019), from the table column.

    ``lambda_weight`` weighs table recall (None: the paper's per-sample heuristic).

    >>> table = [["name", "michael dahlquist"], ["occupation", "drummer"]]
    >>> r = Parent()(prompts=[""], completions=["michael dahlquist was a drummer"],
    ...              references=[["michael dahlquist was a drummer"]], table=[table])
    >>> round(r["parent_f1"], 4)
    1.0
    """

    name = "parent"

    def __init__(
        self,
        lambda_weight: float | None = 0.5,
        smoothing: float = 1e-5,
        max_order: int = 4,
        table_column: str = "table",
    ) -> None:
        self.lambda_weight, self.smoothing, self.max_order = lambda_weight, smoothing, max_order
        self.table_column = table_column

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        if self.table_column not in columns:
            raise ValueError(
                f"parent needs the table of each sample: give the dataset a {self.table_column!r} column "
                "([attribute, value] pairs) or set table_column"
            )
        tables = columns[self.table_column]
        refs = reference_lists(references, len(completions), "parent")
        keys = ("parent_precision", "parent_recall", "parent_f1")
        out: dict[str, list[float]] = {k: [] for k in keys}
        for completion, sample_refs, table in zip(completions, refs, tables, strict=True):
            records = table_values(table)
            if not sample_refs or not records:
                best = (NAN, NAN, NAN)
            else:
                prediction = tokenize(completion)
                args = (self.lambda_weight, self.smoothing, self.max_order)
                best = max(
                    (parent_scores(prediction, tokenize(r), records, *args) for r in sample_refs), key=lambda s: s[2]
                )
            for key, value in zip(keys, best, strict=True):
                out[key].append(value)
        return out
