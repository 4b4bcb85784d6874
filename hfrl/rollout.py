"""Rollouts for the online algorithms: generation with the KV cache, rewards, batched scoring.

One rollout = ``B`` prompts, one sampled completion each (at most ``T`` new tokens). Everything
is computed in batches: ``generate`` once per generation batch, each reward function once per
rollout, one forward per model (policy + values, reference) per scoring batch. No token-by-token
re-scoring anywhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import torch
from torch import nn
from transformers import PreTrainedModel

from hfrl.advantages import Reduce, explained_variance, gae, masked_mean, masked_var, whiten
from hfrl.capture import Captured, SampledSetRecorder, StepCapture, processor_last, unpack_sets
from hfrl.policies import ActorCritic, ReferencePolicy, completion_forward, tempered, trim_padding


@dataclass
class Rollout:
    """The tensors of one rollout. ``B`` completions, prompts of ``P`` tokens, completions of ``T``."""

    query_ids: torch.Tensor  # (B, P) prompt ids; left-padded for causal models, right-padded for seq2seq
    query_mask: torch.Tensor  # (B, P) 1 on prompt tokens
    response_ids: torch.Tensor  # (B, T) completion ids, right-padded with the pad token
    response_mask: torch.Tensor  # (B, T) 1 on completion tokens up to and including the first EOS
    logprobs: torch.Tensor  # (B, T) log pi_old(a_t | s_t) of the sampled tokens in the action distribution
    #                          (NLPO: renormalised over the set sampled from); the PPO ratio's denominator
    ref_logprobs: torch.Tensor  # (B, T) log pi_ref(a_t | s_t)
    kl: torch.Tensor  # (B, T) log pi_old(a_t | s_t) - log pi_ref(a_t | s_t), unmasked distributions
    values: torch.Tensor  # (B, T) V(s_t) at rollout time
    scores: torch.Tensor  # (B,) task reward of each completion (weighted sum of the reward functions)
    rewards: torch.Tensor  # (B, T) -beta * (logp - ref_logp) + task reward on the last token
    advantages: torch.Tensor  # (B, T) GAE advantages (whitened if configured)
    returns: torch.Tensor  # (B, T) advantages + values (before whitening)
    action_sets: torch.Tensor | None = None  # (B, T, ceil(V/8)) NLPO: the packed set each token was sampled from
    entropy: torch.Tensor | None = None  # (B, T) entropy of the action distribution at rollout time (logged)
    token_mask: torch.Tensor | None = None  # (B, T) bool: the transitions a token minibatch trains on

    def __len__(self) -> int:
        return self.response_ids.shape[0]

    @property
    def train_mask(self) -> torch.Tensor:
        """The completion tokens the loss counts: a token minibatch's selection, else every one."""
        return self.response_mask if self.token_mask is None else self.token_mask

    def __getitem__(self, index: torch.Tensor | slice) -> Rollout:
        """The rows ``index`` of every tensor (a minibatch)."""
        rows: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            rows[f.name] = None if value is None else value[index]
        return Rollout(**rows)


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
def generate(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict,
    pad_token_id: int,
    batch_size: int | None = None,
    logits_processor: Callable[[torch.Tensor, torch.Tensor], list] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample completions with ``lm.generate`` (KV cache on) in batches of ``batch_size`` prompts.

    ``logits_processor(query_ids, query_mask)`` builds the extra logits processors for one batch
    (NLPO's action mask keeps per-batch state). Returns ``(response_ids, response_mask)``,
    ``(B, T)``, right-padded with ``pad_token_id``.
    """
    response_ids, response_mask, *_ = _generate(
        lm, query_ids, query_mask, generation_kwargs, pad_token_id, batch_size, logits_processor
    )
    return response_ids, response_mask


@torch.no_grad()
def generate_and_capture(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict,
    pad_token_id: int,
    batch_size: int | None = None,
    temperature: float = 1.0,
    hidden: bool = True,
    logits_processor: Callable[[torch.Tensor, torch.Tensor], list] | None = None,
    action_sets: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, Captured]:
    """:func:`generate`, also keeping what generation computed anyway (:class:`hfrl.capture.StepCapture`):
    ``(response_ids, response_mask, captured)`` with :class:`hfrl.capture.Captured`'s ``(B, T)``
    tensors: the sampled tokens' log-probs under ``softmax(logits / temperature)``, the last hidden
    states that predicted them (``hidden``), and that distribution's entropy. With ``action_sets``
    (NLPO), also the set each step sampled from (the tokens whose logit every logits processor left
    finite: :class:`hfrl.capture.SampledSetRecorder`), packed ``(B, T, ceil(V / 8))``, the sampled
    tokens' log-probs under the distribution renormalised over that set, and that distribution's
    entropy. Zero at padded positions."""
    response_ids, response_mask, captured = _generate(
        lm,
        query_ids,
        query_mask,
        generation_kwargs,
        pad_token_id,
        batch_size,
        logits_processor,
        (temperature, hidden),
        action_sets,
    )
    assert captured is not None
    return response_ids, response_mask, captured


def _generate(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict,
    pad_token_id: int,
    batch_size: int | None,
    logits_processor: Callable[[torch.Tensor, torch.Tensor], list] | None,
    capture: tuple[float, bool] | None = None,
    action_sets: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, Captured | None]:
    batch_size = batch_size or len(query_ids)
    eos = generation_kwargs.get("eos_token_id", lm.generation_config.eos_token_id)
    is_seq2seq = bool(getattr(lm.config, "is_encoder_decoder", False))
    chunks: list[torch.Tensor] = []
    parts: list[Captured] = []
    for start in range(0, len(query_ids), batch_size):
        ids, mask = trim_padding(query_ids[start : start + batch_size], query_mask[start : start + batch_size])
        kwargs = {"use_cache": True, "pad_token_id": pad_token_id, **generation_kwargs}
        processors = logits_processor(ids, mask) if logits_processor is not None else []
        if processors:
            kwargs["logits_processor"] = processors
        recorder = SampledSetRecorder() if capture is not None and action_sets else None
        action_set = (lambda r=recorder: r.last_allowed) if recorder is not None else None
        recording = processor_last(lm, recorder) if recorder is not None else contextlib.nullcontext()
        cap = StepCapture(lm, *capture, action_set=action_set) if capture is not None else contextlib.nullcontext()
        with recording, cap, _without_dropped_mask_warning():
            out = lm.generate(input_ids=ids, attention_mask=mask, **kwargs)  # type: ignore[operator]
        chunk = out[:, 1:] if is_seq2seq else out[:, ids.shape[1] :]  # drop decoder start / prompt
        chunks.append(chunk)
        if isinstance(cap, StepCapture):
            part = cap.result(chunk)
            parts.append(part._replace(action_sets=recorder.sets(chunk.shape[1])) if recorder is not None else part)
    width = max(c.shape[1] for c in chunks)

    def cat(tensors: list, value: float = 0) -> torch.Tensor:
        return torch.cat([_pad_dim1(t, width, value) for t in tensors], dim=0)

    response_ids = cat(chunks, pad_token_id)
    response_mask = completion_mask(response_ids, eos)
    response_ids = response_ids.masked_fill(response_mask == 0, pad_token_id)
    if capture is None:
        return response_ids, response_mask, None

    def optional(name: str) -> torch.Tensor | None:
        tensors = [getattr(part, name) for part in parts]
        return None if tensors[0] is None else cat(tensors)

    captured = Captured(
        cat([p.logprobs for p in parts]),
        optional("hidden"),
        cat([p.entropy for p in parts]),
        optional("action_logprobs"),
        optional("action_sets"),  # zero bytes (empty sets) after each row's last generated token
    )
    return response_ids, response_mask, captured


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


def reward_name(func: Callable) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


MAX_ABS_REWARD = 1e6  # |reward| beyond this is a bug (an unscaled logit sum, 3.4e38 from a clamped inf)


class RewardError(ValueError):
    """A reward function returned something that is not one finite number per completion."""


def compute_rewards(
    reward_funcs: Sequence[Callable],
    reward_weights: Sequence[float],
    prompts: list,
    completions: list[str],
    response_mask: torch.Tensor,
    columns: dict[str, list],
    max_abs: float | None = MAX_ABS_REWARD,
    drop_invalid: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Call every reward function once on the whole batch (TRL signature) and combine them.

    A reward returns one float per completion (sequence level) or one list of floats per completion
    token (token level). Returns ``(scores (B,), token_rewards (B, T), per-function means)``: the
    weighted sequence-level sum, the weighted token-level sum, and each function's own mean for
    logging. ``None`` entries (a reward that does not apply to a sample) count as 0 in the sum.

    A value that is not a number, NaN, +-inf or beyond ``max_abs`` stops with
    :class:`RewardError` naming the function and the completion; with ``drop_invalid`` it is
    reported (a warning) and the completion gets no reward: its row of ``response_mask`` is zeroed
    in place, so that it takes no part in the update.
    """
    n, width = response_mask.shape
    scores = torch.zeros(n)
    token_rewards = torch.zeros(n, width)
    means: dict[str, float] = {}
    for func, weight in zip(reward_funcs, reward_weights, strict=True):
        name = reward_name(func)
        out = func(prompts=prompts, completions=completions, **columns)
        values, token_level = _reward_values(name, out, n)
        missing = torch.tensor([v is None for v in out]) if not token_level else torch.zeros(n, dtype=torch.bool)
        bad = ~torch.isfinite(values) | (values.abs() > max_abs if max_abs is not None else False)
        bad = (bad.any(1) if token_level else bad) & ~missing
        if bool(bad.any()):
            _invalid(name, values, bad, max_abs, drop_invalid)
            values = values.masked_fill(bad.unsqueeze(1) if token_level else bad, 0.0)
            response_mask[bad] = 0
        if token_level:
            lengths = response_mask.sum(1, keepdim=True)
            values = values[:, :width] * (torch.arange(values.shape[1])[None, :width] < lengths)
            token_rewards[:, : values.shape[1]] += weight * values
            means[name] = float(values.sum(1).mean()) if n else 0.0
            continue
        means[name] = float(values.nanmean()) if n else 0.0
        scores += weight * torch.nan_to_num(values, nan=0.0)  # NaN here: None, "does not apply"
    return scores, token_rewards, means


def _reward_values(name: str, out: Any, n: int) -> tuple[torch.Tensor, bool]:
    """A reward function's output as ``(B,)`` floats (None -> NaN) or, token level, ``(B, T)``
    floats padded with 0; one line naming the function for anything else."""
    if isinstance(out, (str, bytes)) or not hasattr(out, "__len__"):
        raise RewardError(
            f"reward function {name!r} returned {type(out).__name__} {out!r:.40}, not one value per completion "
            f"(a list of {n} floats)"
        )
    out = list(out)
    if len(out) != n:
        raise RewardError(f"reward function {name!r} returned {len(out)} values for {n} completions")
    token_level = bool(out) and isinstance(out[0], (list, tuple))
    if token_level:
        rows = []
        for i, row in enumerate(out):
            if not isinstance(row, (list, tuple)):
                raise RewardError(f"reward function {name!r} mixed a list and a {type(row).__name__} (completion {i})")
            rows.append([_number(name, v, i) for v in row])
        width = max((len(r) for r in rows), default=0)
        return torch.tensor([r + [0.0] * (width - len(r)) for r in rows], dtype=torch.float).reshape(n, width), True
    return torch.tensor([float("nan") if v is None else _number(name, v, i) for i, v in enumerate(out)]), False


def _number(name: str, value: Any, i: int) -> float:
    if isinstance(value, (str, bytes, list, tuple, dict)) or value is None:
        raise RewardError(
            f"reward function {name!r} returned {value!r:.40} ({type(value).__name__}) for completion {i}; a reward "
            "is a number per completion (None where it does not apply)"
        )
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise RewardError(f"reward function {name!r} returned {value!r:.40} for completion {i}: {err}") from err


def _invalid(name: str, values: torch.Tensor, bad: torch.Tensor, max_abs: float | None, drop: bool) -> None:
    """Stop (or, with ``drop``, warn) naming the function, the first bad completion and its value."""
    i = int(bad.nonzero()[0])
    row = values[i].reshape(-1)
    culprit = row[~torch.isfinite(row) | (row.abs() > max_abs if max_abs is not None else False)][0]
    what = str(float(culprit)) if not bool(torch.isfinite(culprit)) else f"{float(culprit):.3g} (|r| > {max_abs:g})"
    more = f" (and {int(bad.sum()) - 1} more)" if int(bad.sum()) > 1 else ""
    if not drop:
        raise RewardError(
            f"reward function {name!r} returned {what} for completion {i}{more}; fix the reward, raise "
            "max_abs_reward, or set invalid_rewards to 'drop' to leave such completions out"
        )
    from transformers.utils import logging

    logging.get_logger(__name__).warning(
        f"reward function {name!r} returned {what} for completion {i}{more}; left out of this rollout"
    )


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


class Scores(NamedTuple):
    """What :func:`score` returns, each ``(B, T)``."""

    logprobs: torch.Tensor  # full distribution (the KL penalty's)
    values: torch.Tensor
    ref_logprobs: torch.Tensor
    action_logprobs: torch.Tensor  # the action distribution's (NLPO: masked), the ratio's denominator
    entropy: torch.Tensor | None  # the action distribution's entropy (None when captured without it)


@torch.no_grad()
def score(
    model: ActorCritic,
    reference: ReferencePolicy | None,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    batch_size: int,
    temperature: float = 1.0,
    action_sets: torch.Tensor | None = None,
    policy_logprobs: torch.Tensor | None = None,
    policy_values: torch.Tensor | None = None,
    policy_entropy: torch.Tensor | None = None,
    policy_action_logprobs: torch.Tensor | None = None,
) -> Scores:
    """Log-probs and values under the current policy, log-probs under the reference: one forward per
    model per batch. Given the policy's ``policy_logprobs``, ``policy_values`` and ``policy_entropy
    (B, T)`` (captured during generation; with an action set, also ``policy_action_logprobs``), only
    the reference runs.

    Returns :class:`Scores` ``(logprobs, values, ref_logprobs, action_logprobs, entropy)``, each
    ``(B, T)``: ``logprobs`` under the full distribution (for the KL penalty), ``action_logprobs``
    and ``entropy`` under the action distribution (renormalised over the packed ``action_sets
    (B, T, ceil(V / 8))`` generation sampled from, when given; else equal to ``logprobs``).
    """
    from trl.trainer.utils import selective_log_softmax

    if policy_logprobs is not None and action_sets is not None:
        raise ValueError(
            "score: with captured policy log-probs, pass the action distribution's as policy_action_logprobs "
            "instead of the action sets"
        )
    logprobs: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    ref_logprobs: list[torch.Tensor] = []
    masked: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    for start in range(0, len(query_ids), batch_size):
        rows = slice(start, start + batch_size)
        args = (query_ids[rows], query_mask[rows], response_ids[rows], response_mask[rows])
        if policy_logprobs is not None and policy_values is not None:
            logprobs.append(policy_logprobs[rows])
            values.append(policy_values[rows].float())
        else:
            logits, value = model(*args)
            logits = tempered(logits, temperature)
            values.append(value.float())
            mask = None
            if action_sets is not None:
                mask = unpack_sets(action_sets[rows], logits.shape[-1])
                logprobs.append(selective_log_softmax(logits, response_ids[rows]))
            action_lp, entropy = action_logprobs(logits, response_ids[rows], mask, entropy_grad=False)
            (masked if mask is not None else logprobs).append(action_lp)
            entropies.append(cast(torch.Tensor, entropy))
        if reference is not None:
            with reference.active() as ref:
                ref_logits, _ = completion_forward(ref, *args)
            ref_logprobs.append(selective_log_softmax(tempered(ref_logits, temperature), response_ids[rows]))
    lp = torch.cat(logprobs)
    ref_lp = torch.cat(ref_logprobs) if ref_logprobs else lp.clone()
    entropy = torch.cat(entropies) if entropies else policy_entropy
    if masked:
        action_lp = torch.cat(masked)
    else:
        action_lp = policy_action_logprobs if policy_action_logprobs is not None else lp.clone()
    return Scores(lp, torch.cat(values), ref_lp, action_lp, entropy)


def assemble(
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    values: torch.Tensor,
    scores: torch.Tensor,
    token_rewards: torch.Tensor,
    kl_coef: float,
    gamma: float,
    lam: float,
    whiten_advantages: bool,
    old_logprobs: torch.Tensor | None = None,
    reduce: Reduce = None,
    entropy: torch.Tensor | None = None,
) -> Rollout:
    """Per-token rewards ``r_t = -beta * (logp_t - ref_logp_t)`` (full distributions), plus the task
    score on the last completion token and any token-level rewards; then GAE and (optionally)
    whitening (over every process's rollout with ``reduce``). ``old_logprobs`` (the action
    distribution's, NLPO) default to ``logprobs``."""
    mask = response_mask.to(logprobs.dtype)
    kl = (logprobs - ref_logprobs) * mask
    rewards = -kl_coef * kl + token_rewards.to(kl) * mask
    last = (response_mask.sum(1) - 1).clamp(min=0)  # index of each row's last completion token
    rewards[torch.arange(len(rewards)), last] += scores.to(rewards)
    values = values * mask
    advantages, returns = gae(rewards, values, mask, gamma, lam)
    if whiten_advantages:
        advantages = whiten(advantages, mask, reduce=reduce)
    return Rollout(
        query_ids,
        query_mask,
        response_ids,
        response_mask,
        (logprobs if old_logprobs is None else old_logprobs) * mask,
        ref_logprobs * mask,
        kl,
        values,
        scores,
        rewards,
        advantages,
        returns,
        entropy=None if entropy is None else entropy.float() * mask,
    )


def rollout_stats(rollout: Rollout, reduce: Reduce = None) -> dict[str, float]:
    """Statistics of a rollout for logging, over every process's share with ``reduce``: per
    completion (reward, length) or per completion token (KL, values, returns)."""
    mask = rollout.response_mask
    ones = (mask.sum(1) > 0).to(rollout.scores.dtype)  # the completions kept (a dropped reward zeroes its row)
    scores = rollout.scores.float()
    lengths = mask.sum(1).float()
    reward = masked_mean(scores, ones, reduce=reduce)
    entropy = {} if rollout.entropy is None else {"entropy": masked_mean(rollout.entropy, mask, reduce=reduce).item()}
    return {
        **entropy,  # of the action distribution that sampled (the update's, when in the loss, replaces it)
        "reward": reward.item(),
        "reward_std": masked_var(scores, ones, reduce=reduce).sqrt().item(),
        "kl": masked_mean(rollout.kl, mask, reduce=reduce).item(),  # per-token mean KL(pi || pi_ref) estimate
        "completion_length": masked_mean(lengths, ones, reduce=reduce).item(),
        "explained_variance": explained_variance(rollout.values, rollout.returns, mask, reduce).item(),
        "value_mean": masked_mean(rollout.values, mask, reduce=reduce).item(),
        "return_mean": masked_mean(rollout.returns, mask, reduce=reduce).item(),
        "num_completions": float(ones.sum().item() if reduce is None else reduce(ones.sum()).item()),
    }
