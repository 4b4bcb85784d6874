"""``A2CTrainer``: the online trainer with A2C's settings (:class:`A2CConfig`: ``policy_loss`` a2c, one pass).

hfrl train --task numbers --alg a2c --model tiny
"""

from __future__ import annotations

from hfrl.trainers.online.a2c_config import A2CConfig
from hfrl.trainers.online.online_trainer import OnlineTrainer
from hfrl.trainers.papers import paper


class A2CTrainer(OnlineTrainer):
    """A2C: ``-A * log pi + c_v (V - R)^2 - c_e H`` over the rollout; no ratio, no clipping."""

    algs = {"a2c": "online: advantage actor-critic, one gradient step per rollout, no ratio or clipping (A2C)."}
    config_class = A2CConfig
    args: A2CConfig
    _name = "A2C"
    _tag_names = ["hfrl", "a2c"]
    _paper = paper("mnih2016asynchronous")
