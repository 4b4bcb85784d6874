"""``A2CTrainer``: the shared online core plus A2C's plain policy-gradient update.

hfrl train --task numbers --alg a2c --model tiny
"""

from __future__ import annotations

from hfrl.core.losses import a2c_loss
from hfrl.core.rollout import Rollout
from hfrl.trainers.online.a2c_config import A2CConfig
from hfrl.trainers.online.online_trainer import OnlineTrainer


class A2CTrainer(OnlineTrainer):
    """A2C: ``-A * log pi + c_v (V - R)^2 - c_e H`` over the rollout; no ratio, no clipping."""

    config_class = A2CConfig
    _name = "A2C"
    _tag_names = ["hfrl", "a2c"]
    _paper = {
        "title": "Asynchronous Methods for Deep Reinforcement Learning",
        "id": "1602.01783",
        "citation": """@inproceedings{mnih2016asynchronous,
    title     = {{Asynchronous Methods for Deep Reinforcement Learning}},
    author    = {Volodymyr Mnih and Adri{\\`a} Puigdom{\\`e}nech Badia and Mehdi Mirza and Alex Graves and
                 Timothy P. Lillicrap and Tim Harley and David Silver and Koray Kavukcuoglu},
    booktitle = {Proceedings of the 33rd International Conference on Machine Learning},
    year      = 2016
}""",
    }

    def compute_loss(self, model, inputs: Rollout, return_outputs: bool = False, num_items_in_batch=None):
        logprobs, entropy, values = self.policy_outputs(model, inputs)
        loss, stats = a2c_loss(
            logprobs,
            inputs.advantages,
            values,
            inputs.returns,
            entropy,
            inputs.train_mask,
            self.args.vf_coef,
            self.args.ent_coef,
        )
        self.record(stats)
        return (loss, {"values": values}) if return_outputs else loss
