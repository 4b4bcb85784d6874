"""KL-penalty coefficient controllers: fixed, and adaptive (Ziegler et al. 2019, as in RL4LMs;
docs/algorithms.md §1).

The adaptive controller is stepped once per rollout on the per-token mean KL of that rollout:
``e = clip((KL - target) / target, -0.2, 0.2)``, ``beta <- beta * (1 + rate * e)``.
Both expose ``state_dict()`` / ``load_state_dict()`` so checkpoints carry them.
"""

from __future__ import annotations


class FixedKLController:
    """A constant KL coefficient."""

    def __init__(self, kl_coef: float) -> None:
        self.value = float(kl_coef)

    def step(self, current_kl: float) -> float:
        return self.value

    def state_dict(self) -> dict[str, float]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.value = float(state["value"])


class AdaptiveKLController(FixedKLController):
    """Multiplicative update of beta towards a target per-token KL."""

    def __init__(self, kl_coef: float, target: float, rate: float = 0.1, clip: float = 0.2) -> None:
        if target <= 0:
            raise ValueError(f"kl_target must be > 0, got {target}; leave it unset for a fixed coefficient")
        super().__init__(kl_coef)
        self.target, self.rate, self.clip = float(target), float(rate), float(clip)

    def step(self, current_kl: float) -> float:
        error = min(max((current_kl - self.target) / self.target, -self.clip), self.clip)
        self.value *= 1 + self.rate * error  # beta <- beta * (1 + 0.1 * e)
        return self.value


def make_kl_controller(kl_coef: float, kl_target: float | None, rate: float = 0.1) -> FixedKLController:
    """Adaptive when a target is given, fixed otherwise."""
    return FixedKLController(kl_coef) if kl_target is None else AdaptiveKLController(kl_coef, kl_target, rate)
