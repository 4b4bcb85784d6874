"""``NLPOConfig``: PPO's settings plus NLPO's top-p action mask."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hfrl.trainers.config_checks import MAX_COUNT
from hfrl.trainers.online.ppo_config import PPOConfig


@dataclass
class NLPOConfig(PPOConfig):
    """Natural Language Policy Optimization (Ramamurthy et al. 2023): PPO whose action space at each
    step is the top-p set of a mask policy, a copy of the policy refreshed every
    ``mask_update_every`` rollouts.

    >>> NLPOConfig(output_dir="runs/demo", top_mask=0.5).top_mask
    0.5
    """

    task_section: ClassVar[str] = "nlpo"

    top_mask: float = field(
        default=0.9, metadata={"help": "Cumulative probability of the mask policy's top-p action set (IWSLT: 0.5)."}
    )
    mask_update_every: int = field(
        default=20,
        metadata={"help": "Rollouts between refreshes of the mask policy (RL4LMs: IMDB 5, most tasks 20)."},
    )
    min_tokens_to_keep: int = field(default=100, metadata={"help": "Actions always kept in the mask."})

    # Ranges (hfrl.trainers.config_checks), checked with OnlineConfig's, first in its __post_init__
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {
        "top_mask": {"gt": 0, "le": 1},
        "mask_update_every": {"ge": 1, "cap": MAX_COUNT},
        "min_tokens_to_keep": {"ge": 1},
    }
