"""What ``--alg reward`` adds to TRL's ``RewardTrainer``: reward models fitted to scores, and encoders.

**Scores** (pointwise data): a row is a text and its ``score`` in [0, 1], such as the share of people who
rated the text positive or a calibrated probability, instead of a chosen / rejected pair. The text is
``text``, or ``prompt`` + ``completion``. The model's one output ``r`` is fitted by binary cross-entropy
to the score as a soft label, ``-(s log sigmoid(r) + (1 - s) log(1 - sigmoid(r)))``, so ``sigmoid(r)``
estimates the score (a logistic regression on the soft labels: the loss is smallest at
``sigmoid(r) = s``) and ``r(x) - r(y)`` is on the Bradley-Terry logit scale the pairs loss uses. Scores
outside [0, 1] are refused: rescale them first (``(x - min) / (max - min)``).

**Encoders without an EOS token** (BERT-style sequence classifiers: ``[CLS] text [SEP]``): TRL appends
``eos_token`` to every text, which such a tokenizer does not have; here a text is tokenized as the
tokenizer frames it, the way a classifier reads it at scoring time (``learned_classifier``,
``reward_model`` add no EOS when the tokenizer has none).
"""

from __future__ import annotations

from typing import Any, cast

SCORE = "score"


def is_scored(dataset: Any) -> bool:
    """Pointwise rows (a ``score`` column, no pairs) rather than preference pairs."""
    columns = set(getattr(dataset, "column_names", None) or [])
    return SCORE in columns and not {"chosen", "rejected"} <= columns


def scored_rows(dataset: Any) -> Any:
    """The text and score columns of pointwise rows; one line for a text or a score that is missing or
    a score outside [0, 1]."""
    columns = dataset.column_names
    text = [c for c in ("prompt", "completion", "text") if c in columns]
    if "text" not in text and "completion" not in text:
        raise ValueError(
            "a reward model fitted to scores reads a 'text' column (or 'prompt' + 'completion') beside 'score' "
            f"(the dataset has: {', '.join(columns)})"
        )
    bad = [(i, s) for i, s in enumerate(dataset[SCORE]) if s is None or not 0.0 <= float(s) <= 1.0]
    if bad:
        i, s = bad[0]
        raise ValueError(
            f"row {i}: score {s!r} is not in [0, 1] ({len(bad)} such rows): a reward model fitted to scores reads "
            "each as the probability of a good text; rescale them first, e.g. (x - min) / (max - min)"
        )
    return dataset.select_columns([*text, SCORE])


def _joined(example: dict[str, Any]) -> str:
    text = example.get("text")
    if text is None:
        text = example.get("completion") or ""
    return (example.get("prompt") or "") + text


def tokenize_scored(dataset: Any, tokenizer: Any, max_length: int | None) -> Any:
    """Pointwise rows -> ``input_ids`` and ``score`` (TRL's EOS rule: appended when the tokenizer has
    one); rows over ``max_length`` tokens dropped, as TRL drops long pairs."""
    eos = tokenizer.eos_token

    def tokenize(example: dict[str, Any]) -> dict[str, Any]:
        text = _joined(example)
        if eos and not text.endswith(eos):
            text += eos
        return {"input_ids": tokenizer(text)["input_ids"], SCORE: float(example[SCORE])}

    out = dataset.map(tokenize, remove_columns=dataset.column_names, desc="Tokenizing scored texts")
    if max_length is not None:
        out = out.filter(lambda example: len(example["input_ids"]) <= max_length)
    return out


def tokenize_pairs_without_eos(dataset: Any, tokenizer: Any) -> Any:
    """Pairs for a tokenizer without an EOS token: ``chosen_ids`` / ``rejected_ids`` as the tokenizer
    frames each text (TRL's preparation then skips tokenizing and still drops long pairs)."""

    def tokenize(example: dict[str, Any]) -> dict[str, Any]:
        prompt = example.get("prompt") or ""
        return {
            "chosen_ids": tokenizer(prompt + example["chosen"])["input_ids"],
            "rejected_ids": tokenizer(prompt + example["rejected"])["input_ids"],
        }

    keep = [c for c in dataset.column_names if c == "margin"]
    drop = [c for c in dataset.column_names if c not in keep]
    return dataset.map(tokenize, remove_columns=drop, desc="Tokenizing pairs")


def replaced_head(model: str) -> bool:
    """Whether ``model`` is a sequence classifier with other than one output (``lvwerra/distilbert-imdb``:
    two), whose head a reward model replaces by a new one-output head; said once. TRL loads it with
    ``num_labels=1``, which transformers refuses for a checkpoint with a head of another shape."""
    from hfrl.core.models import load_config

    try:
        config = load_config(model)
    except (OSError, ValueError):
        return False  # not a model folder or id hfrl can read: TRL's own loading says why
    heads = [a for a in getattr(config, "architectures", None) or [] if a.endswith("ForSequenceClassification")]
    labels = getattr(config, "num_labels", 1)
    if not heads or labels == 1:
        return False
    from transformers.utils import logging

    logging.get_logger(__name__).warning(
        f"{model} is a {labels}-label classifier ({heads[0]}): a reward model has one output, so its head is "
        "replaced by a new one, trained from scratch; the rest of the model is kept"
    )
    return True


class ScoresOrPairs:
    """TRL's preference collator for pairs; for scored rows, ``input_ids`` padded on the right,
    ``attention_mask`` and ``score``."""

    def __init__(self, pairs: Any, pad_token_id: int) -> None:
        self.pairs, self.pad_token_id = pairs, pad_token_id

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if SCORE not in examples[0]:
            return cast(dict[str, Any], self.pairs(examples))
        import torch

        width = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(examples), width), dtype=torch.long)
        for row, example in enumerate(examples):
            n = len(example["input_ids"])
            ids[row, :n] = torch.tensor(example["input_ids"])
            mask[row, :n] = 1
        scores = torch.tensor([float(e[SCORE]) for e in examples])
        return {"input_ids": ids, "attention_mask": mask, SCORE: scores}


def scored_loss(rewards: Any, scores: Any) -> Any:
    """Binary cross-entropy of ``sigmoid(rewards)`` against the soft labels ``scores``, the batch mean.

    >>> import torch
    >>> round(float(scored_loss(torch.tensor([0.0, 2.0]), torch.tensor([0.5, 1.0]))), 4)  # (ln 2 + ln(1+e^-2)) / 2
    0.41
    """
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(rewards.float(), scores.float())


def side_agreement(rewards: Any, scores: Any) -> tuple[float, int]:
    """How many of the rows whose score is not 0.5 have ``sigmoid(r)`` on the same side of 0.5 (``r`` on
    the same side of 0), and how many such rows there are."""
    decided = scores != 0.5
    agree = ((rewards > 0) == (scores > 0.5)) & decided
    return float(agree.sum()), int(decided.sum())


__all__ = [
    "SCORE",
    "ScoresOrPairs",
    "is_scored",
    "replaced_head",
    "scored_loss",
    "scored_rows",
    "side_agreement",
    "tokenize_scored",
]
