"""``PPOTrainer``: the shared online core plus PPO's clipped-surrogate update.

hfrl train --task numbers --alg ppo --model tiny
"""

from __future__ import annotations

from hfrl.core.losses import ppo_loss
from hfrl.core.rollout import Rollout
from hfrl.trainers.online.online_trainer import OnlineTrainer
from hfrl.trainers.online.ppo_config import PPOConfig


class PPOTrainer(OnlineTrainer):
    """Proximal Policy Optimization with a value head, token-level KL penalty and GAE.

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

    config_class = PPOConfig
    _name = "PPO"
    _tag_names = ["hfrl", "ppo"]
    _paper = {
        "title": "Proximal Policy Optimization Algorithms",
        "id": "1707.06347",
        "citation": """@article{schulman2017proximal,
    title   = {{Proximal Policy Optimization Algorithms}},
    author  = {John Schulman and Filip Wolski and Prafulla Dhariwal and Alec Radford and Oleg Klimov},
    year    = 2017,
    journal = {arXiv preprint arXiv:1707.06347}
}""",
    }

    def compute_loss(self, model, inputs: Rollout, return_outputs: bool = False, num_items_in_batch=None):
        logprobs, entropy, values = self.policy_outputs(model, inputs)
        loss, stats = ppo_loss(
            logprobs,
            inputs.logprobs,
            inputs.advantages,
            values,
            inputs.values,
            inputs.returns,
            entropy,
            inputs.train_mask,
            self.args.cliprange,
            self.args.cliprange_value,
            self.args.vf_coef,
            self.args.ent_coef,
        )
        self.record(stats)
        return (loss, {"values": values}) if return_outputs else loss
