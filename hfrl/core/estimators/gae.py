"""``gae``: generalised advantage estimation with a critic (Schulman et al. 2016), the default of
PPO, NLPO, A2C and TRPO. docs/algorithms.md §1 and §13.1. Decoupled (VC-PPO, VAPO; §16): the critic's
targets with their own lambda (``lam_critic``, 1 in both papers: Monte Carlo returns, no bias from an
untrained critic), the actor's advantages with ``lam`` or, with ``lam_alpha``, VAPO's length-adaptive
``1 - 1 / (alpha |y|)`` per completion.

    python -m pytest tests/unit/test_estimators.py -k gae
"""

from __future__ import annotations

from typing import cast

from torch import Tensor

from hfrl.core.advantages import gae, length_adaptive_lambda, whiten
from hfrl.core.estimators.base import AdvantageEstimator, Estimate, EstimatorInputs, add_scores


class GAE(AdvantageEstimator):
    """GAE(gamma, lambda) with a value head: A_t = sum_k (gamma lambda)^k delta_{t+k}, returns A + V."""

    needs_critic = True
    whitening = None  # as whiten_advantages says

    def estimate(self, x: EstimatorInputs) -> Estimate:
        rewards = add_scores(x.token_rewards, x.scores, x.mask)  # r_t = -beta kl_t + rtok_t + [t = T] R
        values = cast(Tensor, x.values)
        # the actor's lambda: lam, or VAPO's 1 - 1 / (alpha |y_i|) per completion (lam_alpha)
        lam = self.lam if self.lam_alpha is None else length_adaptive_lambda(x.mask, self.lam_alpha)
        # delta_t = r_t + gamma V(s_{t+1}) - V(s_t);  A_t = sum_k (gamma lambda)^k delta_{t+k};  R_t = A_t + V(s_t)
        advantages, returns = gae(rewards, values, x.mask, self.gamma, lam)
        if self.lam_critic != self.lam or self.lam_alpha is not None:  # decoupled GAE (VC-PPO, VAPO)
            _, returns = gae(rewards, values, x.mask, self.gamma, self.lam_critic)  # the critic's targets
        if self.whitens:  # A <- (A - mean_m(A)) / sqrt(var_m(A) + 1e-8) over every process's completion tokens
            advantages = whiten(advantages, x.mask, reduce=self.reduce)
        return Estimate(advantages, returns)
