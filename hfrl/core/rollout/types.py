"""The typed data of one online iteration (:mod:`hfrl.core.rollout`): what generation returns
(:class:`Completions`, with its :class:`Groups`), what the rewards and the scoring forward return
(:class:`TaskRewards`, :class:`Scores`) and what the update trains on (:class:`Rollout`). The shape
of every tensor field is in the package's table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

import torch

from hfrl.core.capture import Captured

_Rows = TypeVar("_Rows")


def select_rows(item: _Rows, index: torch.Tensor | slice) -> _Rows:
    """The rows ``index`` of every tensor field of a dataclass (and of its dataclass fields)."""
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(cast(Any, item)):
        value = getattr(item, field.name)
        if isinstance(value, torch.Tensor):
            changes[field.name] = value[index]
        elif dataclasses.is_dataclass(value):
            changes[field.name] = select_rows(value, index)
    return cast(_Rows, dataclasses.replace(cast(Any, item), **changes))


@dataclass
class Groups:
    """Which prompt each completion answers, set once where the completions are sampled
    (:func:`~hfrl.core.rollout.generate.generate_completions`): ``ids`` numbers the prompts, and each
    prompt's ``size`` completions (``num_generations``; 1: one completion per prompt) are consecutive
    rows. A selection of rows (a minibatch) keeps ``size``: :meth:`whole` says whether its rows are
    still whole groups.

    >>> groups = Groups.of(prompts=2, size=2)
    >>> groups.ids.tolist(), groups.whole(), groups[torch.tensor([0, 1, 2])].whole()
    ([0, 0, 1, 1], 2, 1)
    """

    ids: torch.Tensor  # (B,) long: the prompt each completion answers
    size: int = 1  # completions per prompt

    @classmethod
    def of(cls, prompts: int, size: int = 1, device: Any = None) -> Groups:
        """``prompts`` prompts with ``size`` consecutive completions each."""
        return cls(torch.arange(prompts, device=device).repeat_interleave(size), size)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: torch.Tensor | slice) -> Groups:
        return Groups(self.ids[index], self.size)

    def whole(self) -> int:
        """``size`` when these rows are whole groups, each in order (every ``size`` consecutive rows one
        prompt, no prompt twice), so a forward may run each prompt once for its group; else 1."""
        n = self.size
        if n < 2 or not len(self.ids) or len(self.ids) % n:
            return 1
        runs = self.ids.view(-1, n)
        same = bool((runs == runs[:, :1]).all()) and len(runs[:, 0].unique()) == len(runs)
        return n if same else 1


@dataclass
class Rollout:
    """The tensors of one rollout (shapes: the module's table)."""

    query_ids: torch.Tensor  # prompt ids
    query_mask: torch.Tensor  # 1 on prompt tokens
    response_ids: torch.Tensor  # completion ids, right-padded with the pad token
    response_mask: torch.Tensor  # 1 on completion tokens up to and including the first EOS
    logprobs: torch.Tensor  # log pi_old(a_t | s_t) of the sampled tokens, action distribution: the ratio's denominator
    ref_logprobs: torch.Tensor  # log pi_ref(a_t | s_t)
    kl: torch.Tensor  # log pi_old(a_t | s_t) - log pi_ref(a_t | s_t), full distributions
    values: torch.Tensor | None  # V(s_t) at rollout time (None: no critic)
    scores: torch.Tensor  # task reward of each completion (weighted sum of the reward functions)
    rewards: torch.Tensor  # -beta * kl (KL in the reward) + token-level rewards, plus the task reward on the last token
    advantages: torch.Tensor  # the advantage estimator's (GAE: whitened if configured)
    returns: torch.Tensor  # the critic's targets, advantages + values before whitening (GAE); the shaped returns
    groups: Groups | None = None  # the prompt each completion answers (num_generations share one)
    action_sets: torch.Tensor | None = None  # the set each token was sampled from (an action space recording them)
    entropy: torch.Tensor | None = None  # of the action distribution at rollout time (logged)
    token_mask: torch.Tensor | None = None  # bool: the transitions a token minibatch trains on
    critic_only: bool = False  # a minibatch of a critic pass (critic_epochs, the warm-up): the critic alone learns
    is_weights: torch.Tensor | None = None  # vLLM rollouts: min(exp(logprobs - the sampler's), cap), per token

    def __len__(self) -> int:
        return self.response_ids.shape[0]

    @property
    def train_mask(self) -> torch.Tensor:
        """The completion tokens the loss counts: a token minibatch's selection, else every one."""
        return self.response_mask if self.token_mask is None else self.token_mask

    def __getitem__(self, index: torch.Tensor | slice) -> Rollout:
        """The rows ``index`` of every tensor (a minibatch)."""
        return select_rows(self, index)

    def importance_weighted(self) -> Rollout:
        """The rollout as the policy loss reads it: itself, or with ``is_weights`` (vLLM rollouts) each
        token's advantage times its weight, ``w_t A_t``. Every registered policy loss is linear in ``A`` and
        keeps its sign's branch for ``w > 0`` (``min(rho w A, clip(rho) w A) = w min(rho A, clip(rho) A)``), so
        this weights each token's policy-loss term by ``w_t``: TRL's ``per_token_loss * importance_sampling_ratio``.
        The value, entropy and KL terms are not weighted (TRL adds its KL after the weight)."""
        if self.is_weights is None:
            return self
        return dataclasses.replace(self, advantages=self.advantages * self.is_weights)


@dataclass
class Completions:
    """The sampled completions (``num_generations`` per prompt, a prompt's in a row: ``groups`` says which
    prompt each answers) and what generation kept of each step (shapes: the module's table)."""

    query_ids: torch.Tensor  # prompt ids
    query_mask: torch.Tensor  # 1 on prompt tokens
    response_ids: torch.Tensor  # completion ids, pad token after the first EOS
    response_mask: torch.Tensor  # 1 on completion tokens up to and including the first EOS
    captured: Captured | None = None  # the policy's numbers computed by generation (capture on)
    action_sets: torch.Tensor | None = None  # the set each step sampled from (an action space recording them)
    groups: Groups | None = None  # the prompt each completion answers (None: one completion per prompt)
    sampler_logprobs: torch.Tensor | None = None  # vLLM rollouts: the sampler's log-prob of each token (NaN: none)

    def __len__(self) -> int:
        return self.response_ids.shape[0]

    def __getitem__(self, index: torch.Tensor | slice) -> Completions:
        return select_rows(self, index)


class TaskRewards(NamedTuple):
    """What :func:`hfrl.rewards.combine.compute_rewards` returns (shapes: the module's table)."""

    scores: torch.Tensor  # the weighted sum of the sequence-level rewards of each completion
    token_rewards: torch.Tensor  # the weighted sum of the token-level rewards
    means: dict[str, float]  # each reward function's own mean (logged)


@dataclass
class Scores:
    """What :func:`score` returns: the policy's and the reference's numbers of every completion token."""

    logprobs: torch.Tensor  # under the action distribution: the rollout's old log-probs
    full_logprobs: torch.Tensor  # under the full softmax: the KL penalty's
    ref_logprobs: torch.Tensor  # the reference's, full softmax
    values: torch.Tensor | None  # V(s_t) (None: no critic)
    entropy: torch.Tensor  # of the action distribution


__all__ = ["Completions", "Groups", "Rollout", "Scores", "TaskRewards", "select_rows"]
