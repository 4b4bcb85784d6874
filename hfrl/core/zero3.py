"""Whole copies of a model whose parameters DeepSpeed ZeRO-3 partitions.

Under ZeRO-3 (``zero3_init_flag: true``, the shipped ``deepspeed_zero3.yaml``) transformers loads a model
already partitioned: each parameter holds an empty tensor and its slice lives in ``ds_tensor``. A
``copy.deepcopy`` of such a model copies empty tensors and DeepSpeed's bookkeeping, and the copy fails at
its first forward (measured: the reference model's parameters had ``ds_numel`` 0). hfrl copies the policy
three times (the reference when no ``ref_model`` is given, a ``separate_critic``'s backbone, NLPO's mask
policy); :func:`whole_copy` builds each from the gathered weights instead, as an ordinary module. What
is done with the copy is the caller's: the reference is partitioned again as TRL prepares its own
(:meth:`hfrl.core.policies.ReferencePolicy.prepare`); the critic's backbone is partitioned with the
trained model; NLPO's mask policy stays whole on every process (it is only read, once per token).

Without ZeRO-3 partitioning every function here is the plain operation (``copy.deepcopy``, the
``state_dict``), with no DeepSpeed import.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any, TypeVar

from torch import nn

M = TypeVar("M", bound=nn.Module)

__all__ = [
    "default_persistence_threshold",
    "gathered",
    "is_partitioned",
    "loading_whole",
    "whole_copy",
    "whole_state_dict",
]


def is_partitioned(module: nn.Module) -> bool:
    """Whether any parameter of ``module`` is a ZeRO-3 partition (DeepSpeed's ``ds_id`` attribute)."""
    return any(hasattr(p, "ds_id") for p in module.parameters())


@contextlib.contextmanager
def gathered(module: nn.Module) -> Iterator[None]:
    """Inside, every parameter of ``module`` holds its whole tensor (read only; every process must
    enter: the gather is collective). Nothing happens for a module that is not partitioned."""
    if not is_partitioned(module):
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
        yield


@contextlib.contextmanager
def loading_whole() -> Iterator[None]:
    """Models loaded inside are ordinary, whole modules even in a ZeRO-3 run. While a ZeRO-3
    ``TrainingArguments`` lives, transformers builds every ``from_pretrained`` model inside
    ``deepspeed.zero.Init`` (partitioned, with empty tensors); a frozen scorer loaded by a reward or
    metric (a classifier, BERTScore's encoder) would then have no engine to gather its weights and fail
    at its first forward. Classifiers are partitioned afterwards on purpose
    (:func:`hfrl.metrics.learned.shard_classifiers`); the rest stay whole on every process."""
    import sys

    integration: Any = sys.modules.get("transformers.integrations.deepspeed")  # imported by a ZeRO-3 run
    if integration is None or not integration.is_deepspeed_zero3_enabled():
        yield
        return
    saved = integration._hf_deepspeed_config_weak_ref
    integration._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        integration._hf_deepspeed_config_weak_ref = saved


def whole_state_dict(module: nn.Module) -> dict[str, Any]:
    """``module.state_dict()`` with whole tensors (detached copies when it is partitioned)."""
    if not is_partitioned(module):
        return module.state_dict()
    with gathered(module):
        return {name: value.detach().clone() for name, value in module.state_dict().items()}


def whole_copy(module: M) -> M:
    """A copy of ``module`` that owns ordinary, whole tensors: ``copy.deepcopy`` unless it is
    partitioned; then a new instance of its class built from its config (a transformers model),
    loaded with the gathered weights, in the partition's dtype."""
    if not is_partitioned(module):
        return copy.deepcopy(module)
    config = getattr(module, "config", None)
    if config is None:
        name = type(module).__name__
        raise TypeError(f"cannot copy a ZeRO-3 partitioned {name}: it has no config to rebuild it from")
    state = whole_state_dict(module)
    dtype = next(iter(p.ds_tensor.dtype for p in module.parameters() if hasattr(p, "ds_tensor")))
    import torch
    from accelerate import init_empty_weights

    # empty (meta) weights, then the gathered ones: no initialisation to compute, and with the random
    # state forked: building a model draws its initial weights, which would change every later sample
    with torch.random.fork_rng(devices=[]), init_empty_weights():
        clone = type(module)(copy.deepcopy(config))
    clone.load_state_dict(state, strict=False, assign=True)
    tie = getattr(clone, "tie_weights", None)
    if callable(tie):
        tie()  # a tied weight appears once in a state dict
    left = [name for name, p in clone.named_parameters() if p.is_meta]
    if left:
        raise RuntimeError(f"copying a ZeRO-3 partitioned {type(module).__name__} left {left[:3]} without weights")
    _same_dropout(module, clone)
    clone.to(dtype).train(module.training)
    return clone


def _same_dropout(source: nn.Module, clone: nn.Module) -> None:
    """The source's dropout settings, which its config does not hold when they were changed after loading
    (``disable_dropout``: ``nn.Dropout.p`` and float ``*dropout*`` attributes set to 0): without them a
    separate critic copied from the policy trained with dropout on (measured: 1e-2 from DDP's weights)."""
    modules = dict(clone.named_modules())
    for name, module in source.named_modules():
        twin = modules.get(name)
        if twin is None:
            continue
        for key, value in vars(module).items():
            number = isinstance(value, int | float) and not isinstance(value, bool)  # TRL sets Dropout.p = 0
            if (key == "p" and isinstance(module, nn.Dropout) or "dropout" in key) and number:
                setattr(twin, key, value)


def default_persistence_threshold(accelerator: Any, model: Any) -> int | None:
    """Under ZeRO-3, ``stage3_param_persistence_threshold`` where the DeepSpeed config leaves it unset:
    10 x the model's hidden size, the value transformers fills in for ``"auto"`` (and TRL for its
    reference model). DeepSpeed's own default, 100,000 elements, keeps every tensor smaller than that
    whole on every process: all of a small model (measured: the tiny model's 165,697 parameters on both
    of 2 processes under the shipped ``deepspeed_zero3.yaml``, which cannot name the key). The value
    set, or None (not ZeRO-3, or the config names it)."""
    plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
    if plugin is None or plugin.zero_stage != 3:
        return None
    zero = plugin.deepspeed_config.setdefault("zero_optimization", {})
    if zero.get("stage3_param_persistence_threshold", "auto") != "auto":
        return None
    config = getattr(model, "config", None)
    hidden: int = max(getattr(config, "hidden_sizes", None) or [getattr(config, "hidden_size", 0) or 0])

    if not hidden:
        return None
    zero["stage3_param_persistence_threshold"] = 10 * hidden
    return 10 * hidden
