"""NLPO's action mask (Ramamurthy et al. 2023): the top-p set of a *mask policy*.

The mask policy is a frozen copy of the policy (under PEFT: a second adapter holding a copy of the
trained adapter's weights, not a second base model), refreshed from the current policy every
``mask_update_every`` rollouts. Generation samples through :class:`TopPMaskProcessor`, a logits
processor that runs the mask policy incrementally with its own KV cache (one per ``generate`` call,
built by NLPO's action space: :class:`hfrl.trainers.online.nlpo_trainer.NLPOActionSpace`, which also
holds the refresh schedule and the checkpoint file). What the loss renormalises
over is not this mask alone but the set sampling finally drew from, after every other processor too
(top_k, min_new_tokens...): :class:`hfrl.core.capture.SampledSetRecorder` keeps it from generation, so
the loss runs no mask-policy forward. Unlike RL4LMs (issues #28, #62), generation always masks with
the *current* mask policy: the processor is built from it at every rollout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, cast

import torch
from transformers import LogitsProcessor

from hfrl.core.policies import accepts_logits_to_keep, cache_kwarg, is_peft_model, returned_cache, tempered
from hfrl.core.zero3 import whole_copy, whole_state_dict

MASK_ADAPTER = "nlpo_mask"


def top_p_threshold(
    logits: torch.Tensor, top_p: float, min_tokens_to_keep: int = 1, candidates: int | None = None
) -> torch.Tensor:
    """The smallest logit inside the top-p set, over the last dim: the set is ``logits >= threshold``.

    The set is the smallest group of most probable tokens whose cumulative probability reaches
    ``top_p`` (the token that crosses the threshold included), at least ``min_tokens_to_keep``.
    ``candidates``: look among the ``candidates`` largest logits first (a ``topk`` instead of a
    sort of the vocabulary); rows whose set is not complete within them fall back to the full
    sort, so the result is the same either way.

    >>> top_p_threshold(torch.tensor([0.5, 0.3, 0.15, 0.05]).log(), top_p=0.7).exp()
    tensor(0.3000)
    >>> top_p_threshold(torch.tensor([0.5, 0.3, 0.15, 0.05]).log(), top_p=0.7, candidates=3).exp()
    tensor(0.3000)
    """
    vocab = logits.shape[-1]
    log_z = logits.logsumexp(-1, keepdim=True)
    if candidates is not None and max(candidates, min_tokens_to_keep) < vocab:
        top, _ = logits.topk(max(candidates, min_tokens_to_keep), dim=-1)  # sorted, largest first
        threshold, complete = _threshold_in_prefix(top, log_z, top_p, min_tokens_to_keep)
        if bool(complete.all()):
            return threshold
        rest = ~complete  # rows whose set reaches past the candidates: sort those rows only
        threshold[rest] = top_p_threshold(logits[rest], top_p, min_tokens_to_keep)
        return threshold
    sorted_logits, _ = logits.sort(dim=-1, descending=True)
    return _threshold_in_prefix(sorted_logits, log_z, top_p, min_tokens_to_keep)[0]


def _threshold_in_prefix(
    prefix: torch.Tensor, log_z: torch.Tensor, top_p: float, min_tokens_to_keep: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Threshold from the largest logits in descending order, and whether each row's set ends
    inside them (the last of them is already outside: the mass ranked above it reaches top_p)."""
    probs = (prefix - log_z).exp()
    before = probs.cumsum(-1) - probs  # probability mass of the tokens ranked above each token
    inside = (before < top_p).sum(-1)  # a prefix: `before` grows
    complete = inside < prefix.shape[-1]
    kept = inside.clamp(min=min_tokens_to_keep, max=prefix.shape[-1])
    return prefix.gather(-1, (kept - 1).unsqueeze(-1)).squeeze(-1), complete


def mask_from_threshold(
    logits: torch.Tensor, threshold: torch.Tensor, always_allowed: Sequence[int] | torch.Tensor | None = None
) -> torch.Tensor:
    """``logits >= threshold`` (with a float tolerance, so that a recomputed forward keeps the token at
    the threshold) plus the ``always_allowed`` ids (special tokens)."""
    mask = logits >= threshold.unsqueeze(-1) - 1e-4
    if always_allowed is not None and len(always_allowed):
        ids = torch.as_tensor(always_allowed, device=mask.device)
        ids = ids[ids < mask.shape[-1]]
        mask[..., ids] = True
    return mask


def top_p_mask(
    logits: torch.Tensor,
    top_p: float,
    min_tokens_to_keep: int = 1,
    always_allowed: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """Boolean mask over the last dim: the top-p set (:func:`top_p_threshold`) plus ``always_allowed``
    ids (special tokens).

    >>> top_p_mask(torch.tensor([0.5, 0.3, 0.15, 0.05]).log(), top_p=0.7).tolist()
    [True, True, False, False]
    """
    return mask_from_threshold(logits, top_p_threshold(logits, top_p, min_tokens_to_keep), always_allowed)


class MaskPolicy:
    """The frozen mask policy of NLPO and its top-p action mask."""

    def __init__(
        self,
        policy: Any,  # a PreTrainedModel or a PeftModel
        top_p: float = 0.9,
        min_tokens_to_keep: int = 100,
        always_allowed: Sequence[int] = (),
        temperature: float = 1.0,
    ) -> None:
        self.policy = policy
        self.top_p, self.min_tokens_to_keep = top_p, min_tokens_to_keep
        self.always_allowed = sorted(set(always_allowed))
        self.temperature = temperature
        self.is_peft = is_peft_model(policy)
        self._adapter_layers: list[Any] = []  # PEFT: the adapter layers whose active adapter switches
        if self.is_peft:
            # A second adapter, not a second base model: copies of the adapter weights only.
            policy.add_adapter(MASK_ADAPTER, policy.peft_config[policy.active_adapter])
            self.model: Any = None
            self._adapter_layers = _switchable_adapter_layers(policy)
        else:
            # kept whole on every process, also under ZeRO-3 (only read: the top-p mask, once per token)
            self.model = whole_copy(policy).eval().requires_grad_(False)
        self.refresh()

    # ---- weights ----------------------------------------------------------------------------
    def _adapter_pairs(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(mask-adapter tensor, trained-adapter tensor) pairs."""
        active = self.policy.active_adapter
        params = dict(self.policy.named_parameters())
        for name, param in params.items():
            if f".{MASK_ADAPTER}." in name:
                yield param, params[name.replace(f".{MASK_ADAPTER}.", f".{active}.")]

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the current policy's weights into the mask policy."""
        if self.is_peft:
            for mask_param, param in self._adapter_pairs():
                mask_param.copy_(param)
                mask_param.requires_grad_(False)
        else:
            self.model.load_state_dict(whole_state_dict(self.policy))  # ZeRO-3: gathered (collective)

    def state_dict(self) -> dict[str, torch.Tensor]:
        if self.is_peft:
            return {name: p for name, p in self.policy.named_parameters() if f".{MASK_ADAPTER}." in name}
        return cast(dict[str, torch.Tensor], self.model.state_dict())

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if self.is_peft:
            params = dict(self.policy.named_parameters())
            for name, value in state.items():
                params[name].copy_(value)
        else:
            self.model.load_state_dict(state, strict=False)
            self.model.tie_weights()

    def to(self, device: torch.device) -> MaskPolicy:
        if self.model is not None:
            self.model.to(device)
        return self

    @contextlib.contextmanager
    def active(self) -> Iterator[Any]:
        """The module to call for mask-policy logits (only without gradient: the processor runs under
        inference mode). Under PEFT the mask adapter is made the one each adapter layer applies, on a
        list of the layers kept from the start (their ``active_adapter``): PEFT's ``set_adapter`` walks
        every module of the model and sets every adapter weight's ``requires_grad``, twice per generated
        token (a tenth of NLPO's generation on SmolLM2-135M with LoRA on all its linear layers); which
        weights are trainable does not change. A model with auxiliary adapter modules
        (``modules_to_save``) switches PEFT's way."""
        if not self.is_peft:
            yield self.model
            return
        previous = self.policy.active_adapter
        if self._adapter_layers:  # which adapter each layer applies; trainability is left alone (no gradient here)
            saved = [layer._active_adapter for layer in self._adapter_layers]
            for layer in self._adapter_layers:
                layer._active_adapter = [MASK_ADAPTER]
            try:
                yield self.policy
            finally:
                for layer, active in zip(self._adapter_layers, saved, strict=True):
                    layer._active_adapter = active
            return
        self.policy.set_adapter(MASK_ADAPTER)  # a model with auxiliary adapter modules (modules_to_save): PEFT's way
        try:
            yield self.policy
        finally:
            self.policy.set_adapter(previous)  # also restores which adapter is trainable
            for mask_param, _ in self._adapter_pairs():
                mask_param.requires_grad_(False)


def _switchable_adapter_layers(policy: Any) -> list[Any]:
    """The PEFT adapter layers of ``policy`` when switching each of them switches the model (no
    auxiliary adapter modules such as ``modules_to_save``, which PEFT's ``set_adapter`` also switches,
    and layers that keep their active adapter where PEFT 0.17-0.21 does); else an empty list."""
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils.other import AuxiliaryTrainingWrapper

    modules = list(policy.modules())
    if any(isinstance(m, AuxiliaryTrainingWrapper) for m in modules):
        return []
    layers = [m for m in modules if isinstance(m, BaseTunerLayer)]
    return (
        layers if all("_active_adapter" in vars(layer) or hasattr(layer, "_active_adapter") for layer in layers) else []
    )


class TopPMaskProcessor(LogitsProcessor):
    """Inside ``generate``: set every logit outside the mask policy's top-p set to -inf.

    The mask policy runs incrementally with its own KV cache: the prompt once, then one token per
    step (for seq2seq: the encoder once, then the decoder token by token). With ``num_generations``
    > 1, each run of that many rows is one prompt, encoded once and its cache expanded to the group.
    """

    def __init__(
        self, mask_policy: MaskPolicy, query_ids: torch.Tensor, query_mask: torch.Tensor, num_generations: int = 1
    ) -> None:
        self.mask_policy = mask_policy
        self.query_ids, self.query_mask = query_ids, query_mask
        self.group = num_generations
        self.past: Any = None
        self.encoder_outputs: Any = None
        self.attention_mask = query_mask
        self.thresholds: list[torch.Tensor] = []  # (B,) per generated token: the top-p set's smallest logit
        self.kept: list[torch.Tensor] = []  # (B,) per generated token: allowed tokens (kept on device)
        self.candidates: int | None = None  # where the next step looks for its top-p set (None: sort all)

    @torch.no_grad()
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[0] != self.query_ids.shape[0]:
            raise ValueError("NLPO's action mask supports sampling one sequence per prompt (no beams)")
        policy = self.mask_policy
        # (under a rollout's StepCapture: paused, StepCapture.outside_steps); nothing of it is ever differentiated
        with policy.active() as model, torch.inference_mode():
            logits = tempered(self._next_logits(model, input_ids), policy.temperature)
        threshold = top_p_threshold(logits, policy.top_p, policy.min_tokens_to_keep, self.candidates)
        mask = mask_from_threshold(logits, threshold, policy.always_allowed)[..., : scores.shape[-1]]
        self.thresholds.append(threshold)
        kept = mask.sum(-1)
        self.kept.append(kept)
        # Sets change slowly from one token to the next: look among twice the last step's largest set
        # (a topk) while that is a small part of the vocabulary; a full sort otherwise. Exact either way.
        widest = 2 * int(kept.max())
        self.candidates = max(widest, 256) if 4 * widest < logits.shape[-1] else None
        return cast(torch.FloatTensor, scores.masked_fill(~mask, -float("inf")))

    def _next_logits(self, model: Any, input_ids: torch.Tensor) -> torch.Tensor:
        first = self.past is None
        group = self.group if first and self.group > 1 else 1  # the first step: one row per prompt, then expanded
        if getattr(model.config, "is_encoder_decoder", False):
            step_ids = input_ids if first else input_ids[:, -1:]
            out = model(
                input_ids=None if self.encoder_outputs is not None else self.query_ids[::group],
                encoder_outputs=self.encoder_outputs,
                attention_mask=self.query_mask[::group],
                decoder_input_ids=step_ids[::group],
                use_cache=True,
                **{cache_kwarg(model): self.past},
            )
            if self.encoder_outputs is None:
                self.encoder_outputs = (out.encoder_last_hidden_state.repeat_interleave(group, 0),)
        else:
            if first:  # the prompt, left-padded: positions follow the attention mask
                step_ids, mask = input_ids, self.attention_mask
            else:
                ones = self.attention_mask.new_ones(self.attention_mask.shape[0], 1)
                self.attention_mask = torch.cat([self.attention_mask, ones], dim=1)
                step_ids, mask = input_ids[:, -1:], self.attention_mask
            positions = (mask.cumsum(1) - 1).clamp(min=0)[:, -step_ids.shape[1] :]
            last_only = (
                {"logits_to_keep": 1} if accepts_logits_to_keep(model) else {}
            )  # not the prompt's every position
            out = model(
                input_ids=step_ids[::group],
                attention_mask=mask[::group],
                position_ids=positions[::group],
                use_cache=True,
                **{cache_kwarg(model): self.past},
                **last_only,
            )
        self.past = returned_cache(out)
        if group > 1:
            self.past.batch_repeat_interleave(group)
            return cast(torch.Tensor, out.logits[:, -1].repeat_interleave(group, 0))
        return cast(torch.Tensor, out.logits[:, -1])
