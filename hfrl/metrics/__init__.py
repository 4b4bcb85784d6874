"""Evaluation metrics and their registry. A metric is a callable

``metric(prompts: list, completions: list[str], references: list[list[str]] | None = None, **columns)
-> MetricResult``: a dict of corpus scores (name -> float) whose ``per_sample`` attribute holds
per-sample scores (name -> one float per completion) when the metric has them (see ``base.py``).

YAML names a metric by id with args (``{id: rouge, args: {rouge_types: [rougeL]}}``) or by a
``module:attr`` path to user code. Every reward id is a metric too (its per-sample values and their
mean), and metrics with per-sample scores are rewards (``hfrl.rewards``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hfrl.utils.registry import built, resolve, spec_parts

METRICS: dict[str, str] = {
    # diversity and length (diversity.py)
    "mean_length": "hfrl.metrics.diversity:MeanLength",
    "distinct_n": "hfrl.metrics.diversity:DistinctN",
    "unique_ngrams": "hfrl.metrics.diversity:UniqueNgrams",
    "vocab_size": "hfrl.metrics.diversity:VocabSize",
    "entropy": "hfrl.metrics.diversity:NgramEntropy",
    # lexical overlap with references (lexical.py)
    "rouge": "hfrl.metrics.lexical:Rouge",
    "bleu": "hfrl.metrics.lexical:Bleu",
    "sacrebleu": "hfrl.metrics.lexical:SacreBleu",
    "chrf": "hfrl.metrics.lexical:Chrf",
    "ter": "hfrl.metrics.lexical:Ter",
    "meteor": "hfrl.metrics.lexical:Meteor",
    # semantic similarity (semantic.py)
    "bertscore": "hfrl.metrics.semantic:BertScore",
    "bleurt": "hfrl.metrics.semantic:Bleurt",
    # task-specific
    "cider": "hfrl.metrics.captioning:Cider",
    "spice": "hfrl.metrics.captioning:Spice",
    "parent": "hfrl.metrics.table:Parent",
    "commongen_repeat_penalty": "hfrl.metrics.commongen:CommonGenRepeatPenalty",
    # learned classifiers (learned.py)
    "learned_classifier": "hfrl.metrics.learned:LearnedClassifier",
    "learned_judge": "hfrl.metrics.learned:LearnedJudge",
    "intent_accuracy": "hfrl.metrics.learned:IntentAccuracy",
    # lexicon sentiment, the offline stand-in for a sentiment classifier (sentiment.py)
    "vader_sentiment": "hfrl.metrics.sentiment:VaderSentiment",
    # drift (drift.py)
    "causal_perplexity": "hfrl.metrics.drift:CausalPerplexity",
    # any `evaluate` module, and any reward
    "evaluate": "hfrl.metrics.hf_evaluate:EvaluateMetric",
    "reward": "hfrl.metrics.from_reward:RewardMetric",
}


def load_metric(spec: str | dict[str, Any] | Callable) -> Callable:
    """A metric from a registry id, a ``module:attr`` path, ``{id, args}`` or a callable.

    An id that names a reward but no metric gives that reward as a metric (``RewardMetric``).
    """
    if callable(spec):
        return spec
    name, args = spec_parts(spec, "metric")
    if name not in METRICS:
        from hfrl.rewards import REWARDS

        if name in REWARDS:
            from hfrl.metrics.from_reward import RewardMetric

            return RewardMetric(reward={"id": name, "args": args})
    return built(resolve(name, METRICS, "metric"), args, "metric", name)
