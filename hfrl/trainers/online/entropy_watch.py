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
#: iteration's. exp(H) is the number of equally likely tokens H is worth: 5% of a random-weight
#: model's 6.2 nats (~500 tokens) is 0.31 nats (~1.4 tokens), nearly one token per step. Measured on
#: the numbers task (tiny model, 1000 iterations of A2C, one thread): the runs that collapsed without
#: an entropy bonus went under 0.2% (stuck on one completion worth 0.4; a climb to 0.75 lost to 0.10)
#: and 2.2% (its last fifth fell to 0.14); the runs that dipped and recovered stayed over 6.9%, and
#: with the entropy bonus of 0.01 or TRPO's trust region they stayed over 60%. 10% would have
#: warned about a run that recovered (ent_coef 0.003); 1% would have missed the unstable one.
COLLAPSE_FRACTION = 0.05


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
