"""The advantage estimators on `numbers`: each learns (several seeds), and what a critic costs.

``learn``: PPO on the `numbers` task (its shipped config, the built-in tiny model; no entropy bonus for
the estimators whose advantages are in reward units: ``settings()``) with each advantage estimator, 64
completions per iteration (GAE: 64 prompts; the group estimators: 16 prompts x 4), ``--iterations``
iterations, ``--seeds`` seeds; the gain is the mean reward of the last 10 iterations minus that of
the first 5.

``cost``: the same rollout and update with GAE (shared critic, and a separate critic as RL4LMs)
against the critic-free estimators at equal samples, each run in a fresh process: seconds per
iteration (after the first) and peak resident memory (VmHWM).

    OMP_NUM_THREADS=1 python benchmarks/bench_estimators.py learn --seeds 0 1 2 --iterations 50
    OMP_NUM_THREADS=1 python benchmarks/bench_estimators.py cost --model tiny --iterations 6
    OMP_NUM_THREADS=1 python benchmarks/bench_estimators.py cost --model gpt2-small --iterations 3 --prompts 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hfrl.core.estimators import ESTIMATORS as REGISTERED
from hfrl.core.estimators import estimator_class

HERE = Path(__file__).resolve().parent
ESTIMATORS = tuple(REGISTERED)  # every registered estimator, in the registry's order
# The task's entropy bonus (0.01) is sized for advantages of unit scale (whitened, or divided by the group's
# std); an estimator whose advantages are in reward units (``unit_scale`` False: rloo, dr_grpo; ~0.05 on
# `numbers`) is outweighed by it: over 40 iterations they gained +0.01-0.02 with it, +0.05-0.06 without.


def settings(estimator: str) -> dict:
    """The overrides an estimator runs `numbers` with, from what its class says."""
    return {} if estimator_class(estimator).unit_scale else {"ent_coef": 0.0}


def groups_of(estimator: str) -> int:
    """Completions per prompt: 1 with a critic, 4 for the critic-free estimators' groups."""
    return 1 if estimator_class(estimator).needs_critic else 4


def learn_once(estimator: str, seed: int, iterations: int, out: str) -> dict:
    from hfrl.runs.experiment import build_trainer, resolve_run

    groups = groups_of(estimator)
    overrides = {
        "num_iterations": iterations, "disable_tqdm": True, "advantage_estimator": estimator, "num_generations": groups,
        "rollout_batch_size": 64 // groups, "seed": seed, "report_to": "none", **settings(estimator),
    }  # fmt: skip
    trainer = build_trainer(resolve_run("numbers", "ppo", "tiny", overrides=overrides, output_dir=out))
    start = time.perf_counter()
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    first, last = statistics.mean(rewards[:5]), statistics.mean(rewards[-10:])
    return {"first5": first, "last10": last, "gain": last - first, "seconds": time.perf_counter() - start}


def cost_once(model: str, setup: str, prompts: int, new_tokens: int, iterations: int) -> dict:
    """One run (in this process, which the caller started fresh): GAE (``gae``, ``gae_separate``) or a
    critic-free estimator at ``prompts`` x ``new_tokens`` completions per iteration (groups of 4)."""
    import torch
    from bench_online import length_reward, model_dir
    from datasets import Dataset

    from hfrl import PPOConfig, PPOTrainer

    estimator = "gae" if setup.startswith("gae") else setup
    groups = groups_of(estimator)
    args = PPOConfig(
        output_dir=tempfile.mkdtemp(), num_iterations=iterations + 1, rollout_batch_size=prompts // groups,
        num_generations=groups, mini_batch_size=prompts // 4, num_ppo_epochs=1, max_new_tokens=new_tokens,
        learning_rate=1e-5, kl_coef=0.05, report_to="none", disable_tqdm=True, save_strategy="no",
        generation_kwargs={"do_sample": True, "top_k": 0, "min_new_tokens": new_tokens},
        advantage_estimator=estimator, separate_critic=setup == "gae_separate",
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": [f"{i} 2 3 the movie was" for i in range(2 * prompts)]})
    path = model_dir(model, tempfile.mkdtemp(prefix="hfrl-bench-"))
    trainer = PPOTrainer(model=path, args=args, reward_funcs=length_reward, train_dataset=data)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h][1:]  # the first iteration is warm-up
    seconds = [sum(h[f"time/{k}"] for k in ("generate", "reward", "score", "update")) for h in logs]
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))
    return {
        "seconds_per_iteration": statistics.mean(seconds), "peak_rss_mb": peak,
        "critic_parameters": sum(p.numel() for p in trainer.model.critic_modules().parameters()),
        "threads": torch.get_num_threads(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("learn", "cost", "cost-one"))
    parser.add_argument("--estimators", nargs="*", default=list(ESTIMATORS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--model", default="tiny", help="cost: tiny, gpt2-small or a local causal model")
    parser.add_argument("--prompts", type=int, default=64, help="cost: completions per iteration")
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--setup", help="cost-one: gae, gae_separate or an estimator (run by cost, one process each)")
    parser.add_argument("--rounds", type=int, default=1, help="cost: runs of each setup, in turns (medians reported)")
    parser.add_argument("--json", help="write the figures to this file")
    a = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if a.part == "cost-one":
        result = cost_once(a.model, a.setup, a.prompts, a.new_tokens, a.iterations)
        print("RESULT " + json.dumps(result))
        return result
    results: dict = {"part": a.part}
    if a.part == "learn":
        for estimator in a.estimators:
            runs = [learn_once(estimator, seed, a.iterations, tempfile.mkdtemp()) for seed in a.seeds]
            results[estimator] = {"seeds": a.seeds, "runs": runs, "mean_gain": statistics.mean(r["gain"] for r in runs)}
            gains = ", ".join(f"{r['gain']:+.3f}" for r in runs)
            print(f"{estimator:<20} gain over {a.iterations} iterations, seeds {a.seeds}: {gains}", flush=True)
    else:
        setups = ["gae", "gae_separate", *[e for e in a.estimators if e != "gae"]]
        results.update(model=a.model, prompts=a.prompts, new_tokens=a.new_tokens, iterations=a.iterations)
        runs: dict[str, list[dict]] = {setup: [] for setup in setups}
        sizes = ["--prompts", str(a.prompts), "--new-tokens", str(a.new_tokens), "--iterations", str(a.iterations)]
        for _ in range(a.rounds):  # in turns, so that a busy neighbour slows every setup alike
            for setup in setups:
                cmd = [sys.executable, __file__, "cost-one", "--setup", setup, "--model", a.model, *sizes]
                proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
                line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
                runs[setup].append(json.loads(line.removeprefix("RESULT ")))
        for setup, rows in runs.items():
            results[setup] = {
                "seconds_per_iteration": statistics.median(r["seconds_per_iteration"] for r in rows),
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rows),
                "critic_parameters": rows[0]["critic_parameters"], "threads": rows[0]["threads"], "runs": rows,
            }  # fmt: skip
            r = results[setup]
            print(f"{setup:<20} {r['seconds_per_iteration']:.3f} s/iteration, peak RSS {r['peak_rss_mb']:.0f} MB, "
                  f"critic parameters {r['critic_parameters']} (median of {len(rows)})", flush=True)  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
