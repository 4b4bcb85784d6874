"""benchmarks/real_model.py keeps running end to end (the tiny model stands in for SmolLM2): with
``--workers 2`` each run is its own process, and both merge into one JSON and one report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_model.py"


def test_two_workers_merge_their_runs_into_one_report(tmp_path):
    out = tmp_path / "r.json"
    command = [
        sys.executable, str(SCRIPT), "--model", "tiny", "--workers", "2", "--threads", "1",
        "--algs", "ppo,a2c,ppo+rloo", "--generations", "2", "--modes", "full", "--prompts", "4", "--new-tokens", "4",
        "--iterations", "1", "--eval-prompts", "4",
        "--json", str(out), "--results", str(tmp_path / "R.md"), "--plot", str(tmp_path / "c.png"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert set(results["runs"]) == {"ppo-full", "a2c-full", "ppo+rloo-full"} and "base" in results
    assert results["runs"]["ppo+rloo-full"]["config"]["num_generations"] == 2  # 4 completions: 2 prompts x 2
    for run in results["runs"].values():
        assert run["threads"] == 1 and run["eval_seconds"] > 0 and len(run["iterations"]) == 1
    report = (tmp_path / "R.md").read_text()
    assert "| ppo-full |" in report and "| a2c-full |" in report and (tmp_path / "c.png").is_file()
    assert "| ppo+rloo-full |" in report and "- ppo+rloo-full: reward" in report  # its target line
