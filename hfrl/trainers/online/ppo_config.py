"""``PPOConfig``: the online core's settings plus PPO's clipping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hfrl.trainers.online.online_config import OnlineConfig


@dataclass
class PPOConfig(OnlineConfig):
    """Proximal Policy Optimization (Schulman et al. 2017) on the token-level MDP.

    Defaults follow SB3 / RL4LMs: clip 0.2, gamma 0.99, lambda 0.95, value coefficient 0.5, no
    entropy bonus, gradient norm 0.5, whitened advantages.

    >>> PPOConfig(output_dir="runs/demo", num_iterations=10, rollout_batch_size=32, mini_batch_size=8).max_steps
    160
    """

    cliprange: float = field(default=0.2, metadata={"help": "PPO ratio clip range epsilon."})
    cliprange_value: float | None = field(
        default=None, metadata={"help": "Clip value predictions around the rollout's values (None: no clipping)."}
    )

    # Ranges (hfrl.trainers.config_checks), checked with OnlineConfig's, first in its __post_init__
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {"cliprange": {"gt": 0, "lt": 1}, "cliprange_value": {"gt": 0}}
