"""``reinforce_baseline``: REINFORCE++-baseline (Hu et al. 2025, "REINFORCE++: An Efficient RLHF
Algorithm with Robustness to Both Prompt and Reward Models", OpenRLHF's ``reinforce_baseline``): the
group mean as the baseline, then the token-level returns whitened over the whole batch.
docs/algorithms.md §13.4.

    python -m pytest tests/unit/test_estimators.py -k reinforce_baseline
"""

from __future__ import annotations

from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs, group_stats


class ReinforceBaseline(AdvantageEstimator):
    """REINFORCE++-baseline, no critic: reward minus its prompt's group mean, then whitened over the batch."""

    needs_groups = True
    whitening = True

    def estimate(self, x: EstimatorInputs) -> Estimate:
        n, total, _ = group_stats(x.scores, x.group_ids, x.mask.sum(1) > 0)
        shaped = x.scores.float() - total / n.clamp(min=1)  # R_i - mean(R_group)
        # G_t = sum_{k>=t} gamma^(k-t) r'_k, then A <- (G - mean_m(G)) / sqrt(var_m(G) + 1e-8) over the batch
        return self.shaped_returns(x, shaped)
