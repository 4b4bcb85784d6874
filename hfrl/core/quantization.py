"""4- and 8-bit loading (QLoRA) for every trainer, the same way for the policy and its reference.

    hfrl train --task hh --alg ppo --use_peft --load_in_4bit true      # TRL's ModelConfig flags
    ALoLConfig(load_in_4bit=True)                                      # A-LoL's own field
    PPOConfig(model_init_kwargs={"quantization_config": BitsAndBytesConfig(load_in_4bit=True)})

One path for all three: :func:`bnb_config` builds the bitsandbytes config (from TRL's flags or
A-LoL's field), and :func:`hfrl.core.models.load_trainable` loads any model whose
``from_pretrained`` arguments carry one: it checks that the machine can (:func:`check_kbit_available`:
a CUDA GPU and bitsandbytes, else one line that says so), places the whole model on this process's GPU
(:func:`kbit_device_map`), prepares the quantised base for training (PEFT's
``prepare_model_for_kbit_training``: norms and head in fp32, input gradients for checkpointing) and
puts the trained LoRA adapter on it (a fresh one, or the adapter the model name points at). Quantised
weights are never trained directly. The reference policy is that same quantised base, with the
adapter switched off (a fresh adapter) or a frozen copy of the starting adapter
(:class:`hfrl.core.policies.ReferencePolicy`): QLoRA for policy and reference, one copy of the base.
"""

from __future__ import annotations

import importlib.util
from typing import Any

KBIT_FLAGS = ("load_in_4bit", "load_in_8bit")
DEFAULT_COMPUTE_DTYPE = "bfloat16"  # QLoRA's (Dettmers et al. 2023) and LoL-RL's 4-bit compute type


def bnb_config(
    bits: int,
    quant_type: str = "nf4",
    double_quant: bool = False,
    compute_dtype: Any = None,
    quant_storage: Any = None,
) -> Any:
    """The ``BitsAndBytesConfig`` for 4-bit (``quant_type`` nf4 / fp4, ``double_quant`` for the
    quantisation constants, ``compute_dtype`` default bfloat16, ``quant_storage``) or 8-bit weights.
    Builds without bitsandbytes or a GPU (it is a description).

    >>> bnb_config(4, double_quant=True).to_dict()["bnb_4bit_quant_type"]
    'nf4'
    """
    from transformers import BitsAndBytesConfig

    if bits == 8:
        return BitsAndBytesConfig(load_in_8bit=True)
    if bits != 4:
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quant_type,
        bnb_4bit_use_double_quant=double_quant,
        bnb_4bit_compute_dtype=compute_dtype or DEFAULT_COMPUTE_DTYPE,
        bnb_4bit_quant_storage=quant_storage,
    )


def kbit_flag(quantization_config: Any) -> str | None:
    """``load_in_4bit`` / ``load_in_8bit`` for a bitsandbytes config, else None (no config, or
    another kind: GGUF's dequantisation is not k-bit training)."""
    if quantization_config is None:
        return None
    as_dict = quantization_config if isinstance(quantization_config, dict) else quantization_config.to_dict()
    if str(as_dict.get("quant_method", "")).lower().split(".")[-1] not in ("bitsandbytes", "bits_and_bytes"):
        return None
    return next((flag for flag in KBIT_FLAGS if as_dict.get(flag)), None)


def check_kbit_available(flag: str) -> None:
    """One line when ``flag`` (``load_in_4bit`` / ``load_in_8bit``) cannot work here: bitsandbytes
    missing, no CUDA GPU, or both."""
    import torch

    missing = [
        what
        for what, ok in (
            ("no CUDA GPU is visible", torch.cuda.is_available()),
            ("bitsandbytes is not installed", importlib.util.find_spec("bitsandbytes") is not None),
        )
        if not ok
    ]
    if missing:
        raise ValueError(
            f"{flag} (QLoRA) needs a CUDA GPU and bitsandbytes, but {' and '.join(missing)}: run on a GPU machine "
            f"with `pip install bitsandbytes`, or set {flag} false to train in full precision"
        )


def kbit_device_map() -> dict[str, int] | None:
    """Where a k-bit model goes: all of it on this process's GPU, ``{"": local process index}``
    (each DDP process holds its own copy), on CUDA or XPU; None elsewhere. What TRL's removed
    ``get_kbit_device_map`` returned."""
    import torch

    xpu = getattr(torch, "xpu", None)
    if torch.cuda.is_available() or (xpu is not None and xpu.is_available()):
        from accelerate import PartialState

        return {"": PartialState().local_process_index}
    return None


def is_kbit(model: Any) -> bool:
    """Whether a loaded model holds 4- or 8-bit bitsandbytes weights."""
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))


def prepare_kbit(model: Any, gradient_checkpointing: bool) -> Any:
    """PEFT's preparation of a k-bit base for adapter training (a no-op for other models)."""
    if not is_kbit(model):
        return model
    from peft import prepare_model_for_kbit_training

    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)


__all__ = [
    "KBIT_FLAGS",
    "bnb_config",
    "check_kbit_available",
    "is_kbit",
    "kbit_device_map",
    "kbit_flag",
    "prepare_kbit",
]
