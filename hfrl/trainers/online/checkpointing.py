"""The online trainers' saved model: the policy folder, the value head and critic beside it
(:func:`save_policy`), and their weights back from a checkpoint (:func:`load_weights`), for resuming and
for loading the best evaluated checkpoint at the end (transformers' ``load_best_model_at_end``).
The rest of a checkpoint's own state: :mod:`hfrl.trainers.online.online_state`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hfrl.core.models import load_pretrained_weights
from hfrl.core.policies import ActorCritic, is_peft_model
from hfrl.trainers.online.critic_from import VALUE_HEAD_NAME  # the critic's file names, where torch is not imported

if TYPE_CHECKING:
    import torch


def save_policy(
    model: ActorCritic, tokenizer: Any, args: Any, output_dir: str, state_dict: dict[str, torch.Tensor] | None = None
) -> None:
    """The policy as a plain transformers (or PEFT adapter) directory, the value head (if any) beside it,
    the critic's own backbone (``separate_critic``) in ``critic/``, the tokenizer and ``training_args.bin``
    (without secrets). Under DeepSpeed / FSDP the Trainer passes the gathered ``state_dict`` of the whole
    wrapper; it is split by prefix (``policy.``, ``value_head.``, ``critic.``)."""
    from safetensors.torch import save_file

    from hfrl.trainers.secret_free_save import save_training_args

    os.makedirs(output_dir, exist_ok=True)
    parts = _split_state_dict(state_dict, ("policy", "value_head", "critic")) if state_dict else {}
    only_trained = {"selected_adapters": [model.policy.active_adapter]} if is_peft_model(model.policy) else {}
    model.policy.save_pretrained(output_dir, state_dict=parts.get("policy"), **only_trained)
    if model.value_head is not None:  # none without a critic
        head = parts.get("value_head") or model.value_head.state_dict()
        save_file({k: v.contiguous() for k, v in head.items()}, os.path.join(output_dir, VALUE_HEAD_NAME))
    if model.critic is not None:
        model.critic.save_pretrained(os.path.join(output_dir, "critic"), state_dict=parts.get("critic"))
    tokenizer.save_pretrained(output_dir)
    save_training_args(args, output_dir)  # the pickle never holds a secret


def load_weights(model: ActorCritic, folder: str, advantage_estimator: str) -> None:
    """The policy's weights of a checkpoint ``folder``, with its value head and critic when the model
    has them (a run of another ``advantage_estimator`` may have written none: one line)."""
    from safetensors.torch import load_file

    load_pretrained_weights(model.policy, folder)
    if model.value_head is not None:
        head = os.path.join(folder, VALUE_HEAD_NAME)
        if not os.path.isfile(head):
            raise ValueError(
                f"{folder} holds no value head: a run without a critic wrote it; resume it with its own "
                f"advantage_estimator, not {advantage_estimator}"
            )
        model.value_head.load_state_dict(load_file(head))
    if model.critic is not None:
        load_pretrained_weights(model.critic, os.path.join(folder, "critic"))


def _split_state_dict(
    state_dict: dict[str, torch.Tensor], prefixes: tuple[str, ...]
) -> dict[str, dict[str, torch.Tensor]]:
    """``{"policy.a": x, "value_head.b": y}`` -> ``{"policy": {"a": x}, "value_head": {"b": y}}``."""
    parts: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state_dict.items():
        head, _, rest = key.partition(".")
        if head in prefixes:
            parts.setdefault(head, {})[rest] = value
    return parts


__all__ = ["VALUE_HEAD_NAME", "load_weights", "save_policy"]
