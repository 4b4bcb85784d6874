"""Tiny stand-ins for the published classifiers behind the Leftover-Lunch rewards, built offline and
saved in the published layouts, so that the rewards load them through their real code path:
sequence classifiers (CoLA, FaithCritic, DialogRPT, any offensive-language classifier), ToxiChat's
``GPT2ForOC_S_offensive`` folder, the converted COMET critic folder, and OpenAssistant's GPT-NeoX
reward model (the A-LoL HH reward) as its Hub repository holds it.

Each takes ``logits``: ``None`` keeps the seeded random head (the output depends on the text), a
tuple sets the head by hand so that every input gets exactly those logits (the expected score of a
reward is then known: a test of which label the reward reads).

    from hfrl.testing.tiny_classifiers import save_sequence_classifier
    save_sequence_classifier("/tmp/cola", "roberta", ["LABEL_0", "LABEL_1"], logits=(0.0, 1.0986))
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import GPT2Config, PreTrainedModel, PreTrainedTokenizerFast, RobertaConfig

HIDDEN = 32


def _tokenizer() -> PreTrainedTokenizerFast:
    from hfrl.core.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # as the published RoBERTa / GPT-2 tokenizers
    tokenizer.padding_side = "right"
    return tokenizer


def _roberta_config(tokenizer: PreTrainedTokenizerFast, **extra: Any) -> RobertaConfig:
    from transformers import RobertaConfig

    ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("bos", "eos", "pad")}
    positions = tokenizer.pad_token_id + 2 + 512  # RoBERTa's positions start after the pad id
    sizes: dict[str, Any] = dict(
        hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2, intermediate_size=2 * HIDDEN
    )
    return RobertaConfig(vocab_size=len(tokenizer), max_position_embeddings=positions, **sizes, **ids, **extra)


def _gpt2_config(tokenizer: PreTrainedTokenizerFast, **extra: Any) -> GPT2Config:
    from transformers import GPT2Config

    eos = tokenizer.eos_token_id
    sizes: dict[str, Any] = dict(n_embd=HIDDEN, n_layer=1, n_head=2, n_positions=1024)
    return GPT2Config(vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos, **sizes, **extra)


def save_sequence_classifier(
    folder: str | os.PathLike[str],
    architecture: str,
    labels: Sequence[str],
    logits: Sequence[float] | None = None,
    seed: int = 0,
) -> str:
    """A tiny ``roberta`` (CoLA, FaithCritic) or ``gpt2`` (DialogRPT: one output, no head bias)
    sequence classifier with ``labels`` (``id2label``), saved with the tiny tokenizer."""
    import torch
    from transformers import GPT2ForSequenceClassification, RobertaForSequenceClassification

    tokenizer = _tokenizer()
    names = {"id2label": dict(enumerate(labels)), "label2id": {name: i for i, name in enumerate(labels)}}
    torch.manual_seed(seed)
    model: PreTrainedModel
    if architecture == "roberta":
        roberta = RobertaForSequenceClassification(_roberta_config(tokenizer, num_labels=len(labels), **names))
        if logits is not None:
            with torch.no_grad():
                roberta.classifier.out_proj.weight.zero_()
                roberta.classifier.out_proj.bias.copy_(torch.tensor(list(logits)))
        model = roberta
    elif architecture == "gpt2":
        gpt2 = GPT2ForSequenceClassification(
            _gpt2_config(tokenizer, num_labels=len(labels), pad_token_id=tokenizer.pad_token_id, **names)
        )
        if logits is not None:  # `score` has no bias: make every hidden state e_0, then score = logits * 1
            with torch.no_grad():
                gpt2.transformer.ln_f.weight.zero_()
                gpt2.transformer.ln_f.bias.zero_()
                gpt2.transformer.ln_f.bias[0] = 1.0
                gpt2.score.weight.zero_()
                gpt2.score.weight[:, 0] = torch.tensor(list(logits))
        model = gpt2
    else:
        raise ValueError(f"architecture must be 'roberta' or 'gpt2', got {architecture!r}")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_toxichat(folder: str | os.PathLike[str], logits: Sequence[float] | None = None, seed: int = 0) -> str:
    """A tiny ToxiChat ``GPT2ForOC_S_offensive`` folder: a GPT-2 LM's weights plus ``off_classifier``
    (``Linear(hidden, 2)``, label 0 safe), ``config.json`` naming that architecture."""
    import torch
    from safetensors.torch import save_file
    from transformers import GPT2LMHeadModel

    from hfrl.rewards.toxichat import ARCHITECTURE

    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    config = _gpt2_config(tokenizer, architectures=[ARCHITECTURE])
    lm = GPT2LMHeadModel(config)
    head = torch.nn.Linear(HIDDEN, 2)
    if logits is not None:
        with torch.no_grad():
            head.weight.zero_()
            head.bias.copy_(torch.tensor(list(logits)))
    state = {k: v.contiguous() for k, v in lm.state_dict().items() if k != "lm_head.weight"}  # tied to wte
    state.update({"off_classifier.weight": head.weight.detach(), "off_classifier.bias": head.bias.detach()})
    Path(folder).mkdir(parents=True, exist_ok=True)
    save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config_dict = config.to_dict()
    config_dict["architectures"] = [ARCHITECTURE]
    Path(folder, "config.json").write_text(json.dumps(config_dict, indent=2))
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_comet_critic(folder: str | os.PathLike[str], logit: float | None = None, seed: int = 0) -> str:
    """A tiny converted COMET critic: a ``RobertaModel`` folder with its pooler and
    ``custom_roberta_classification_head.pt`` (``dense`` hidden -> hidden / 2, ``out_proj`` -> 1; the
    published one is 1024 -> 512 -> 1)."""
    import torch
    from transformers import RobertaModel

    from hfrl.rewards.comet_critic import HEAD_FILE

    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    body = RobertaModel(_roberta_config(tokenizer), add_pooling_layer=True)
    dense, out_proj = torch.nn.Linear(HIDDEN, HIDDEN // 2), torch.nn.Linear(HIDDEN // 2, 1)
    head = torch.nn.ModuleDict({"dense": dense, "out_proj": out_proj})
    if logit is not None:
        with torch.no_grad():
            out_proj.weight.zero_()
            out_proj.bias.fill_(float(logit))
    body.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    torch.save(head.state_dict(), os.path.join(folder, HEAD_FILE))
    return str(folder)


# OpenAssistant/oasst-rm-2.1-pythia-1.4b-epoch-2.5's config.json on the Hub, but the sizes (there:
# hidden 2048, 24 layers, 16 heads, intermediate 8192, vocab 50288; saved by transformers 4.28.0.dev0).
OASST_RM_CONFIG = {
    "architectures": ["GPTNeoXRewardModel"],
    "bos_token_id": 0,
    "eos_token_id": 0,
    "hidden_act": "gelu",
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox_reward_model",
    "pooling": "last",
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "transformers_version": "4.28.0.dev0",
    "use_cache": True,
    "use_parallel_residual": True,
}


def save_oasst_reward_model(folder: str | os.PathLike[str], pooling: str = "last", seed: int = 0) -> str:
    """A tiny OpenAssistant GPT-NeoX reward model in its Hub layout: ``config.json`` with the published
    keys (``model_type: gpt_neox_reward_model``, ``pooling``, ``rotary_pct``...), ``pytorch_model.bin``
    with the published key names (``gpt_neox.*``, ``out_proj.weight`` / ``out_proj.bias``, and the
    attention buffers transformers 4.28 saved), and the tiny tokenizer with the ``<|prompter|>`` /
    ``<|assistant|>`` tokens. Written without hfrl's reward-model class: the weights come from a
    plain ``GPTNeoXModel`` and a ``Linear(hidden, 1)``, seeded."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXModel

    tokenizer = _tokenizer()
    tokenizer.add_tokens(["<|prompter|>", "<|assistant|>"], special_tokens=True)
    sizes = dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4, intermediate_size=2 * HIDDEN)
    # the published keys as they are (values of several types): checked by GPTNeoXConfig at run time
    config: dict[str, Any] = {**OASST_RM_CONFIG, **sizes, "vocab_size": len(tokenizer), "pooling": pooling}
    torch.manual_seed(seed)
    body = GPTNeoXModel(GPTNeoXConfig(**{k: v for k, v in config.items() if k not in ("model_type", "pooling")}))
    head = torch.nn.Linear(HIDDEN, 1)
    state = {f"gpt_neox.{k}": v.detach().clone() for k, v in body.state_dict().items()}
    state.update({"out_proj.weight": head.weight.detach().clone(), "out_proj.bias": head.bias.detach().clone()})
    positions = 16  # transformers 4.28's causal-mask buffers (max_position_embeddings square there; unused)
    for layer in range(sizes["num_hidden_layers"]):
        prefix = f"gpt_neox.layers.{layer}.attention"
        state[f"{prefix}.bias"] = torch.tril(torch.ones(positions, positions, dtype=torch.bool))[None, None]
        state[f"{prefix}.masked_bias"] = torch.tensor(-1e9)
        state[f"{prefix}.rotary_emb.inv_freq"] = 1.0 / (10000 ** (torch.arange(0, 2, 2).float() / 2))
    Path(folder).mkdir(parents=True, exist_ok=True)
    torch.save(state, os.path.join(folder, "pytorch_model.bin"))
    Path(folder, "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_lol_classifiers(folder: str | os.PathLike[str], seed: int = 0) -> dict[str, str]:
    """Seeded random stand-ins for every Leftover-Lunch reward classifier, in ``folder``: the task
    argument that takes each (``fluency_model``, ``safety_model``, ``engagement_model``,
    ``upvote_model``, ``faithfulness_model``, ``critic_model``) -> its folder."""
    root = Path(folder)
    return {
        "fluency_model": save_sequence_classifier(root / "cola", "roberta", ["LABEL_0", "LABEL_1"], seed=seed),
        "safety_model": save_toxichat(root / "toxichat", seed=seed),
        "engagement_model": save_sequence_classifier(root / "depth", "gpt2", ["LABEL_0"], seed=seed),
        "upvote_model": save_sequence_classifier(root / "updown", "gpt2", ["LABEL_0"], seed=seed + 1),
        "faithfulness_model": save_sequence_classifier(
            root / "faithcritic", "roberta", ["Entailment", "Hallucination"], seed=seed
        ),
        "critic_model": save_comet_critic(root / "comet_critic", seed=seed),
    }


__all__ = [
    "OASST_RM_CONFIG",
    "save_comet_critic",
    "save_lol_classifiers",
    "save_oasst_reward_model",
    "save_sequence_classifier",
    "save_toxichat",
]
