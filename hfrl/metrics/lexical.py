"""Lexical overlap with reference texts: ROUGE (rouge-score), BLEU (NLTK), SacreBLEU, chrF and TER
(sacrebleu), METEOR (NLTK + WordNet). Thin layers over the reference libraries, never re-implementations.

Scores are on a 0-1 scale (sacrebleu's 0-100 divided by 100). Each sample has a list of references
(the ``references`` column); the best reference counts for ROUGE and METEOR, all of them for
BLEU, chrF and TER (their multi-reference definitions). A sample with no reference gets NaN per
sample and is left out of the corpus score; an empty completion scores 0 (TER: 1, all edits).

    from hfrl.metrics.lexical import Rouge
    Rouge()(prompts=[""], completions=["the cat"], references=[["a cat"]])
"""

from __future__ import annotations

from typing import Any, cast

from hfrl.metrics.base import NAN, SampleMetric, reference_lists

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


class Rouge(SampleMetric):
    """ROUGE-1/2/L/Lsum F1 (or precision/recall) against the best of a sample's references (rouge-score).

    ``rougeLsum`` splits summaries into sentences on newlines, as rouge-score does.

    >>> r = Rouge(rouge_types=["rouge1"])(prompts=[""], completions=["the cat sat"], references=[["the cat"]])
    >>> round(r["rouge1"], 4)  # P = 2/3, R = 2/2, F = 2PR/(P+R) = 0.8
    0.8
    """

    name = "rouge"

    def __init__(
        self,
        rouge_types: list[str] | tuple[str, ...] = ROUGE_TYPES,
        use_stemmer: bool = True,
        measure: str = "fmeasure",
        rouge_type: str | None = None,
    ) -> None:
        if rouge_type is not None:  # one type (a reward's): rouge_type: rougeL, as rouge_types: [rougeL]
            rouge_types = [rouge_type]
        bad = [t for t in rouge_types if t not in ROUGE_TYPES]
        if bad or not rouge_types:
            raise ValueError(f"rouge: unknown rouge_types {bad}; choose among {', '.join(ROUGE_TYPES)}")
        if measure not in ("fmeasure", "precision", "recall"):
            raise ValueError(f"rouge: measure must be fmeasure, precision or recall, got {measure!r}")
        self.rouge_types, self.use_stemmer, self.measure = tuple(rouge_types), use_stemmer, measure

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer(list(self.rouge_types), use_stemmer=self.use_stemmer)
        out: dict[str, list[float]] = {t: [] for t in self.rouge_types}
        for completion, refs in zip(completions, reference_lists(references, len(completions), "rouge"), strict=True):
            best = scorer.score_multi(refs, completion) if refs else None  # max F over references
            for t in self.rouge_types:
                out[t].append(float(getattr(best[t], self.measure)) if best else NAN)
        return out


def _tokenize_13a(text: str) -> list[str]:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return cast(str, Tokenizer13a()(text)).split()


class Bleu(SampleMetric):
    """BLEU (Papineni et al. 2002) with NLTK on 13a tokens: corpus BLEU; smoothed sentence BLEU per sample.

    Per-sample smoothing is a Chen & Cherry (2014) method from NLTK (``smoothing``, ``method1`` by default).

    >>> r = Bleu()(prompts=[""], completions=["the cat sat on the mat"], references=[["the cat sat on the mat"]])
    >>> r["bleu"]
    1.0
    """

    name = "bleu"

    def __init__(self, max_order: int = 4, smoothing: str | None = "method1", lowercase: bool = False) -> None:
        self.max_order, self.smoothing, self.lowercase = max_order, smoothing, lowercase

    def _tokens(self, text: str) -> list[str]:
        return _tokenize_13a(text.lower() if self.lowercase else text)

    def _weights(self) -> tuple[float, ...]:
        return (1.0 / self.max_order,) * self.max_order

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        smooth = getattr(SmoothingFunction(), self.smoothing) if self.smoothing else None
        out = []
        for completion, refs in zip(completions, reference_lists(references, len(completions), "bleu"), strict=True):
            hyp = self._tokens(completion)
            if not refs:
                out.append(NAN)
            elif not hyp:
                out.append(0.0)
            else:
                out.append(float(sentence_bleu([self._tokens(r) for r in refs], hyp, self._weights(), smooth)))
        return {"bleu": out}

    def corpus(
        self,
        per_sample: dict[str, list[float]],
        prompts: list[Any],
        completions: list[str],
        references: Any,
        **columns: Any,
    ) -> dict[str, float]:
        import warnings

        from nltk.translate.bleu_score import corpus_bleu

        pairs = [
            (self._tokens(c), [self._tokens(r) for r in refs])
            for c, refs in zip(completions, reference_lists(references, len(completions), "bleu"), strict=True)
            if refs
        ]
        if not pairs:
            return {"bleu": NAN}
        with warnings.catch_warnings():  # NLTK warns when an n-gram order has no match; BLEU is then 0
            warnings.simplefilter("ignore")
            score = corpus_bleu([refs for _, refs in pairs], [hyp for hyp, _ in pairs], self._weights())
        return {"bleu": float(score)}


def _streams(references: Any, n: int, metric: str) -> tuple[list[int], list[list[str | None]]]:
    """Indices of samples with references, and sacrebleu's reference streams (``None`` pads a sample
    that has fewer references than the others; sacrebleu then counts only its real ones)."""
    refs = reference_lists(references, n, metric)
    kept = [i for i, r in enumerate(refs) if r]
    width = max((len(refs[i]) for i in kept), default=0)
    return kept, [[refs[i][k] if k < len(refs[i]) else None for i in kept] for k in range(width)]


class _Sacre(SampleMetric):
    """Shared code of the sacrebleu metrics: a corpus-level object and a sentence-level one."""

    def _metric(self, sentence: bool) -> Any:
        raise NotImplementedError

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        metric = self._metric(sentence=True)
        out = [
            float(metric.sentence_score(c, refs).score) / 100.0 if refs else NAN
            for c, refs in zip(completions, reference_lists(references, len(completions), self.name), strict=True)
        ]
        return {self.name: out}

    def corpus(
        self,
        per_sample: dict[str, list[float]],
        prompts: list[Any],
        completions: list[str],
        references: Any,
        **columns: Any,
    ) -> dict[str, float]:
        kept, streams = _streams(references, len(completions), self.name)
        if not kept:
            return {self.name: NAN}
        score = self._metric(sentence=False).corpus_score([completions[i] for i in kept], streams).score
        return {self.name: float(score) / 100.0}


class SacreBleu(_Sacre):
    """SacreBLEU (Post 2018): corpus BLEU with sacrebleu; sentence BLEU (effective order) per sample.

    >>> r = SacreBleu()(prompts=[""], completions=["The dog bit the man."], references=[["The dog bit the man."]])
    >>> round(r["sacrebleu"], 6)
    1.0
    """

    name = "sacrebleu"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False, smooth_method: str = "exp") -> None:
        self.tokenize, self.lowercase, self.smooth_method = tokenize, lowercase, smooth_method

    def _metric(self, sentence: bool) -> Any:
        from sacrebleu.metrics import BLEU

        return BLEU(
            tokenize=self.tokenize, lowercase=self.lowercase, smooth_method=self.smooth_method, effective_order=sentence
        )


class Chrf(_Sacre):
    """chrF (Popović 2015; ``word_order: 2`` gives chrF++) with sacrebleu, on a 0-1 scale.

    >>> Chrf()(prompts=[""], completions=["a cat"], references=[["a cat"]])["chrf"]
    1.0
    """

    name = "chrf"

    def __init__(self, char_order: int = 6, word_order: int = 0, beta: int = 2, lowercase: bool = False) -> None:
        self.char_order, self.word_order, self.beta, self.lowercase = char_order, word_order, beta, lowercase

    def _metric(self, sentence: bool) -> Any:
        from sacrebleu.metrics import CHRF

        return CHRF(char_order=self.char_order, word_order=self.word_order, beta=self.beta, lowercase=self.lowercase)


class Ter(_Sacre):
    """TER (Snover et al. 2006), edits per reference word with sacrebleu, as a fraction: lower is better.

    >>> Ter()(prompts=[""], completions=["the cat sat"], references=[["the cat sat on the mat"]])["ter"]
    0.5
    """

    name = "ter"

    def __init__(self, normalized: bool = False, no_punct: bool = False, case_sensitive: bool = False) -> None:
        self.normalized, self.no_punct, self.case_sensitive = normalized, no_punct, case_sensitive

    def _metric(self, sentence: bool) -> Any:
        from sacrebleu.metrics import TER

        return TER(normalized=self.normalized, no_punct=self.no_punct, case_sensitive=self.case_sensitive)


class Meteor(SampleMetric):
    """METEOR (Banerjee & Lavie 2005) with NLTK and WordNet synonyms; best reference per sample, corpus mean.

    Text is split with NLTK's Treebank word tokenizer (``word_tokenize`` without its sentence splitter,
    which would need the punkt model). WordNet comes from NLTK's data or Debian's ``wordnet-base``; when
    it is missing this fails with the command that installs it.

    >>> Meteor()(prompts=[""], completions=["a hound"], references=[["a dog"]])  # doctest: +SKIP
    {'meteor': 0.9375}
    """

    name = "meteor"

    def __init__(self, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5) -> None:
        self.alpha, self.beta, self.gamma = alpha, beta, gamma

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.translate.meteor_score import meteor_score

        from hfrl.metrics.wordnet import load_wordnet

        refs_all = reference_lists(references, len(completions), "meteor")
        wordnet = load_wordnet()
        tokenize = NLTKWordTokenizer().tokenize
        out = []
        for completion, refs in zip(completions, refs_all, strict=True):
            hyp = tokenize(completion)
            if not refs:
                out.append(NAN)
            elif not hyp:
                out.append(0.0)
            else:
                ref_tokens = [tokenize(r) for r in refs]
                score = meteor_score(
                    ref_tokens, hyp, alpha=self.alpha, beta=self.beta, gamma=self.gamma, wordnet=wordnet
                )
                out.append(float(score))
        return {"meteor": out}
