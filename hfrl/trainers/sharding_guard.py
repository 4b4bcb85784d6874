"""What a distributed run got, said at its start, and a stop when it asked to shard and did not.

Every silent failure seen while making DeepSpeed and FSDP run here was a run that looked fine: plain
DDP instead of sharding (accelerate with ``use_cpu``, or FSDP on the CPU), two unsynchronised copies,
or one process per machine (no backend). So a run launched as several processes, or with a sharding
config, logs one line once its model and optimizer are prepared (world size, distributed type, ZeRO
stage, the parameter and optimizer elements each process holds, as a share of the model's), writes
the same numbers to ``distributed.json`` in its output folder, and stops with one line when:

- the launcher asked for DeepSpeed or FSDP and accelerate set up something else;
- ZeRO-3 or FSDP runs on several processes and every process holds every parameter;
- ZeRO-2 (or 1) runs on several processes and every process's optimizer holds every trainable element.

Each process measures its own elements; the numbers are gathered so that every process takes the
same decision. Every process stops; the first says why (the others raise :class:`SaidByFirstProcess`,
which the CLI ends without printing it again).
"""

from __future__ import annotations

import json
import os
from typing import Any

from transformers import TrainerCallback
from transformers.utils import logging

logger = logging.get_logger(__name__)

__all__ = ["SaidByFirstProcess", "ShardingGuard", "check_report", "describe"]
REPORT_FILE = "distributed.json"


class SaidByFirstProcess(ValueError):
    """The stop every process takes alike, on a process other than the first: the first one prints it
    (``said_by_first_process``, read by the CLI's error boundary), so the console shows one line."""

    said_by_first_process = True


def _asked() -> str | None:
    for variable, name in (("ACCELERATE_USE_DEEPSPEED", "DeepSpeed"), ("ACCELERATE_USE_FSDP", "FSDP")):
        if os.environ.get(variable, "false").lower() == "true":
            return name
    return None


def _elements(params: Any) -> int:
    """Elements this process holds of ``params`` (ZeRO-3: its slice, or the whole tensor of a parameter
    it keeps on every process, ``ds_persist``: those under ``stage3_param_persistence_threshold``;
    FSDP2: its local shard)."""
    total = 0
    for p in params:
        if getattr(p, "ds_persist", False):
            total += p.ds_numel
        elif hasattr(p, "ds_tensor"):
            total += p.ds_tensor.numel()
        elif hasattr(p, "to_local"):  # a DTensor (FSDP2)
            total += p.to_local().numel()
        else:
            total += p.numel()
    return total


def _full(params: Any) -> int:
    return sum(getattr(p, "ds_numel", None) or p.numel() for p in params)


def _optimizer_elements(optimizer: Any) -> int:
    """Elements the optimizer updates on this process (what its state is sized by). DeepSpeed's ZeRO
    optimizers keep this process's flat fp32 partitions (ZeRO-3 swaps them into the inner torch
    optimizer only during its step, so they are read from DeepSpeed's own lists); otherwise the
    innermost torch optimizer's parameters."""
    inner = optimizer
    while inner is not None:
        for flat in ("fp32_partitioned_groups_flat", "single_partition_of_fp32_groups"):  # ZeRO-3, ZeRO-1/2
            if getattr(inner, flat, None) is not None:
                return sum(t.numel() for t in getattr(inner, flat))
        if not hasattr(inner, "optimizer") or inner.optimizer is inner:
            break
        inner = inner.optimizer
    groups = getattr(inner, "param_groups", [])
    return _elements(p for group in groups for p in group["params"])


def describe(accelerator: Any, model: Any, optimizer: Any) -> dict[str, Any]:
    """This process's numbers (the caller gathers them)."""
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    return {
        "distributed_type": str(accelerator.distributed_type).split(".")[-1],
        "zero_stage": plugin.zero_stage if plugin is not None else None,
        "fsdp": bool(getattr(accelerator.state, "fsdp_plugin", None)),
        "world_size": accelerator.num_processes,
        "parameters": _elements(params),
        "model_parameters": _full(params),
        "optimizer": _optimizer_elements(optimizer),
        "trainable_parameters": _full(trainable),
    }


def check_report(report: dict[str, Any], asked: str | None) -> None:
    """The one-line stops (see the module); ``report`` holds every process's ``describe`` under ``ranks``."""
    kind, stage, world = report["distributed_type"], report["zero_stage"], report["world_size"]
    if asked == "DeepSpeed" and kind != "DEEPSPEED" or asked == "FSDP" and kind != "FSDP":
        raise ValueError(
            f"the launcher asked for {asked} and accelerate set up {kind} ({world} process(es)): the run would hold "
            "whole, unsharded copies; see docs/how-to/distributed.md for what shards on this machine"
        )
    if world < 2:
        return
    most_params = max(r["parameters"] for r in report["ranks"])
    most_state = max(r["optimizer"] for r in report["ranks"])
    if (stage == 3 or report["fsdp"]) and most_params >= report["model_parameters"]:
        raise ValueError(
            f"{'ZeRO-3' if stage == 3 else 'FSDP'} on {world} processes and a process holds all "
            f"{report['model_parameters']:,} parameters: nothing was sharded (on a small model set "
            "stage3_param_persistence_threshold: 0 in the DeepSpeed config)"
        )
    if stage in (1, 2) and report["trainable_parameters"] and most_state >= report["trainable_parameters"]:
        raise ValueError(
            f"ZeRO-{stage} on {world} processes and a process's optimizer holds all {report['trainable_parameters']:,} "
            "trainable elements: the optimizer state was not partitioned"
        )


def summary(report: dict[str, Any]) -> str:
    kind = report["distributed_type"]
    if report["zero_stage"] is not None:
        kind = f"DeepSpeed ZeRO-{report['zero_stage']}"
    params = max(r["parameters"] for r in report["ranks"])
    state = max(r["optimizer"] for r in report["ranks"])
    share = params / max(report["model_parameters"], 1)
    state_share = state / max(report["trainable_parameters"], 1)
    return (
        f"distributed: {kind}, {report['world_size']} processes; per process at most {params:,} of "
        f"{report['model_parameters']:,} parameters ({share:.2f}) and an optimizer over {state:,} of "
        f"{report['trainable_parameters']:,} trainable elements ({state_share:.2f})"
    )


class ShardingGuard(TrainerCallback):
    """Runs :func:`describe` on every process at the start of training, gathers, logs and checks."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        accelerator = trainer.accelerator
        asked = _asked()
        if accelerator.num_processes < 2 and asked is None:
            return
        mine = describe(accelerator, trainer.model_wrapped, trainer.optimizer)
        ranks = _gather(mine, accelerator.num_processes)
        report = {**{k: mine[k] for k in ("distributed_type", "zero_stage", "fsdp", "world_size")},
                  "model_parameters": mine["model_parameters"], "trainable_parameters": mine["trainable_parameters"],
                  "ranks": ranks}  # fmt: skip
        if state.is_world_process_zero:
            logger.warning(summary(report))
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, REPORT_FILE), "w") as f:
                json.dump(report, f, indent=1)
        try:
            check_report(report, asked)
        except ValueError as err:
            if state.is_world_process_zero:
                raise
            raise SaidByFirstProcess(str(err)) from None


def _gather(mine: dict[str, Any], world: int) -> list[dict[str, int]]:
    numbers = {"parameters": mine["parameters"], "optimizer": mine["optimizer"]}
    if world < 2:
        return [numbers]
    import torch.distributed as dist

    out: list[Any] = [None] * world
    dist.all_gather_object(out, numbers)
    return out
