"""Does one online iteration scale with its rollout? PPO's update time per sample at growing rollouts.

With the built-in tiny model, fixed minibatches (16 completions, 4 epochs: ``rollout / 4``
micro-steps per iteration), the update phase (``time/update``: every minibatch's forward, backward
and optimizer step, plus whatever the dataloader does between micro-steps) is divided by the
rollout size. Flat is the goal: a cost per micro-step that grows with the rollout (re-fetching
every prompt of the rollout at every micro-step) shows up as a rising line. Each size measures at
least ``--samples`` completions (small rollouts run more iterations) after one warm-up iteration,
and reports the median iteration: other processes on a shared machine only ever add time.

    OMP_NUM_THREADS=1 python benchmarks/bench_rollout_scale.py --rollouts 64 256 1024 2048 4096 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch
from datasets import Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_online import length_reward  # noqa: E402


def run(rollout: int, new_tokens: int, iterations: int, out: str) -> dict:
    """PPO for ``iterations + 1`` iterations (the first is warm-up); per-phase medians of the others."""
    from hfrl import PPOConfig, PPOTrainer
    from hfrl.core.tiny import tiny_model_path

    args = PPOConfig(
        output_dir=out, num_iterations=iterations + 1, rollout_batch_size=rollout, mini_batch_size=16,
        num_ppo_epochs=4, max_new_tokens=new_tokens, learning_rate=1e-5, kl_coef=0.05, report_to="none",
        disable_tqdm=True, save_strategy="no", generation_batch_size=min(rollout, 256),
        generation_kwargs={"do_sample": True, "top_k": 0, "min_new_tokens": new_tokens},
    )  # fmt: skip
    prompts = [f"{i % 97} {i % 13} the movie was" for i in range(rollout * (iterations + 1))]
    trainer = PPOTrainer(
        model=tiny_model_path("tiny"),
        args=args,
        reward_funcs=length_reward,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h][1:]
    update = statistics.median(h["time/update"] for h in logs)
    return {
        "rollout": rollout,
        "micro_steps": args.micro_steps_per_iteration,
        "iterations": len(logs),
        "time/update": update,
        "update_ms_per_sample": 1000 * update / rollout,
        **{f"time/{k}": statistics.median(h[f"time/{k}"] for h in logs) for k in ("generate", "reward", "score")},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, nargs="+", default=[64, 256, 1024, 2048, 4096])
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument(
        "--samples", type=int, default=4096, help="completions measured per size (at least 2 iterations)"
    )
    parser.add_argument("--json", help="write the figures to this file")
    a = parser.parse_args(argv)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="hfrl-bench-scale-")
    rows = [run(n, a.new_tokens, max(2, a.samples // n), os.path.join(root, str(n))) for n in a.rollouts]
    per_sample = [r["update_ms_per_sample"] for r in rows]
    results = {
        "threads": torch.get_num_threads(),
        "new_tokens": a.new_tokens,
        "rows": rows,
        "max_over_min_update_per_sample": max(per_sample) / min(per_sample),
    }
    print(f"\nPPO, tiny model, minibatch 16, 4 epochs, {a.new_tokens} new tokens, {results['threads']} threads")
    header = ("rollout", 8), ("micro-steps", 13), ("iterations", 12), ("update s", 10), ("ms/sample", 11)
    print("".join(f"{name:>{width}}" for name, width in header) + f"{'generate s':>12}{'score s':>9}")
    for r in rows:
        print(f"{r['rollout']:>8}{r['micro_steps']:>13}{r['iterations']:>12}{r['time/update']:>10.2f}{r['update_ms_per_sample']:>11.2f}"
              f"{r['time/generate']:>12.2f}{r['time/score']:>9.2f}")  # fmt: skip
    print(f"max / min update time per sample: {results['max_over_min_update_per_sample']:.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
