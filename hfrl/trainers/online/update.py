"""The update of one online iteration: how its rollout becomes the minibatches of its passes, and the rate
the critic's parameters learn at. Functions of the rollout and the run's settings, without a Trainer; the
online trainer (:class:`~hfrl.trainers.online.online_trainer.OnlineTrainer`) calls them, the minibatches
once per iteration and the critic's optimizer groups once per run.

    passes = minibatches(rollout, args, trains_policy=True, has_critic=True, warming_up=False,
                         whole_groups=False, whitens=True, reestimated=lambda r: r)

    python -m pytest tests/trainers/test_critic_training.py tests/trainers/test_minibatches_training.py
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, cast

import torch

from hfrl.core.estimators.base import AdvantageEstimator
from hfrl.core.minibatches import rollout_minibatches
from hfrl.core.policies import ActorCritic
from hfrl.core.rollout import Rollout, reestimate
from hfrl.trainers.online.iteration_state import Pass
from hfrl.trainers.online.online_config import OnlineConfig


def minibatches(
    rollout: Rollout,
    args: OnlineConfig,
    *,
    trains_policy: bool,
    has_critic: bool,
    warming_up: bool,
    whole_groups: bool,
    whitens: bool,
    reestimated: Callable[[Rollout], Rollout],
) -> list[Pass]:
    """Every micro-step's share of the rollout (:func:`hfrl.core.minibatches.rollout_minibatches`), of
    whole groups with ``whole_groups`` (:func:`whole_groups_per_minibatch`).

    First ``critic_epochs`` passes that train the critic alone on the rollout's returns (all the passes,
    during the critic's warm-up, ``warming_up``); then the policy's ``num_ppo_epochs``, made when their
    turn comes, from the advantages estimated again (``reestimated``) with the critic those passes
    trained (SAO's order). ``trains_policy`` off and no critic (TRPO without one): nothing to train in
    minibatches, the policy step was all; the rollout itself for every micro-step. ``whitens``: the
    estimator whitens its advantages (again in each minibatch with ``whiten_scope: minibatch``)."""
    if not (trains_policy or has_critic):
        return [rollout] * args.micro_steps_per_iteration
    split: dict[str, Any] = {
        "minibatches": args.rollout_completions // args.mini_batch_size,
        "micro_batches": args.gradient_accumulation_steps,
        "unit": args.minibatch_unit,
        "whole_groups": whole_groups,
    }
    passes = args.critic_epochs + (args.num_ppo_epochs if warming_up else 0)
    critic = [dataclasses.replace(part, critic_only=True) for part in rollout_minibatches(
        rollout, epochs=passes, **split)] if passes and has_critic else []  # fmt: skip

    def policy() -> list[Rollout]:
        source = reestimated(rollout) if critic else rollout
        whiten_each = whitens and args.whiten_scope == "minibatch"
        return rollout_minibatches(source, epochs=args.num_ppo_epochs, whiten_each=whiten_each, **split)

    if warming_up:
        return list(critic)
    return [*critic, policy] if critic else list(policy())


def reestimated(
    rollout: Rollout, model: ActorCritic, estimator: AdvantageEstimator, *, batch_size: int, accelerator: Any
) -> Rollout:
    """The rollout with advantages from the critic as its own passes left it (one forward of ``model``'s
    critic over the rollout in chunks of ``batch_size``, without gradient, in ``accelerator``'s mixed
    precision), its returns unchanged (:func:`hfrl.core.rollout.reestimate`)."""
    values = []
    with torch.no_grad(), accelerator.autocast():
        for start in range(0, len(rollout), batch_size):
            part = rollout[start : start + batch_size]
            _, predicted = model(part.query_ids, part.query_mask, part.response_ids, part.response_mask,
                                 values_only=True)  # fmt: skip
            values.append(cast(torch.Tensor, predicted).float())
    return reestimate(rollout, torch.cat(values), estimator)


def whole_groups_per_minibatch(args: OnlineConfig, needs_groups: bool, has_critic: bool) -> bool:
    """Minibatches of whole groups: when the policy loss needs them (its ``needs_groups``), or when they
    let the update run each prompt once (no critic, ``num_generations`` > 1, whole completions,
    ``mini_batch_size`` a multiple of it)."""
    group = args.num_generations
    if needs_groups:
        return True
    return group > 1 and not has_critic and args.minibatch_unit == "sequences" and not args.mini_batch_size % group


def critic_learning_rate(args: OnlineConfig) -> float | None:
    """The critic's own rate: ``critic_learning_rate``, else ``critic_learning_rate_ratio`` x
    ``learning_rate``; None: the policy's (the config refuses both set)."""
    if args.critic_learning_rate is not None:
        return args.critic_learning_rate
    if args.critic_learning_rate_ratio is not None:
        return args.critic_learning_rate_ratio * args.learning_rate
    return None


def split_critic_groups(
    optimizer: torch.optim.Optimizer, critic: Iterable[torch.nn.Parameter], rate: float
) -> torch.optim.Optimizer:
    """``optimizer`` with the ``critic``'s parameters (value head, the separate critic's backbone) in
    groups of their own at ``rate``, beside each group they came from (the scheduler scales every group
    alike). Before the optimizer holds any state: nothing has trained yet."""
    ids = {id(p) for p in critic}
    groups: list[dict[str, Any]] = []
    for group in optimizer.param_groups:
        own = [p for p in group["params"] if id(p) not in ids]
        theirs = [p for p in group["params"] if id(p) in ids]
        groups += [{**group, "params": own}] if own else []
        groups += [{**group, "params": theirs, "lr": rate}] if theirs else []
    optimizer.param_groups[:] = groups
    return optimizer


__all__ = ["critic_learning_rate", "minibatches", "reestimated", "split_critic_groups", "whole_groups_per_minibatch"]
