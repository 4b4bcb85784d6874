"""The benchmark script keeps running: a tiny smoke run writes every figure the issue names.
(Speed is measured by the benchmark itself, never asserted here.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_online.py"


@pytest.mark.slow
def test_benchmark_writes_every_figure(tmp_path, tiny_causal_dir):
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), "--model", "tiny", "--prompts", "8", "--new-tokens", "4", "--iterations", "1",
           "--algs", "ppo,nlpo,ppo+rloo", "--generations", "2", "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    keys = ("ppo_over_floor", "nlpo_over_floor", "tokens_per_s_over_trl_rloo", "tokens_per_s_over_trl_grpo",
            "lora_peak_memory_over_sft")  # fmt: skip
    assert all(results[k] > 0 for k in keys)
    for run in ("ppo", "nlpo"):
        assert {"time/generate", "time/reward", "time/score", "time/update", "tokens_per_s", "peak_rss_mb"} <= set(
            results[run]
        )
    assert "ppo_over_floor" in proc.stdout  # the printed table
    assert results["ppo+rloo_tokens_per_s_over_trl_grpo"] > 0 and "ppo+rloo" in proc.stdout


@pytest.mark.slow
def test_the_estimator_prefill_and_nlpo_benchmarks_run(tmp_path, tiny_causal_dir):
    """benchmarks/bench_estimators.py (learn, cost), bench_prefill.py and bench_nlpo_generation.py on
    the tiny model, a few seconds each: every figure they report is there. Each script's ``main(argv)``
    runs in this process (its cost setups launch their own processes) and writes its --json."""

    def run(script: str, *args: str) -> dict:
        out = tmp_path / f"{script}.json"
        load_benchmark(script).main([*args, "--json", str(out)])
        return json.loads(out.read_text())

    learned = run("bench_estimators", "learn", "--estimators", "rloo", "--seeds", "0", "--iterations", "1")
    assert set(learned["rloo"]["runs"][0]) >= {"first5", "last10", "gain", "seconds"}
    cost = run("bench_estimators", "cost", "--estimators", "rloo", "--iterations", "1", "--prompts", "8",
               "--new-tokens", "4")  # fmt: skip
    assert cost["gae"]["critic_parameters"] > 0 and cost["rloo"]["critic_parameters"] == 0
    assert cost["gae_separate"]["critic_parameters"] > cost["gae"]["critic_parameters"]
    prefill = run("bench_prefill", "--model", "tiny", "--prompts", "2", "--generations", "2", "--prompt-tokens",
                  "8", "--new-tokens", "3", "--repeats", "1")  # fmt: skip
    assert prefill["greedy_identical"] and prefill["speedup"] > 0
    nlpo = run("bench_nlpo_generation", "--model", "tiny", "--prompts", "4", "--new-tokens", "3", "--repeats", "1")
    assert nlpo["forwards_per_rollout"] == {"ppo": 3, "nlpo": 6} and nlpo["nlpo_over_ppo"] > 0


def test_the_arith_base_benchmark_scores_with_the_tasks_checker():
    """bench_arith_base.py's shares, by hand: right answers and ``Answer: N`` formats by the task's own
    checker, first steps against the worked solution, groups of 2 with at least one right answer."""
    bench = load_benchmark("bench_arith_base")
    rows = {"prompt": ["a", "b"], "answer": ["3", "7"],
            "references": [[" 13 - 1 = 12. 12 - 9 = 3.\nAnswer: 3"], [" 2 + 5 = 7.\nAnswer: 7"]]}  # fmt: skip
    completions = [" 13 - 1 = 12. 12 - 9 = 3.\nAnswer: 3", " 13 - 1 = 11.\nAnswer: 11", " 2 + 5 = 7. Answer: 8", "7"]
    assert bench.score(rows, completions, 2) == {
        "exact": 0.25, "format": 0.75, "first_step": 0.5, "groups_with_a_right_answer": 0.5, "completions": 4,
    }  # fmt: skip


@pytest.mark.slow
def test_the_arith_base_benchmark_runs(tmp_path, tiny_causal_dir):
    """bench_arith_base.py end to end on the tiny model: every figure per chain length, greedy and sampled."""
    out = tmp_path / "arith.json"
    argv = ["--model", "tiny", "--steps", "1", "2", "--prompts", "2", "--group", "2", "--new-tokens", "3",
            "--threads", "1", "--json", str(out)]  # fmt: skip
    result = load_benchmark("bench_arith_base").main(argv)
    assert json.loads(out.read_text()) == result and set(result["steps"]) == {"1", "2"}
    for row in result["steps"].values():
        assert row["greedy"]["completions"] == 2 and row["sampled"]["completions"] == 4
        assert row["sampling"]["do_sample"] is True and 0 <= row["sampled"]["exact"] <= 1
