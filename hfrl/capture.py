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
"""

from __future__ import annotations

from typing import Any

import torch

from hfrl.policies import base_lm, tempered


class StepCapture:
    """Context manager around one ``lm.generate`` call (greedy or sampling, one sequence per row).

    >>> # with StepCapture(model, temperature=0.7) as cap:
    >>> #     out = model.generate(...)
    >>> # logprobs, hidden, entropy = cap.result(out[:, prompt_len:])  # (B, T), (B, T, H), (B, T)
    """

    def __init__(self, lm: Any, temperature: float = 1.0, hidden: bool = True) -> None:
        self.model = base_lm(lm)  # the module whose forward generate calls (under a PeftModel too)
        self.temperature = temperature
        self.keep_hidden = hidden
        self.is_seq2seq = bool(getattr(self.model.config, "is_encoder_decoder", False))
        self._pending: torch.Tensor | None = None  # (B, V) log-softmax of the last step
        self.logprobs: list[torch.Tensor] = []  # (B,) per generated token but the last
        self.hidden: list[torch.Tensor] = []  # (B, H) per generated token
        self.entropy: list[torch.Tensor] = []  # (B,) per generated token
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

    @torch.no_grad()
    def _before(self, module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if self.keep_hidden:
            kwargs["output_hidden_states"] = True  # for this forward only: generate keeps nothing
        if self._pending is not None:
            self._pick(args, kwargs)
        return args, kwargs

    def _pick(self, args: tuple, kwargs: dict) -> None:
        assert self._pending is not None
        ids = kwargs.get("decoder_input_ids" if self.is_seq2seq else "input_ids")
        if ids is None:
            ids = args[0] if args else None
        if ids is None:
            raise RuntimeError("StepCapture: generate passed no input ids to the model's forward")
        self.logprobs.append(self._pending.gather(-1, ids[:, -1:]).squeeze(-1))
        self._pending = None

    @torch.no_grad()
    def _after(self, module: Any, args: tuple, output: Any) -> None:
        logits = output.logits[:, -1].float()
        self._pending = tempered(logits, self.temperature).log_softmax(-1)
        self.entropy.append(-(self._pending.exp() * self._pending).sum(-1))
        if self.keep_hidden:
            states = output.decoder_hidden_states if self.is_seq2seq else output.hidden_states
            if states is None:
                raise RuntimeError(f"StepCapture: {type(module).__name__} returned no hidden states")
            self.hidden.append(states[-1][:, -1])

    def result(self, response_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``(logprobs (B, T), hidden (B, T, H) or None, entropy (B, T))`` for the generated
        ``response_ids (B, T)``."""
        if self._pending is not None:  # the last generated token
            self.logprobs.append(self._pending.gather(-1, response_ids[:, -1:]).squeeze(-1))
            self._pending = None
        width = response_ids.shape[1]
        if len(self.logprobs) != width or (self.keep_hidden and len(self.hidden) != width):
            raise RuntimeError(
                f"StepCapture saw {len(self.logprobs)} generation steps for {width} generated tokens "
                "(beam search or assisted decoding?): set logprobs_from_generation=False to score with a forward"
            )
        logprobs = torch.stack(self.logprobs, dim=1)
        hidden = torch.stack(self.hidden, dim=1) if self.keep_hidden else None
        return logprobs, hidden, torch.stack(self.entropy, dim=1)
