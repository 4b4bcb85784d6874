"""The config of OpenAssistant's GPT-NeoX reward models (``model_type: gpt_neox_reward_model``): a
``GPTNeoXConfig`` plus ``pooling``, which hidden state the linear head reads.

What the published checkpoints hold (``OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5``'s
config.json on the Hub): ``"model_type": "gpt_neox_reward_model"``, ``"architectures":
["GPTNeoXRewardModel"]``, ``"pooling": "last"``, Pythia's GPT-NeoX sizes written in the pre-v5 names
(``rotary_pct``, ``rotary_emb_base``, which ``GPTNeoXConfig`` still reads) and no ``pad_token_id``.
OpenAssistant's own class (``model/model_training/models/reward_model.py`` in LAION-AI/Open-Assistant)
takes ``pooling`` ``"last"`` (the default, also for a null value) or ``"mean"``; so does this one.
The head has one output: ``num_labels`` defaults to 1 (the file names no labels; transformers'
default of two would misdescribe the head).

Creating one registers the model class with ``AutoModelForSequenceClassification`` (see
:mod:`hfrl.core.auto_classes` for why then).
"""

from __future__ import annotations

from typing import Any

from transformers.models.gpt_neox.configuration_gpt_neox import GPTNeoXConfig

MODEL_TYPE = "gpt_neox_reward_model"
POOLINGS = ("last", "mean")


class GPTNeoXRewardModelConfig(GPTNeoXConfig):
    """``GPTNeoXConfig`` + ``pooling``: ``"last"`` (the hidden state of each sequence's last non-pad
    token) or ``"mean"`` (the mean over its non-pad tokens).

    >>> config = GPTNeoXRewardModelConfig(hidden_size=32, num_attention_heads=4, pooling=None)
    >>> config.model_type, config.pooling, config.num_labels
    ('gpt_neox_reward_model', 'last', 1)
    """

    model_type = MODEL_TYPE

    def __init__(self, pooling: str | None = "last", **kwargs: Any) -> None:
        if "id2label" not in kwargs and "label2id" not in kwargs:
            kwargs.setdefault("num_labels", 1)
        super().__init__(**kwargs)
        pooling = pooling or "last"  # as OpenAssistant's class: a null pooling is "last"
        if pooling not in POOLINGS:
            raise ValueError(f"{MODEL_TYPE}: pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        from hfrl.core.auto_classes import register_models

        register_models()  # the model class, now that a config of this type exists (no import is under way)


__all__ = ["MODEL_TYPE", "POOLINGS", "GPTNeoXRewardModelConfig"]
