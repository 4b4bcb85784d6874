"""``PPOConfig``: the online core's settings, PPO's clipped ratio as the policy loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hfrl.trainers.online.online_config import OnlineConfig


@dataclass
class PPOConfig(OnlineConfig):
    """Proximal Policy Optimization (Schulman et al. 2017) on the token-level MDP: the online core with
    ``policy_loss`` ppo_clip (its default; any other, e.g. ``gspo`` or ``cispo``, is PPO's loop with that loss).

    Defaults follow SB3 / RL4LMs: clip 0.2, gamma 0.99, lambda 0.95, value coefficient 0.5, no
    entropy bonus, gradient norm 0.5, whitened advantages.

    >>> PPOConfig(output_dir="runs/demo", num_iterations=10, rollout_batch_size=32, mini_batch_size=8).max_steps
    160
    """

    task_section: ClassVar[str] = "ppo"
