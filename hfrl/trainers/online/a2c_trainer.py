"""``A2CTrainer``: the shared online core plus A2C's plain policy-gradient update.

hfrl train --task numbers --alg a2c --model tiny
"""

from __future__ import annotations

from typing import cast

import torch

from hfrl.core.losses import a2c_loss
from hfrl.core.rollout import Rollout
from hfrl.trainers.online.a2c_config import A2CConfig
from hfrl.trainers.online.online_trainer import OnlineTrainer, PolicyOutputs
from hfrl.trainers.papers import paper


class A2CTrainer(OnlineTrainer):
    """A2C: ``-A * log pi + c_v (V - R)^2 - c_e H`` over the rollout; no ratio, no clipping."""

    algs = {"a2c": "online: advantage actor-critic, one gradient step per rollout, no ratio or clipping (A2C)."}
    config_class = A2CConfig
    args: A2CConfig
    _name = "A2C"
    _tag_names = ["hfrl", "a2c"]
    _paper = paper("mnih2016asynchronous")

    def loss(self, batch: Rollout, out: PolicyOutputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """A2C's policy gradient, value loss (with a critic) and entropy bonus (:func:`a2c_loss`)."""
        a = self.args
        return a2c_loss(cast(torch.Tensor, out.logprobs), batch.advantages, out.values, batch.returns, out.entropy,
                        batch.train_mask, a.vf_coef, a.ent_coef, max_tokens=self.loss_max_tokens)  # fmt: skip
