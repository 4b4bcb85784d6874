"""``NLPOTrainer``: PPO through NLPO's top-p action mask of a periodically refreshed mask policy.

hfrl train --task numbers --alg nlpo --model tiny
"""

from __future__ import annotations

import os
from typing import Any

import torch

from hfrl.capture import set_sizes
from hfrl.masking import MaskPolicy
from hfrl.trainers.online.nlpo_config import NLPOConfig
from hfrl.trainers.online.ppo_trainer import PPOTrainer

MASK_POLICY_NAME = "mask_policy.safetensors"


class NLPOTrainer(PPOTrainer):
    """NLPO: generation samples through the mask policy's top-p mask; the ratio, the old log-probs and
    the entropy use the policy renormalised over the set each token was actually sampled from (the
    tokens every logits processor left finite: the top-p mask, and also top_k, top_p, min_new_tokens'
    EOS ban...; RL4LMs: "processed logit is finite"), kept from generation, 1 bit per vocabulary
    entry; the KL penalty uses the unmasked distribution. The mask policy used by generation is the
    refreshed one (RL4LMs kept masking with its initial copy)."""

    config_class = NLPOConfig
    _name = "NLPO"
    _tag_names = ["hfrl", "nlpo"]
    _action_set_from_sampling = True
    _paper = {
        "title": "Is Reinforcement Learning (Not) for Natural Language Processing: Benchmarks, Baselines, "
        "and Building Blocks for Natural Language Policy Optimization",
        "id": "2210.01241",
        "citation": """@inproceedings{ramamurthy2023is,
    title     = {{Is Reinforcement Learning (Not) for Natural Language Processing: Benchmarks, Baselines, and
                 Building Blocks for Natural Language Policy Optimization}},
    author    = {Rajkumar Ramamurthy and Prithviraj Ammanabrolu and Kiant{\\'e} Brantley and Jack Hessel and
                 Rafet Sifa and Christian Bauckhage and Hannaneh Hajishirzi and Yejin Choi},
    booktitle = {The Eleventh International Conference on Learning Representations},
    year      = 2023
}""",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._require_unsharded_policy("copies the policy's weights into its mask policy")
        policy = self.accelerator.unwrap_model(self.model).policy
        self.mask_policy = MaskPolicy(
            policy,
            self.args.top_mask,
            self.args.min_tokens_to_keep,
            always_allowed=self.tokenizer.all_special_ids,
            temperature=self.temperature,
        ).to(self.accelerator.device)
        self._mask_refreshed_at = 0  # iteration of the last refresh
        self._processors: list = []  # this rollout's generation processors, one per generate call

    # ---- the mask in generation, at scoring and in the loss --------------------------------
    def _logits_processor(self):
        def make(query_ids, query_mask):
            processors = self.mask_policy.logits_processor(query_ids, query_mask)
            self._processors.extend(processors)
            return processors

        return make

    def collect_rollout(self, batch):
        iteration = self.state.global_step // self.args.steps_per_iteration
        if iteration - self._mask_refreshed_at >= self.args.mask_update_every:
            self.mask_policy.refresh()  # from the current policy, used by this rollout's generation
            self._mask_refreshed_at = iteration
        self._processors = []
        rollout = super().collect_rollout(batch)
        top_p = [k for p in self._processors for k in p.kept]
        valid = rollout.response_mask.bool()
        sampled = set_sizes(rollout.action_sets)[valid].float()  # type: ignore[arg-type]
        self._iteration["mask/kept_tokens"] = sampled.mean().item() if len(sampled) else 0.0  # sampled from
        self._iteration["mask/top_p_tokens"] = torch.cat(top_p).float().mean().item() if top_p else 0.0
        return rollout

    # ---- checkpoints ------------------------------------------------------------------------
    def online_state(self) -> dict[str, Any]:
        return {**super().online_state(), "mask_refreshed_at": self._mask_refreshed_at}

    def load_online_state(self, state: dict[str, Any]) -> None:
        super().load_online_state(state)
        self._mask_refreshed_at = int(state.get("mask_refreshed_at", 0))

    _own_checkpoint_files = (*PPOTrainer._own_checkpoint_files, MASK_POLICY_NAME)

    def _save_own_state(self, folder: str) -> None:
        super()._save_own_state(folder)
        if self.args.should_save:
            from safetensors.torch import save_file

            state = {k: v.detach().contiguous().cpu() for k, v in self.mask_policy.state_dict().items()}
            save_file(_untie(state), os.path.join(folder, MASK_POLICY_NAME))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        from safetensors.torch import load_file

        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.mask_policy.load_state_dict(load_file(os.path.join(resume_from_checkpoint, MASK_POLICY_NAME)))


def _untie(state: dict) -> dict:
    """safetensors refuses tensors that share memory (tied embeddings): keep the first of each."""
    seen: set[int] = set()
    out = {}
    for key, value in state.items():
        ptr = value.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        out[key] = value
    return out
