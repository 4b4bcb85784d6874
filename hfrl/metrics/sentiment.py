"""Lexicon sentiment: VADER's compound score (Hutto & Gilbert 2014), a metric and a reward that need no
model download, the offline stand-in for IMDB's learned sentiment classifier (``learned_classifier``
with ``lvwerra/distilbert-imdb``; ``hfrl train --task imdb --task-arg reward=vader``).

The compound score is VADER's normalised sum of the valences of the words it knows, in [-1, 1]
(``x / sqrt(x^2 + 15)``): above 0.05 reads positive, below -0.05 negative. It needs the
``vaderSentiment`` package (MIT; ``pip install vaderSentiment`` or ``pip install "hfrl[metrics]"``).

    from hfrl.metrics.sentiment import VaderSentiment
    VaderSentiment()(prompts=[""], completions=["a wonderful film"])
"""

from __future__ import annotations

from typing import Any

from hfrl.metrics.base import SampleMetric, cached, require
from hfrl.metrics.learned import classifier_inputs


def vader_analyzer() -> Any:
    """VADER's analyzer (its lexicon read once per process)."""

    def build() -> Any:
        module = require("vaderSentiment.vaderSentiment", "vaderSentiment", "vader_sentiment")
        return module.SentimentIntensityAnalyzer()

    return cached(("vader",), build)


class VaderSentiment(SampleMetric):
    """VADER's compound sentiment in [-1, 1] of what ``input`` selects: ``completion`` or
    ``prompt+completion`` (joined by ``separator``; IMDB's classifier reads the whole review). An
    empty completion scores ``empty_score``.

    >>> result = VaderSentiment()(prompts=["", ""], completions=["a wonderful, moving film", "dull and bad"])
    >>> result.per_sample, result
    ({'vader_sentiment': [0.5719, -0.7351]}, {'vader_sentiment': -0.0816})
    """

    name = "vader_sentiment"

    def __init__(
        self, input: str = "completion", separator: str = " ", empty_score: float = 0.0, key: str | None = None
    ) -> None:
        if input not in ("completion", "prompt+completion"):
            raise ValueError(f"vader_sentiment: input must be completion or prompt+completion, got {input!r}")
        self.input, self.separator, self.empty_score = input, separator, empty_score
        self.key = key or self.name

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        analyzer = vader_analyzer()
        texts, _ = classifier_inputs(prompts, completions, self.input, None, self.separator)
        out = [
            float(analyzer.polarity_scores(text)["compound"]) if completion.strip() else float(self.empty_score)
            for text, completion in zip(texts, completions, strict=True)
        ]
        return {self.key: out}


__all__ = ["VaderSentiment", "vader_analyzer"]
