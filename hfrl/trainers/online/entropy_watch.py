"""A one-line warning, once per run, when the policy's entropy collapses.

A policy whose entropy has collapsed samples (nearly) the same completion every time: the rollout's
rewards stop varying, the advantages carry only the critic's noise, and on-policy learning stalls
where it is, often at a poor policy (A2C on the ``numbers`` task without an entropy bonus ended at
entropy 0.002, from 6.2, on one completion worth 0.4). The run goes on; the warning says so at the
iteration it happens instead of leaving it to be found in the curves.

    watch = EntropyWatch()
    message = watch.observe(entropy=0.05, iteration=40)   # the warning's text the first time, else None
"""

from __future__ import annotations

from typing import Any

#: The warning fires when the mean per-token entropy falls under this fraction of the first
#: iteration's. exp(H) is the number of equally likely tokens H is worth: a tenth of the initial
#: entropy is the initial choice's tenth root (a random-weight model's 6.2 nats, ~500 tokens, -> 0.62
#: nats, ~1.9 tokens; a pretrained model's ~2.5 nats, ~12 tokens, -> 0.25 nats, ~1.3 tokens), i.e.
#: nearly one token per step. Healthy runs stay well above it: on the numbers task PPO's and
#: NLPO's shipped configs, and A2C's with its entropy bonus, ended at 25-50% of their initial entropy
#: (docs/algorithms.md); RLHF'd language models keep most of theirs under a KL penalty.
COLLAPSE_FRACTION = 0.1


class EntropyWatch:
    """Remembers the first iteration's entropy (kept in the checkpoint, so that a resumed run
    compares with the run's start) and says once when an iteration's falls under
    :data:`COLLAPSE_FRACTION` of it."""

    def __init__(self, fraction: float = COLLAPSE_FRACTION) -> None:
        self.fraction = fraction
        self.initial: float | None = None
        self.warned = False

    def observe(self, entropy: float, iteration: int) -> str | None:
        """The warning's one line when ``entropy`` is the first under the threshold; None otherwise."""
        if self.initial is None:
            self.initial = entropy
            return None
        if self.warned or not entropy < self.fraction * self.initial:
            return None
        self.warned = True
        return (
            f"the policy's entropy collapsed at iteration {iteration}: {entropy:.3g} nats per token, under "
            f"{self.fraction:.0%} of the first iteration's {self.initial:.3g}; its samples barely vary and learning "
            "stalls: raise ent_coef, lower learning_rate, or keep the best evaluated policy (load_best_model_at_end)"
        )

    def state(self) -> dict[str, Any]:
        return {"initial_entropy": self.initial, "entropy_collapse_warned": self.warned}

    def load_state(self, state: dict[str, Any]) -> None:
        """From a checkpoint's ``online_state.json`` (one written before this watch has neither key)."""
        self.initial = state.get("initial_entropy")
        self.warned = bool(state.get("entropy_collapse_warned", False))
