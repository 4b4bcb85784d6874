"""Which device a run trains on when the machine has no accelerator."""

from __future__ import annotations

from typing import Any


def has_accelerator() -> bool:
    """A CUDA, MPS or XPU device that transformers would train on."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    xpu = getattr(torch, "xpu", None)
    return bool(
        torch.cuda.is_available()
        or (mps is not None and mps.is_available())
        or (xpu is not None and xpu.is_available())
    )


def cpu_defaults(args: Any) -> None:
    """A ``TrainingArguments`` on a machine without an accelerator, or with ``use_cpu``:
    ``bf16`` autocasts on the CPU (``use_cpu``), which transformers otherwise refuses with "Your
    setup doesn't support bf16/gpu"; and the dataloader does not pin memory, which only helps
    host-to-GPU copies (torch warns about it on every run otherwise)."""
    accelerator = has_accelerator()
    if args.bf16 and not args.use_cpu and not accelerator:
        args.use_cpu = True
    if args.use_cpu or not accelerator:
        args.dataloader_pin_memory = False
