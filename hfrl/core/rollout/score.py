"""Scoring, the phase after generation (:mod:`hfrl.core.rollout`): the policy's log-probs, entropy and
values of every completion token (taken from generation when it captured them) and the reference's
log-probs, one forward per model per batch."""

from __future__ import annotations

from typing import Any, cast

import torch

from hfrl.core.action_space import FULL_VOCABULARY, ActionSpace
from hfrl.core.policies import (
    ActorCritic,
    ReferencePolicy,
    completion_forward,
    grouped_completion_forward,
    tempered,
)
from hfrl.core.rollout.types import Completions, Scores


def action_logprobs(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    action_mask: torch.Tensor | None = None,
    entropy_grad: bool = True,
    with_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``tokens`` and entropies under ``softmax(logits)``, or, with a boolean
    ``action_mask (B, T, V)``, under the masked and renormalised distribution (NLPO).
    The taken token is always allowed, so a log-prob is never -inf. ``entropy_grad=False`` keeps
    the entropy out of the autograd graph (when it is only logged); ``with_entropy=False`` skips
    it (None)."""
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    if action_mask is not None:
        action_mask = action_mask.scatter(-1, tokens.unsqueeze(-1), True)
        logits = logits.masked_fill(~action_mask, torch.finfo(logits.dtype).min)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = entropy_from_logits(logits)
    return selective_log_softmax(logits, tokens), entropy


@torch.no_grad()
def score(
    model: ActorCritic,
    reference: ReferencePolicy | None,
    completions: Completions,
    *,
    batch_size: int,
    temperature: float = 1.0,
    action_space: ActionSpace = FULL_VOCABULARY,
) -> Scores:
    """Log-probs and values under the current policy, log-probs under the reference, in batches of
    ``batch_size`` completions: one forward per model per batch.

    When generation captured the policy's numbers (``completions.captured``, with hidden states when
    there is a critic), only the reference runs; the values are the value head's on the captured
    hidden states (None without a critic).
    Otherwise the policy's forward gives them, its action distribution renormalised over
    ``action_space.loss_mask`` of the stored sets (the full softmax for the whole vocabulary). No
    reference: its log-probs are the policy's.
    """
    captured = completions.captured
    if captured is not None and captured.hidden is None and model.has_critic:
        raise ValueError("score: the capture holds no hidden states for the values; capture with hidden=True")
    policy: list[tuple[Any, ...]] = []
    reference_logprobs: list[torch.Tensor] = []
    for start in range(0, len(completions), batch_size):
        batch = completions[start : start + batch_size]
        if captured is None:
            policy.append(_policy_forward(model, batch, temperature, action_space))
        if reference is not None:
            reference_logprobs.append(_reference_logprobs(reference, batch, temperature))
    if captured is not None:
        logprobs, full, entropy = captured.logprobs, captured.full_logprobs, captured.entropy
        head = model.value_head
        values = head(cast(torch.Tensor, captured.hidden)).float() if head is not None else None
    else:
        logprobs, full, entropy = (torch.cat([part[i] for part in policy]) for i in (0, 1, 3))
        values = torch.cat([part[2] for part in policy]) if model.has_critic else None
    ref = torch.cat(reference_logprobs) if reference is not None else full.clone()
    return Scores(logprobs=logprobs, full_logprobs=full, ref_logprobs=ref, values=values, entropy=entropy)


def _policy_forward(
    model: ActorCritic, batch: Completions, temperature: float, action_space: ActionSpace
) -> tuple[Any, ...]:
    """:func:`score`'s policy forward over one batch: ``(logprobs, full_logprobs, values, entropy)``."""
    from trl.trainer.utils import selective_log_softmax

    logits, values = model(batch.query_ids, batch.query_mask, batch.response_ids, batch.response_mask)
    logits = tempered(logits, temperature)
    mask = action_space.loss_mask(batch.action_sets, logits.shape[-1])
    logprobs, entropy = action_logprobs(logits, batch.response_ids, mask, entropy_grad=False)
    full = logprobs if mask is None else selective_log_softmax(logits, batch.response_ids)
    return logprobs, full, values.float() if values is not None else None, cast(torch.Tensor, entropy)


def _reference_logprobs(reference: ReferencePolicy, batch: Completions, temperature: float) -> torch.Tensor:
    """The reference's log-probs of a batch's completions; a batch of whole groups of completions
    (``num_generations`` > 1) runs each prompt once (:func:`hfrl.core.policies.grouped_completion_forward`)."""
    from trl.trainer.utils import selective_log_softmax

    group = batch.groups.whole() if batch.groups is not None and batch.response_ids.shape[1] > 1 else 1
    with reference.active() as ref:
        if group > 1:
            ids, mask = batch.query_ids[::group], batch.query_mask[::group]
            logits = grouped_completion_forward(ref, ids, mask, batch.response_ids, batch.response_mask, group)
        else:
            logits, _ = completion_forward(
                ref, batch.query_ids, batch.query_mask, batch.response_ids, batch.response_mask
            )
    return selective_log_softmax(tempered(logits, temperature), batch.response_ids)


__all__ = ["action_logprobs", "score"]
