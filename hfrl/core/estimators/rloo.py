"""``rloo``: REINFORCE with the leave-one-out baseline (Kool et al. 2019, "Buy 4 REINFORCE Samples,
Get a Baseline for Free!"; Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style
Optimization for Learning from Human Feedback in LLMs"; OpenRLHF's and TRL's ``rloo``).
docs/algorithms.md §13.6.

This file and one line in ``hfrl/core/estimators/__init__.py`` are all an estimator takes.

    python -m pytest tests/unit/test_estimators.py -k rloo
"""

from __future__ import annotations

import torch

from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs, group_stats


class RLOO(AdvantageEstimator):
    """RLOO, no critic: each completion's reward minus the mean reward of the other completions of its prompt."""

    needs_groups = True
    unit_scale = False  # R_i minus the others' mean: reward units

    def estimate(self, x: EstimatorInputs) -> Estimate:
        kept = x.mask.sum(1) > 0
        n, total, _ = group_stats(x.scores, x.group_ids, kept)
        scores = x.scores.float()
        # b_i = (sum_j R_j - R_i) / (n - 1): the mean of the other n - 1 completions of the prompt
        # (a completion whose siblings were all dropped is its own baseline: advantage 0)
        baseline = torch.where(n > 1, (total - scores) / (n - 1).clamp(min=1), scores)
        return self.shaped_returns(x, scores - baseline)  # A_t = sum_{k>=t} gamma^(k-t) r'_k
