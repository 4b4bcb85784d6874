"""The benchmark script keeps running: a tiny smoke run writes every figure the issue names.
(Speed is measured by the benchmark itself, never asserted here.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_online.py"


@pytest.mark.slow
def test_benchmark_writes_every_figure(tmp_path, tiny_causal_dir):
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), "--model", "tiny", "--prompts", "8", "--new-tokens", "4", "--iterations", "1",
           "--json", str(out)]  # fmt: skip
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
