"""benchmarks/vllm_side_by_side.py (issue 53, item 3): generate's and the engine's runs of real_model.py's JSON,
side by side. Hand-built JSON, hand-computed figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_side_by_side.py"


def _run(alg, seed, gain, generate_s, vllm=False):
    first = {"time/generate": 99.0, "time/update": 99.0, "completion_length": 16.0}  # left out: the first
    row = {"time/generate": generate_s, "time/score": 1.0, "time/update": 2.0, "completion_length": 16.0,
           "tokens_per_second": 256 / (generate_s + 3.0 + (0.5 if vllm else 0.0))}  # fmt: skip
    if vllm:
        row.update({"time/sync_weights": 0.5, "vllm/is_weight_mean": 0.99, "vllm/logprob_gap_mean": 0.01,
                    "vllm/is_weight_clipped_frac": 0.0})  # fmt: skip
    return {"alg": alg, "mode": "lora", "seed": seed, "reward_gain": gain, "judge_gain": gain, "ppl_ratio": 1.2,
            "iterations": [first, row, row]}  # fmt: skip


def _trl_run(seed):
    """TRL's rows: one rollout phase (generation, reward and reference together), then the update."""
    row = {"time/rollout": 5.0, "time/update": 3.0, "completion_length": 16.0, "tokens_per_second": 256 / 8.0}
    return {"alg": "grpo", "mode": "lora", "seed": seed, "reward_gain": 0.1, "judge_gain": 0.1, "ppl_ratio": 1.0,
            "iterations": [dict(row, **{"time/rollout": 99.0}), row]}  # fmt: skip


def test_the_table_puts_the_engine_beside_generate(tmp_path):
    hf = {"runs": {f"ppo-lora-s{s}": _run("ppo", s, g, 4.0) for s, g in ((0, 0.2), (1, 0.4))}}
    hf["runs"]["ppo-lora-s0-t2"] = _run("ppo", 0, 9.0, 4.0)  # a re-run at 2 threads: not a seed
    engine = {"runs": {f"ppo[use_vllm=true]-lora-s{s}": _run("ppo[use_vllm=true]", s, 0.4, 2.0, vllm=True)
                       for s in (0, 1)}}  # fmt: skip
    (tmp_path / "hf.json").write_text(json.dumps(hf))
    (tmp_path / "vllm.json").write_text(json.dumps(engine))
    (tmp_path / "trl.json").write_text(json.dumps({"runs": {"grpo-lora-s0": _trl_run(0)}}))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--generate", str(tmp_path / "hf.json"), "--vllm", str(tmp_path / "vllm.json"),
         "--modes", "lora", "--extra", "TRL GRPO", str(tmp_path / "trl.json"), "grpo"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # generate: 16 x 16 tokens in 4 s = 64 tok/s, 7 s an iteration (256 / 7 = 36.6 tok/s in training); the
    # engine: 128 tok/s, 5.5 s (46.5 tok/s in training); a phase a sampler does not have: "-"
    hf_row = "| generate | 2 | +0.300 ± 0.141 | +0.300 ± 0.141 | 1.20 | 7.0 | 4.0 | - | 1.0 | - | 2.0 | 64.0 | 36.6 |"
    engine_row = (
        "| vLLM (CPU engine) | 2 | +0.400 ± 0.000 | +0.400 ± 0.000 | 1.20 | 5.5 | 2.0 | 0.5 | 1.0 | - | 2.0 | 128.0 "
        "| 46.5 |"
    )
    assert f"{hf_row} - | - | - |" in out and f"{engine_row} 0.990 | 0.000 | 0.010 |" in out
    # TRL: the iterations after the first, 5 + 3 s, 32 tok/s in training, no generate phase of its own
    trl_row = "| TRL GRPO | 1 | +0.100 ± 0.000 | +0.100 ± 0.000 | 1.00 | 8.0 | - | - | - | 5.0 | 3.0 | - | 32.0 |"
    assert f"{trl_row} - | - | - |" in out
    # (0.4 - 0.3) / 0.1414 = 0.71 of generate's standard deviations
    assert "2.00x generate's tokens/s, 1.27x its iterations per second; its judge gain +0.71 of generate's" in out
    assert "The engine's `ppo[use_vllm=true]`: 1.45x TRL GRPO's training tokens/s." in out  # 46.5 / 32


def test_rerun_threads_picks_the_seeds_re_runs_at_that_thread_count(tmp_path):
    """``--rerun-threads 2``: the ``...-t2`` runs (real_model.py's ``--rerun``), not the seeds' first runs."""
    hf = {"runs": {"ppo-full-s0": _run("ppo", 0, 0.2, 4.0), "ppo-full-s0-t2": _run("ppo", 0, 0.5, 2.0)}}
    cell = "ppo[use_vllm=true]"
    engine = {"runs": {f"{cell}-full-s0": _run(cell, 0, 0.1, 2.0, vllm=True),
                       f"{cell}-full-s0-t2": _run(cell, 0, 0.6, 1.0, vllm=True)}}  # fmt: skip
    for runs in (hf["runs"], engine["runs"]):
        for run in runs.values():
            run["mode"] = "full"
    (tmp_path / "hf.json").write_text(json.dumps(hf))
    (tmp_path / "vllm.json").write_text(json.dumps(engine))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--generate", str(tmp_path / "hf.json"), "--vllm", str(tmp_path / "vllm.json"),
         "--modes", "full", "--rerun-threads", "2"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # 256 tokens in 2 s (generate) and 1 s (the engine): 128 and 256 tok/s
    assert "| generate | 1 | +0.500 ± 0.000 | +0.500 ± 0.000 | 1.20 | 5.0 | 2.0 | - | 1.0 | - | 2.0 | 128.0 |" in out
    engine = "| vLLM (CPU engine) | 1 | +0.600 ± 0.000 | +0.600 ± 0.000 |"
    assert f"{engine} 1.20 | 4.5 | 1.0 | 0.5 | 1.0 | - | 2.0 | 256.0 |" in out


def test_a_task_without_a_judge_compares_the_held_out_reward_of_the_seeds_asked(tmp_path):
    """arith_chains has no judge (``judge_gain`` None): the column shows "-" and the distance is the held-out
    reward's; ``--seeds 0 1`` leaves seed 2 out of every row. Hand-computed: generate's gains 0.2 and 0.4
    (std 0.1414), the engine's 0.35 and 0.35: (0.35 - 0.3) / 0.1414 = +0.35."""
    hf = {"runs": {f"ppo-lora-s{s}": {**_run("ppo", s, g, 4.0), "judge_gain": None}
                   for s, g in ((0, 0.2), (1, 0.4), (2, 9.0))}}  # fmt: skip
    cell = "ppo[use_vllm=true]"
    engine = {"runs": {f"{cell}-lora-s{s}": {**_run(cell, s, 0.35, 2.0, vllm=True), "judge_gain": None}
                       for s in (0, 1, 2)}}  # fmt: skip
    (tmp_path / "hf.json").write_text(json.dumps(hf))
    (tmp_path / "vllm.json").write_text(json.dumps(engine))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--generate", str(tmp_path / "hf.json"), "--vllm", str(tmp_path / "vllm.json"),
         "--modes", "lora", "--seeds", "0", "1"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "| generate | 2 | +0.300 ± 0.141 | - | 1.20 | 7.0 |" in out
    assert "| vLLM (CPU engine) | 2 | +0.350 ± 0.000 | - | 1.20 | 5.5 |" in out
    assert "its held-out reward gain +0.35 of generate's standard deviations from generate's" in out
