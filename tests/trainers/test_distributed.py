"""Two real processes on CPU through `accelerate launch` (gloo): sharded rollouts, global statistics."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import one_launch_at_a_time


@pytest.fixture(scope="module", autouse=True)
def _one_launch_at_a_time(tmp_path_factory):
    """Two processes on accelerate's default port (29500): no other module launches meanwhile (pytest-xdist)."""
    with one_launch_at_a_time(tmp_path_factory):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["ppo", "nlpo", "trpo"])
def test_online_training_in_two_processes(alg, tmp_path, tiny_causal_dir):
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate CLI is not on PATH")
    out = tmp_path / "run"
    train = [
        "-m", "hfrl.cli", "train", "--task", "numbers", "--alg", alg, "--model", "tiny",
        "--output-dir", str(out), "--num_iterations", "2", "--rollout_batch_size", "8", "--mini_batch_size", "4",
        "--num_ppo_epochs", "1", "--log_completions", "true", "--disable_tqdm", "true", "--save_every", "2",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("ACCELERATE_USE_CPU", None)
    if alg == "ppo":  # the shipped config alone, as the README shows it: no environment variable, no --use_cpu
        configs = os.path.join(os.path.dirname(__import__("hfrl").__file__), "accelerate_configs")
        cmd = ["accelerate", "launch", "--config_file", os.path.join(configs, "multi_cpu.yaml"), *train]
    else:  # `--cpu` alone silently runs one process; --multi_gpu + ACCELERATE_USE_CPU gives 2 gloo workers.
        cmd = ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", *train, "--use_cpu", "true"]  # fmt: skip
        env["ACCELERATE_USE_CPU"] = "1"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "find_unused_parameters" not in proc.stderr  # every trained parameter is used: DDP need not search

    logs = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logs) == 2
    for iteration, log in enumerate(logs, start=1):
        rows = [json.loads(line) for line in (out / "completions" / f"iteration-{iteration}.jsonl").open()]
        assert {r["process"] for r in rows} == {0, 1}  # world size 2, and both processes generated
        assert len(rows) == 16 and log["num_completions"] == 16
        # the logged reward is the mean over both processes' completions
        # a float32 sum of n rewards is within n eps sum|r| of the exact one (here in float64; eps = 2^-23)
        bound = len(rows) * 2.0**-23 * sum(abs(r["reward"]) for r in rows) / len(rows)
        assert log["reward"] == pytest.approx(sum(r["reward"] for r in rows) / len(rows), abs=bound + 1e-12)
    assert proc.stdout.count(" in the first iteration") == 1  # the summary (and the save) happen once
    # the checkpoint is marked complete once both processes wrote their files (one RNG state each)
    files = json.loads((out / "checkpoint-4" / "checkpoint_complete.json").read_text())["files"]
    assert {"rng_state_0.pth", "rng_state_1.pth", "online_state.json", "optimizer.pt"} <= set(files)

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.n_layer == 2


def test_trpo_refuses_deepspeed_and_fsdp_with_one_line(tiny_causal_dir, make_config):
    """TRPO takes second derivatives through the whole policy and moves the weights itself, outside the
    optimizer DeepSpeed partitions (any ZeRO stage) and FSDP shards: one line instead of a silent misstep.
    (NLPO runs under ZeRO-3 now: its mask policy is a whole copy, tests/trainers/test_sharding_algs.py.)"""
    from types import SimpleNamespace

    from datasets import Dataset

    from hfrl import PPOTrainer
    from hfrl.testing import digit_reward

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2"] * 8}),
    )
    trainer.require_unsharded_policy("needs the whole policy")  # DDP / one process: fine
    expected = (
        "PPO moves the weights itself, outside the optimizer that DeepSpeed ZeRO partitions and FSDP shards: "
        "use DDP (hfrl/accelerate_configs/multi_gpu.yaml, or multi_cpu.yaml on the CPU)"
    )
    trainer.is_fsdp_enabled = True
    with pytest.raises(ValueError) as err:
        trainer.require_unsharded_policy("moves the weights itself")
    assert str(err.value) == expected
    trainer.is_fsdp_enabled = False
    trainer.accelerator = SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=2)))
    with pytest.raises(ValueError) as err:
        trainer.require_unsharded_policy("moves the weights itself")
    assert str(err.value) == expected


def test_reference_prepare_places_a_separate_reference_on_the_device(tiny_causal_dir):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from hfrl.core.policies import ReferencePolicy

    lm = AutoModelForCausalLM.from_pretrained(tiny_causal_dir)
    accelerator = Accelerator(cpu=True)
    reference = ReferencePolicy(lm).prepare(accelerator)
    assert reference.model is not lm and not any(p.requires_grad for p in reference.model.parameters())
    assert {p.device for p in reference.model.parameters()} == {accelerator.device}


SYNC_SCRIPT = """
import json, sys, torch
from datasets import Dataset
from hfrl import PPOConfig, PPOTrainer, TRPOConfig, TRPOTrainer
from hfrl.testing import digit_reward

for config_class, trainer_class, extra in ((PPOConfig, PPOTrainer, {"learning_rate": 1e-3}),
                                           (TRPOConfig, TRPOTrainer, {"target_kl": 0.05})):
    args = config_class(output_dir=sys.argv[2] + "/" + trainer_class.__name__, num_iterations=2,
                        rollout_batch_size=4, mini_batch_size=4, num_ppo_epochs=1, max_new_tokens=5,
                        report_to="none", disable_tqdm=True, use_cpu=True, save_strategy="no", **extra)
    data = Dataset.from_dict({"prompt": ["1 2", "3", "a b c", "x"] * 4})
    trainer = trainer_class(model=sys.argv[1], args=args, reward_funcs=digit_reward, train_dataset=data)
    trainer.train()
    policy = trainer.accelerator.unwrap_model(trainer.model).policy
    checksum = sum(float(p.double().sum()) for p in policy.parameters())
    moved = trainer.state.log_history[0].get("trpo/accepted", 1.0)
    rank = trainer.accelerator.process_index
    with open(f"{sys.argv[2]}/{trainer_class.__name__}-{rank}.json", "w") as f:  # one file per rank: stdout interleaves
        json.dump({"checksum": checksum, "moved": moved}, f)

# as docs/how-to/distributed.md tells a script to end: a gloo group alive at the interpreter's exit can
# abort it after its work is done ("terminate called without an active exception": CI on 861bfb6)
del trainer, policy
from hfrl.trainers.devices import close_process_group
close_process_group()
"""


@pytest.mark.slow
def test_every_process_keeps_the_same_policy(tmp_path, tiny_causal_dir):
    """Two processes on different prompts: after PPO (DDP's gradient all-reduce) and TRPO (its own
    reductions: ``autograd.grad`` bypasses DDP) both processes hold the same policy weights."""
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate CLI is not on PATH")
    script = tmp_path / "sync.py"
    script.write_text(SYNC_SCRIPT)
    cmd = ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no",
           str(script), tiny_causal_dir, str(tmp_path)]  # fmt: skip
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("PPOTrainer", "TRPOTrainer"):
        ranks = [json.loads((tmp_path / f"{name}-{rank}.json").read_text()) for rank in (0, 1)]
        assert ranks[0]["checksum"] == ranks[1]["checksum"], (name, ranks)
        assert ranks[0]["moved"] > 0, (name, ranks)  # the step was taken: equal weights are not a no-op


def test_fsdp_on_a_cpu_only_machine_stops_and_deepspeed_without_its_package_says_what_to_install(monkeypatch):
    """accelerate sets FSDP up only for GPU-like devices: on the CPU its processes fall back to plain DDP
    without a word (measured: the fsdp.yaml run's parameters were no DTensors, its final weights equal
    DDP's to the bit). DeepSpeed shards on the CPU (tests/trainers/test_sharding.py) when it is installed."""
    import importlib.util

    import torch

    from hfrl.trainers.devices import check_sharding_on_cpu

    if torch.cuda.is_available():
        pytest.skip("a GPU machine shards for real")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(ValueError) as err:
        check_sharding_on_cpu()
    assert str(err.value) == (
        "FSDP (fsdp.yaml) runs only on GPUs: accelerate 1.15 sets FSDP up for GPU-like devices and on the CPU "
        "silently runs plain DDP instead; on the CPU shard with DeepSpeed (deepspeed_zero3.yaml --mixed_precision no) "
        "or launch with hfrl/accelerate_configs/multi_cpu.yaml"
    )
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    with pytest.raises(ValueError) as err:
        check_sharding_on_cpu()
    assert str(err.value) == (
        'DeepSpeed (deepspeed_*.yaml) needs the deepspeed package: pip install "hfrl[deepspeed]" (or launch with '
        "hfrl/accelerate_configs/multi_cpu.yaml for plain data parallelism)"
    )


@pytest.mark.slow
def test_the_fsdp_config_launched_on_the_cpu_stops_with_one_line(tmp_path):
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate CLI is not on PATH")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU machine shards for real")
    configs = os.path.join(os.path.dirname(__import__("hfrl").__file__), "accelerate_configs")
    cmd = ["accelerate", "launch", "--config_file", os.path.join(configs, "fsdp.yaml"), "--num_processes", "2",
           "--mixed_precision", "no", "-m", "hfrl.cli", "train", "--task", "numbers", "--model", "tiny",
           "-o", str(tmp_path / "run")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0
    assert "error: FSDP (fsdp.yaml) runs only on GPUs: accelerate 1.15 sets FSDP up for GPU-like devices" in proc.stderr
    assert not (tmp_path / "run").exists()
