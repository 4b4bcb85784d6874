"""ToxiChat's offensive-language classifier (Baheti et al. 2021, "Just Say No: Analyzing the Stance of
Neural Dialogue Generation in Offensive Contexts"), the safety reward of the Leftover-Lunch Reddit
tasks, read from its saved folder without its code.

A ``GPT2ForOC_S_offensive`` checkpoint (``config.json`` naming that architecture, the weights, a
GPT-2 tokenizer) is a GPT-2 LM (``transformer.*``, ``lm_head``) plus ``off_classifier``, a
``Linear(hidden, 2)`` applied to the last hidden state at the EOS closing each utterance of a
thread; label 0 is safe, 1 offensive (LoL-RL ``utils/attributes_utils.py``). Here the GPT-2 body and
the head load from the weights file (safetensors, or a ``.bin`` read with
``torch.load(weights_only=True)``: tensors only, no code).

    from hfrl.rewards.toxichat import is_toxichat
    is_toxichat("saved_models/DGPT_medium_OC_S_and_SBF_offensive_e2")
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

ARCHITECTURE = "GPT2ForOC_S_offensive"
LABELS = ("safe", "offensive")  # off_classifier's outputs 0 and 1


def is_toxichat(model: str) -> bool:
    """Whether ``model`` is a local folder holding a ToxiChat ``GPT2ForOC_S_offensive`` checkpoint."""
    path = os.path.join(model, "config.json")
    if not os.path.isfile(path):
        return False
    with open(path) as fh:
        return ARCHITECTURE in (json.load(fh).get("architectures") or [])


def _state_dict(folder: str) -> dict[str, Any]:
    import torch

    safetensors = os.path.join(folder, "model.safetensors")
    if os.path.isfile(safetensors):
        from safetensors.torch import load_file

        return load_file(safetensors)
    binary = os.path.join(folder, "pytorch_model.bin")
    if os.path.isfile(binary):
        return cast(dict[str, Any], torch.load(binary, map_location="cpu", weights_only=True))
    raise FileNotFoundError(f"safety: no model.safetensors or pytorch_model.bin in the ToxiChat folder {folder}")


def load_toxichat(folder: str, device: str) -> Any:
    """``(tokenizer, GPT-2 body, off_classifier head)`` of a ToxiChat folder, loaded once per process."""
    from hfrl.metrics.base import cached, evaluating_on

    def build() -> Any:
        import torch
        from transformers import AutoConfig, AutoTokenizer, GPT2Model

        from hfrl.core.models import fix_tokenizer

        state = _state_dict(folder)
        missing = [k for k in ("off_classifier.weight", "off_classifier.bias") if k not in state]
        if missing:
            raise ValueError(f"safety: the ToxiChat checkpoint in {folder} has no {' or '.join(missing)}")
        body = GPT2Model(
            AutoConfig.from_pretrained(folder, trust_remote_code=False)
        )  # the LM's body: its `transformer.*` weights
        weights = {k.removeprefix("transformer."): v for k, v in state.items() if k.startswith("transformer.")}
        loaded = body.load_state_dict(weights, strict=False)  # old checkpoints also hold attention-mask buffers
        if loaded.missing_keys:
            raise ValueError(f"safety: the ToxiChat checkpoint in {folder} lacks {', '.join(loaded.missing_keys[:3])}")
        head = torch.nn.Linear(*reversed(state["off_classifier.weight"].shape))
        head.load_state_dict({"weight": state["off_classifier.weight"], "bias": state["off_classifier.bias"]})
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        tokenizer.padding_side, tokenizer.truncation_side = "right", "left"  # keep the end of long threads
        fix_tokenizer(tokenizer)
        return tokenizer, evaluating_on(body, device), head.to(device).eval()

    return cached(("toxichat", folder, str(device)), build)


def toxichat_logits(
    folder: str, texts: list[str], batch_size: int, max_length: int, device: str
) -> tuple[torch.Tensor, PretrainedConfig]:
    """``(logits (B, 2), config)``: ``off_classifier`` on the hidden state of each thread's last token
    (the EOS that closes the response); the config names the labels ``safe`` and ``offensive``."""
    import torch
    from transformers import PretrainedConfig

    from hfrl.metrics.base import encoded

    tokenizer, body, head = load_toxichat(folder, device)
    chunks = []
    for start in range(0, len(texts), batch_size):
        batch = encoded(
            tokenizer, texts[start : start + batch_size], None, max_length, device, add_special_tokens=False
        )
        with torch.no_grad():
            hidden = body(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
            last = batch["attention_mask"].sum(1) - 1  # right padding: each thread's closing EOS
            chunks.append(head(hidden[torch.arange(hidden.shape[0], device=hidden.device), last]).float().cpu())
    config = PretrainedConfig(id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
    return (torch.cat(chunks) if chunks else torch.zeros(0, 2)), config
