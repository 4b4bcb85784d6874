"""A LoRA policy's rollouts sampled with the adapter merged into its base weights (``merge_lora_for_rollouts``).

An unmerged LoRA layer runs its base linear and then the adapter's two small matmuls on every
forward, once per generated token: on SmolLM2-135M with r 16 on every linear layer that is most of
generation's time (``benchmarks/bench_lora_merge.py``). Merged (PEFT's ``merge_adapter``), each layer
is one linear. :func:`merged_for_rollout` merges for the rollout's ``generate`` and restores the base
weights bit for bit after, through the vLLM sync's helper
(:func:`hfrl.trainers.online.vllm_cpu.merged_weights`: ``unmerge_adapter``, then each merged weight copied
back from a snapshot, since ``W + BA - BA`` is not ``W`` in floating point). The adapter's own weights
are only read.

The merged model's logits equal the unmerged one's only up to rounding, so the collector merges only
for a rollout that keeps no log-probs from generation (``logprobs_from_generation`` false, or a separate
critic): its scoring forward computes them, and the values, with the adapter unmerged, so the PPO ratio
starts from the policy being trained. With generation's log-probs kept (the default) the rollout stays
unmerged: trading them for a scoring forward lost on the CPU (SmolLM2-135M, 16 x 48 tokens, one thread:
merged generation 1.28-1.46x the tokens/s, but the rollout with its scoring forward 1.07-1.25x slower;
where that forward runs anyway, merged generate + merge 1.17-1.29x faster: ``benchmarks/RESULTS.md``). On
a GPU, where generation is bound by kernel launches, set ``logprobs_from_generation: false`` to merge
(``benchmarks/gpu_check.py`` compares the two).

:func:`merge_refusal` says when a rollout is sampled unmerged: no PEFT adapter, a prompt-learning
adapter (nothing to merge), a second adapter (NLPO's mask policy shares the base weights), a quantized
base (merging rounds into 4/8-bit weights) or weights sharded by ZeRO-3 / FSDP.

    python -m pytest tests/trainers/test_lora_rollouts.py -q
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hfrl.core.policies import is_peft_model


def merge_refusal(policy: Any, sharded: bool = False) -> str | None:
    """Why ``policy``'s rollouts cannot be sampled merged (one phrase), or None when they can.
    ``sharded``: the weights are partitioned across processes (ZeRO-3, FSDP)."""
    if not is_peft_model(policy):
        return "no PEFT adapter"
    if len(policy.peft_config) != 1:
        return "more than one adapter (NLPO's mask policy shares the base weights)"
    if policy.peft_config[policy.active_adapter].is_prompt_learning:
        return "a prompt-learning adapter has no weights to merge"
    base = policy.get_base_model()
    if getattr(base, "hf_quantizer", None) is not None or getattr(base, "is_quantized", False):
        return "a quantized base (merging would round into its 4/8-bit weights)"
    if sharded:
        return "weights sharded by ZeRO-3 / FSDP"
    return None


@contextlib.contextmanager
def merged_for_rollout(policy: Any, merge: bool = True) -> Iterator[None]:
    """``policy`` with its LoRA adapter merged inside (``merge`` and no :func:`merge_refusal`), its base
    weights bit for bit what they were after (the adapter's untouched)."""
    if not merge or merge_refusal(policy) is not None:
        yield
        return
    from hfrl.trainers.online.vllm_cpu import merged_weights

    with merged_weights(policy):
        yield


__all__ = ["merge_refusal", "merged_for_rollout"]
