"""Attribute rewards of the Leftover-Lunch dialogue tasks (``reddit_pos`` / ``reddit_neg``, ``wow`` /
``faithdial`` / ``faithdial_wow``): fluency, safety, engagement, upvote probability, faithfulness and
diversity, each its own reward function so that users can weight them (LoL-RL, abaheti95/LoL-RL
``utils/rl_utils.py``, sums them with weight 1 each).

Prompts follow LoL-RL's layout: turns joined by DialoGPT's EOS ``<|endoftext|>`` and ending with it;
a knowledge-grounded prompt starts with ``Knowledge: {snippet}<|endoftext|>``. Each classifier loads
once per process (:func:`hfrl.metrics.learned.load_classifier`) and scores the whole batch; an
empty completion gets ``empty_score`` (0) without being shown to the classifier.

    from hfrl.rewards.dialogue import CoLAFluency
    CoLAFluency()(prompts=["Hi<|endoftext|>"], completions=["How are you?"])
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from hfrl.metrics.base import default_device, text_of
from hfrl.metrics.learned import classifiers_sharded

EOS = "<|endoftext|>"  # DialoGPT's (GPT-2's) EOS: LoL-RL's turn separator
KNOWLEDGE_PREFIX = "Knowledge:"


def knowledge_of(prompt: str, separator: str = EOS) -> str:
    """The knowledge snippet of a knowledge-grounded prompt: its first segment without ``Knowledge:``.

    >>> knowledge_of("Knowledge: Paris is in France.<|endoftext|>Where is Paris?<|endoftext|>")
    'Paris is in France.'
    """
    return prompt.split(separator, 1)[0].strip().removeprefix(KNOWLEDGE_PREFIX).strip()


def history_of(prompt: str, separator: str = EOS) -> str:
    """The dialogue history of a knowledge-grounded prompt: everything after the knowledge segment.

    >>> history_of("Knowledge: Paris is in France.<|endoftext|>Where is Paris?<|endoftext|>")
    'Where is Paris?<|endoftext|>'
    """
    parts = prompt.split(separator, 1)
    return parts[1] if len(parts) == 2 else prompt


class _Classifier:
    """Base: a sequence classifier (Hub id or local folder) scoring the non-empty completions of a batch."""

    __name__ = "classifier"
    truncation_side = "right"  # which end of a long input to cut (dialogue contexts: "left")

    def __init__(
        self,
        model: str,
        label: int | str = 1,
        batch_size: int = 32,
        max_length: int = 512,
        empty_score: float = 0.0,
        device: str | None = None,
    ) -> None:
        self.model, self.label, self.batch_size, self.max_length = model, label, batch_size, max_length
        self.empty_score, self.device = empty_score, device

    def inputs(
        self, prompts: list[str], completions: list[str], columns: dict[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        """What the classifier reads per sample: ``(texts, text_pairs or None)``."""
        return completions, None

    def probabilities(self, logits: torch.Tensor, config: Any) -> torch.Tensor:
        """Each row's score from its logits ``(B, num_labels)``: the softmax probability of ``label``
        (the sigmoid of the one output of a ranker such as DialogRPT)."""
        import torch

        from hfrl.metrics.learned import label_index

        if logits.shape[1] == 1:
            return torch.sigmoid(logits[:, 0])
        return torch.softmax(logits, dim=-1)[:, label_index(self.label, config, self.__name__)]

    def logits(self, texts: list[str], pairs: list[str] | None) -> tuple[torch.Tensor, Any]:
        """``(logits (B, num_labels), model config)`` in batches (:func:`hfrl.metrics.learned.classifier_logits`)."""
        from hfrl.metrics.learned import classifier_logits, load_classifier

        device = self.device or default_device()
        tokenizer, _ = load_classifier(self.model, device)
        with _truncation_side(tokenizer, self.truncation_side):
            return classifier_logits(self.model, texts, pairs, self.batch_size, self.max_length, device)

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        prompts, completions = [text_of(p) for p in prompts], [text_of(c) for c in completions]
        out = [float(self.empty_score)] * len(completions)
        todo = [i for i, c in enumerate(completions) if c.strip()]
        if todo or classifiers_sharded():  # ZeRO-3: every process joins each forward
            picked = {k: [v[i] for i in todo] for k, v in columns.items() if isinstance(v, (list, tuple))}
            texts, pairs = self.inputs([prompts[i] for i in todo], [completions[i] for i in todo], picked)
            logits, config = self.logits(texts, pairs)
            for i, value in zip(todo, self.probabilities(logits, config).tolist(), strict=True):
                out[i] = float(value)
        return out


@contextlib.contextmanager
def _truncation_side(tokenizer: Any, side: str) -> Iterator[None]:
    """Cut long inputs on ``side`` for one call (the tokenizer is shared through the per-process cache)."""
    old = tokenizer.truncation_side
    tokenizer.truncation_side = side
    try:
        yield
    finally:
        tokenizer.truncation_side = old


class CoLAFluency(_Classifier):
    """Fluency: the probability that a CoLA classifier reads the completion as grammatically acceptable.

    ``textattack/roberta-base-CoLA`` labels 0 (``LABEL_0``) unacceptable and 1 (``LABEL_1``)
    acceptable; the reward is P(label 1), as LoL-RL's ``get_cola_fluency_score``.

    >>> CoLAFluency()(prompts=["Hi<|endoftext|>"], completions=["How are you?"])  # doctest: +SKIP
    [0.97...]
    """

    __name__ = "fluency"

    def __init__(self, model: str = "textattack/roberta-base-CoLA", label: int | str = 1, **args: Any) -> None:
        super().__init__(model, label, **args)


class DialogRPT(_Classifier):
    """A DialogRPT ranker's probability ``sigmoid(score)`` of ``context + completion``.

    ``context``: ``prompt`` (the whole prompt, which ends with EOS: Reddit) or ``history`` (the
    prompt after its knowledge segment: Wizard of Wikipedia / FaithDial). Long contexts are cut on
    the left, so that the completion is always read.
    """

    __name__ = "dialogrpt"
    truncation_side = "left"
    default_model: str | None = None  # each ranker's own (engagement: DialogRPT-depth, upvote: -updown)

    def __init__(
        self,
        model: str | None = None,
        context: str = "prompt",
        separator: str = EOS,
        max_length: int = 1024,
        **args: Any,
    ) -> None:
        if context not in ("prompt", "history"):
            raise ValueError(f"{self.__name__}: context must be 'prompt' or 'history', got {context!r}")
        model = model or self.default_model
        if model is None:
            raise ValueError(f"{self.__name__}: pass model=, a DialogRPT ranker (a Hub id or a local folder)")
        super().__init__(model, 0, max_length=max_length, **args)
        self.context, self.separator = context, separator

    def inputs(
        self, prompts: list[str], completions: list[str], columns: dict[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        contexts = prompts if self.context == "prompt" else [history_of(p, self.separator) for p in prompts]
        return [f"{c}{r}" for c, r in zip(contexts, completions, strict=True)], None  # LoL-RL: f"{context}{response}"


class DialogRPTDepth(DialogRPT):
    """Engagement: ``microsoft/DialogRPT-depth``'s probability that the response gets a long follow-up thread.

    >>> DialogRPTDepth()(prompts=["Any plans?<|endoftext|>"], completions=["A hike, join me?"])  # doctest: +SKIP
    [0.61...]
    """

    __name__ = "engagement"
    default_model = "microsoft/DialogRPT-depth"


class DialogRPTUpdown(DialogRPT):
    """Upvote probability: ``microsoft/DialogRPT-updown``'s probability that the response is upvoted.

    >>> DialogRPTUpdown()(prompts=["Any plans?<|endoftext|>"], completions=["A hike, join me?"])  # doctest: +SKIP
    [0.45...]
    """

    __name__ = "upvote"
    default_model = "microsoft/DialogRPT-updown"


class FaithCritic(_Classifier):
    """Faithfulness: the probability that FaithCritic reads the completion as entailed by the knowledge.

    ``McGill-NLP/roberta-large-faithcritic`` reads the pair (knowledge, response) and labels 0
    ``Entailment`` (faithful) and 1 ``Hallucination`` (FaithDial's ``models/critic_data.py``); the
    reward is P(label 0), as LoL-RL's ``get_batch_faithfulness_reward``. The knowledge is the
    sample's ``knowledge`` column, else the prompt's ``Knowledge: ...`` segment.

    >>> FaithCritic()(prompts=["Knowledge: Paris is in France.<|endoftext|>Where is Paris?<|endoftext|>"],
    ...               completions=["It is in France."])  # doctest: +SKIP
    [0.98...]
    """

    __name__ = "faithfulness"

    def __init__(
        self,
        model: str = "McGill-NLP/roberta-large-faithcritic",
        label: int | str = 0,
        separator: str = EOS,
        **args: Any,
    ) -> None:
        super().__init__(model, label, **args)
        self.separator = separator

    def inputs(
        self, prompts: list[str], completions: list[str], columns: dict[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        knowledge = columns.get("knowledge") or [knowledge_of(p, self.separator) for p in prompts]
        return [text_of(k) for k in knowledge], completions


class OffensiveSafety(_Classifier):
    """Safety: the probability that an offensive-language classifier reads the response as safe.

    ``model`` is a local folder (or Hub id) given by the user. The paper's is ToxiChat's DialoGPT
    offensive classifier (a ``GPT2ForOC_S_offensive`` checkpoint: a GPT-2 and a ``Linear(hidden, 2)``
    ``off_classifier`` on the hidden state of each utterance's EOS; label 0 safe, 1 offensive); such
    a folder is read directly (config, weights and tokenizer only, no code), and the reward is the
    softmax probability of label 0 at the EOS that closes the response, as LoL-RL's
    ``get_batch_toxichat_safe_reward``. Any other folder is loaded as a sequence classifier, and
    ``label`` names its safe class. Both read the thread ``prompt + completion + EOS``.

    >>> OffensiveSafety(model="saved_models/DGPT_medium_OC_S_and_SBF_offensive_e2")(  # doctest: +SKIP
    ...     prompts=["Any plans?<|endoftext|>"], completions=["A hike, join me?"])
    [0.99...]
    """

    __name__ = "safety"
    truncation_side = "left"

    def __init__(self, model: str, label: int | str = 0, separator: str = EOS, **args: Any) -> None:
        if not model:
            raise ValueError(
                "safety needs an offensive-language classifier: set model to its folder (the paper's is ToxiChat's "
                "DialoGPT classifier, see https://github.com/abaheti95/ToxiChat)"
            )
        super().__init__(model, label, **args)
        self.separator = separator

    def inputs(
        self, prompts: list[str], completions: list[str], columns: dict[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        return [f"{p}{r}{self.separator}" for p, r in zip(prompts, completions, strict=True)], None

    def logits(self, texts: list[str], pairs: list[str] | None) -> tuple[torch.Tensor, Any]:
        from hfrl.rewards.toxichat import is_toxichat, toxichat_logits

        if not is_toxichat(self.model):
            return super().logits(texts, pairs)
        return toxichat_logits(self.model, texts, self.batch_size, self.max_length, self.device or default_device())


# ---- diversity: TF-IDF ---------------------------------------------------------------------------
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn CountVectorizer's default token pattern


def words(text: str) -> list[str]:
    """CountVectorizer's default analyzer: lowercase, tokens of two or more word characters.

    >>> words("I love it, I do!")
    ['love', 'it', 'do']
    """
    return _TOKEN.findall(text.lower())


class TfidfDiversity:
    """Diversity: the mean TF-IDF weight of a response's words times a length penalty (LoL-RL's
    ``get_batch_tfidf_reward``, which uses scikit-learn's ``CountVectorizer`` and
    ``TfidfTransformer(smooth_idf=True)``; computed here without scikit-learn, same numbers).

    ``idf(t) = ln((1 + n) / (1 + df(t))) + 1`` over the ``n`` fitted documents (the task's training
    responses); a response's weights ``count(t) * idf(t)`` over the fitted vocabulary are L2-normalised;
    the reward is their mean over the ``k`` distinct known words, times ``k / 10`` when ``k < 5``
    (one-word responses would otherwise score 1). No known word: 0. A task fits it on its training
    responses (:meth:`fit`); pass ``documents`` to fit it at construction.

    >>> reward = TfidfDiversity(documents=["the cat sat", "the dog ran", "a cat ran off"])
    >>> [round(x, 4) for x in reward(prompts=["", ""], completions=["the cat", "zebra"])]
    [0.1414, 0.0]
    """

    __name__ = "diversity"

    def __init__(self, documents: Iterable[str] | None = None, short_below: int = 5) -> None:
        self.short_below = short_below
        self.idf: dict[str, float] | None = None
        if documents is not None:
            self.fit(documents)

    def fit(self, documents: Iterable[str]) -> TfidfDiversity:
        """Fit the inverse document frequencies on ``documents``; returns ``self``."""
        df: Counter[str] = Counter()
        n = 0
        for doc in documents:
            df.update(set(words(text_of(doc))))
            n += 1
        if n == 0:
            raise ValueError("diversity: fit the TF-IDF weights on at least one document")
        self.idf = {t: math.log((1 + n) / (1 + d)) + 1.0 for t, d in df.items()}  # smooth_idf
        return self

    def score(self, text: str) -> float:
        if self.idf is None:
            raise ValueError("diversity is not fitted: pass documents=[...] (the training responses) or call fit()")
        counts = Counter(w for w in words(text) if w in self.idf)
        if not counts:
            return 0.0
        weights = [c * self.idf[t] for t, c in counts.items()]
        norm = math.sqrt(sum(w * w for w in weights))
        mean = sum(w / norm for w in weights) / len(weights)  # mean of the L2-normalised non-zero weights
        k = len(weights)
        return mean * (k / 10.0 if k < self.short_below else 1.0)  # LoL-RL's length penalty

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        return [self.score(text_of(c)) for c in completions]


def fit_diversity(reward_funcs: Iterable[Any], documents: list[str]) -> None:
    """Fit every unfitted :class:`TfidfDiversity` among ``reward_funcs`` (``weighted`` sums included)."""
    for func in reward_funcs:
        if isinstance(func, TfidfDiversity) and func.idf is None:
            func.fit(documents)
        fit_diversity(getattr(func, "rewards", None) or [], documents)


__all__ = [
    "CoLAFluency",
    "DialogRPTDepth",
    "DialogRPTUpdown",
    "FaithCritic",
    "OffensiveSafety",
    "TfidfDiversity",
    "fit_diversity",
    "history_of",
    "knowledge_of",
]
