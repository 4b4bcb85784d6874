"""``NLPOTrainer``: PPO through NLPO's top-p action mask of a periodically refreshed mask policy.

hfrl train --task numbers --alg nlpo --model tiny

All of NLPO's difference from PPO is its action space (:class:`NLPOActionSpace`, the
:mod:`hfrl.core.action_space` interface the online core calls): generation samples through the mask
policy's top-p mask (:mod:`hfrl.core.masking`), the sets sampled from are stored with the rollout, and the
loss renormalises the policy over them. docs/algorithms.md §3.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from transformers import LogitsProcessor

from hfrl.core.action_space import ActionSpace
from hfrl.core.capture import set_sizes, unpack_sets
from hfrl.core.masking import MaskPolicy, TopPMaskProcessor
from hfrl.trainers.online.collector import rollout_temperature
from hfrl.trainers.online.nlpo_config import NLPOConfig
from hfrl.trainers.online.ppo_trainer import PPOTrainer
from hfrl.trainers.papers import paper

MASK_POLICY_NAME = "mask_policy.safetensors"


class NLPOActionSpace(ActionSpace):
    """NLPO's actions: at each step the tokens of the mask policy's top-p set. The mask policy is
    refreshed from the current policy at the start of a rollout once ``update_every`` iterations have
    passed since the last refresh, so generation masks with the refreshed one (RL4LMs kept masking
    with its initial copy). The loss's action distribution is the policy renormalised over the set
    each token was actually sampled from: the tokens every logits processor left finite (the top-p
    mask, and also top_k, top_p, min_new_tokens' EOS ban...; RL4LMs: "processed logit is finite"),
    recorded by generation, 1 bit per vocabulary entry."""

    records_sets = True
    checkpoint_files = (MASK_POLICY_NAME,)

    def __init__(self, mask_policy: MaskPolicy, update_every: int) -> None:
        self.mask_policy = mask_policy
        self.update_every = update_every
        self.refreshed_at = 0  # iteration of the last refresh
        self.rollout_processors: list[TopPMaskProcessor] = []  # this rollout's, one per generate call

    def before_rollout(self, iteration: int) -> None:
        if iteration - self.refreshed_at >= self.update_every:
            self.mask_policy.refresh()  # from the current policy, used by this rollout's generation
            self.refreshed_at = iteration
        self.rollout_processors = []

    def processors(
        self, query_ids: torch.Tensor, query_mask: torch.Tensor, num_generations: int = 1
    ) -> list[LogitsProcessor]:
        processor = TopPMaskProcessor(self.mask_policy, query_ids, query_mask, num_generations)
        self.rollout_processors.append(processor)
        return [processor]

    def loss_mask(self, action_sets: torch.Tensor | None, vocab: int) -> torch.Tensor | None:
        return None if action_sets is None else unpack_sets(action_sets, vocab)

    def rollout_stats(self, action_sets: torch.Tensor | None, response_mask: torch.Tensor) -> dict[str, float]:
        """``mask/kept_tokens``: mean size of the sets sampled from; ``mask/top_p_tokens``: of the
        mask policy's top-p sets alone."""
        assert action_sets is not None  # records_sets
        sampled = set_sizes(action_sets)[response_mask.bool()].float()
        top_p = [kept for processor in self.rollout_processors for kept in processor.kept]
        return {
            "mask/kept_tokens": sampled.mean().item() if len(sampled) else 0.0,
            "mask/top_p_tokens": torch.cat(top_p).float().mean().item() if top_p else 0.0,
        }

    def state(self) -> dict[str, Any]:
        return {"mask_refreshed_at": self.refreshed_at}

    def load_state(self, state: dict[str, Any]) -> None:
        self.refreshed_at = int(state.get("mask_refreshed_at", 0))

    def save(self, folder: str) -> None:
        from safetensors.torch import save_file

        state = {k: v.detach().contiguous().cpu() for k, v in self.mask_policy.state_dict().items()}
        save_file(_untie(state), os.path.join(folder, MASK_POLICY_NAME))

    def load(self, folder: str) -> None:
        from safetensors.torch import load_file

        self.mask_policy.load_state_dict(load_file(os.path.join(folder, MASK_POLICY_NAME)))


class NLPOTrainer(PPOTrainer):
    """NLPO: PPO over :class:`NLPOActionSpace`. The ratio, the old log-probs and the entropy use the
    policy renormalised over the set each token was sampled from; the KL penalty uses the unmasked
    distribution."""

    algs = {"nlpo": "online: PPO that samples inside the top-p set of a periodically refreshed mask policy (NLPO)."}
    config_class = NLPOConfig
    args: NLPOConfig
    _name = "NLPO"
    _tag_names = ["hfrl", "nlpo"]
    _paper = paper("ramamurthy2023is")

    def _build_action_space(self) -> NLPOActionSpace:
        args: NLPOConfig = self.args
        mask_policy = MaskPolicy(
            self.accelerator.unwrap_model(self.model).policy,
            args.top_mask,
            args.min_tokens_to_keep,
            always_allowed=self.tokenizer.all_special_ids,
            temperature=rollout_temperature(args),  # the collector's (built after the action space)
        ).to(self.accelerator.device)
        return NLPOActionSpace(mask_policy, args.mask_update_every)


def _untie(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
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
