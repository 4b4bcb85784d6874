"""What every advantage estimator shares: its inputs, its output and the group statistics.

An estimator (:class:`AdvantageEstimator`) turns one rollout's rewards into advantages and returns.
Its inputs (:class:`EstimatorInputs`) separate the task's sequence-level score ``R`` of each
completion from the rest of the per-token reward (the KL penalty and any token-level task reward),
because the critic-free estimators shape ``R`` with a baseline over the completions of the same
prompt (its *group*, ``group_ids``) before adding it on the last token. docs/algorithms.md §13.

    python -m pytest tests/unit/test_estimators.py
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor

from hfrl.core.advantages import Reduce, discounted_returns, whiten


@dataclass
class EstimatorInputs:
    """One rollout as an estimator sees it (``B`` completions of at most ``T`` tokens): data only; the
    settings (gamma, lambda, whitening) are the estimator's own (:class:`AdvantageEstimator`)."""

    scores: Tensor  # (B,) the task reward R(x, y) of each completion
    token_rewards: Tensor  # (B, T) the rest of r_t: -beta * kl_t (KL penalty in the reward) + token-level rewards
    mask: Tensor  # (B, T) float, 1 on completion tokens (a dropped completion's row is all 0)
    group_ids: Tensor  # (B,) long: which prompt each completion answers (num_generations per prompt)
    values: Tensor | None = None  # (B, T) V(s_t), 0 at padding (estimators with a critic)


class Estimate(NamedTuple):
    """An estimator's output, both ``(B, T)`` and 0 at padding."""

    advantages: Tensor  # A_t, what the policy loss weighs each token's log-prob by
    returns: Tensor  # the critic's regression targets (GAE); the shaped returns, logged, otherwise


class AdvantageEstimator:
    """The interface: :meth:`estimate`, the settings an estimator is built with, and what the trainer
    must know about it (class attributes). The class's docstring (its first paragraph) is its line in
    ``hfrl list algs``.

    >>> from hfrl.core.estimators import estimator_class
    >>> rloo = estimator_class("rloo")(gamma=1.0)
    >>> x = EstimatorInputs(torch.tensor([1.0, 3.0]), torch.zeros(2, 1), torch.ones(2, 1), torch.tensor([0, 0]))
    >>> rloo.estimate(x).advantages.flatten().tolist()  # R_i minus the other completion's reward
    [-2.0, 2.0]
    """

    #: a value head is built, scored, trained and saved (GAE); False: no critic at all
    needs_critic: ClassVar[bool] = False
    #: a baseline over each prompt's completions: needs num_generations >= 2
    needs_groups: ClassVar[bool] = False
    #: whether the advantages are whitened over the batch: True / False by the estimator's definition,
    #: None as the config's whiten_advantages says (GAE); whiten_scope 'minibatch' applies when whitened
    whitening: ClassVar[bool | None] = False
    #: the advantages are divided by a standard deviation (whitened over the batch, or a group's std), so
    #: they are of order 1 whatever the reward's scale; False: in the reward's units (RLOO, Dr. GRPO),
    #: which an entropy bonus tuned for unit-scale advantages outweighs when rewards are small
    unit_scale: ClassVar[bool] = True
    #: the policy loss's aggregation this estimator's definition includes (Dr. GRPO's constant normaliser,
    #: "seq-mean-token-sum-norm"), used where the config's ``loss_aggregation`` and the loss leave it unset
    loss_aggregation: ClassVar[str | None] = None

    def __init__(
        self,
        gamma: float = 1.0,
        lam: float = 1.0,
        whiten: bool = False,
        reduce: Reduce = None,
        lam_critic: float | None = None,
        lam_alpha: float | None = None,
    ) -> None:
        self.gamma = gamma  # discount
        self.lam = lam  # GAE's lambda (the actor's advantages)
        self.lam_critic = lam if lam_critic is None else lam_critic  # the critic's targets' lambda (VC-PPO, VAPO)
        self.lam_alpha = lam_alpha  # the actor's lambda 1 - 1 / (alpha |y|), per completion (VAPO); None: lam
        self.whitens = whiten if self.whitening is None else self.whitening  # the config's, or the definition's
        self.reduce = reduce  # sums over every process (batch statistics of a distributed rollout)

    def estimate(self, x: EstimatorInputs) -> Estimate:
        raise NotImplementedError

    def shaped_returns(self, x: EstimatorInputs, shaped_scores: Tensor) -> Estimate:
        """The critic-free estimators' last step (OpenRLHF's ``get_cumulative_returns``): the shaped score
        on the last token plus the per-token KL penalty, summed from each token to the end,
        ``G_t = sum_{k >= t} gamma^(k - t) r'_k``; the advantages are ``G`` (whitened over the batch when
        the estimator whitens), the returns ``G``."""
        returns = discounted_returns(add_scores(x.token_rewards, shaped_scores, x.mask), x.mask, self.gamma)
        advantages = whiten(returns, x.mask, reduce=self.reduce) if self.whitens else returns
        return Estimate(advantages, returns)


# ---- shared pieces ---------------------------------------------------------------------------------
def add_scores(token_rewards: Tensor, scores: Tensor, mask: Tensor) -> Tensor:
    """``r_t + [t = T] * score``: each completion's score added on its last completion token.

    >>> add_scores(torch.zeros(2, 3), torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 1, 0], [1, 1, 1]])).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    """
    rewards = token_rewards.clone()
    last = (mask.sum(1) - 1).clamp(min=0).long()  # index of each row's last completion token
    rewards[torch.arange(len(rewards)), last] += scores.to(rewards)
    return rewards


def group_stats(scores: Tensor, group_ids: Tensor, kept: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per completion, over the *kept* completions of its group: their count ``n``, sum and unbiased
    standard deviation (0 for a group of one). A dropped completion (``kept`` 0) counts in none.

    >>> n, total, std = group_stats(torch.tensor([1.0, 3.0, 5.0, 7.0]), torch.tensor([0, 0, 1, 1]), torch.ones(4))
    >>> n.tolist(), total.tolist(), [round(s, 4) for s in std.tolist()]
    ([2.0, 2.0, 2.0, 2.0], [4.0, 4.0, 12.0, 12.0], [1.4142, 1.4142, 1.4142, 1.4142])
    """
    scores, kept = scores.float(), kept.float()
    size = int(group_ids.max()) + 1 if len(group_ids) else 0
    count = torch.zeros(size, device=scores.device).index_add_(0, group_ids, kept)
    total = torch.zeros(size, device=scores.device).index_add_(0, group_ids, scores * kept)
    mean = total / count.clamp(min=1)
    squares = torch.zeros(size, device=scores.device).index_add_(0, group_ids, (scores - mean[group_ids]) ** 2 * kept)
    std = (squares / (count - 1).clamp(min=1)).sqrt()  # Bessel-corrected, as torch.std
    return count[group_ids], total[group_ids], std[group_ids]


__all__ = ["AdvantageEstimator", "Estimate", "EstimatorInputs", "add_scores", "group_stats"]
