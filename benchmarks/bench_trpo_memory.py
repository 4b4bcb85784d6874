"""Peak memory and time of TRPO's policy step with and without ``fisher_batch_size``.

One fresh process per setting (peak RSS cannot be separated inside one process on CPU):

    python benchmarks/bench_trpo_memory.py --model gpt2-small --prompts 16 --new-tokens 32 --fisher-batch-size none 4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def policy_step(path: str, prompts: int, new_tokens: int, fisher_batch_size: int | None) -> None:
    """Collect one rollout, then time one policy step; prints seconds, peak RSS (MB) and the step."""
    from datasets import Dataset

    from hfrl import TRPOConfig, TRPOTrainer

    def length_reward(prompts, completions, **kwargs):
        return [len(c) / 100 for c in completions]

    args = TRPOConfig(
        output_dir=tempfile.mkdtemp(), num_iterations=1, rollout_batch_size=prompts, mini_batch_size=prompts,
        num_ppo_epochs=1, max_new_tokens=new_tokens, report_to="none", disable_tqdm=True, save_strategy="no",
        fisher_batch_size=fisher_batch_size, cg_max_steps=10,
        generation_kwargs={"do_sample": True, "top_k": 0, "min_new_tokens": new_tokens},
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": ["1 2 3 the movie was"] * (2 * prompts)})
    trainer = TRPOTrainer(model=path, args=args, reward_funcs=length_reward, train_dataset=data)
    rollout = trainer.collect_rollout([trainer.train_dataset[i] for i in range(prompts)])
    start = time.perf_counter()
    stats = trainer.policy_step(rollout)
    seconds = time.perf_counter() - start
    with open("/proc/self/status") as status:
        peak = [int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM")][0]
    print(f"RESULT {fisher_batch_size} {seconds:.1f} {peak:.0f} {stats['trpo/step_size']:.4g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--fisher-batch-size", nargs="+", default=["none", "4"])
    a = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_online import model_dir

    path = model_dir(a.model, tempfile.mkdtemp(prefix="hfrl-bench-"))
    print(f"{'fisher_batch_size':>18}{'seconds':>9}{'peak RSS MB':>13}{'step size':>11}")
    for value in a.fisher_batch_size:
        size = None if value == "none" else int(value)
        code = f"import bench_trpo_memory as b; b.policy_step({path!r}, {a.prompts}, {a.new_tokens}, {size!r})"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             cwd=os.path.dirname(os.path.abspath(__file__)))  # fmt: skip
        _, size_, seconds, peak, step = next(x for x in out.stdout.splitlines() if x.startswith("RESULT")).split()
        print(f"{size_:>18}{seconds:>9}{peak:>13}{step:>11}")


if __name__ == "__main__":
    main()
