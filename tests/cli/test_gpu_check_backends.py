"""benchmarks/gpu_check.py's backends and RLHF rerun, as far as a CPU machine takes them (``--dry-run``):
transformers' generate eager, static cache + torch.compile (dynamo's eager backend here), LoRA unmerged and
merged, each greedy-checked; docs/how-to/rlhf.md's three stages shortened, its PPO step with ``--bf16 false``
and with ``--learning_rate 1e-4`` (slow tier); a run that raises is one line in the table and exit code 1."""

import json
import sys

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def gpu_check():
    yield load_benchmark("gpu_check")
    sys.modules.pop("gpu_check", None)


ONLY_NEW = ["--skip", "full", "lora", "qlora", "lora-merged", "zero2", "nlpo", "trl"]


def test_rlhf_commands_are_the_pages_shortened_on_a_dry_run(gpu_check):
    sft, reward, ppo = gpu_check.rlhf_commands(dry_run=False)
    assert sft[:6] == ["--task", "hh", "--alg", "sft", "--model", "tiny"]
    assert ppo[ppo.index("--reward_model") + 1] == "runs/hh-reward"
    assert ppo[ppo.index("--num_iterations") + 1] == "30" and ppo[ppo.index("--learning_rate") + 1] == "1e-3"
    short = gpu_check.rlhf_commands(dry_run=True)
    assert [
        c[c.index(f) + 1] for c, f in zip(short, ("--num_train_epochs", "--max_steps", "--num_iterations"), strict=True)
    ] == [
        "1",
        "2",
        "2",
    ]
    assert gpu_check._set(["-o", "a", "--x", "1"], "--x", "2") == ["-o", "a", "--x", "2"]
    assert gpu_check._set(["-o", "a"], "--bf16", "false") == ["-o", "a", "--bf16", "false"]


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_dry_run_generation_backends(gpu_check, tmp_path, tiny_causal_dir, capsys):
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--dry-run", "--json", str(out), *ONLY_NEW, "rlhf"]) == 0, capsys.readouterr().out[-2000:]
    results = json.loads(out.read_text())
    assert results["runs"] == [] and "rlhf" not in results  # vllm: skipped on a dry run (stderr says so)
    arms = results["generation"]["arms"]
    assert list(arms) == ["eager", "static+compile", "lora unmerged", "lora merged"]
    assert arms["static+compile"]["greedy_equal"] is True and arms["static+compile"]["compile_s"] > 0
    assert arms["lora merged"]["greedy_equal"] is True
    assert all(len(arm["tok_s"]) == 2 and min(arm["tok_s"]) > 0 for arm in arms.values())
    printed = capsys.readouterr()
    assert "the vllm run needs vLLM on a CUDA GPU" in printed.err
    assert "static+compile" in printed.out and "greedy equal" in printed.out and "wall time:" in printed.out


@pytest.mark.slow  # four hfrl train processes (minutes on 2 busy cores)
def test_dry_run_rlhf_rerun(gpu_check, tmp_path, tiny_causal_dir, capsys):
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--dry-run", "--json", str(out), *ONLY_NEW, "backends"]) == 0
    rlhf = json.loads(out.read_text())["rlhf"]
    assert list(rlhf) == ["sft", "reward", "ppo --bf16 false", "ppo --learning_rate 1e-4"]
    assert all(row["exit_code"] == 0 for row in rlhf.values()), rlhf
    assert "--bf16 false" in rlhf["ppo --bf16 false"]["command"]
    assert "--learning_rate 1e-4" in rlhf["ppo --learning_rate 1e-4"]["command"]
    assert rlhf["ppo --bf16 false"]["iterations"] == 2 and rlhf["ppo --learning_rate 1e-4"]["iterations"] == 2
    assert "ppo --learning_rate 1e-4" in capsys.readouterr().out


def test_a_run_that_raises_is_one_line_and_exit_code_1(gpu_check, monkeypatch, capsys):
    def broken(alg, mode, path, a, out):
        raise RuntimeError("CUDA error: out of memory\nmore detail")

    monkeypatch.setattr(gpu_check, "run_hfrl", broken)
    argv = ["--dry-run", "--skip", "full", "qlora", "lora-merged", "zero2", "nlpo", "trl", "backends", "rlhf"]
    assert gpu_check.main(argv) == 1
    out = capsys.readouterr().out
    assert "ppo lora      FAILED RuntimeError: CUDA error: out of memory\n" in out
    assert "gpu_check: FAILED: ppo lora (an error," in out
