"""Embedding and learned similarity to references: BERTScore (the bert-score package, any Hub or local
encoder) and BLEURT (PyTorch checkpoints from the Hub, e.g. ``lucadiliello/BLEURT-20-D12``).

Models load once per process and run in batches on this process's device. An empty completion scores
0 in BERTScore (bert-score's own convention); a sample without references gets NaN.

    from hfrl.metrics.semantic import BertScore
    BertScore(model_type="/path/to/encoder", num_layers=6)(prompts=[""], completions=["hi"], references=[["hello"]])
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from hfrl.metrics.base import (
    NAN,
    SampleMetric,
    cached,
    default_device,
    encoded,
    evaluating_on,
    reference_lists,
    require,
)
from hfrl.utils.assets import hub_kwargs


def _num_layers(model_type: str, num_layers: int | None) -> int | None:
    """bert-score's tuned layer for known models; otherwise the encoder's last layer (from its config)."""
    if num_layers is not None:
        return num_layers
    from bert_score.utils import model2layers

    if model_type in model2layers:
        return None  # bert-score picks its tuned layer
    config = os.path.join(model_type, "config.json")
    if os.path.isfile(config):
        with open(config) as fh:
            return int(json.load(fh)["num_hidden_layers"])
    from transformers import AutoConfig

    from hfrl.utils.trust import remote_code

    return int(AutoConfig.from_pretrained(model_type, trust_remote_code=remote_code(model_type)).num_hidden_layers)


class BertScore(SampleMetric):
    """BERTScore (Zhang et al. 2020) precision, recall and F1 with any encoder; best reference per sample.

    ``model_type`` None takes bert-score's default for ``lang`` (roberta-large for English); the layer is
    bert-score's tuned one for models it knows, else the model's last layer (``num_layers`` overrides).

    >>> BertScore(model_type="/path/to/all-MiniLM-L6-v2")(  # doctest: +SKIP
    ...     prompts=[""], completions=["the cat sat"], references=[["the cat sat"]])["bertscore_f1"]
    1.0
    """

    name = "bertscore"

    def __init__(
        self,
        model_type: str | None = None,
        num_layers: int | None = None,
        lang: str = "en",
        idf: bool = False,
        batch_size: int = 64,
        rescale_with_baseline: bool = False,
        baseline_path: str | None = None,
        device: str | None = None,
    ) -> None:
        self.model_type, self.num_layers, self.lang, self.idf = model_type, num_layers, lang, idf
        self.batch_size, self.rescale_with_baseline, self.baseline_path = (
            batch_size,
            rescale_with_baseline,
            baseline_path,
        )
        self.device = device

    def scorer(self) -> Any:
        require("bert_score", "bert-score", "bertscore")
        from bert_score.utils import lang2model

        model_type = str(self.model_type or lang2model[self.lang.lower()])
        device = self.device or default_device()
        key = (
            "bertscore",
            model_type,
            self.num_layers,
            self.lang,
            self.rescale_with_baseline,
            self.baseline_path,
            device,
        )

        def build() -> Any:
            from bert_score import BERTScorer

            from hfrl.utils.trust import remote_code

            remote_code(model_type)  # bert-score passes no trust_remote_code: a folder naming its own code stops here
            return BERTScorer(
                model_type=model_type,
                num_layers=_num_layers(model_type, self.num_layers),
                lang=self.lang,
                rescale_with_baseline=self.rescale_with_baseline,
                baseline_path=self.baseline_path,
                device=device,
            )

        return cached(key, build)

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        refs = reference_lists(references, len(completions), "bertscore")
        keys = ("bertscore_precision", "bertscore_recall", "bertscore_f1")
        out = {k: [NAN if not r else 0.0 for r in refs] for k in keys}  # empty completion: 0
        todo = [i for i, (c, r) in enumerate(zip(completions, refs, strict=True)) if r and c.strip()]
        if todo:
            scorer = self.scorer()
            if self.idf:
                scorer.compute_idf([r for i in todo for r in refs[i]])
            p, r, f = scorer.score([completions[i] for i in todo], [refs[i] for i in todo], batch_size=self.batch_size)
            for key, values in zip(keys, (p, r, f), strict=True):
                for i, v in zip(todo, values.tolist(), strict=True):
                    out[key][i] = float(v)
        return out


def _hub_file(name: str, filename: str) -> str | None:
    """Path of ``filename`` in a local folder or a Hub repository (through the Hub cache), or None."""
    if os.path.isdir(name):
        path = os.path.join(name, filename)
        return path if os.path.isfile(path) else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return cast(str, hf_hub_download(name, filename, **hub_kwargs(name)))  # a manifest model at its pinned commit
    except EntryNotFoundError:
        return None


def load_bleurt(name: str, device: str = "cpu") -> Any:
    """A BLEURT checkpoint in lucadiliello/bleurt-pytorch's format as ``(tokenizer, model)``.

    That format is BERT plus, in the BLEURT-20 family (RemBERT-based), an embedding size below the hidden
    size with a linear projection before the encoder. Its own package no longer imports with
    transformers 5, so this maps the checkpoint onto transformers' ``BertForSequenceClassification``
    (the projection wrapped around the embeddings); the weights load strictly, so a mismatch fails.
    """
    import torch
    from torch import nn
    from transformers import BertConfig, BertForSequenceClassification

    config_path = _hub_file(name, "config.json")
    if config_path is None:
        raise ValueError(
            f"bleurt: {name!r} has no config.json; give a BLEURT checkpoint such as lucadiliello/BLEURT-20-D12"
        )
    with open(config_path) as fh:
        raw = json.load(fh)
    fields = (
        *("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
        *("hidden_act", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "pad_token_id"),
    )
    # num_labels is PreTrainedConfig's keyword, which BertConfig's typed signature does not list
    settings: dict[str, Any] = {**{k: raw[k] for k in fields if k in raw}, "num_labels": 1}
    config = BertConfig(**settings)
    model = BertForSequenceClassification(config)
    embedding_size = raw.get("embedding_size")
    if embedding_size and embedding_size != config.hidden_size:
        from transformers.models.bert.modeling_bert import BertEmbeddings

        class ProjectedEmbeddings(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embeddings = BertEmbeddings(BertConfig(**{**config.to_dict(), "hidden_size": embedding_size}))
                self.projection = nn.Linear(embedding_size, config.hidden_size)

            def forward(self, **kwargs: Any) -> torch.Tensor:
                return cast(torch.Tensor, self.projection(self.embeddings(**kwargs)))

        model.bert.add_module("embeddings", ProjectedEmbeddings())  # replaces BERT's (a Module's setattr)
    weights = _hub_file(name, "model.safetensors")
    if weights is not None:
        from safetensors.torch import load_file

        state = load_file(weights)
    else:
        weights = _hub_file(name, "pytorch_model.bin")
        if weights is None:
            raise ValueError(f"bleurt: {name!r} has neither model.safetensors nor pytorch_model.bin")
        state = torch.load(weights, map_location="cpu", weights_only=True)
    renamed = {}
    for key, value in state.items():
        if key.endswith("position_ids"):
            continue
        key = key.replace("bleurt.encoder.embedding_projection.", "bert.embeddings.projection.")
        if embedding_size and embedding_size != config.hidden_size:
            key = key.replace("bleurt.embeddings.", "bert.embeddings.embeddings.")
        renamed[key.replace("bleurt.", "bert.", 1)] = value
    model.load_state_dict(renamed, strict=True)
    if _hub_file(name, "vocab.txt") is not None:  # bleurt-{tiny,base,large}: WordPiece, lowercased
        from transformers import BertTokenizer

        lower = raw.get("do_lower_case", True)
        tokenizer = BertTokenizer.from_pretrained(
            name, do_lower_case=lower, **hub_kwargs(name, trust_remote_code=False)
        )
    else:  # BLEURT-20: SentencePiece (bleurt-pytorch reads it with DeBERTa-v2's tokenizer)
        from transformers import DebertaV2Tokenizer

        pin = hub_kwargs(name, trust_remote_code=False)
        tokenizer = DebertaV2Tokenizer.from_pretrained(name, do_lower_case=False, **pin)
    return tokenizer, evaluating_on(model, device)


class Bleurt(SampleMetric):
    """BLEURT (Sellam et al. 2020): a learned quality score of a completion against its best reference.

    Loads PyTorch BLEURT checkpoints from the Hub (``lucadiliello/BLEURT-20-D12`` by default; also
    ``BLEURT-20``, ``-D3``, ``-D6``, ``bleurt-base-128`` ...) or a local folder in that format.

    >>> Bleurt()(prompts=[""], completions=["a bird chirps"], references=[["a bird chirps"]])  # doctest: +SKIP
    {'bleurt': 0.96...}
    """

    name = "bleurt"

    def __init__(
        self,
        checkpoint: str = "lucadiliello/BLEURT-20-D12",
        batch_size: int = 32,
        max_length: int = 512,
        device: str | None = None,
    ) -> None:
        self.checkpoint, self.batch_size, self.max_length, self.device = checkpoint, batch_size, max_length, device

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        import torch

        refs = reference_lists(references, len(completions), "bleurt")
        device = self.device or default_device()
        tokenizer, model = cached(("bleurt", self.checkpoint, device), lambda: load_bleurt(self.checkpoint, device))
        pairs = [(i, r, c) for i, (c, rs) in enumerate(zip(completions, refs, strict=True)) for r in rs]
        best = [NAN] * len(completions)
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            batch = encoded(tokenizer, [r for _, r, _ in chunk], [c for _, _, c in chunk], self.max_length, device)
            with torch.no_grad():
                values = model(**batch).logits[:, 0].float().tolist()
            for (i, _, _), v in zip(chunk, values, strict=True):
                best[i] = v if best[i] != best[i] else max(best[i], v)  # best[i] != best[i]: still NaN
        return {"bleurt": best}
