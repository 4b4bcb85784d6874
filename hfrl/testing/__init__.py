"""Helpers for hfrl's tests (and for users testing their own rewards and tasks with hfrl).

from hfrl.testing import run_cli, digit_reward, requires_wordnet

Optional system resources are checked here, once: a test that needs one is marked with its
``requires_*`` marker and skipped with the reason (and how to install it) where it is missing. Under
``CI=true`` nothing is skipped: CI installs them, and a skip there would hide a broken install.
"""

from __future__ import annotations

import os
from typing import Any


def run_cli(args: list[str], capsys: Any) -> tuple[int, str, str]:
    """Run ``hfrl ARGS`` through the CLI's error boundary; ``(exit code, stdout, stderr)``."""
    import pytest

    from hfrl.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(args)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def digit_reward(prompts: list[Any], completions: list[str], **kwargs: Any) -> list[float]:
    """Fraction of characters that are digits: a plain TRL-style reward for tests.

    >>> digit_reward(prompts=["", ""], completions=["a1", ""])
    [0.5, 0.0]
    """
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def wordnet_missing() -> str | None:
    """Why METEOR cannot run on this machine (how to install WordNet), or None when it can."""
    from hfrl.metrics.wordnet import load_wordnet

    try:
        load_wordnet()
    except RuntimeError as err:
        return str(err)
    return None


def requires_wordnet() -> Any:
    """A pytest mark: skip (saying how to install it) where WordNet, which METEOR reads, is missing."""
    import pytest

    reason = None if os.environ.get("CI") else wordnet_missing()
    return pytest.mark.skipif(reason is not None, reason=f"WordNet is not installed: {reason}")


def tiny_llama(seed: int = 0, heads: int = 4, kv_heads: int = 2) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a tiny random Llama (2 layers, 64 dims, grouped-query attention: ``heads``
    query heads sharing ``kv_heads``; ``heads=2, kv_heads=1`` gives the heads of 32 that vLLM's CPU attention
    takes) with hfrl's tiny byte-level BPE tokenizer, built from ``seed``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfrl.core.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    torch.manual_seed(seed)
    ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("bos", "eos", "pad")}
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        tie_word_embeddings=False,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        **ids,
    )
    return LlamaForCausalLM(config).eval(), tokenizer


def write_gguf(model: Any, tokenizer: Any, path: str) -> str:
    """Write a Llama ``model`` and its byte-level BPE ``tokenizer`` as a float32 GGUF file at ``path``,
    as llama.cpp's converter does (GGUF tensor names, q/k rows permuted, the vocabulary and merges),
    for tests of the GGUF path without a real model file. Needs the ``gguf`` package. Returns ``path``.

    >>> model, tokenizer = tiny_llama()
    >>> write_gguf(model, tokenizer, "/tmp/tiny-llama.gguf")  # doctest: +SKIP
    '/tmp/tiny-llama.gguf'
    """
    import json

    import gguf
    import torch

    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("hfrl tiny llama")
    writer.add_license("apache-2.0")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(config.hidden_size // heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    special = set(tokenizer.all_special_tokens)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens])
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)

    def permute(weight: torch.Tensor, n_head: int) -> torch.Tensor:  # llama.cpp's convert_hf_to_gguf.py
        rows = weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
        return rows.swapaxes(1, 2).reshape(weight.shape)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name.endswith("q_proj.weight"):
            tensor = permute(tensor, heads)
        elif name.endswith("k_proj.weight"):
            tensor = permute(tensor, kv_heads)
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ValueError(f"no GGUF name for {name}")
        writer.add_tensor(gguf_name, tensor.detach().float().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
