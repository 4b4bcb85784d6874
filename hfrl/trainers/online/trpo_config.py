"""``TRPOConfig``: the trust-region policy step and the critic's regression epochs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hfrl.trainers.config_checks import MAX_BATCH, MAX_COUNT
from hfrl.trainers.online.online_config import OnlineConfig


@dataclass
class TRPOConfig(OnlineConfig):
    """Trust Region Policy Optimization (Schulman et al. 2015), sb3-contrib's defaults.

    Each iteration makes one natural-gradient step of the policy over the whole rollout: conjugate
    gradient (``cg_max_steps``, ``cg_damping``) on Fisher-vector products of ``KL(pi_old || pi)``,
    the largest step with KL ``target_kl``, then a backtracking line search (``line_search_shrinking_factor``,
    ``line_search_max_iter``) that accepts a step when the KL stays within ``target_kl`` and the
    objective improves: minus the policy loss (``policy_loss``; TRPO's ``surrogate``: ``mean(rho * A)``),
    minus ``beta * k3`` with ``kl_in_loss``. Then the critic alone regresses the returns for
    ``num_ppo_epochs`` epochs (sb3-contrib: 10) in minibatches of ``mini_batch_size`` with the Trainer's
    optimizer at ``learning_rate`` (sb3-contrib: 1e-3). With a shared backbone the critic trains the value
    head only (the policy's features are not moved outside the trust region); ``separate_critic`` trains
    a whole critic backbone.

    >>> TRPOConfig(output_dir="runs/demo", rollout_batch_size=64).mini_batch_size
    64
    """

    task_section: ClassVar[str] = "trpo"

    policy_loss: str = field(
        default="surrogate",
        metadata={
            "help": "What the natural-gradient step maximises, as minus a policy loss (TRPO: surrogate, -rho A; "
            "any registered one, e.g. gspo's sequence ratio)."
        },
    )
    target_kl: float = field(default=0.01, metadata={"help": "KL bound delta of the policy step."})
    cg_max_steps: int = field(default=15, metadata={"help": "Conjugate gradient iterations."})
    cg_damping: float = field(default=0.1, metadata={"help": "Damping added to the Fisher-vector product."})
    line_search_shrinking_factor: float = field(default=0.8, metadata={"help": "Step shrink per line-search try."})
    line_search_max_iter: int = field(default=10, metadata={"help": "Line-search tries."})
    fisher_batch_size: int | None = field(
        default=None,
        metadata={
            "help": "Completions per forward of the policy step. None: the whole rollout in one graph kept through "
            "conjugate gradient (fastest, memory grows with the rollout); smaller bounds memory by one chunk's graph "
            "at the cost of one forward per chunk per conjugate-gradient step."
        },
    )
    fisher_subsample: int = field(
        default=1,
        metadata={
            "help": "Fisher-vector products on every k-th completion of the rollout (OpenAI Baselines' TRPO: every "
            "5th, after Schulman's thesis); the gradient and the line search use the whole rollout. 1: all of them."
        },
    )
    mini_batch_size: int | None = field(  # type: ignore[assignment]  # None: derived in __post_init__
        default=None, metadata={"help": "Critic minibatch (default: min(128, the rollout's completions))."}
    )
    num_ppo_epochs: int = field(
        default=10, metadata={"help": "Critic epochs per rollout (sb3-contrib: 10; none without a critic)."}
    )
    learning_rate: float = field(default=1e-3, metadata={"help": "Critic learning rate (sb3-contrib: 1e-3)."})
    ddp_find_unused_parameters: bool | None = field(
        default=True, metadata={"help": "DDP: the critic's optimizer steps leave the policy's parameters unused."}
    )

    # Ranges (hfrl.trainers.config_checks), checked with OnlineConfig's, first in its __post_init__
    field_bounds: ClassVar[dict[str, dict[str, Any]]] = {
        "target_kl": {"gt": 0},
        "cg_max_steps": {"ge": 1, "cap": MAX_COUNT},
        "cg_damping": {"ge": 0},
        "line_search_shrinking_factor": {"gt": 0, "lt": 1},
        "line_search_max_iter": {"ge": 1, "cap": MAX_COUNT},
        "fisher_batch_size": {"ge": 1, "cap": MAX_BATCH},
        "fisher_subsample": {"ge": 1},
    }

    def __post_init__(self) -> None:
        from hfrl.core.estimators import estimator_class

        # no critic to regress (a critic-free advantage estimator): an iteration is its policy step alone
        self._policy_step_only = not estimator_class(self.advantage_estimator).needs_critic
        if self.mini_batch_size is None:
            self.mini_batch_size = min(128, self.rollout_batch_size * self.num_generations)
        super().__post_init__()  # OnlineConfig: the ranges first
        if self.critic_epochs:
            raise ValueError(
                f"critic_epochs ({self.critic_epochs}): TRPO's minibatches already train the critic alone, "
                f"num_ppo_epochs ({self.num_ppo_epochs}) passes of them: raise num_ppo_epochs instead"
            )
        from hfrl.core.policy_losses import policy_loss_class

        if not policy_loss_class(self.policy_loss).surrogate:
            raise ValueError(
                f"TRPO's line search compares the policy loss's values from step to step, and policy_loss "
                f"{self.policy_loss} is a gradient estimator, not a surrogate of the improvement: use surrogate "
                "(TRPO's), ppo_clip or gspo"
            )

    @property
    def steps_per_iteration(self) -> int:
        """Optimizer steps per rollout: the critic's epochs x minibatches; 1 without a critic (the policy
        step alone; the Trainer's optimizer then holds no parameters)."""
        return 1 if getattr(self, "_policy_step_only", False) else super().steps_per_iteration
