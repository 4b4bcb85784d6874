"""What every policy loss shares: the model's outputs on a minibatch, the settings the loss is built
with, and its interface (docs/algorithms.md §2, §4, §15).

A policy loss (:class:`PolicyLoss`) is the actor's term of an online update: from the policy's
log-probs of the minibatch's tokens (with gradients) and the rollout's numbers (old log-probs,
advantages, the training mask) it returns the term and its detached statistics. The value loss, the
entropy bonus and the KL term are added once, by :class:`hfrl.core.losses.UpdateLoss`. A loss is built
with its settings (:class:`LossSettings`), so that its call takes data only.

    python -m pytest tests/unit/test_policy_losses.py
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from torch import Tensor

from hfrl.core.policy_losses.aggregation import aggregate

if TYPE_CHECKING:
    from hfrl.core.rollout import Rollout


class PolicyOutputs(NamedTuple):
    """One forward of the trained model over a minibatch (``(B, T)``): what the losses read."""

    logprobs: Tensor | None  # of the taken tokens under the action distribution (None: the critic alone)
    entropy: Tensor | None  # of the action distribution, only when in the loss (ent_coef)
    values: Tensor | None  # V(s_t) (None: no critic)
    full_logprobs: Tensor | None = None  # of the taken tokens under the full softmax (kl_in_loss only)


@dataclass(frozen=True)
class LossSettings:
    """A policy loss's settings, resolved from the config (``OnlineConfig.loss_settings``).

    >>> LossSettings(cliprange_low=0.2, cliprange_high=0.28).clip_bounds
    (0.8, 1.28)
    """

    cliprange_low: float = 0.2  # the ratio's lower clip, 1 - eps_low
    cliprange_high: float = 0.2  # its upper clip, 1 + eps_high (DAPO's clip-higher: eps_high > eps_low)
    clip_ratio_c: float | None = None  # dual-clip's bound c > 1 on -rho A for negative advantages (Ye et al. 2020)
    loss_aggregation: str = "token-mean"  # how per-token terms become one number (aggregation.AGGREGATIONS)
    max_tokens: int | None = None  # max_new_tokens: seq-mean-token-sum-norm's constant

    @property
    def clip_bounds(self) -> tuple[float, float]:
        return 1.0 - self.cliprange_low, 1.0 + self.cliprange_high


#: the online configs' settings of a policy loss (the union; each loss declares what it ``reads``)
CLIP_SETTINGS = ("cliprange", "cliprange_low", "cliprange_high")
LOSS_SETTINGS = (*CLIP_SETTINGS, "clip_ratio_c", "loss_aggregation")


class PolicyLoss:
    """The interface of a policy loss: ``loss(outputs, batch) -> (term, stats)``, and what the trainer
    must know about it. The class's docstring (its first paragraph) is its line in ``hfrl list algs``."""

    #: a term over each whole completion (GSPO's sequence ratio): minibatches hold whole completions
    #: (``minibatch_unit`` sequences), never tokens drawn across them
    needs_whole_sequences: ClassVar[bool] = False
    #: statistics over a prompt's completions: minibatches hold whole groups
    needs_groups: ClassVar[bool] = False
    #: its value (negated) estimates the policy's improvement, importance-weighted: comparable across
    #: parameters, as TRPO's line search compares it (the clipped ratios, GSPO's, the plain surrogate);
    #: False for a gradient estimator whose value is not (A2C's -A log pi, CISPO's)
    surrogate: ClassVar[bool] = False
    #: the settings a config leaves unset take these (GSPO's tiny clip range); the config's own win
    defaults: ClassVar[dict[str, Any]] = {}
    #: its paper, a key of hfrl/trainers/papers.bib (the model card cites it); None: the trainer's
    paper: ClassVar[str | None] = None
    #: the config's loss settings it reads (of :data:`LOSS_SETTINGS`): a run that sets another is refused
    #: (hfrl.trainers.field_rules.check_policy_loss), and ``hfrl list fields`` says which loss reads which
    reads: ClassVar[tuple[str, ...]] = ("loss_aggregation",)

    def __init__(self, settings: LossSettings | None = None) -> None:
        self.settings = settings or LossSettings()

    def __call__(self, out: PolicyOutputs, batch: Rollout) -> tuple[Tensor, dict[str, Tensor]]:
        raise NotImplementedError

    def aggregate(self, values: Tensor, mask: Tensor) -> Tensor:
        """``values`` ``(B, T)`` over ``mask`` as the settings' ``loss_aggregation`` says."""
        return aggregate(values, mask, self.settings.loss_aggregation, self.settings.max_tokens)


def taken_logprobs(out: PolicyOutputs) -> Tensor:
    """The outputs' log-probs; a loss is only called when the policy was run (a critic-only forward is not)."""
    if out.logprobs is None:
        raise ValueError("a policy loss needs the policy's log-probs: the forward ran the critic alone")
    return out.logprobs


__all__ = ["CLIP_SETTINGS", "LOSS_SETTINGS", "LossSettings", "PolicyLoss", "PolicyOutputs", "taken_logprobs"]
