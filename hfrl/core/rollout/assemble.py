"""Assembly, the last phase of collecting a rollout (:mod:`hfrl.core.rollout`): the per-token rewards
(the KL penalty, token-level rewards, the task score on the last token), the estimator's advantages
and returns, one :class:`~hfrl.core.rollout.types.Rollout`; and its statistics for the log."""

from __future__ import annotations

import dataclasses

import torch

from hfrl.core.advantages import Reduce, explained_variance, masked_mean, masked_var
from hfrl.core.estimators.base import AdvantageEstimator, EstimatorInputs, add_scores
from hfrl.core.rollout.types import Completions, Groups, Rollout, Scores, TaskRewards


def assemble(
    completions: Completions,
    scores: Scores,
    rewards: TaskRewards,
    *,
    kl_coef: float,
    estimator: AdvantageEstimator,
    kl_in_reward: bool = True,
) -> Rollout:
    """Per-token rewards ``r_t = -beta * (logp_t - ref_logp_t)`` (full distributions; left out with
    ``kl_in_reward`` off, when the KL is in the loss), plus any token-level rewards and the task score
    on the last completion token; then the ``estimator``'s advantages and returns
    (:mod:`hfrl.core.estimators`, built with its settings: gamma, lambda, whitening, the processes' sum)."""
    response_mask = completions.response_mask
    mask = response_mask.to(scores.full_logprobs.dtype)
    task_scores = rewards.scores.to(scores.full_logprobs.device)
    kl = (scores.full_logprobs - scores.ref_logprobs) * mask
    token_rewards = rewards.token_rewards.to(kl) * mask
    if kl_in_reward:
        token_rewards = -kl_coef * kl + token_rewards
    values = scores.values * mask if scores.values is not None else None
    groups = completions.groups or Groups.of(len(completions), device=mask.device)  # None: each its own group
    advantages, returns = estimator.estimate(EstimatorInputs(task_scores, token_rewards, mask, groups.ids, values))
    return Rollout(
        query_ids=completions.query_ids,
        query_mask=completions.query_mask,
        response_ids=completions.response_ids,
        response_mask=response_mask,
        logprobs=scores.logprobs * mask,
        ref_logprobs=scores.ref_logprobs * mask,
        kl=kl,
        values=values,
        scores=task_scores,
        rewards=add_scores(token_rewards, task_scores, mask),
        advantages=advantages,
        returns=returns,
        groups=groups,
        action_sets=completions.action_sets,
        entropy=scores.entropy.float() * mask,
    )


def reestimate(rollout: Rollout, values: torch.Tensor, estimator: AdvantageEstimator) -> Rollout:
    """``rollout`` with its advantages estimated again from ``values`` (``(B, T)``, the critic's after it
    trained on this rollout: ``critic_epochs``, SAO's order), its rewards unchanged; the returns, the
    critic's targets, stay the rollout's (SAO: fixed targets), as do the values its clipping is around."""
    mask = rollout.response_mask.to(values.dtype)
    token_rewards = rollout.rewards - add_scores(torch.zeros_like(rollout.rewards), rollout.scores, mask)
    groups = rollout.groups or Groups.of(len(rollout), device=mask.device)
    inputs = EstimatorInputs(rollout.scores, token_rewards, mask, groups.ids, values * mask)
    return dataclasses.replace(rollout, advantages=estimator.estimate(inputs).advantages)


def rollout_stats(rollout: Rollout, reduce: Reduce = None) -> dict[str, float]:
    """Statistics of a rollout for logging, over every process's share with ``reduce``: per
    completion (reward, length) or per completion token (KL, values, returns). The critic's
    (explained variance, value mean) only with a critic."""
    mask = rollout.response_mask
    ones = (mask.sum(1) > 0).to(rollout.scores.dtype)  # the completions kept (a dropped reward zeroes its row)
    scores = rollout.scores.float()
    lengths = mask.sum(1).float()
    reward = masked_mean(scores, ones, reduce=reduce)
    entropy = {} if rollout.entropy is None else {"entropy": masked_mean(rollout.entropy, mask, reduce=reduce).item()}
    critic = {}
    if rollout.values is not None:
        critic = {
            "explained_variance": explained_variance(rollout.values, rollout.returns, mask, reduce).item(),
            "value_mean": masked_mean(rollout.values, mask, reduce=reduce).item(),
        }
    return {
        **entropy,  # of the action distribution that sampled (the update's, when in the loss, replaces it)
        "reward": reward.item(),
        "reward_std": masked_var(scores, ones, reduce=reduce).sqrt().item(),
        "kl": masked_mean(rollout.kl, mask, reduce=reduce).item(),  # per-token mean KL(pi || pi_ref) estimate
        "completion_length": masked_mean(lengths, ones, reduce=reduce).item(),
        **critic,
        "return_mean": masked_mean(rollout.returns, mask, reduce=reduce).item(),
        "num_completions": float(ones.sum().item() if reduce is None else reduce(ones.sum()).item()),
    }


__all__ = ["assemble", "reestimate", "rollout_stats"]
