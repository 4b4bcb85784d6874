"""Evaluation metrics and their registry. A metric is a callable

``metric(prompts: list, completions: list[str], references: list[list[str]] | None = None, **columns)
-> MetricResult``: a dict of corpus scores (name -> float) whose ``per_sample`` attribute holds
per-sample scores (name -> one float per completion) when the metric has them (see ``base.py``).

YAML names a metric by id with args (``{id: rouge, args: {rouge_types: [rougeL]}}``) or by a
``module:attr`` path to user code. Metrics with per-sample scores are rewards of the same id, and
every reward is a metric too (its per-sample values and their mean): :mod:`hfrl.rewards`, the layer
that knows both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from hfrl.utils.registry import Entry, built, resolve, spec_parts

# name -> Entry: where the class is (imported when used), the columns it reads, its per-sample score's
# range, what it needs beyond a plain install, and the per-sample score a reward takes ("": the only
# one; None: no per-sample score, not a reward). Every metric with a per-sample score is a reward of
# the same name (hfrl.rewards: MetricReward), described once here.
METRICS: dict[str, Entry] = {
    # diversity and length (diversity.py): corpus statistics
    "mean_length": Entry("hfrl.metrics.diversity:MeanLength", range="words >= 0"),
    "distinct_n": Entry("hfrl.metrics.diversity:DistinctN", range="[0, 1]"),
    "unique_ngrams": Entry("hfrl.metrics.diversity:UniqueNgrams", range="count >= 0"),
    "vocab_size": Entry("hfrl.metrics.diversity:VocabSize", range="count >= 0"),
    "entropy": Entry("hfrl.metrics.diversity:NgramEntropy", range="bits >= 0"),
    # lexical overlap with references (lexical.py)
    "rouge": Entry("hfrl.metrics.lexical:Rouge", ("references",), "[0, 1]", reward="rouge1"),
    "bleu": Entry("hfrl.metrics.lexical:Bleu", ("references",), "[0, 1]", reward="bleu"),
    "sacrebleu": Entry("hfrl.metrics.lexical:SacreBleu", ("references",), "[0, 1]", reward="sacrebleu"),
    "chrf": Entry("hfrl.metrics.lexical:Chrf", ("references",), "[0, 1]", reward="chrf"),
    "ter": Entry(
        "hfrl.metrics.lexical:Ter",
        ("references",),
        "TER >= 0; as a reward 1 - TER <= 1",
        reward="ter",
        reward_transform="1 - x",
    ),  # fmt: skip
    "meteor": Entry("hfrl.metrics.lexical:Meteor", ("references",), "[0, 1]", ("wordnet",), reward="meteor"),
    # semantic similarity (semantic.py)
    "bertscore": Entry(
        "hfrl.metrics.semantic:BertScore", ("references",), "[-1, 1], about [0, 1]", ("model",), reward="bertscore_f1"
    ),  # fmt: skip
    "bleurt": Entry("hfrl.metrics.semantic:Bleurt", ("references",), "about [0, 1]", ("model",), reward="bleurt"),
    # task-specific
    "cider": Entry("hfrl.metrics.captioning:Cider", ("references",), "[0, 10]", reward="cider"),
    "spice": Entry("hfrl.metrics.captioning:Spice", ("references",), "[0, 1]", ("java", "corenlp"), reward="spice"),
    "parent": Entry("hfrl.metrics.table:Parent", ("references", "table"), "[0, 1]", reward="parent_f1"),
    "commongen_repeat_penalty": Entry(
        "hfrl.metrics.commongen:CommonGenRepeatPenalty", (), "{penalty, 0}", reward="commongen_repeat_penalty"
    ),
    # learned classifiers (learned.py)
    "learned_classifier": Entry(
        "hfrl.metrics.learned:LearnedClassifier", (), "[0, 1] (a probability)", ("model",), reward="learned_classifier"
    ),  # fmt: skip
    "intent_accuracy": Entry(
        "hfrl.metrics.learned:IntentAccuracy", ("intent",), "{0, 1}", ("model",), reward="intent_accuracy"
    ),  # fmt: skip
    "reward_model": Entry(
        "hfrl.metrics.learned:RewardModel", (), "a logit (higher: preferred)", ("model",), reward="reward_model"
    ),  # fmt: skip
    "learned_judge": Entry(
        "hfrl.metrics.learned:LearnedJudge", (), "[0, 1] (a probability)", ("model",), reward="learned_judge"
    ),  # fmt: skip
    # lexicon sentiment, the offline stand-in for a sentiment classifier (sentiment.py)
    "vader_sentiment": Entry("hfrl.metrics.sentiment:VaderSentiment", (), "[-1, 1]", reward=""),
    # drift (drift.py)
    "causal_perplexity": Entry("hfrl.metrics.drift:CausalPerplexity", ("references",), "perplexity >= 1", ("model",)),
    # any `evaluate` module (its per-sample output: `key`)
    "evaluate": Entry("hfrl.metrics.hf_evaluate:EvaluateMetric", ("references",), "the module's", ("code",), reward=""),
}


def load_metric(spec: str | dict[str, Any] | Callable[..., Any]) -> Callable[..., Any]:
    """A metric from a registry id, a ``module:attr`` path, ``{id, args}`` or a callable. (A reward used
    as a metric: :func:`hfrl.rewards.load_task_metric`, which takes both.)"""
    if callable(spec):
        return spec
    name, args = spec_parts(spec, "metric")
    return cast(Callable[..., Any], built(resolve(name, METRICS, "metric"), args, "metric", name))
