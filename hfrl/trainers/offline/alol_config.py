"""Configuration of the offline A-LoL family trainer (``ALoLTrainer``): one config, eight algorithms.

hfrl train --task hh --alg a_lol --model MODEL
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hfrl.core.offline_losses import OFFLINE_LOSSES, weight_of
from hfrl.trainers.config_checks import MAX_BATCH, MAX_COUNT, MAX_TOKENS, check_values
from hfrl.trainers.rl_config import RLConfig

ALOL_ALGORITHMS = tuple(OFFLINE_LOSSES)  # the family's variants (hfrl.core.offline_losses)

SAMPLINGS = ("none", "good_priority", "good_random")


# Card names of the algorithms (the paper's).
DISPLAY_NAMES = {
    "nll": "NLL (behaviour cloning)",
    "wbc": "weighted behaviour cloning (wBC)",
    "r_gold": "R-GOLD",
    "r_lol": "R-LoL",
    "a_lol": "A-LoL",
    "a_lol_ref_free": "A-LoL ref-free",
    "a_lol_seq": "A-LoL seq",
    "a_lol_kl": "A-LoL KL",
}


@dataclass
class ALoLConfig(RLConfig):
    """Settings of offline advantage- and reward-weighted training (A-LoL, Baheti et al. 2024).

    Each training example is a (prompt, completion, reward) triple; the whole completion is one
    action. Before training the trainer prepares the data once (cached): rewards, the reference
    policy's log-probs, the value head ``V(x)`` and advantages ``A = R - V(x)``. The step budget is
    the Trainer's (``num_train_epochs`` or ``max_steps``); with ``good_priority`` / ``good_random``
    sampling an epoch draws as many examples as have a positive weight, so an epoch-based budget
    scales with the positive fraction. An explicit ``max_steps`` is taken as is. The value head's
    validation generations use ``eval_generation_kwargs`` with ``do_sample`` false. The prompt,
    generation, reward-weight and model-loading fields are :class:`~hfrl.trainers.rl_config.RLConfig`'s.
    """

    #: its section of a task's YAML ``configs``, inherited along the config classes (hfrl.runs.experiment.task_config)
    task_section: ClassVar[str] = "offline"  # then the variant's own (a_lol, a_lol_seq, ...)

    algorithms: ClassVar[tuple[str, ...]] = ALOL_ALGORITHMS  # what `algorithm` may be (PROConfig: pro)

    # ---- Algorithm ----
    algorithm: str = field(
        default="a_lol",
        metadata={
            "help": f"Loss of the family (docs/algorithms.md §6): one of {', '.join(ALOL_ALGORITHMS)}.",
            "choices": ALOL_ALGORITHMS,
        },
    )
    ppo_clip: float = field(
        default=0.9,
        metadata={
            "help": "Importance weights rho are clamped to [1 - ppo_clip, 1 + ppo_clip] (r_lol, a_lol, a_lol_seq)."
        },
    )
    kl_beta: float = field(
        default=0.1, metadata={"help": "Coefficient of a_lol_kl's term beta * (log pi(y|x) - log pi_ref(y|x))."}
    )
    sampling: str | None = field(
        default=None,
        metadata={
            "choices": SAMPLINGS,
            "help": "Training example sampling: 'good_priority' (P(i) ∝ A+_i, or ∝ R_i for wbc / r_gold / r_lol), "
            "'good_random' (uniform over positive weights) or 'none' (uniform over all). Default: 'none' for nll, "
            "'good_priority' for the others.",
        },
    )

    # ---- Rewards and the value estimate V(x) ----
    max_value: float = field(
        default=1.0, metadata={"help": "The value head predicts sigmoid(.) * max_value: the largest reward expected."}
    )
    value_epochs: int = field(
        default=10, metadata={"help": "Epochs of value-head fitting on the validation generations (LoL-RL: 5-10)."}
    )
    value_learning_rate: float = field(default=1e-4, metadata={"help": "AdamW learning rate of the value head."})
    value_batch_size: int = field(default=16, metadata={"help": "Prompts per value-head optimizer step."})
    value_num_heads: int = field(
        default=8, metadata={"help": "Attention heads of the value head; must divide the model's hidden size."}
    )
    value_holdout_fraction: float = field(
        default=0.2,
        metadata={
            "help": "Fraction of the validation prompts held out to pick the value head's best epoch (lowest MSE); "
            "0 picks by the training MSE."
        },
    )

    # ---- Lengths (prompts, max_new_tokens, evaluation's generation: RLConfig) ----
    max_completion_length: int = field(
        default=128, metadata={"help": "Completion tokens trained on (EOS included); longer ones are cut."}
    )

    # ---- Preparation cache ----
    preparation_cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where prepared datasets are cached (default: $HFRL_CACHE/offline, else $HF_HOME/hfrl/offline)."
        },
    )
    overwrite_preparation_cache: bool = field(
        default=False, metadata={"help": "Recompute the preparation even when a cached one matches."}
    )
    preparation_batch_size: int | None = field(
        default=None,
        metadata={"help": "Examples per forward / generate call in preparation (default: per_device_eval_batch_size)."},
    )

    # ---- Model ----
    load_in_4bit: bool = field(
        default=False,
        metadata={
            "help": "QLoRA: load the base model in 4-bit NF4 (needs bitsandbytes, a CUDA GPU and a LoRA adapter)."
        },
    )

    # ---- TrainingArguments defaults that differ here ----
    logging_steps: float = field(default=10, metadata={"help": "Log every N optimizer steps."})

    # Ranges (hfrl.trainers.config_checks: checked before torch is imported, and first in __post_init__)
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {
        "ppo_clip": {"gt": 0, "le": 1, "note": "rho is clamped to [1 - c, 1 + c]"},
        "kl_beta": {"ge": 0},
        "max_value": {"gt": 0},
        "value_learning_rate": {"gt": 0},
        "value_epochs": {"ge": 1, "cap": MAX_COUNT},
        "value_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "value_num_heads": {"ge": 1},
        "value_holdout_fraction": {"ge": 0, "lt": 1},
        "max_completion_length": {"ge": 1, "cap": MAX_TOKENS},
        "preparation_batch_size": {"ge": 1, "cap": MAX_BATCH},
    }

    def __post_init__(self) -> None:
        check_values(self)  # finite numbers, the ranges above and RLConfig's, generate's keyword arguments
        if self.algorithm not in self.algorithms:
            from hfrl.utils.registry import unknown

            raise unknown("algorithm", self.algorithm, self.algorithms, hint="; set algorithm to one of them")
        weighted = weight_of(self.algorithm) is not None
        if self.sampling is None:
            self.sampling = "good_priority" if weighted else "none"
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}, got {self.sampling!r}")
        if not weighted and self.sampling != "none":
            raise ValueError(
                f"{self.algorithm} has no advantage or reward to sample by: set sampling 'none', not {self.sampling!r}"
            )
        if self.remove_unused_columns:
            raise ValueError(
                "remove_unused_columns must be false: the trainer reads the prepared columns and rewards read the rest"
            )
        super().__post_init__()

    @property
    def value_generation_kwargs(self) -> dict[str, Any]:
        """``generate`` keyword arguments of the reference's validation generations: greedy."""
        return {
            "max_new_tokens": self.eval_max_new_tokens or self.max_new_tokens,
            **self.eval_generation_kwargs,
            "do_sample": False,
        }

    @property
    def eval_kwargs(self) -> dict[str, Any]:
        """``generate`` keyword arguments of evaluation."""
        return {"max_new_tokens": self.eval_max_new_tokens or self.max_new_tokens, **self.eval_generation_kwargs}
