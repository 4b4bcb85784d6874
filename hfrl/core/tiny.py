"""The built-in ``tiny`` models: small GPT-2 and T5 models that need no network.

``--model tiny`` (or ``tiny-t5``, ``tiny-vllm``) resolves to a directory that this module builds once,
deterministically (a byte-level BPE tokenizer trained on a fixed synthetic corpus, weights drawn
from a fixed seed), and then loads through the ordinary ``from_pretrained(local_dir)`` path.

    python -c "from hfrl.core.tiny import tiny_model_path; print(tiny_model_path('tiny'))"
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast


TINY_MODELS = ("tiny", "tiny-t5", "tiny-vllm")
_VERSION = "v2"  # bump when the recipe below changes, so that stale caches are rebuilt (v2: tiny-t5's BOS id)
_WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "it",
    "for",
    "on",
    "with",
    "as",
    "at",
    "by",
    "this",
    "that",
    "from",
    "or",
    "an",
    "be",
    "are",
    "have",
    "has",
    "not",
    "but",
    "one",
    "two",
    "three",
    "day",
    "date",
    "year",
    "month",
    "time",
    "number",
    "count",
    "list",
    "first",
    "next",
    "last",
    "good",
    "bad",
    "happy",
    "sad",
    "movie",
    "film",
    "story",
    "dialogue",
    "question",
    "answer",
    "summary",
    "table",
    "text",
    "great",
    "love",
    "hate",
    "fun",
    "boring",
]


def _corpus(seed: int = 0) -> list[str]:
    """Fixed synthetic text: runs of numbers, ISO dates and short sentences."""
    rng = random.Random(seed)
    lines = []
    for _ in range(600):
        start = rng.randint(0, 95)
        lines.append(" ".join(str(n) for n in range(start, start + rng.randint(3, 12))))
        lines.append(f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(8)) + ".")
    return lines


def build_tiny_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style) trained on :func:`_corpus`; deterministic."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<pad>",
        padding_side="left",
    )


def _build(kind: str, out: Path, made_from: dict[str, str], seed: int = 0) -> None:
    import torch

    from hfrl.utils.cache import discard, put_in_place, write_manifest

    tokenizer = build_tiny_tokenizer()
    with torch.random.fork_rng(devices=[]):  # building leaves the caller's RNG as it was: a run that
        torch.manual_seed(seed)  # builds the model draws the same value head as one that loads it
        model = _random_model(kind, tokenizer)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    discard(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_manifest(tmp, made_from)
    put_in_place(tmp, out, made_from)


def _random_model(kind: str, tokenizer: Any) -> PreTrainedModel:
    """The tiny GPT-2 (``tiny``, ``tiny-vllm``) or T5 (``tiny-t5``) with random weights from the current RNG.
    ``tiny-vllm`` is ``tiny`` with 2 heads of 32 instead of 4 of 16: vLLM's CPU attention takes head
    dimensions 32-512 only (``--use_vllm`` on the CPU)."""
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

    model: PreTrainedModel
    common: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if kind in ("tiny", "tiny-vllm"):
        config = GPT2Config(
            n_layer=2,
            n_head=4 if kind == "tiny" else 2,
            n_embd=64,
            n_positions=512,
            bos_token_id=tokenizer.bos_token_id,
            **common,
        )
        model = GPT2LMHeadModel(config)
    else:
        tokenizer.padding_side = "right"
        # the tokenizer's BOS id in the config too: else the Trainer aligns it, with a note, at every run.
        # As a dict: they are PreTrainedConfig's keywords, which T5Config's typed signature does not list
        starts: dict[str, Any] = dict(
            decoder_start_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id
        )
        t5 = T5Config(
            d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2, num_decoder_layers=2, **starts, **common
        )
        model = T5ForConditionalGeneration(t5)
    return model


def tiny_model_path(name: str = "tiny", cache_dir: str | os.PathLike[str] | None = None) -> str:
    """Return a local directory holding the built-in model ``name``, building it on first use.

    >>> from transformers import AutoModelForCausalLM
    >>> model = AutoModelForCausalLM.from_pretrained(tiny_model_path("tiny"))  # doctest: +SKIP
    """
    if name not in TINY_MODELS:
        raise ValueError(f"unknown built-in model {name!r}; built-in models are {', '.join(TINY_MODELS)}")
    from hfrl.utils.cache import cache_root, ensure_built

    root = Path(cache_dir) if cache_dir else cache_root()
    out = root / f"{name}-{_VERSION}"
    made_from = {"built_in": out.name}  # the recipe, by its name and version
    # a folder of the cache is data: checked on each use (a few hundred KB hashed), built again when it is
    # missing, not what hfrl wrote (planted, changed, a config naming code) or from before manifests; under
    # the folder's lock, by the first process of a launch, so that none reads it half built or half replaced
    out.parent.mkdir(parents=True, exist_ok=True)
    ensure_built(out, made_from, lambda: _build(name, out, made_from))
    return str(out)
