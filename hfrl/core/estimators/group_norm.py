"""``group_norm``: GRPO's group-normalised advantage (Shao et al. 2024, "DeepSeekMath: Pushing the
Limits of Mathematical Reasoning in Open Language Models", §4.1.2 outcome supervision; OpenRLHF's
``group_norm``, TRL's ``GRPOTrainer``). docs/algorithms.md §13.2.

    python -m pytest tests/unit/test_estimators.py -k group_norm
"""

from __future__ import annotations

from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs, group_stats

EPS = 1e-4  # TRL's GRPOTrainer: (R - mean) / (std + 1e-4); a group of equal rewards gets advantage 0


class GroupNorm(AdvantageEstimator):
    """GRPO, no critic: each completion's reward standardised by the mean and std of its prompt's completions."""

    needs_groups = True

    def estimate(self, x: EstimatorInputs) -> Estimate:
        n, total, std = group_stats(x.scores, x.group_ids, x.mask.sum(1) > 0)
        mean = total / n.clamp(min=1)
        shaped = (x.scores.float() - mean) / (std + EPS)  # A_i = (R_i - mean(R_group)) / (std(R_group) + eps)
        return self.shaped_returns(x, shaped)
