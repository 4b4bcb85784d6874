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


def cpu_bf16(args: Any) -> None:
    """``bf16`` without an accelerator: autocast on the CPU (``use_cpu``), which transformers
    otherwise refuses with "Your setup doesn't support bf16/gpu"."""
    if args.bf16 and not args.use_cpu and not has_accelerator():
        args.use_cpu = True
