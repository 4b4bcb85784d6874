"""OpenAssistant's GPT-NeoX reward model as a transformers model, without remote code: a GPT-NeoX body
(weights ``gpt_neox.*``) and one linear head ``out_proj`` (``hidden -> 1``, with bias) read at one
pooled hidden state per sequence.

    score(x) = out_proj(h_pool(x)),  h_pool = h[last non-pad token]     (pooling "last")
                                     h_pool = mean of h over non-pad tokens (pooling "mean")

The layout and the maths of ``GPTNeoXRewardModel`` in LAION-AI/Open-Assistant
(``model/model_training/models/reward_model.py``), which its checkpoints on the Hub
(``OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5``, the A-LoL HH reward) were saved from. Written
here from that description, not copied. Differences: "mean" pooling weights each hidden state by its
mask over the hidden dimension (the original multiplies a ``(B, T, H)`` tensor by a ``(B, T)`` mask,
which does not broadcast); the output is transformers' ``SequenceClassifierOutput`` (``logits``
``(B, 1)``, as the original's).

Loaded through ``AutoModelForSequenceClassification`` once ``hfrl`` is imported
(:mod:`hfrl.core.auto_classes`):

    import hfrl  # noqa: F401
    from transformers import AutoModelForSequenceClassification
    name = "OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5"
    rm = AutoModelForSequenceClassification.from_pretrained(name, trust_remote_code=False)  # no remote code needed
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.models.gpt_neox.configuration_gpt_neox import GPTNeoXConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXModel, GPTNeoXPreTrainedModel

from hfrl.core.gpt_neox_reward_config import GPTNeoXRewardModelConfig


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """One vector per sequence from hidden states ``(B, T, H)`` and the attention mask ``(B, T)``
    (1 = token, 0 = padding, either side): ``(B, H)``.

    >>> h = torch.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]])
    >>> mask = torch.tensor([[1, 1, 0], [0, 1, 1]])  # right- and left-padded
    >>> pool(h, mask, "last").squeeze(-1).tolist(), pool(h, mask, "mean").squeeze(-1).tolist()
    ([2.0, 6.0], [1.5, 5.5])
    """
    if pooling == "last":
        if attention_mask is None:
            return hidden[:, -1]
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        last = (positions * attention_mask.to(positions.dtype)).argmax(dim=1)  # index of the last 1 in each row
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    if pooling == "mean":
        if attention_mask is None:
            return hidden.mean(dim=1)
        weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
    raise ValueError(f"unknown pooling {pooling!r}: use 'last' or 'mean'")


class GPTNeoXRewardModel(GPTNeoXPreTrainedModel):
    """A scalar reward per sequence: ``logits (B, 1) = out_proj(pool(gpt_neox(x)))``."""

    config_class = GPTNeoXRewardModelConfig
    # Buffers that pre-v5 GPT-NeoX checkpoints (transformers 4.28: OpenAssistant's) saved with the weights.
    _keys_to_ignore_on_load_unexpected = [r"attention\.bias", r"attention\.masked_bias", r"rotary_emb\.inv_freq"]

    def __init__(self, config: GPTNeoXRewardModelConfig) -> None:
        if type(config) is GPTNeoXConfig:  # a plain GPT-NeoX config: read it as this model's (pooling "last")
            config = GPTNeoXRewardModelConfig.from_dict(config.to_dict())
        super().__init__(config)
        self.gpt_neox = GPTNeoXModel(config)
        self.out_proj = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        kwargs.pop("use_cache", None)  # one forward per batch, no generation: nothing to cache
        out = self.gpt_neox(
            input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            **kwargs,
        )
        pooled = pool(out.last_hidden_state, attention_mask, self.config.pooling)
        return SequenceClassifierOutput(
            logits=self.out_proj(pooled), hidden_states=out.hidden_states, attentions=out.attentions
        )


__all__ = ["GPTNeoXRewardModel", "pool"]
