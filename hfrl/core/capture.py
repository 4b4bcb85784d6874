"""Log-probs and last hidden states of the sampled tokens, captured while ``generate`` runs.

Generation already computes, at every step, the logits that sampled the next token and the hidden
state that produced them. Keeping the sampled token's log-prob and the distribution's entropy (two
floats) and that hidden state (``H`` floats) per step spares the rollout a second forward of the
policy over every completion: the log-probs are those of the distribution that actually sampled
(the behaviour policy), and a value head applied to the hidden states gives the values.

Two hooks on the transformers model that ``generate`` calls (the first also asks each forward for
its hidden states, which ``generate`` itself then discards): after each forward, the last
position's log-softmax (kept for one step only: ``(B, V)``) and last hidden state; before the next
forward, its new input token (the one just sampled) picks its log-prob. The last token's
log-prob is picked from the returned sequences.

When the action space records the sets sampled from (:attr:`hfrl.core.action_space.ActionSpace.records_sets`:
NLPO), each step also keeps the sampled token's log-prob and the entropy under the policy
renormalised over that set: ``log p_S(a) = log p(a) - log P(S)``, where ``P(S)`` is the policy's
mass on the set. The set is the one sampling drew from: the tokens whose logit is still finite after
*every* logits processor of ``generate`` (RL4LMs: "processed logit is finite"), which
:class:`SampledSetRecorder`, run after all of them (:func:`processor_last`), keeps 1 bit per token.
A logits processor may run forwards of its own on the captured module (under PEFT, another adapter
of the same base model): the capture is paused while the action space's processors run
(:meth:`StepCapture.outside_steps`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import torch
from transformers import LogitsProcessor

from hfrl.core.policies import base_lm, tempered


@dataclass
class Captured:
    """What generation computed per generated token (shapes: :mod:`hfrl.core.rollout`'s table)."""

    full_logprobs: torch.Tensor  # the sampled tokens' log-probs under softmax(logits / temperature)
    logprobs: torch.Tensor  # the same under the action distribution (renormalised over the set sampled from)
    entropy: torch.Tensor  # of the action distribution
    hidden: torch.Tensor | None = None  # the last hidden states that predicted them (for the value head)


class CaptureSettings(NamedTuple):
    """What a :class:`StepCapture` keeps: log-probs under ``softmax(logits / temperature)``, and the
    last hidden states when ``hidden``."""

    temperature: float = 1.0
    hidden: bool = True


class StepCapture:
    """Context manager around one ``lm.generate`` call (greedy or sampling, one sequence per row).
    ``recorder``: the :class:`SampledSetRecorder` of the same call, whose set of the current step
    (read after every logits processor ran) gives log-probs and entropy under the renormalised
    distribution.

    >>> # with StepCapture(model, temperature=0.7) as cap:
    >>> #     out = model.generate(...)
    >>> # captured = cap.result(out[:, prompt_len:])  # a Captured
    """

    def __init__(
        self, lm: Any, temperature: float = 1.0, hidden: bool = True, recorder: SampledSetRecorder | None = None
    ) -> None:
        self.model = base_lm(lm)  # the module whose forward generate calls (under a PeftModel too)
        self.temperature = temperature
        self.keep_hidden = hidden
        self.recorder = recorder
        self.is_seq2seq = bool(getattr(self.model.config, "is_encoder_decoder", False))
        self._pending: torch.Tensor | None = None  # (B, V) log-softmax of the last step
        self._paused = 0  # > 0: the forwards seen are not generation steps (run by a logits processor)
        self.full_logprobs: list[torch.Tensor] = []  # (B,) per generated token but the last
        self.logprobs: list[torch.Tensor] = []  # (B,) the same under the recorded set (with a recorder)
        self.hidden: list[torch.Tensor] = []  # (B, H) per generated token
        self.entropy: list[torch.Tensor] = []  # (B,) per generated token but the last
        self._handles: list[Any] = []

    def __enter__(self) -> StepCapture:
        self._handles = [
            self.model.register_forward_pre_hook(self._before, with_kwargs=True),
            self.model.register_forward_hook(self._after),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def outside_steps(self, processors: list[LogitsProcessor]) -> list[LogitsProcessor]:
        """``processors`` whose own forwards are not taken for generation steps: a processor may run
        a model sharing the captured module (a second PEFT adapter of the same base model)."""
        return [_OutsideSteps(processor, self) for processor in processors]

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Forwards of the captured module inside are not generation steps."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @torch.no_grad()
    def _before(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        if self._paused:
            return None
        if self.keep_hidden:
            kwargs["output_hidden_states"] = True  # for this forward only: generate keeps nothing
        if self._pending is not None:
            self._pick(args, kwargs)
        return args, kwargs

    def _pick(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        assert self._pending is not None
        ids = kwargs.get("decoder_input_ids" if self.is_seq2seq else "input_ids")
        if ids is None:
            ids = args[0] if args else None
        if ids is None:
            raise RuntimeError("StepCapture: generate passed no input ids to the model's forward")
        self._close(ids[:, -1:])

    def _close(self, tokens: torch.Tensor) -> None:
        """The pending step's sampled ``tokens (B, 1)``: their log-probs and the entropy."""
        logp = self._pending
        assert logp is not None
        self._pending = None
        self.full_logprobs.append(logp.gather(-1, tokens).squeeze(-1))
        if self.recorder is None:
            self.entropy.append(-(logp.exp() * logp).sum(-1))
            return
        allowed = self.recorder.current[..., : logp.shape[-1]].scatter(-1, tokens, True)  # as the loss's mask
        log_mass = logp.masked_fill(~allowed, -float("inf")).logsumexp(-1, keepdim=True)  # log P(S)
        masked = (logp - log_mass).masked_fill(~allowed, 0.0)  # log p_S on S, 0 elsewhere (adds 1 * 0 below)
        self.logprobs.append(masked.gather(-1, tokens).squeeze(-1))
        self.entropy.append(-(masked.exp() * masked).sum(-1))

    @torch.no_grad()
    def _after(self, module: Any, args: tuple[Any, ...], output: Any) -> None:
        if self._paused:
            return
        logits = output.logits[:, -1].float()
        self._pending = tempered(logits, self.temperature).log_softmax(-1)
        if self.keep_hidden:
            states = output.decoder_hidden_states if self.is_seq2seq else output.hidden_states
            if states is None:
                raise RuntimeError(f"StepCapture: {type(module).__name__} returned no hidden states")
            self.hidden.append(states[-1][:, -1])

    def result(self, response_ids: torch.Tensor) -> Captured:
        """What generation computed for the generated ``response_ids (B, T)``."""
        if self._pending is not None:  # the last generated token
            self._close(response_ids[:, -1:])
        width = response_ids.shape[1]
        if len(self.full_logprobs) != width or (self.keep_hidden and len(self.hidden) != width):
            raise RuntimeError(
                f"StepCapture saw {len(self.full_logprobs)} generation steps for {width} generated tokens "
                "(beam search or assisted decoding?): set logprobs_from_generation=False to score with a forward"
            )
        full = torch.stack(self.full_logprobs, dim=1)
        return Captured(
            full_logprobs=full,
            logprobs=torch.stack(self.logprobs, dim=1) if self.recorder is not None else full,
            entropy=torch.stack(self.entropy, dim=1),
            hidden=torch.stack(self.hidden, dim=1) if self.keep_hidden else None,
        )


class _OutsideSteps(LogitsProcessor):
    """A logits processor run with its :class:`StepCapture` paused (:meth:`StepCapture.outside_steps`)."""

    def __init__(self, processor: LogitsProcessor, capture: StepCapture) -> None:
        self.processor, self.capture = processor, capture

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        with self.capture.paused():
            return cast(torch.FloatTensor, self.processor(input_ids, scores))


# ---- the set each step sampled from -------------------------------------------------------------
_BITS = 1 << torch.arange(8, dtype=torch.uint8)  # bit i of a byte holds vocabulary entry 8k + i


def pack_sets(allowed: torch.Tensor) -> torch.Tensor:
    """Boolean sets ``(..., V)`` -> ``(..., ceil(V / 8))`` bytes, 1 bit per vocabulary entry.

    >>> pack_sets(torch.tensor([True, False, True, False, False, False, False, False, True])).tolist()
    [5, 1]
    """
    width = allowed.shape[-1]
    padded = torch.nn.functional.pad(allowed, (0, -width % 8)).to(torch.uint8)
    bits = _BITS.to(allowed.device)
    return (cast(torch.Tensor, padded.unflatten(-1, (-1, 8))) * bits).sum(-1, dtype=torch.uint8)


def unpack_sets(packed: torch.Tensor, width: int) -> torch.Tensor:
    """:func:`pack_sets` undone: ``(..., ceil(V / 8))`` bytes -> boolean ``(..., width)``.

    >>> unpack_sets(torch.tensor([5, 1], dtype=torch.uint8), 9).tolist()
    [True, False, True, False, False, False, False, False, True]
    """
    bits = _BITS.to(packed.device)
    return ((packed.unsqueeze(-1) & bits) != 0).flatten(-2)[..., :width]


def set_sizes(packed: torch.Tensor) -> torch.Tensor:
    """The number of tokens in each packed set ``(..., ceil(V / 8))`` -> ``(...)``.

    >>> set_sizes(torch.tensor([[5, 1], [255, 0]], dtype=torch.uint8)).tolist()
    [3, 8]
    """
    return unpack_sets(packed, 8 * packed.shape[-1]).sum(-1)  # padding bits are 0


class SampledSetRecorder(LogitsProcessor):
    """The last logits processor of a ``generate`` call (installed by :func:`processor_last`): keeps
    each step's set of tokens with a finite processed logit, the set sampling drew from once every
    processor ran (min_new_tokens' EOS ban, NLPO's mask, temperature, top_k, top_p, ...). Returns
    the scores unchanged."""

    def __init__(self) -> None:
        self.current = torch.empty(0, dtype=torch.bool)  # (B, V) the current step's set (read by StepCapture)
        self.steps: list[torch.Tensor] = []  # (B, ceil(V / 8)) packed, per generated token

    @torch.no_grad()
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.current = torch.isfinite(scores)
        self.steps.append(pack_sets(self.current))
        return scores

    def sets(self, width: int) -> torch.Tensor:
        """``(B, width, ceil(V / 8))`` packed sets of the generated positions, empty after the last step."""
        steps = torch.stack(self.steps, dim=1)[:, :width]
        return torch.nn.functional.pad(steps, (0, 0, 0, width - steps.shape[1]))


@contextlib.contextmanager
def processor_last(lm: Any, processor: LogitsProcessor) -> Iterator[None]:
    """Inside, ``lm.generate`` runs ``processor`` after every logits processor it builds. (A processor
    passed to ``generate`` runs before transformers' sampling warpers: temperature, top_k, top_p...)"""
    model = base_lm(lm)  # the module whose generate builds the processors (under a PeftModel too)
    build = getattr(model, "_get_logits_processor", None)
    if build is None:
        raise RuntimeError(f"{type(model).__name__} builds no logits processors to append the action-set recorder to")

    def with_last(*args: Any, **kwargs: Any) -> Any:
        processors = build(*args, **kwargs)
        processors.append(processor)
        return processors

    model._get_logits_processor = with_last
    try:
        yield
    finally:
        del model._get_logits_processor  # the class's own again
