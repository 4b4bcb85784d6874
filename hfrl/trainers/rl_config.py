"""``RLConfig``: the fields every hfrl trainer of its own declares alike, written once.

The online configs (:class:`~hfrl.trainers.online.online_config.OnlineConfig`: PPO, NLPO, A2C, TRPO)
and the offline one (:class:`~hfrl.trainers.offline.alol_config.ALoLConfig`: the A-LoL family, PRO)
both cut prompts, generate completions (rollouts, evaluation, A-LoL's value-head data), weigh reward
functions, load a model by name and change some of ``TrainingArguments``' defaults for RL: those 11
fields and their checks live here. A subclass re-declares a field only to change its default
(``OnlineConfig.max_new_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from transformers import TrainingArguments

from hfrl.trainers.config_checks import MAX_TOKENS, check_values, fit_min_new_tokens
from hfrl.trainers.devices import cpu_defaults
from hfrl.trainers.run_guard import OverwriteOutputDir

TRUNCATION_SIDES = ("left", "right")


@dataclass
class RLConfig(OverwriteOutputDir, TrainingArguments):
    """Prompts, generation lengths and evaluation sampling, reward weights, model loading, dropout,
    and the ``TrainingArguments`` defaults that differ for RL.

    >>> RLConfig(output_dir="runs/demo", report_to="none", max_new_tokens=0)
    Traceback (most recent call last):
    ...
    ValueError: max_new_tokens must be >= 1, got 0
    """

    # ---- Prompts and generation ----
    max_prompt_length: int | None = field(default=512, metadata={"help": "Prompt tokens kept (None: all)."})
    truncation_side: str = field(
        default="left",
        metadata={"help": "Which end of a long prompt to cut: 'left' or 'right'.", "choices": TRUNCATION_SIDES},
    )
    max_new_tokens: int = field(default=128, metadata={"help": "Maximum completion length when generating."})
    eval_max_new_tokens: int | None = field(
        default=None, metadata={"help": "Maximum completion length in evaluation (default: max_new_tokens)."}
    )
    eval_generation_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"do_sample": False},
        metadata={"help": "Keyword arguments of `generate` for evaluation (default: greedy)."},
    )

    # ---- Rewards and model ----
    reward_weights: list[float] | None = field(
        default=None, metadata={"help": "Weight of each reward function (default: 1 each)."}
    )
    model_init_kwargs: dict[str, Any] | None = field(
        default=None, metadata={"help": "Keyword arguments of `from_pretrained` when `model` is a name."}
    )
    base_model: str | None = field(
        default=None,
        metadata={
            "help": "The base model that a PEFT adapter given as `model` loads onto, a Hub id or a path (default: "
            "the base its adapter_config.json records, which may be a private path). Only for adapters."
        },
    )
    bf16: bool | None = field(  # type: ignore[assignment]
        default=None,
        metadata={
            "help": "bf16 mixed precision (float32 weights, bfloat16 autocast). Default: on where a CUDA GPU "
            "supports bfloat16 and neither fp16 nor use_cpu is set, off on the CPU (hfrl.trainers.devices)."
        },
    )
    disable_dropout: bool = field(
        default=True,
        metadata={
            "help": "Turn dropout off, so that the log-probs of sampling (or the reference's) and the update agree."
        },
    )

    # ---- TrainingArguments defaults that differ for RL ----
    lr_scheduler_type: str = field(
        default="constant", metadata={"help": "Scheduler type (RL4LMs and LoL-RL: constant)."}
    )
    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Keep dataset columns: rewards and metrics receive them as keyword arguments."}
    )
    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={
            "help": "DDP: every trained parameter takes part in each forward, so DDP need not search for unused ones."
        },
    )

    # Ranges (hfrl.trainers.config_checks: checked before torch is imported and in __post_init__)
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {
        "max_prompt_length": {"ge": 1, "cap": MAX_TOKENS},
        "max_new_tokens": {"ge": 1, "cap": MAX_TOKENS},
        "eval_max_new_tokens": {"ge": 1, "cap": MAX_TOKENS},
    }
    generate_fields: ClassVar[tuple[str, ...]] = ("eval_generation_kwargs",)  # generate's keyword arguments

    def __post_init__(self) -> None:
        check_values(self)  # once: OnlineConfig / ALoLConfig check first, before they derive values
        if self.truncation_side not in TRUNCATION_SIDES:
            raise ValueError(f"truncation_side must be 'left' or 'right', got {self.truncation_side!r}")
        if not isinstance(self.eval_generation_kwargs, dict):
            raise ValueError(
                f"eval_generation_kwargs must be a mapping, got {type(self.eval_generation_kwargs).__name__}"
            )
        if self.reward_weights is not None and not isinstance(self.reward_weights, (list, tuple)):
            raise ValueError(f"reward_weights must be a list of numbers, got {self.reward_weights!r}")
        cap, cap_name = (self.eval_max_new_tokens, "eval_max_new_tokens") if self.eval_max_new_tokens else (
            self.max_new_tokens, "max_new_tokens")  # fmt: skip
        self.eval_generation_kwargs = fit_min_new_tokens(self.eval_generation_kwargs, cap, "eval_generation_kwargs",
                                                         cap_name)  # fmt: skip
        cpu_defaults(self)
        super().__post_init__()
