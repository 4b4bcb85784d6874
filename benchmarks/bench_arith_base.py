"""How often the base SmolLM2-135M-Instruct already solves ``arith_chains``: the signal an RL run starts from.

For each chain length (``--steps``) it samples completions of the task's training prompts as a rollout
does (the task's ``generation_kwargs``: temperature 1, no top-k) and greedily as the evaluation does,
and scores them with the task's own checker (``hfrl.rewards.arithmetic``): the share with the right final
answer, the share in the ``Answer: N`` format, the share whose first step is right, and the share of
prompts whose ``--group`` samples hold at least one right answer (a GRPO group with any signal; a group
of all-wrong answers has zero advantage everywhere). An exact-match reward that almost never fires
cannot move any algorithm in a few hundred completions; this says how far from that a run starts.

    OMP_NUM_THREADS=2 python benchmarks/bench_arith_base.py --steps 2 3 4   # ~8 min on 2 quiet cores
    OMP_NUM_THREADS=2 python benchmarks/bench_arith_base.py --steps 2 --task-arg "operations=[add]" \\
        --task-arg operand_max=3 --json benchmarks/results-arith-base-add3.json   # an easier family
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from hfrl.core.models import load_model, load_tokenizer
from hfrl.rewards.arithmetic import answer_format, exact_answer
from hfrl.runs.run_eval import generate_completions
from hfrl.tasks import load_task

HERE = Path(__file__).resolve().parent


def first_step(text: str) -> str:
    """The first sentence of a worked solution, ``13 - 1 = 12``."""
    return text.strip().split(".")[0].strip()


def complete(lm: Any, tokenizer: Any, prompts: list[str], new_tokens: int, kwargs: dict) -> list[str]:
    """Completions of ``prompts`` by the evaluation's own completer (``hfrl eval``'s), 16 at a time."""
    settings = {"max_new_tokens": new_tokens, "eval_generation_kwargs": kwargs}
    return generate_completions(lm, tokenizer, prompts, settings, batch_size=16)


def score(rows: dict[str, list], completions: list[str], group: int) -> dict[str, float]:
    """Shares of right answers, formatted answers, right first steps; groups of ``group`` with a right one."""
    n = len(completions)

    def each(column: str) -> list:
        return [value for value in rows[column] for _ in range(group)]

    prompts, answers, refs = each("prompt"), each("answer"), [r[0] for r in each("references")]
    right = exact_answer(prompts, completions, answer=answers)
    formatted = answer_format(prompts, completions)
    first = [float(first_step(c) == first_step(r)) for c, r in zip(completions, refs, strict=True)]
    groups = [max(right[i : i + group]) for i in range(0, n, group)]
    return {"exact": sum(right) / n, "format": sum(formatted) / n, "first_step": sum(first) / n,
            "groups_with_a_right_answer": sum(groups) / len(groups), "completions": n}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[2, 3, 4], help="chain lengths to measure")
    parser.add_argument("--prompts", type=int, default=64, help="training prompts per chain length")
    parser.add_argument("--group", type=int, default=4, help="samples per prompt (GRPO's num_generations)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per completion (default 16 per step + 16)")
    parser.add_argument("--model", default="smollm2", help="the model (any causal model name hfrl loads)")
    parser.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a task argument (YAML value), e.g. operations=[add]")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(HERE / "results-arith-base.json"), help="the figures' file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer, lm = load_tokenizer(args.model), load_model(args.model).eval()
    family = {k.strip(): yaml.safe_load(v) for k, _, v in (item.partition("=") for item in args.task_arg)}
    rows_out: dict[str, Any] = {}
    for steps in args.steps:
        # the first problems of the family
        task = load_task("arith_chains", steps=steps, train_size=args.prompts, eval_size=1, **family)
        sampled_kwargs = dict(task.config_for("ppo", ["defaults", "online"]).get("generation_kwargs", {}))
        new_tokens = args.new_tokens or 16 * steps + 16
        rows = task.dataset["train"].select(range(args.prompts)).to_dict()
        start = time.perf_counter()
        torch.manual_seed(args.seed)
        greedy = complete(lm, tokenizer, rows["prompt"], new_tokens, {"do_sample": False})
        repeated = [p for p in rows["prompt"] for _ in range(args.group)]
        sampled = complete(lm, tokenizer, repeated, new_tokens, sampled_kwargs)
        rows_out[str(steps)] = {
            "new_tokens": new_tokens, "sampling": sampled_kwargs,
            "greedy": score(rows, greedy, 1), "sampled": score(rows, sampled, args.group),
            "seconds": round(time.perf_counter() - start, 1),
        }  # fmt: skip
        print(f"steps={steps}: {json.dumps(rows_out[str(steps)])}", flush=True)
    result = {"model": args.model, "task": "arith_chains", "task_args": family, "prompts": args.prompts,
              "group": args.group, "seed": args.seed, "threads": args.threads, "torch": torch.__version__,
              "machine": platform.processor() or platform.machine(), "steps": rows_out}  # fmt: skip
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
