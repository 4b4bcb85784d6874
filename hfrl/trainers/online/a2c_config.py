"""``A2CConfig``: one gradient step per rollout, SB3's A2C defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hfrl.trainers.online.online_config import OnlineConfig


@dataclass
class A2CConfig(OnlineConfig):
    """Advantage Actor-Critic (Mnih et al. 2016), synchronous, on the token-level MDP.

    SB3 defaults: one update over the whole rollout (``mini_batch_size`` = ``rollout_batch_size``,
    one epoch), GAE lambda 1.0, no advantage normalisation, RMSprop (alpha 0.99, eps 1e-5), value
    coefficient 0.5, gradient norm 0.5.

    >>> A2CConfig(output_dir="runs/demo", rollout_batch_size=32).mini_batch_size
    32
    """

    task_section: ClassVar[str] = "a2c"

    mini_batch_size: int | None = field(  # type: ignore[assignment]  # None: derived in __post_init__
        default=None, metadata={"help": "Completions per update (default: the whole rollout, as A2C)."}
    )
    policy_loss: str = field(
        default="a2c", metadata={"help": "The actor's loss (A2C: a2c, the policy gradient -A log pi; any registered)."}
    )
    num_ppo_epochs: int = field(default=1, metadata={"help": "Passes over each rollout (A2C: 1)."})
    lam: float = field(default=1.0, metadata={"help": "GAE lambda (A2C: 1.0, n-step returns)."})
    whiten_advantages: bool = field(default=False, metadata={"help": "Normalise advantages (A2C: off)."})
    optim: str = field(default="rmsprop", metadata={"help": "Optimizer (A2C: RMSprop)."})
    optim_args: str | None = field(
        default="alpha=0.99,eps=1e-5", metadata={"help": "Optimizer arguments (SB3's RMSprop settings)."}
    )

    def __post_init__(self) -> None:
        if self.mini_batch_size is None:
            self.mini_batch_size = self.rollout_batch_size * self.num_generations
        super().__post_init__()
