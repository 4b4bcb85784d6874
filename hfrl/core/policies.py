"""Actor-critic wrappers for causal and seq2seq language models, and reference-model handling.

``ActorCritic`` holds the policy (a ``PreTrainedModel`` or a PEFT model), a value head on the last
hidden state of its backbone (one shared backbone by default; a separate critic backbone as an
option; none at all for the critic-free advantage estimators) and scores a whole batch of
completions in one forward pass. The reference policy is a
frozen copy, or, under a PEFT adapter, the same model with the adapter disabled.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import torch
from torch import nn

from hfrl.core.zero3 import whole_copy

if TYPE_CHECKING:
    from peft import PeftModel


class ValueHead(nn.Module):
    """``Linear(hidden, 1)`` on the last hidden state: ``V(s_t)`` for every position. Zero at first:
    a pretrained model's last hidden states are large (SmolLM2-135M: a default-initialised head gave
    values of std ~1.4 against rewards of std 0.5, explained variance -7), and a random critic's
    noise goes straight into GAE's advantages; from zero the first advantages are the returns."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.summary = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.summary.weight)
        nn.init.zeros_(self.summary.bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.summary(hidden_states.to(self.summary.weight.dtype))).squeeze(-1)


def hidden_size_of(config: Any) -> int:
    for name in ("hidden_size", "n_embd", "d_model"):
        if getattr(config, name, None):
            return int(getattr(config, name))
    raise ValueError(f"cannot find the hidden size in the config of {type(config).__name__}")


def is_peft_model(model: nn.Module) -> TypeGuard[PeftModel]:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency
        return False
    return isinstance(model, PeftModel)


REFERENCE_ADAPTER = "reference"  # the frozen copy of a starting adapter (ReferencePolicy)


def frozen_adapter_copy(policy: Any, name: str = REFERENCE_ADAPTER) -> str:
    """Add to a PEFT model a frozen copy of its active adapter under ``name`` (not active). Only the
    active adapter is saved with the model (``save_pretrained(selected_adapters=...)`` in the trainers)."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    active = policy.active_adapter
    config = copy.deepcopy(policy.peft_config[active])
    config.inference_mode = True
    policy.add_adapter(name, config)
    set_peft_model_state_dict(policy, get_peft_model_state_dict(policy, adapter_name=active), adapter_name=name)
    for key, param in policy.named_parameters():
        if f".{name}." in key or key.endswith(f".{name}"):
            param.requires_grad_(False)
    return name


@contextlib.contextmanager
def adapter_switched(policy: Any, name: str) -> Iterator[None]:
    """Run ``policy`` with its adapter ``name`` active, then the previous one again; which parameters
    require gradients is restored exactly (PEFT's ``set_adapter`` makes the active adapter trainable)."""
    previous = policy.active_adapter
    trainable = {key: p.requires_grad for key, p in policy.named_parameters()}
    policy.set_adapter(name)
    try:
        yield
    finally:
        policy.set_adapter(previous)
        for key, param in policy.named_parameters():
            param.requires_grad_(trainable[key])


def disable_dropout(model: nn.Module) -> None:
    """Dropout off everywhere, so rollout-time and update-time log-probs agree: ``nn.Dropout``
    modules (TRL's helper) and float ``*dropout*`` attributes that attention code passes to
    ``functional.dropout`` directly (T5, Llama, ...)."""
    from trl.trainer.utils import disable_dropout_in_model

    disable_dropout_in_model(model)
    for module in model.modules():
        for name, value in vars(module).items():
            if "dropout" in name and isinstance(value, float):
                setattr(module, name, 0.0)


def completion_forward(
    lm: Any,  # a PreTrainedModel, a PeftModel, or a DDP/DeepSpeed-unwrapped one
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    output_hidden_states: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One forward over prompts + completions; logits (and last hidden states) at the positions that
    predict each completion token.

    Shapes: ``query_* (B, P)``, ``response_* (B, T)`` -> logits ``(B, T, V)``, hidden ``(B, T, H)``.
    Causal: prompts are left-padded, position ids follow the attention mask as in ``generate``.
    Seq2seq: the prompt is the encoder input; the decoder reads ``[start] + response[:-1]``.
    """
    config = lm.config
    query_ids, query_mask = trim_padding(query_ids, query_mask)
    inputs: dict[str, Any]
    if getattr(config, "is_encoder_decoder", False):
        start = config.decoder_start_token_id
        inputs = {
            "input_ids": query_ids,
            "attention_mask": query_mask,
            "decoder_input_ids": torch.cat([torch.full_like(response_ids[:, :1], start), response_ids[:, :-1]], 1),
            "decoder_attention_mask": torch.cat([torch.ones_like(response_mask[:, :1]), response_mask[:, :-1]], 1),
        }
    else:
        attention_mask = torch.cat([query_mask, response_mask], dim=1)
        inputs = {
            "input_ids": torch.cat([query_ids, response_ids], dim=1),
            "attention_mask": attention_mask,
            "position_ids": (attention_mask.cumsum(1) - 1).clamp(min=0),
        }
        if _accepts_logits_to_keep(base_lm(lm).__class__):  # only the completion positions need logits
            inputs["logits_to_keep"] = response_ids.shape[1] + 1
    out = lm(**inputs, output_hidden_states=output_hidden_states, use_cache=False)
    if getattr(config, "is_encoder_decoder", False):
        return out.logits, out.decoder_hidden_states[-1] if output_hidden_states else None
    start, stop = query_ids.shape[1] - 1, inputs["input_ids"].shape[1] - 1  # logits at t predict token t+1
    hidden = out.hidden_states[-1][:, start:stop] if output_hidden_states else None
    return out.logits[:, -(response_ids.shape[1] + 1) : -1], hidden


def grouped_completion_forward(
    lm: Any,
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    group: int,
) -> torch.Tensor:
    """:func:`completion_forward`'s logits for completions in groups of ``group`` that share a prompt,
    each prompt run once, with gradient when it is enabled (it flows back through the expanded
    cache): ``query_* (B / group, P)``, one row per prompt, and ``response_* (B, T)``. A causal model
    runs each prompt with its KV cache kept (the last prompt position's logits predict the first
    token), expands the cache to the group (``Cache.batch_repeat_interleave``) and runs the
    completions on it; a seq2seq model runs its encoder once per prompt. Equal to the plain forward
    up to float rounding."""
    config = lm.config
    query_ids, query_mask = trim_padding(query_ids, query_mask)
    if getattr(config, "is_encoder_decoder", False):
        encoded = base_lm(lm).get_encoder()(input_ids=query_ids, attention_mask=query_mask, return_dict=True)
        encoded.last_hidden_state = encoded.last_hidden_state.repeat_interleave(group, 0)
        start = config.decoder_start_token_id
        out = lm(
            encoder_outputs=encoded,
            attention_mask=query_mask.repeat_interleave(group, 0),
            decoder_input_ids=torch.cat([torch.full_like(response_ids[:, :1], start), response_ids[:, :-1]], 1),
            decoder_attention_mask=torch.cat([torch.ones_like(response_mask[:, :1]), response_mask[:, :-1]], 1),
            use_cache=False,
        )
        return cast(torch.Tensor, out.logits)
    last_only = {"logits_to_keep": 1} if accepts_logits_to_keep(lm) else {}
    positions = (query_mask.cumsum(1) - 1).clamp(min=0)
    prompt = lm(input_ids=query_ids, attention_mask=query_mask, position_ids=positions, use_cache=True, **last_only)
    first = prompt.logits[:, -1:].repeat_interleave(group, 0)  # predicts each completion's first token
    cache = returned_cache(prompt)
    cache.batch_repeat_interleave(group)
    attention = torch.cat([query_mask.repeat_interleave(group, 0), response_mask[:, :-1]], dim=1)
    steps = (attention.cumsum(1) - 1).clamp(min=0)[:, query_ids.shape[1] :]
    rest = lm(
        input_ids=response_ids[:, :-1], attention_mask=attention, position_ids=steps, use_cache=True,
        **{cache_kwarg(lm): cache},
    )  # fmt: skip
    return torch.cat([first, rest.logits], dim=1)


def tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature``, without a vocabulary-sized copy at temperature 1."""
    return logits if temperature == 1.0 else logits / temperature


def trim_padding(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the columns that are padding in every row (a left-padded batch's leading columns, a
    right-padded batch's trailing ones): a batch of short prompts does not pay for the rollout's
    longest.

    >>> trim_padding(torch.tensor([[0, 0, 5], [0, 6, 7]]), torch.tensor([[0, 0, 1], [0, 1, 1]]))[0].tolist()
    [[0, 5], [6, 7]]
    """
    used = mask.any(0).nonzero()
    if len(used) == 0 or (used[0] == 0 and used[-1] == mask.shape[1] - 1):
        return ids, mask
    first, last = int(used[0]), int(used[-1]) + 1
    return ids[:, first:last], mask[:, first:last]


def base_lm(lm: Any) -> Any:
    """The transformers model under a PEFT, DDP, DeepSpeed or FSDP-1 wrapper."""
    lm = getattr(lm, "module", lm)
    return lm.get_base_model() if is_peft_model(lm) else lm


def cache_kwarg(lm: Any) -> str:
    """The keyword a model's ``forward`` and ``generate`` take a KV cache under: ``cache`` (transformers
    5.2x renamed it; ``past_key_values`` warns until its removal) or ``past_key_values``."""
    return _cache_kwarg(base_lm(lm).__class__)


@functools.cache
def _cache_kwarg(cls: Any) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The KV cache a forward returned (``out.cache``, formerly ``out.past_key_values``)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def accepts_logits_to_keep(lm: Any) -> bool:
    """Whether ``lm`` (under any wrapper) computes logits for its last positions only when asked."""
    return _accepts_logits_to_keep(base_lm(lm).__class__)


@functools.cache
def _accepts_logits_to_keep(cls: Any) -> bool:
    """Whether a model class can compute logits for the last positions only (transformers' CausalLMs)."""
    forward = getattr(cls, "forward", None)
    return forward is not None and "logits_to_keep" in inspect.signature(forward).parameters


def freeze_attention(model: nn.Module) -> int:
    """SAO's frozen-attention critic (arXiv 2607.07508): every attention module's parameters stop
    learning (``requires_grad`` off), the MLPs, norms, embeddings and the value head still learn.
    Attention modules are found by class name (``GPT2Attention``, ``LlamaAttention``, ``T5Attention``...).
    Returns how many parameters were frozen; a model with no attention module is an error (the
    setting would do nothing)."""
    frozen = 0
    for module in model.modules():
        if type(module).__name__.endswith("Attention"):
            for parameter in module.parameters():
                if parameter.requires_grad:
                    parameter.requires_grad_(False)
                    frozen += parameter.numel()
    if not frozen:
        raise ValueError(
            f"critic_freeze_attention: found no attention module (a class named *Attention) in {type(model).__name__}"
        )
    return frozen


class ActorCritic(nn.Module):
    """Policy LM + value head. ``forward`` returns completion logits ``(B, T, V)`` and values ``(B, T)``
    (None with ``critic=False``: no value head is built, and no hidden states are asked for)."""

    def __init__(self, policy: Any, separate_critic: bool = False, critic: bool = True) -> None:
        super().__init__()
        if separate_critic and not critic:
            raise ValueError("separate_critic needs a critic")
        self.policy = policy
        # A separate critic is a copy of the initial backbone (RL4LMs' layout; twice the memory).
        self.critic = whole_copy(self.base_model) if separate_critic else None
        self.value_head = ValueHead(hidden_size_of(self.config)) if critic else None

    @property
    def has_critic(self) -> bool:
        return self.value_head is not None

    def critic_modules(self) -> nn.ModuleList:
        """The modules the critic owns: the value head, the critic backbone when separate (none: no critic)."""
        return nn.ModuleList([m for m in (self.value_head, self.critic) if m is not None])

    @property
    def config(self) -> Any:
        return self.policy.config

    @property
    def base_model(self) -> Any:
        """The plain transformers model under any PEFT wrapper."""
        return self.policy.get_base_model() if is_peft_model(self.policy) else self.policy

    @property
    def is_encoder_decoder(self) -> bool:
        return bool(getattr(self.config, "is_encoder_decoder", False))

    # The Trainer and TRL's unwrap helper toggle gradient checkpointing on the model they hold.
    @property
    def is_gradient_checkpointing(self) -> bool:
        base = self.base_model
        for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # transformers 5 renamed it
            if hasattr(type(base), name):
                return bool(getattr(base, name))
        return False

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict[str, Any] | None = None) -> None:
        lm: Any
        for lm in filter(None, (self.policy, self.critic)):
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self) -> None:
        for lm in filter(None, (self.policy, self.critic)):
            lm.gradient_checkpointing_disable()

    def forward(
        self,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        response_ids: torch.Tensor,
        response_mask: torch.Tensor,
        values_only: bool = False,
        group: int = 1,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``values_only``: the critic alone (TRPO's critic step); a shared backbone then runs
        without gradient, so only the value head learns. ``group`` > 1: the rows are whole groups of
        that many completions of one prompt, and without a critic each prompt runs once
        (:func:`grouped_completion_forward`; not under gradient checkpointing, which keeps no cache)."""
        if values_only:
            if self.value_head is None:
                raise ValueError("values_only: this model has no critic")
            lm = self.critic if self.critic is not None else self.policy
            with torch.set_grad_enabled(self.critic is not None and torch.is_grad_enabled()):
                _, hidden = completion_forward(
                    lm, query_ids, query_mask, response_ids, response_mask, output_hidden_states=True
                )
            return None, self.value_head(hidden)
        if group > 1 and self.value_head is None and not self.is_gradient_checkpointing:
            ids, mask = query_ids[::group], query_mask[::group]
            return grouped_completion_forward(self.policy, ids, mask, response_ids, response_mask, group), None
        shared = self.critic is None and self.value_head is not None
        logits, hidden = completion_forward(
            self.policy, query_ids, query_mask, response_ids, response_mask, output_hidden_states=shared
        )
        if self.value_head is None:
            return logits, None
        if self.critic is not None:
            _, hidden = completion_forward(
                self.critic, query_ids, query_mask, response_ids, response_mask, output_hidden_states=True
            )
        return logits, self.value_head(hidden)


class ReferencePolicy:
    """The frozen reference policy pi_ref: a copy of the initial policy, a given model, or, under a
    PEFT adapter, the policy's own weights (no second copy of the base): with a fresh adapter
    (``adapter_is_start`` false) the policy with its adapter disabled, which is the starting model; when
    the policy started from a trained adapter (an SFT adapter trained further, ``adapter_is_start``),
    a frozen copy of that adapter, loaded beside it as the PEFT adapter ``"reference"`` and switched
    on for the reference's forward passes (LoL-RL's PPO loads the SFT adapter twice for this)."""

    def __init__(self, policy: Any, ref_model: Any = None, adapter_is_start: bool = False) -> None:
        self._policy = policy
        if ref_model is None and not is_peft_model(policy):
            ref_model = whole_copy(policy)  # ZeRO-3: from the gathered weights (hfrl.core.zero3)
        self.model = ref_model
        if ref_model is not None:
            ref_model.eval().requires_grad_(False)
        self.adapter = frozen_adapter_copy(policy) if ref_model is None and adapter_is_start else None

    @contextlib.contextmanager
    def active(self) -> Iterator[nn.Module]:
        """Yields the module to call for reference log-probs."""
        if self.model is not None:
            yield self.model
        elif self.adapter is not None:
            with adapter_switched(self._policy, self.adapter):
                yield self._policy
        else:
            with self._policy.disable_adapter():
                yield self._policy

    def prepare(self, accelerator: Any) -> ReferencePolicy:
        """Place a separate reference model as TRL does for its own: sharded for inference under
        DeepSpeed ZeRO-3 (a stage-0 engine under ZeRO-1/2) or FSDP, else moved to the device.
        Under PEFT there is nothing to place (the policy's base weights are the reference)."""
        if self.model is None:
            return self
        state = accelerator.state
        if getattr(state, "deepspeed_plugin", None) is not None:
            from trl.models.utils import prepare_deepspeed

            self.model = prepare_deepspeed(self.model, accelerator)
        elif getattr(state, "fsdp_plugin", None) is not None:
            from trl.models.utils import prepare_fsdp

            self.model = prepare_fsdp(self.model, accelerator)
        else:
            self.model.to(accelerator.device)
        return self
