"""Rewards made of metrics' per-sample scores: ROUGE, BLEU, chrF, TER, METEOR, BERTScore, BLEURT, CIDEr,
SPICE, PARENT, the CommonGen repeat penalty, learned classifiers, VADER sentiment, intent accuracy and
``evaluate`` modules.

Each is a small picklable class (it keeps settings only; models live in a per-process cache) with the
TRL signature ``reward(prompts, completions, **columns) -> list[float]``; dataset columns such as
``references`` or ``table`` arrive as keyword arguments. Where a score is undefined for a sample (no
reference) the reward is ``missing``: None by default, which TRL and hfrl read as "no reward for this
sample" (hfrl's trainers count it as 0, TRL's ignore it in the sum over reward functions).

    from hfrl.rewards.from_metrics import Rouge
    Rouge(rouge_type="rougeL")(prompts=[""], completions=["the cat"], references=[["the cat sat"]])
"""

from __future__ import annotations

import math
from typing import Any

from hfrl.metrics.base import text_of


class MetricReward:
    """Base: the per-sample score ``key`` of ``metric`` as a reward (``transform`` maps each score)."""

    __name__ = "metric_reward"

    def __init__(self, metric: Any, key: str, missing: float | None = None) -> None:
        self.metric, self.key, self.missing = metric, key, missing

    def transform(self, value: float) -> float:
        return value

    def __call__(self, prompts: list, completions: list, **columns) -> list[float | None]:
        completions = [text_of(c) for c in completions]
        if hasattr(self.metric, "scores"):  # skips corpus statistics that a reward does not need
            values = self.metric.scores(prompts, completions, **columns)[self.key]
        else:
            values = self.metric(prompts, completions, **columns).per_sample[self.key]
        return [self.missing if v is None or math.isnan(v) else self.transform(float(v)) for v in values]


class Rouge(MetricReward):
    """ROUGE of each completion against its best reference (``rouge_type``: rouge1, rouge2, rougeL, rougeLsum).

    >>> Rouge(rouge_type="rouge1")(prompts=[""], completions=["the cat sat"], references=[["the cat"]])
    [0.8]
    """

    __name__ = "rouge"

    def __init__(
        self,
        rouge_type: str = "rouge1",
        use_stemmer: bool = True,
        measure: str = "fmeasure",
        missing: float | None = None,
    ) -> None:
        from hfrl.metrics.lexical import Rouge as Metric

        super().__init__(
            Metric(rouge_types=[rouge_type], use_stemmer=use_stemmer, measure=measure), rouge_type, missing
        )


class Bleu(MetricReward):
    """Smoothed sentence BLEU (NLTK, 13a tokens) of each completion against its references.

    >>> Bleu()(prompts=[""], completions=["the cat sat on the mat"], references=[["the cat sat on the mat"]])
    [1.0]
    """

    __name__ = "bleu"

    def __init__(self, max_order: int = 4, smoothing: str | None = "method1", missing: float | None = None) -> None:
        from hfrl.metrics.lexical import Bleu as Metric

        super().__init__(Metric(max_order=max_order, smoothing=smoothing), "bleu", missing)


class SacreBleu(MetricReward):
    """Sentence BLEU with sacrebleu (effective order), on a 0-1 scale.

    >>> [round(x, 6) for x in SacreBleu()(prompts=[""], completions=["The dog bit the man."],
    ...                                   references=[["The dog bit the man."]])]
    [1.0]
    """

    __name__ = "sacrebleu"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, missing: float | None = None) -> None:
        from hfrl.metrics.lexical import SacreBleu as Metric

        super().__init__(Metric(tokenize=tokenize, lowercase=lowercase), "sacrebleu", missing)


class Chrf(MetricReward):
    """Sentence chrF (``word_order: 2`` for chrF++) with sacrebleu, on a 0-1 scale.

    >>> Chrf()(prompts=[""], completions=["a cat"], references=[["a cat"]])
    [1.0]
    """

    __name__ = "chrf"

    def __init__(self, char_order: int = 6, word_order: int = 0, beta: int = 2, missing: float | None = None) -> None:
        from hfrl.metrics.lexical import Chrf as Metric

        super().__init__(Metric(char_order=char_order, word_order=word_order, beta=beta), "chrf", missing)


class Ter(MetricReward):
    """``1 - TER`` (sacrebleu; TER as a fraction of reference words, so this can go below 0): higher is better.

    >>> Ter()(prompts=[""], completions=["the cat sat"], references=[["the cat sat on the mat"]])  # 3 edits / 6
    [0.5]
    """

    __name__ = "ter"

    def __init__(self, normalized: bool = False, case_sensitive: bool = False, missing: float | None = None) -> None:
        from hfrl.metrics.lexical import Ter as Metric

        super().__init__(Metric(normalized=normalized, case_sensitive=case_sensitive), "ter", missing)

    def transform(self, value: float) -> float:
        return 1.0 - value


class Meteor(MetricReward):
    """METEOR (NLTK + WordNet) of each completion against its best reference.

    >>> Meteor()(prompts=[""], completions=["a hound"], references=[["a dog"]])  # doctest: +SKIP
    [0.9375]
    """

    __name__ = "meteor"

    def __init__(self, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5, missing: float | None = None) -> None:
        from hfrl.metrics.lexical import Meteor as Metric

        super().__init__(Metric(alpha=alpha, beta=beta, gamma=gamma), "meteor", missing)


class BertScore(MetricReward):
    """BERTScore (``score``: f1, precision or recall) of each completion against its best reference.

    >>> BertScore(model_type="/path/to/encoder", num_layers=6)(  # doctest: +SKIP
    ...     prompts=[""], completions=["the cat"], references=[["the cat"]])
    [1.0]
    """

    __name__ = "bertscore"

    def __init__(self, score: str = "f1", missing: float | None = None, **bertscore_args: Any) -> None:
        from hfrl.metrics.semantic import BertScore as Metric

        if score not in ("f1", "precision", "recall"):
            raise ValueError(f"bertscore: score must be f1, precision or recall, got {score!r}")
        super().__init__(Metric(**bertscore_args), f"bertscore_{score}", missing)


class Bleurt(MetricReward):
    """BLEURT score of each completion against its best reference (PyTorch checkpoint from the Hub).

    >>> Bleurt(checkpoint="lucadiliello/BLEURT-20-D12")(  # doctest: +SKIP
    ...     prompts=[""], completions=["a bird chirps"], references=[["a bird chirps"]])
    [0.96...]
    """

    __name__ = "bleurt"

    def __init__(self, checkpoint: str = "lucadiliello/BLEURT-20-D12", missing: float | None = None, **args: Any):
        from hfrl.metrics.semantic import Bleurt as Metric

        super().__init__(Metric(checkpoint=checkpoint, **args), "bleurt", missing)


class Cider(MetricReward):
    """CIDEr-D of each completion, with n-gram weights from the references of its batch.

    >>> [round(x, 4) for x in Cider()(prompts=["", ""], completions=["a cat sat", "a dog"],
    ...                               references=[["a cat sat on the mat"], ["a dog ran"]])]
    [3.8938, 3.4868]
    """

    __name__ = "cider"

    def __init__(self, tokenizer: str = "simple", missing: float | None = None) -> None:
        from hfrl.metrics.captioning import Cider as Metric

        super().__init__(Metric(tokenizer=tokenizer), "cider", missing)


class Spice(MetricReward):
    """SPICE F-score of each completion (Java and the Stanford CoreNLP jars needed: a clear error otherwise).

    >>> Spice()(prompts=[""], completions=["a cat"], references=[["a cat"]])  # doctest: +SKIP
    [1.0]
    """

    __name__ = "spice"

    def __init__(self, tokenizer: str = "simple", missing: float | None = None) -> None:
        from hfrl.metrics.captioning import Spice as Metric

        super().__init__(Metric(tokenizer=tokenizer), "spice", missing)


class Parent(MetricReward):
    """PARENT F of each completion against its references and its ``table`` column (table-to-text).

    >>> table = [["name", "michael dahlquist"], ["occupation", "drummer"]]
    >>> [round(x, 4) for x in Parent()(prompts=[""], completions=["michael dahlquist was a drummer"],
    ...                                references=[["michael dahlquist was a drummer"]], table=[table])]
    [1.0]
    """

    __name__ = "parent"

    def __init__(
        self,
        lambda_weight: float | None = 0.5,
        max_order: int = 4,
        table_column: str = "table",
        missing: float | None = None,
    ) -> None:
        from hfrl.metrics.table import Parent as Metric

        super().__init__(Metric(lambda_weight, max_order=max_order, table_column=table_column), "parent_f1", missing)


class CommonGenRepeatPenalty(MetricReward):
    """CommonGen repeat penalty (RL4LMs): -1 when a completion copies the concepts or the instruction, else 0.

    >>> CommonGenRepeatPenalty()(prompts=["generate a sentence with: dog frisbee."] * 2,
    ...                          completions=["dog frisbee", "A dog caught a frisbee."])
    [-1.0, 0.0]
    """

    __name__ = "commongen_repeat_penalty"

    def __init__(self, prefix: str = "generate a sentence with: ", penalty: float = -1.0) -> None:
        from hfrl.metrics.commongen import CommonGenRepeatPenalty as Metric

        super().__init__(Metric(prefix=prefix, penalty=penalty), "commongen_repeat_penalty")


class LearnedClassifier(MetricReward):
    """A Hub sequence classifier's probability of ``label`` (or its regression score) as the reward.

    ``input`` sets what it reads: completion, prompt+completion, last_turn+completion or pair.

    >>> LearnedClassifier(model="lvwerra/distilbert-imdb", label="POSITIVE")(  # doctest: +SKIP
    ...     prompts=["This movie"], completions=[" was wonderful."])
    [0.99...]
    """

    __name__ = "learned_classifier"

    def __init__(self, model: str, label: int | str | None = None, **args: Any) -> None:
        from hfrl.metrics.learned import LearnedClassifier as Metric

        super().__init__(Metric(model=model, label=label, **args), Metric.name)


class LearnedJudge(LearnedClassifier):
    """``learned_classifier`` under its own id: a second classifier (an independent judge) beside the one
    a task trains on."""

    __name__ = "learned_judge"

    def __init__(self, model: str, label: int | str | None = None, **args: Any) -> None:
        from hfrl.metrics.learned import LearnedJudge as Metric

        MetricReward.__init__(self, Metric(model=model, label=label, **args), Metric.name)


class VaderSentiment(MetricReward):
    """VADER's compound sentiment in [-1, 1] (a word lexicon, no model download): the offline stand-in
    for IMDB's learned classifier. ``input``: ``completion`` or ``prompt+completion``.

    >>> VaderSentiment()(prompts=["", ""], completions=["a wonderful, moving film", "dull and bad"])
    [0.5719, -0.7351]
    """

    __name__ = "vader_sentiment"

    def __init__(self, input: str = "completion", separator: str = " ", empty_score: float = 0.0) -> None:
        from hfrl.metrics.sentiment import VaderSentiment as Metric

        super().__init__(Metric(input=input, separator=separator, empty_score=empty_score), Metric.name)


class IntentAccuracy(MetricReward):
    """DailyDialog intent match (RL4LMs): 1 when the intent classifier reads the sample's intent, else 0.

    >>> IntentAccuracy()(prompts=["hi <EOU>"], completions=["how are you?"], intent=[[2]])  # doctest: +SKIP
    [1.0]
    """

    __name__ = "intent_accuracy"

    def __init__(self, model: str = "rajkumarrrk/roberta-daily-dialog-intent-classifier", **args: Any) -> None:
        from hfrl.metrics.learned import IntentAccuracy as Metric

        super().__init__(Metric(model=model, **args), Metric.name)


class EvaluateReward(MetricReward):
    """A per-sample output (``key``) of an ``evaluate`` module (Hub name or local path) as the reward.

    >>> EvaluateReward(path="path/to/word_match", key="scores")(  # doctest: +SKIP
    ...     prompts=[""], completions=["a b"], references=[["a c"]])
    [0.5]
    """

    __name__ = "evaluate"

    def __init__(self, path: str, key: str | None = None, missing: float | None = None, **args: Any) -> None:
        from hfrl.metrics.hf_evaluate import EvaluateMetric

        super().__init__(EvaluateMetric(path=path, **args), key or "", missing)

    def __call__(self, prompts: list, completions: list, **columns) -> list[float | None]:
        result = self.metric(prompts, completions, **columns)
        if not result.per_sample:
            raise ValueError(
                f"evaluate module {self.metric.path!r} gives no per-sample scores (outputs: {sorted(result)}): "
                "use it as a metric, not a reward"
            )
        key = self.key or (next(iter(result.per_sample)) if len(result.per_sample) == 1 else None)
        if key not in result.per_sample:
            outputs = sorted(result.per_sample)
            raise ValueError(
                f"evaluate module {self.metric.path!r}: set key to one of its per-sample outputs {outputs}"
            )
        return [self.missing if math.isnan(v) else v for v in result.per_sample[key]]
