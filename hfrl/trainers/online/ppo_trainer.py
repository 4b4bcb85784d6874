"""``PPOTrainer``: the shared online core plus PPO's clipped-surrogate update.

hfrl train --task numbers --alg ppo --model tiny
"""

from __future__ import annotations

from typing import cast

import torch

from hfrl.core.losses import ppo_loss
from hfrl.core.rollout import Rollout
from hfrl.trainers.online.online_trainer import OnlineTrainer, PolicyOutputs
from hfrl.trainers.online.ppo_config import PPOConfig
from hfrl.trainers.papers import paper


class PPOTrainer(OnlineTrainer):
    """Proximal Policy Optimization with a value head, token-level KL penalty and GAE (by default; any
    advantage estimator, ``num_generations`` completions per prompt, the KL in the loss as configured).

    Example:

    ```python
    from datasets import Dataset
    from hfrl import PPOConfig, PPOTrainer

    def longer(prompts, completions, **kwargs):
        return [len(c) / 100 for c in completions]

    trainer = PPOTrainer(
        model="tiny",
        args=PPOConfig(output_dir="runs/demo", num_iterations=5, learning_rate=1e-3),
        reward_funcs=longer,
        train_dataset=Dataset.from_dict({"prompt": ["1 2"] * 64}),
    )
    trainer.train()
    ```
    """

    algs = {
        "ppo": "online: clipped-ratio policy updates, per-token KL penalty, GAE with a value head or any estimator "
        "(PPO).",
    }
    config_class = PPOConfig
    args: PPOConfig
    _name = "PPO"
    _tag_names = ["hfrl", "ppo"]
    _paper = paper("schulman2017proximal")

    def loss(self, batch: Rollout, out: PolicyOutputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's clipped surrogate, clipped value loss (with a critic) and entropy bonus (:func:`ppo_loss`)."""
        a = self.args
        return ppo_loss(cast(torch.Tensor, out.logprobs), batch.logprobs, batch.advantages, out.values, batch.values,
                        batch.returns, out.entropy, batch.train_mask, a.cliprange, a.cliprange_value, a.vf_coef,
                        a.ent_coef, max_tokens=self.loss_max_tokens)  # fmt: skip
