"""Generation, the first phase of an iteration (:mod:`hfrl.core.rollout`): ``generate`` with the KV
cache, each prompt encoded once for its group, keeping what generation computed of each step
(:class:`hfrl.core.capture.Captured`) and the sets sampled from (:mod:`hfrl.core.action_space`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any, cast

import torch
from torch import nn
from transformers import PreTrainedModel

from hfrl.core.action_space import FULL_VOCABULARY, ActionSpace
from hfrl.core.capture import Captured, CaptureSettings, SampledSetRecorder, StepCapture, processor_last
from hfrl.core.policies import accepts_logits_to_keep, base_lm, cache_kwarg, returned_cache, trim_padding
from hfrl.core.rollout.stop import STOP_KEY, stop_mask, stop_strings
from hfrl.core.rollout.types import Completions, Groups
from hfrl.utils.trust import code_trusted


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
    generation_kwargs: dict[str, Any],
    pad_token_id: int,
    *,
    batch_size: int | None = None,
    action_space: ActionSpace = FULL_VOCABULARY,
    capture: CaptureSettings | None = None,
    num_generations: int = 1,
    share_prefill: bool = True,
    tokenizer: Any = None,
) -> Completions:
    """Sample ``num_generations`` completions per prompt with ``lm.generate`` (KV cache on), in
    batches of ``batch_size`` completions (whole groups), each trimmed of its all-padding prompt
    columns. The completions of a prompt are consecutive rows, its group (``groups``:
    :class:`~hfrl.core.rollout.types.Groups`, set here and nowhere else); each prompt is encoded once
    for them (``share_prefill``: :func:`shared_prefill`; off: every copy is encoded, as separate
    prompts would be).

    Each batch samples through ``action_space.processors`` and, when the action space records sets,
    keeps the set each step sampled from (``action_sets``: the tokens whose logit every logits
    processor left finite, :class:`hfrl.core.capture.SampledSetRecorder`; empty after each row's last
    generated token). With ``capture``, also what generation computed (``captured``,
    :class:`hfrl.core.capture.StepCapture`): the sampled tokens' log-probs under ``softmax(logits /
    temperature)`` and under the action distribution (renormalised over the recorded set), that
    distribution's entropy and, with ``capture.hidden``, the last hidden states that predicted them.
    Completions are right-padded with ``pad_token_id``. A completion ends at its first EOS, or at the
    first of ``generation_kwargs``' ``stop_strings`` in its text (:mod:`hfrl.core.rollout.stop`; they
    need the ``tokenizer``).
    """
    if stop_strings(generation_kwargs) and tokenizer is None:
        raise ValueError(f"generation_kwargs {STOP_KEY} needs the tokenizer: pass tokenizer= to generate_completions")
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
                tokenizer=tokenizer,
            )  # fmt: skip
        )
    if group > 1:
        query_ids, query_mask = query_ids.repeat_interleave(group, 0), query_mask.repeat_interleave(group, 0)
    completions = concat(parts, pad_token_id, query_ids, query_mask)
    completions.groups = Groups.of(len(query_ids) // group, group, device=query_ids.device)
    return completions


def _generate_batch(
    lm: PreTrainedModel,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    generation_kwargs: dict[str, Any],
    pad_token_id: int,
    *,
    action_space: ActionSpace,
    capture: CaptureSettings | None,
    num_generations: int = 1,
    share_prefill: bool = True,
    tokenizer: Any = None,
) -> Completions:
    """One ``generate`` call of :func:`generate_completions`: ``num_generations`` completions of each
    prompt, the prompts encoded once when ``share_prefill`` (:func:`shared_prefill`)."""
    ids, mask = trim_padding(query_ids, query_mask)
    check_positions(lm, ids.shape[1], generation_kwargs.get("max_new_tokens"))
    kwargs = {"use_cache": True, "pad_token_id": pad_token_id, **fit_min_length(lm, ids.shape[1], generation_kwargs)}
    # generate(custom_generate=...) runs a repo's or folder's code only with the user's own opt-in
    kwargs["trust_remote_code"] = generation_kwargs.get("trust_remote_code", code_trusted())
    stops = stop_strings(generation_kwargs)
    if stops:
        kwargs["tokenizer"] = tokenizer  # transformers' StopStringCriteria reads the vocabulary from it
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
    if stops:
        response_mask = response_mask * stop_mask(response_ids, tokenizer, stops)
    return Completions(
        query_ids,
        query_mask,
        response_ids.masked_fill(response_mask == 0, pad_token_id),
        response_mask,
        captured=step.result(response_ids) if step is not None else None,
        action_sets=recorder.sets(response_ids.shape[1]) if recorder is not None else None,
    )


_LOWERED: set[tuple[int, int, bool]] = set()  # (min_length, max_new_tokens, seq2seq) already said


def fit_min_length(lm: Any, prompt_width: int, generation_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``generation_kwargs`` with a ``min_length`` above the longest sequence ``generate`` can make clipped
    to it, said once a process: the decoder start token + ``max_new_tokens`` for a seq2seq model, the
    prompt's ``prompt_width`` + ``max_new_tokens`` for a causal one (its ``min_length`` counts the prompt).
    ``generate`` stops there anyway, warning "Unfeasible length constraints" at every call;
    ``min_new_tokens`` is fitted in the configs (:func:`hfrl.trainers.config_checks.fit_min_new_tokens`)."""
    least, cap = generation_kwargs.get("min_length"), generation_kwargs.get("max_new_tokens")
    if not isinstance(least, int) or not isinstance(cap, int):
        return generation_kwargs
    seq2seq = bool(getattr(lm.config, "is_encoder_decoder", False))
    longest = (1 if seq2seq else prompt_width) + cap
    if least <= longest:
        return generation_kwargs
    if (least, cap, seq2seq) not in _LOWERED:
        _LOWERED.add((least, cap, seq2seq))
        from hfrl.utils.quiet import own_line

        counted = "the decoder start token" if seq2seq else "the prompt"
        with own_line():  # the first rollout's: the training bar is drawn
            logging.getLogger(__name__).warning(
                f"min_length {least} (generation_kwargs) is above {counted} + max_new_tokens {cap} ({longest}): "
                "clipped to it"
            )
    return {**generation_kwargs, "min_length": longest}


def check_positions(lm: Any, prompt_tokens: int, max_new_tokens: int | None) -> None:
    """A one-line ``ValueError`` when a prompt of ``prompt_tokens`` and ``max_new_tokens`` new tokens need
    more positions than ``lm`` has learned embeddings for (GPT-2's ``n_positions``: past it ``generate``
    indexes out of its position table, a 130-line ``IndexError``). Rotary models (a ``rope_*`` setting)
    are not refused: transformers generates past their ``max_position_embeddings``, warning."""
    config = getattr(lm, "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    rotary = any(getattr(config, key, None) is not None for key in ("rope_theta", "rope_scaling", "rope_parameters"))
    if not isinstance(positions, int) or rotary or not max_new_tokens:
        return
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    needed = max_new_tokens + 1 if seq2seq else prompt_tokens + max_new_tokens  # the decoder's start token
    if needed > positions:
        prompt = "" if seq2seq else f" after a prompt of {prompt_tokens} tokens"
        name = getattr(config, "name_or_path", "") or type(lm).__name__
        raise ValueError(
            f"max_new_tokens {max_new_tokens}{prompt} needs {needed} positions, more than the {positions} the model "
            f"{name} has (max_position_embeddings); lower max_new_tokens (hfrl train --max_new_tokens, hfrl chat "
            "--max-new-tokens) or max_prompt_length"
        )


@torch.no_grad()
def shared_prefill(lm: Any, query_ids: torch.Tensor, query_mask: torch.Tensor, num_generations: int) -> dict[str, Any]:
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
    ``pad_token_id``, masks, captured numbers and sets (empty) with 0; each part's groups numbered after
    the previous parts'."""
    width = max(part.response_ids.shape[1] for part in parts)

    def cat(tensors: list[torch.Tensor], value: float = 0) -> torch.Tensor:
        return torch.cat([_pad_dim1(t, width, value) for t in tensors], dim=0)

    def optional(tensors: list[torch.Tensor | None]) -> torch.Tensor | None:
        return None if tensors[0] is None else cat(cast(list[torch.Tensor], tensors))

    captured = [part.captured for part in parts if part.captured is not None]
    every = [part.groups or Groups.of(len(part), device=part.response_ids.device) for part in parts]
    group_ids, numbered = [], 0
    for groups in every:  # each part's groups numbered after the previous parts'
        group_ids.append(groups.ids + numbered)
        numbered += int(groups.ids.max()) + 1 if len(groups) else 0
    sizes = {groups.size for groups in every}
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
        groups=Groups(torch.cat(group_ids), sizes.pop() if len(sizes) == 1 else 1),
        sampler_logprobs=optional([part.sampler_logprobs for part in parts]),
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


__all__ = ["completion_mask", "concat", "generate_completions", "pad", "shared_prefill"]
