"""``dr_grpo``: Dr. GRPO, "GRPO done right" (Liu et al. 2025, "Understanding R1-Zero-Like Training: A
Critical Perspective", §3.1): the group mean as the baseline with no division by the group's std, and
no length normalisation in the loss: the policy loss sums over tokens and divides by a constant,
``completions x max_new_tokens``, instead of each completion's length (TRL's ``loss_type="dr_grpo"``).
docs/algorithms.md §13.3.

    python -m pytest tests/unit/test_estimators.py -k dr_grpo
"""

from __future__ import annotations

from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs, group_stats


class DrGRPO(AdvantageEstimator):
    """Dr. GRPO, no critic: reward minus its prompt's group mean (no std), the loss summed over tokens / a constant."""

    needs_groups = True
    unit_scale = False  # R_i minus the group mean, not divided by its std
    loss_aggregation = "seq-mean-token-sum-norm"  # sum_t / (completions x max_new_tokens): no 1/|y| length bias

    def estimate(self, x: EstimatorInputs) -> Estimate:
        n, total, _ = group_stats(x.scores, x.group_ids, x.mask.sum(1) > 0)
        shaped = x.scores.float() - total / n.clamp(min=1)  # A_i = R_i - mean(R_group)
        return self.shaped_returns(x, shaped)
