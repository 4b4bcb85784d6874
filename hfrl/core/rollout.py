"""Rollouts for the online algorithms: generation with the KV cache, rewards, batched scoring.

One rollout = ``B / G`` prompts, ``G`` (``num_generations``, 1 by default) sampled completions each,
at most ``T`` new tokens; a prompt's completions are consecutive rows, its *group*, and share its
prompt encoding (:func:`shared_prefill`). Everything is computed in batches: ``generate`` once per
generation batch, each reward function once per rollout, one forward per model (policy + values,
reference) per scoring batch. No token-by-token re-scoring anywhere. The advantages come from an
estimator (:mod:`hfrl.core.estimators`, :func:`assemble`): GAE with the critic's values, or a
critic-free one (then no values at all).

One iteration's data, typed end to end: :func:`generate_completions` returns :class:`Completions`
(with what generation computed per step, :class:`hfrl.core.capture.Captured`),
:func:`hfrl.rewards.combine.compute_rewards` :class:`TaskRewards`, :func:`score` :class:`Scores`,
and :func:`assemble` builds the
:class:`Rollout` from them. The shape of every tensor field of these types, with ``B`` completions,
prompts of ``P`` tokens, completions of ``T``, hidden size ``H`` and vocabulary size ``V``:

    (B, P)               query_ids, query_mask (prompts left-padded for causal models, right for seq2seq)
    (B, T)               response_ids, response_mask, token_mask and every per-token number:
                         logprobs, full_logprobs, ref_logprobs, kl, values, entropy, token_rewards,
                         rewards, advantages, returns (completions right-padded; masked: 0 at padding)
    (B, T, H)            hidden
    (B, T, ceil(V / 8))  action_sets: uint8, 1 bit per vocabulary entry (:func:`hfrl.core.capture.pack_sets`)
    (B,)                 scores; group_ids (long: the prompt each completion answers, 0 .. B/G - 1)

``values`` (and ``hidden``) are None without a critic.

``logprobs`` always means the sampled tokens' log-probs under the *action distribution* (the policy
renormalised over the action space's set, :mod:`hfrl.core.action_space`; the full softmax for PPO, A2C and
TRPO): the ratio's denominator. ``full_logprobs`` are under the full softmax: the KL penalty's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

import torch
from torch import nn
from transformers import PreTrainedModel

from hfrl.core.action_space import FULL_VOCABULARY, ActionSpace
from hfrl.core.advantages import Reduce, explained_variance, masked_mean, masked_var
from hfrl.core.capture import Captured, CaptureSettings, SampledSetRecorder, StepCapture, processor_last
from hfrl.core.estimators.base import AdvantageEstimator, EstimatorInputs, add_scores
from hfrl.core.policies import (
    ActorCritic,
    ReferencePolicy,
    accepts_logits_to_keep,
    base_lm,
    cache_kwarg,
    completion_forward,
    grouped_completion_forward,
    returned_cache,
    tempered,
    trim_padding,
)
from hfrl.utils.trust import code_trusted

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
    group_ids: torch.Tensor | None = None  # the prompt each completion answers (num_generations share one)
    action_sets: torch.Tensor | None = None  # the set each token was sampled from (an action space recording them)
    entropy: torch.Tensor | None = None  # of the action distribution at rollout time (logged)
    token_mask: torch.Tensor | None = None  # bool: the transitions a token minibatch trains on

    def __len__(self) -> int:
        return self.response_ids.shape[0]

    @property
    def train_mask(self) -> torch.Tensor:
        """The completion tokens the loss counts: a token minibatch's selection, else every one."""
        return self.response_mask if self.token_mask is None else self.token_mask

    def __getitem__(self, index: torch.Tensor | slice) -> Rollout:
        """The rows ``index`` of every tensor (a minibatch)."""
        return select_rows(self, index)


@dataclass
class Completions:
    """One sampled completion per prompt, and what generation kept of each step (shapes: the
    module's table)."""

    query_ids: torch.Tensor  # prompt ids
    query_mask: torch.Tensor  # 1 on prompt tokens
    response_ids: torch.Tensor  # completion ids, pad token after the first EOS
    response_mask: torch.Tensor  # 1 on completion tokens up to and including the first EOS
    captured: Captured | None = None  # the policy's numbers computed by generation (capture on)
    action_sets: torch.Tensor | None = None  # the set each step sampled from (an action space recording them)
    group_ids: torch.Tensor | None = None  # the prompt each completion answers (None: one completion per prompt)

    def __len__(self) -> int:
        return self.response_ids.shape[0]

    def __getitem__(self, index: torch.Tensor | slice) -> Completions:
        return select_rows(self, index)


def pad(sequences: Sequence[Sequence[int]], pad_id: int, side: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """Pad lists of ids to ``(ids, mask)`` tensors on ``side``."""
    width = max((len(s) for s in sequences), default=0)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if not len(seq):
            continue
        cols = slice(width - len(seq), width) if side == "left" else slice(0, len(seq))
        ids[row, cols] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    return ids, mask


def completion_mask(response_ids: torch.Tensor, eos_token_id: int | Sequence[int] | None) -> torch.Tensor:
    """1 up to and including the first EOS of each row, 0 after it (all 1 when no EOS)."""
    if eos_token_id is None:
        return torch.ones_like(response_ids)
    eos_ids = torch.as_tensor(eos_token_id, device=response_ids.device).reshape(-1)
    is_eos = torch.isin(response_ids, eos_ids)
    eos_before = is_eos.long().cumsum(1) - is_eos.long()  # EOS tokens strictly before t
    return (eos_before == 0).long()


@torch.no_grad()
def generate_completions(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict,
    pad_token_id: int,
    *,
    batch_size: int | None = None,
    action_space: ActionSpace = FULL_VOCABULARY,
    capture: CaptureSettings | None = None,
    num_generations: int = 1,
    share_prefill: bool = True,
) -> Completions:
    """Sample ``num_generations`` completions per prompt with ``lm.generate`` (KV cache on), in
    batches of ``batch_size`` completions (whole groups), each trimmed of its all-padding prompt
    columns. The completions of a prompt are consecutive rows and share its ``group_ids`` entry
    (the prompt's index); each prompt is encoded once for them (``share_prefill``:
    :func:`shared_prefill`; off: every copy is encoded, as separate prompts would be).

    Each batch samples through ``action_space.processors`` and, when the action space records sets,
    keeps the set each step sampled from (``action_sets``: the tokens whose logit every logits
    processor left finite, :class:`hfrl.core.capture.SampledSetRecorder`; empty after each row's last
    generated token). With ``capture``, also what generation computed (``captured``,
    :class:`hfrl.core.capture.StepCapture`): the sampled tokens' log-probs under ``softmax(logits /
    temperature)`` and under the action distribution (renormalised over the recorded set), that
    distribution's entropy and, with ``capture.hidden``, the last hidden states that predicted them.
    Completions are right-padded with ``pad_token_id``.
    """
    group = num_generations
    prompts = max(1, (batch_size or group * len(query_ids)) // group)  # prompts per generate call
    parts = []
    for start in range(0, len(query_ids), prompts):
        ids, mask = query_ids[start : start + prompts], query_mask[start : start + prompts]
        parts.append(
            _generate_batch(
                lm,
                ids,
                mask,
                generation_kwargs,
                pad_token_id,
                action_space=action_space,
                capture=capture,
                num_generations=group,
                share_prefill=share_prefill,
            )  # fmt: skip
        )
    if group > 1:
        query_ids, query_mask = query_ids.repeat_interleave(group, 0), query_mask.repeat_interleave(group, 0)
    completions = concat(parts, pad_token_id, query_ids, query_mask)
    completions.group_ids = torch.arange(len(query_ids) // group, device=query_ids.device).repeat_interleave(group)
    return completions


def _generate_batch(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict,
    pad_token_id: int,
    *,
    action_space: ActionSpace,
    capture: CaptureSettings | None,
    num_generations: int = 1,
    share_prefill: bool = True,
) -> Completions:
    """One ``generate`` call of :func:`generate_completions`: ``num_generations`` completions of each
    prompt, the prompts encoded once when ``share_prefill`` (:func:`shared_prefill`)."""
    ids, mask = trim_padding(query_ids, query_mask)
    kwargs = {"use_cache": True, "pad_token_id": pad_token_id, **generation_kwargs}
    # generate(custom_generate=...) runs a repo's or folder's code only with the user's own opt-in
    kwargs["trust_remote_code"] = generation_kwargs.get("trust_remote_code", code_trusted())
    if num_generations > 1:
        if share_prefill:
            kwargs.update(shared_prefill(lm, ids, mask, num_generations))
        ids, mask = ids.repeat_interleave(num_generations, 0), mask.repeat_interleave(num_generations, 0)
        query_ids, query_mask = (
            query_ids.repeat_interleave(num_generations, 0),
            query_mask.repeat_interleave(num_generations, 0),
        )
    recorder = SampledSetRecorder() if action_space.records_sets else None
    step = StepCapture(lm, capture.temperature, capture.hidden, recorder) if capture is not None else None
    group = {"num_generations": num_generations} if num_generations > 1 else {}  # (an action space may not take it)
    processors = action_space.processors(ids, mask, **group)
    if processors:  # their own forwards (a second adapter of the captured model) are not steps
        kwargs["logits_processor"] = step.outside_steps(processors) if step is not None else processors
    with contextlib.ExitStack() as stack:
        if recorder is not None:
            stack.enter_context(processor_last(lm, recorder))
        if step is not None:
            stack.enter_context(step)
        stack.enter_context(_without_dropped_mask_warning())
        out = lm.generate(input_ids=ids, attention_mask=mask, **kwargs)  # type: ignore[operator]
    is_seq2seq = bool(getattr(lm.config, "is_encoder_decoder", False))
    response_ids = out[:, 1:] if is_seq2seq else out[:, ids.shape[1] :]  # drop decoder start / prompt
    response_mask = completion_mask(
        response_ids, generation_kwargs.get("eos_token_id", lm.generation_config.eos_token_id)
    )
    return Completions(
        query_ids,
        query_mask,
        response_ids.masked_fill(response_mask == 0, pad_token_id),
        response_mask,
        captured=step.result(response_ids) if step is not None else None,
        action_sets=recorder.sets(response_ids.shape[1]) if recorder is not None else None,
    )


@torch.no_grad()
def shared_prefill(lm: Any, query_ids: torch.Tensor, query_mask: torch.Tensor, num_generations: int) -> dict:
    """``generate`` keyword arguments that hand it each prompt already encoded, once for its
    ``num_generations`` completions: a seq2seq model's encoder outputs, or a causal model's KV cache of
    every prompt token but the last (``generate`` runs the last one, whose logits sample the first
    token), expanded to every completion of the group (``repeat_interleave`` along the batch;
    transformers' ``Cache.batch_repeat_interleave``). Empty (``generate`` encodes every copy) for a
    one-token prompt or a cache that cannot be expanded."""
    model = base_lm(lm)
    if getattr(model.config, "is_encoder_decoder", False):
        encoded = model.get_encoder()(input_ids=query_ids, attention_mask=query_mask, return_dict=True)
        encoded.last_hidden_state = encoded.last_hidden_state.repeat_interleave(num_generations, 0)
        return {"encoder_outputs": encoded}
    if query_ids.shape[1] < 2:
        return {}
    ids, mask = query_ids[:, :-1], query_mask[:, :-1]
    positions = (mask.cumsum(1) - 1).clamp(min=0)  # left padding: positions follow the mask, as in generate
    last_only = {"logits_to_keep": 1} if accepts_logits_to_keep(lm) else {}  # the logits are not used
    out = lm(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **last_only)
    cache = returned_cache(out)
    if not hasattr(cache, "batch_repeat_interleave"):
        return {}
    cache.batch_repeat_interleave(num_generations)
    return {cache_kwarg(lm): cache}


def concat(
    parts: Sequence[Completions], pad_token_id: int, query_ids: torch.Tensor, query_mask: torch.Tensor
) -> Completions:
    """The rows of ``parts`` one after the other, with their prompts ``query_ids``, ``query_mask``
    (padded to one width by the caller): completions right-padded to the widest part, ids with
    ``pad_token_id``, masks, captured numbers and sets (empty) with 0."""
    width = max(part.response_ids.shape[1] for part in parts)

    def cat(tensors: list[torch.Tensor], value: float = 0) -> torch.Tensor:
        return torch.cat([_pad_dim1(t, width, value) for t in tensors], dim=0)

    def optional(tensors: list[torch.Tensor | None]) -> torch.Tensor | None:
        return None if tensors[0] is None else cat(cast(list[torch.Tensor], tensors))

    captured = [part.captured for part in parts if part.captured is not None]
    group_ids, groups = [], 0
    for part in parts:  # each part's groups numbered after the previous parts'
        ids = part.group_ids if part.group_ids is not None else torch.arange(len(part), device=part.response_ids.device)
        group_ids.append(ids + groups)
        groups += int(ids.max()) + 1 if len(ids) else 0
    return Completions(
        query_ids,
        query_mask,
        cat([part.response_ids for part in parts], pad_token_id),
        cat([part.response_mask for part in parts]),
        captured=Captured(
            full_logprobs=cat([c.full_logprobs for c in captured]),
            logprobs=cat([c.logprobs for c in captured]),
            entropy=cat([c.entropy for c in captured]),
            hidden=optional([c.hidden for c in captured]),
        )
        if captured
        else None,
        action_sets=optional([part.action_sets for part in parts]),
        group_ids=torch.cat(group_ids),
    )


class _DroppedMaskFilter(logging.Filter):
    """transformers' ``generate`` drops an all-ones attention mask (no padding: faster), and then the
    model's forward warns "We strongly recommend passing in an `attention_mask`" whenever the latest
    sampled token is the pad id (a random-weight model samples it as an ordinary token). hfrl passes
    every mask and builds completion masks from EOS: nothing for the user to do."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "strongly recommend passing in an `attention_mask`" not in record.getMessage()


@contextlib.contextmanager
def _without_dropped_mask_warning() -> Iterator[None]:
    log = logging.getLogger("transformers.modeling_utils")
    quiet = _DroppedMaskFilter()
    log.addFilter(quiet)
    try:
        yield
    finally:
        log.removeFilter(quiet)


def _pad_dim1(t: torch.Tensor, width: int, value: float) -> torch.Tensor:
    """Right-pad dim 1 of a ``(B, T)`` or ``(B, T, H)`` tensor to ``width``."""
    pad = (0, 0) * (t.dim() - 2) + (0, width - t.shape[1])
    return nn.functional.pad(t, pad, value=value)


class TaskRewards(NamedTuple):
    """What :func:`hfrl.rewards.combine.compute_rewards` returns (shapes: the module's table)."""

    scores: torch.Tensor  # the weighted sum of the sequence-level rewards of each completion
    token_rewards: torch.Tensor  # the weighted sum of the token-level rewards
    means: dict[str, float]  # each reward function's own mean (logged)


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


@dataclass
class Scores:
    """What :func:`score` returns: the policy's and the reference's numbers of every completion token."""

    logprobs: torch.Tensor  # under the action distribution: the rollout's old log-probs
    full_logprobs: torch.Tensor  # under the full softmax: the KL penalty's
    ref_logprobs: torch.Tensor  # the reference's, full softmax
    values: torch.Tensor | None  # V(s_t) (None: no critic)
    entropy: torch.Tensor  # of the action distribution


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

    group = whole_groups(batch.group_ids) if batch.response_ids.shape[1] > 1 else 1
    with reference.active() as ref:
        if group > 1:
            ids, mask = batch.query_ids[::group], batch.query_mask[::group]
            logits = grouped_completion_forward(ref, ids, mask, batch.response_ids, batch.response_mask, group)
        else:
            logits, _ = completion_forward(
                ref, batch.query_ids, batch.query_mask, batch.response_ids, batch.response_mask
            )
    return selective_log_softmax(tempered(logits, temperature), batch.response_ids)


def whole_groups(group_ids: torch.Tensor | None) -> int:
    """The size of the groups when ``group_ids`` is runs of one size, consecutive (a batch of whole
    groups of completions); else 1.

    >>> whole_groups(torch.tensor([3, 3, 4, 4])), whole_groups(torch.tensor([3, 3, 4])), whole_groups(None)
    (2, 1, 1)
    """
    if group_ids is None or len(group_ids) < 2:
        return 1
    size = int((group_ids == group_ids[0]).sum())
    if size < 2 or len(group_ids) % size:
        return 1
    runs = group_ids.view(-1, size)
    same = bool((runs == runs[:, :1]).all()) and len(runs[:, 0].unique()) == len(runs)
    return size if same else 1


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
    group_ids = completions.group_ids
    if group_ids is None:  # one completion per prompt: each its own group
        group_ids = torch.arange(len(completions), device=mask.device)
    advantages, returns = estimator.estimate(EstimatorInputs(task_scores, token_rewards, mask, group_ids, values))
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
        group_ids=group_ids,
        action_sets=completions.action_sets,
        entropy=scores.entropy.float() * mask,
    )


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
