"""benchmarks/gpu_check.py, as far as a CPU machine can take it: without CUDA it stops with one line;
``--dry-run`` runs the same code (PPO and NLPO, full and LoRA in QLoRA's place, TRL's GRPO beside
them) on the tiny model and passes its own checks. (The GPU run itself: see the script.)"""

import importlib.util
import json
import sys

import pytest
import torch
from conftest import load_benchmark


@pytest.fixture(scope="module")
def gpu_check():
    yield load_benchmark("gpu_check")
    sys.modules.pop("gpu_check", None)


def test_without_cuda_one_line_and_exit_code_2(gpu_check, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 2
    err = capsys.readouterr().err
    assert err == (
        "gpu_check: no CUDA GPU is visible (torch.cuda.is_available() is False): run it on a CUDA machine, or pass "
        "--dry-run to run the same code on the tiny model on the CPU\n"
    )


def test_on_cuda_without_bitsandbytes_one_line(gpu_check, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else object())
    assert gpu_check.main([]) == 2
    assert capsys.readouterr().err == (
        "gpu_check: the QLoRA runs need bitsandbytes: pip install bitsandbytes (or --skip qlora)\n"
    )


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_dry_run_trains_every_arm_and_passes_its_checks(gpu_check, tmp_path, tiny_causal_dir, capsys):
    out = tmp_path / "gpu.json"
    argv = ["--dry-run", "--json", str(out), "--skip", "backends", "rlhf"]  # those: test_gpu_check_backends.py
    assert gpu_check.main(argv) == 0, capsys.readouterr().out[-2000:]
    results = json.loads(out.read_text())
    assert [(r["alg"], r["mode"]) for r in results["runs"]] == [
        ("ppo", "full"),
        ("nlpo", "full"),
        ("ppo", "lora"),
        ("nlpo", "lora"),
        ("ppo", "lora-merged"),  # the LoRA adapter merged for the rollouts
        ("ppo", "zero2"),  # DeepSpeed ZeRO-2 in one process (on the CPU over gloo here)
    ]
    assert [r["zero_stage"] for r in results["runs"]] == [None] * 5 + [2]
    for run in results["runs"]:
        assert run["ok"] and run["iterations"] == 3 and not run["non_finite"]
        assert run["tokens_per_s"] > 0 and run["bf16"] is False and run["attention"] == "sdpa"  # the CPU rule
    assert results["trl_grpo"]["tokens_per_s"] > 0
    assert "tokens/s ppo full / trl grpo:" in capsys.readouterr().out
