"""``reinforce``: REINFORCE++ (Hu et al. 2025, "REINFORCE++: An Efficient RLHF Algorithm with
Robustness to Both Prompt and Reward Models"; OpenRLHF's ``reinforce``): no baseline, the token-level
returns whitened over the whole batch (the global normalisation that stands in for the critic).
docs/algorithms.md §13.5.

    python -m pytest tests/unit/test_estimators.py -k "reinforce and not baseline"
"""

from __future__ import annotations

from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs


class Reinforce(AdvantageEstimator):
    """REINFORCE++, no critic: the returns-to-go of every completion, whitened over the batch (any num_generations)."""

    whitening = True

    def estimate(self, x: EstimatorInputs) -> Estimate:
        # G_t = sum_{k>=t} gamma^(k-t) r_k, then A <- (G - mean_m(G)) / sqrt(var_m(G) + 1e-8) over the batch
        return self.shaped_returns(x, x.scores.float())
