"""``PPOTrainer``: the online trainer with PPO's settings (:class:`PPOConfig`: ``policy_loss`` ppo_clip).

hfrl train --task numbers --alg ppo --model tiny
"""

from __future__ import annotations

from hfrl.trainers.online.online_trainer import OnlineTrainer
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
