"""Which device and precision a run trains with, and how many CPU threads.

The rule where the user chose nothing (``bf16`` left None, no ``dtype`` in ``model_init_kwargs`` or
``--dtype``, no ``attn_implementation``):

- CUDA GPU that supports bfloat16 (Ampere and later): ``bf16`` mixed precision (TRL's default for its
  online trainers): weights, gradients and optimizer state in float32 (the model is loaded in float32,
  whatever dtype its checkpoint was saved in, as TRL's trainers load it), forward and backward under
  bfloat16 autocast. Older GPUs: float32 (fp16 needs loss scaling: ask for it with ``--fp16 true``).
- CPU: unchanged, float32 (the checkpoint's dtype: transformers' ``dtype="auto"``) without autocast;
  ``--bf16 true`` autocasts on the CPU.
- Attention: transformers' default, which is SDPA (``torch.nn.functional.scaled_dot_product_attention``)
  for every model that supports it (GPT-2, T5, Llama, GPT-NeoX...), on GPU and CPU alike; hfrl passes
  nothing, ``--attn_implementation`` chooses another.
- 4/8-bit (QLoRA): see :mod:`hfrl.core.quantization` (compute dtype bfloat16).
"""

from __future__ import annotations

import gc
import os
import sys
import types
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


def bf16_default(args: Any) -> bool:
    """``bf16`` where a config leaves it None: on when a CUDA GPU supports bfloat16 and neither
    ``fp16`` nor ``use_cpu`` is set; off otherwise (the CPU: as before)."""
    import torch

    if getattr(args, "fp16", False) or getattr(args, "use_cpu", False) or not torch.cuda.is_available():
        return False
    return bool(torch.cuda.is_bf16_supported())


def cpu_defaults(args: Any) -> None:
    """A ``TrainingArguments``'s device defaults: ``bf16`` left None becomes :func:`bf16_default`; on
    a machine without an accelerator, or with ``use_cpu``, ``bf16`` autocasts on the CPU (``use_cpu``),
    which transformers otherwise refuses with "Your setup doesn't support bf16/gpu"; and the
    dataloader does not pin memory, which only helps host-to-GPU copies (torch warns about it on
    every run otherwise)."""
    if getattr(args, "bf16", False) is None:
        args.bf16 = bf16_default(args)
    accelerator = has_accelerator()
    if args.bf16 and not args.use_cpu and not accelerator:
        args.use_cpu = True
    if deepspeed_requested() and not accelerator:
        check_sharding_on_cpu()
        # DeepSpeed over gloo (check_sharding_on_cpu): not use_cpu, which makes accelerate plain DDP
        args.use_cpu, args.ddp_backend = False, "gloo"
    elif int(os.environ.get("WORLD_SIZE", "1")) > 1 and not accelerator:
        check_sharding_on_cpu()
        args.use_cpu = True  # launched as several processes on a CPU-only machine: gloo, not N lone runs
    if args.use_cpu or not accelerator:
        args.dataloader_pin_memory = False


SHARDING_ENV = {"ACCELERATE_USE_FSDP": "FSDP (fsdp.yaml)", "ACCELERATE_USE_DEEPSPEED": "DeepSpeed (deepspeed_*.yaml)"}


def deepspeed_requested() -> bool:
    """Whether the launcher asked for DeepSpeed (``accelerate launch`` with a DeepSpeed config)."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def check_sharding_on_cpu() -> None:
    """What shards on a CPU-only machine, checked before anything is built:

    - **DeepSpeed ZeRO-2/3 runs on the CPU** (DeepSpeed's CPU accelerator, gloo): :func:`cpu_defaults`
      gives the Trainer ``ddp_backend="gloo"`` and not ``use_cpu``: with ``use_cpu`` accelerate (1.15)
      sets up plain DDP and never DeepSpeed, and with no backend at all it counts one process per
      machine. It needs the ``deepspeed`` package: one line when it is missing.
    - **FSDP does not**: accelerate sets FSDP up only for GPU-like devices, and on the CPU its processes
      fall back to plain DDP without a word (a run that asked for sharded weights would silently hold a
      whole copy per process). One line instead, saying what shards on the CPU.
    """
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        raise ValueError(
            "FSDP (fsdp.yaml) runs only on GPUs: accelerate 1.15 sets FSDP up for GPU-like devices and on the CPU "
            "silently runs plain DDP instead; on the CPU shard with DeepSpeed (deepspeed_zero3.yaml "
            "--mixed_precision no) or launch with hfrl/accelerate_configs/multi_cpu.yaml"
        )
    if deepspeed_requested():
        import importlib.util

        if importlib.util.find_spec("deepspeed") is None:
            raise ValueError(
                'DeepSpeed (deepspeed_*.yaml) needs the deepspeed package: pip install "hfrl[deepspeed]" '
                "(or launch with hfrl/accelerate_configs/multi_cpu.yaml for plain data parallelism)"
            )


def check_launch_devices() -> None:
    """:func:`check_sharding_on_cpu` for a command launched as several processes, before it writes
    anything: a process that fails later, while another is creating the run's folder, gets the
    launcher's SIGTERM and may leave the folder half made. torch is imported only when a sharding
    variable is set."""
    sharding = any(os.environ.get(variable, "false").lower() == "true" for variable in SHARDING_ENV)
    if sharding and int(os.environ.get("WORLD_SIZE", "1")) > 1 and not has_accelerator():
        check_sharding_on_cpu()


def close_process_group() -> None:
    """When torch.distributed is initialised: a barrier, the process groups destroyed (through DeepSpeed
    when it set them up), then every reference still held to one dropped (:func:`drop_references`). A
    gloo group's threads stop only when its last reference goes, and DeepSpeed keeps references past
    ``destroy_process_group`` (its engine, optimizer, hooks, each partitioned parameter), as do
    ``torch.distributed.nn``'s default arguments and DDP's reducer (drop the trainer first): groups alive
    when the interpreter exits leave their threads running into its teardown, and a few ZeRO-3 runs on 2
    CPU processes aborted there ("terminate called without an active exception"; plain torch with two
    leaked gloo groups: 2 exits in 100 on a busy machine, none in 80 with the groups freed). Tested:
    tests/trainers/test_devices.py (the references dropped, the threads gone) and
    tests/trainers/test_sharding.py (no gloo thread left when a ZeRO-3 resume, or DDP on two machines, exits)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.barrier()
    world = getattr(dist.distributed_c10d, "_world", None)  # torch's registry of this process's groups
    groups = tuple(getattr(world, "pg_map", ()))  # the default group among them
    deepspeed_comm = sys.modules.get("deepspeed.comm")
    if deepspeed_comm is not None and deepspeed_comm.is_initialized():
        deepspeed_comm.destroy_process_group()  # torch's, and DeepSpeed's module-level references dropped
    else:
        dist.destroy_process_group()
    from hfrl.metrics.learned import release_sharded_classifiers

    release_sharded_classifiers()
    drop_references(groups)


def drop_references(objects: tuple[Any, ...]) -> int:
    """Set to None every reference that Python objects hold to one of ``objects`` (an attribute, a global, a
    list or dict item, a closure's cell, a function's default argument), so that each is freed now, once the
    caller lets go of the tuple. Other holders the garbage collector does not track are left as they are: a
    tuple, a C object, and a dict whose keys and values are all untracked (``{"group": pg}`` alone).
    Returns how many references it dropped."""
    if not objects:
        return 0
    gc.collect()  # what is already unreachable goes first
    wanted = {id(item) for item in objects}
    dropped = 0
    for holder in gc.get_referrers(*objects):
        if holder is objects:
            continue
        kind = type(holder)  # plain containers only: a subclass's methods could run code (a lazy module's dict)
        if kind is types.CellType:
            holder.cell_contents = None
            dropped += 1
            continue
        if kind is list:
            for i, value in enumerate(list(holder)):
                if id(value) in wanted:
                    holder[i] = None
                    dropped += 1
            continue
        if kind is not dict:  # an instance whose attributes Python 3.11+ keeps without a dict: make it one
            try:
                holder = object.__getattribute__(holder, "__dict__")
            except AttributeError:  # __slots__, a tuple, a C object: left as it is
                continue
            if type(holder) is not dict:
                continue
        for key in [key for key, value in list(holder.items()) if id(value) in wanted]:
            holder[key] = None
            dropped += 1
    return dropped + _drop_from_defaults(wanted)


def _drop_from_defaults(wanted: set[int]) -> int:
    """The default arguments that hold one of ``wanted``, set to None: tuples the collector does not track.
    ``torch.distributed.nn.functional`` binds ``group=group.WORLD`` when it is first imported, which DDP does
    after the default group exists: ten functions held it for the life of the process."""
    dropped = 0
    for function in gc.get_objects():
        if type(function) is not types.FunctionType:
            continue
        defaults = function.__defaults__
        if defaults and any(id(value) in wanted for value in defaults):
            function.__defaults__ = tuple(None if id(value) in wanted else value for value in defaults)
            dropped += 1
        keywords = function.__kwdefaults__
        if keywords and any(id(value) in wanted for value in keywords.values()):
            function.__kwdefaults__ = {k: None if id(v) in wanted else v for k, v in keywords.items()}
            dropped += 1
    return dropped


SMALL_MODEL_PARAMETERS = 50_000_000  # below this, one CPU thread is as fast as two on an idle machine


def check_threads(requested: int | None) -> None:
    """``--threads`` is a count: a one-line error for one below 1 (``hfrl train`` checks it before torch)."""
    if requested is not None and requested < 1:
        raise ValueError(f"--threads must be >= 1, got {requested}")


def cpu_threads(model: Any, requested: int | None = None, use_cpu: bool = True) -> int | None:
    """The number of torch CPU threads for a run: ``requested`` when given; else one thread for a
    model under 50M parameters trained on the CPU when ``OMP_NUM_THREADS`` is unset: its matrices
    are too small to gain from a second thread, and with another process busy on the other core
    two threads ran its iterations 10-50x slower; else None (torch's default, one per core).

    >>> import torch
    >>> cpu_threads(torch.nn.Linear(4, 4)) if "OMP_NUM_THREADS" not in os.environ else 1
    1
    >>> cpu_threads(torch.nn.Linear(4, 4), requested=2)
    2
    """
    if requested is not None:
        check_threads(requested)
        return requested
    if os.environ.get("OMP_NUM_THREADS") or not use_cpu:
        return None
    size = sum(p.numel() for p in model.parameters())
    return 1 if size < SMALL_MODEL_PARAMETERS else None


def set_cpu_threads(model: Any, requested: int | None = None, use_cpu: bool = True) -> None:
    """Apply :func:`cpu_threads` to torch (no change when it is None)."""
    threads = cpu_threads(model, requested, use_cpu)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
