"""The online trainers' saved state: the policy folder, the value head and critic beside it, the
checkpoint's own state (``online_state.json``), resuming from a checkpoint, and loading the best
evaluated checkpoint at the end (transformers' ``load_best_model_at_end``).

A mixin of :class:`~hfrl.trainers.online.online_trainer.OnlineTrainer`; it reads the trainer's
``args``, ``accelerator``, ``model`` (an :class:`~hfrl.core.policies.ActorCritic`), ``tokenizer``,
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from torch import nn

from hfrl.core.models import load_pretrained_weights
from hfrl.core.policies import ActorCritic, is_peft_model

ONLINE_STATE_NAME = "online_state.json"
VALUE_HEAD_NAME = "value_head.safetensors"


class OnlineCheckpointing:
    """``_save``, ``_save_own_state``, ``online_state`` / ``load_online_state``, ``_load_from_checkpoint``
    and ``_load_best_model`` of the online trainers."""

    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        """The policy as a plain transformers (or PEFT adapter) directory, the value head (if any) beside it.

        Under DeepSpeed / FSDP the Trainer passes the gathered ``state_dict`` of the whole wrapper;
        it is split by prefix (``policy.``, ``value_head.``, ``critic.``)."""
        from safetensors.torch import save_file

        trainer: Any = self
        output_dir = str(output_dir or trainer.args.output_dir)
        if not trainer.args.should_save:
            return
        os.makedirs(output_dir, exist_ok=True)
        model: ActorCritic = trainer.accelerator.unwrap_model(trainer.model)
        parts = _split_state_dict(state_dict, ("policy", "value_head", "critic")) if state_dict else {}
        only_trained = {"selected_adapters": [model.policy.active_adapter]} if is_peft_model(model.policy) else {}
        model.policy.save_pretrained(output_dir, state_dict=parts.get("policy"), **only_trained)
        if model.value_head is not None:  # none without a critic
            head = parts.get("value_head") or model.value_head.state_dict()
            save_file({k: v.contiguous() for k, v in head.items()}, os.path.join(output_dir, VALUE_HEAD_NAME))
        if model.critic is not None:
            model.critic.save_pretrained(os.path.join(output_dir, "critic"), state_dict=parts.get("critic"))
        trainer.tokenizer.save_pretrained(output_dir)
        from hfrl.trainers.secret_free_save import save_training_args

        save_training_args(trainer.args, output_dir)  # the pickle never holds a secret

    def _save_own_state(self, folder: str) -> None:
        """``online_state.json`` and the action space's files in the checkpoint (before it is marked
        complete: :mod:`hfrl.trainers.crash_safe`)."""
        trainer: Any = self
        if trainer.args.should_save:
            with open(os.path.join(folder, ONLINE_STATE_NAME), "w") as fh:
                json.dump(self.online_state(), fh, indent=2)
            trainer.action_space.save(folder)

    def online_state(self) -> dict[str, Any]:
        """What a checkpoint needs beyond model, optimizer, scheduler and RNG (subclasses extend)."""
        trainer: Any = self
        return {
            "iteration": trainer.state.global_step // trainer.args.steps_per_iteration,
            "kl_controller": trainer.kl_ctl.state_dict(),
            "advantage_estimator": trainer.args.advantage_estimator,  # a critic (value_head.safetensors) with gae only
            **trainer.entropy_watch.state(),
            **trainer.action_space.state(),
        }

    def load_online_state(self, state: dict[str, Any]) -> None:
        trainer: Any = self
        trainer.kl_ctl.load_state_dict(state["kl_controller"])
        trainer.entropy_watch.load_state(state)
        trainer.action_space.load_state(state)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        trainer: Any = self
        self._load_weights(resume_from_checkpoint, model)
        with open(os.path.join(resume_from_checkpoint, ONLINE_STATE_NAME)) as fh:  # train() checked it is there
            self.load_online_state(json.load(fh))
        trainer.action_space.load(resume_from_checkpoint)

    def _load_best_model(self) -> None:
        """``load_best_model_at_end``: the policy, value head and critic of the best evaluated
        checkpoint (``state.best_model_checkpoint``, by ``metric_for_best_model``) back in the model,
        so that ``save_model`` writes them. The rest of the training state (optimizer, KL
        controller, NLPO's mask policy) is the last iteration's: training is over."""
        from transformers.utils import logging

        trainer: Any = self
        best = trainer.state.best_model_checkpoint
        logging.get_logger(__name__).info(
            f"loading the best evaluated policy from {best} ({trainer.args.metric_for_best_model} = "
            f"{trainer.state.best_metric})"
        )
        self._load_weights(best)

    def _load_weights(self, folder: str, model: nn.Module | None = None) -> None:
        """The policy's weights of a checkpoint ``folder``, with its value head and critic when the model has them."""
        from safetensors.torch import load_file

        trainer: Any = self
        wrapper = cast(ActorCritic, model if model is not None else trainer.model)
        load_pretrained_weights(wrapper.policy, folder)
        if wrapper.value_head is not None:
            head = os.path.join(folder, VALUE_HEAD_NAME)
            if not os.path.isfile(head):
                raise ValueError(
                    f"{folder} holds no value head: a run without a critic wrote it; resume it with "
                    f"its own advantage_estimator, not {trainer.args.advantage_estimator}"
                )
            wrapper.value_head.load_state_dict(load_file(head))
        if wrapper.critic is not None:
            load_pretrained_weights(wrapper.critic, os.path.join(folder, "critic"))


def _split_state_dict(state_dict: dict, prefixes: tuple[str, ...]) -> dict[str, dict]:
    """``{"policy.a": x, "value_head.b": y}`` -> ``{"policy": {"a": x}, "value_head": {"b": y}}``."""
    parts: dict[str, dict] = {}
    for key, value in state_dict.items():
        head, _, rest = key.partition(".")
        if head in prefixes:
            parts.setdefault(head, {})[rest] = value
    return parts
