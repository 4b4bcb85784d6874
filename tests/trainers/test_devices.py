"""The CPU defaults every hfrl config applies (online, A-LoL, TRL's): bf16 on a CPU-only machine
autocasts on the CPU, and the dataloader pins memory only for an accelerator."""

import warnings

import pytest

from hfrl import ALoLConfig, PPOConfig
from hfrl.trainers import devices
from hfrl.trainers.trl_adapters import GRPOConfig


@pytest.fixture(params=["ppo", "alol", "grpo"])
def config(request, tmp_path):
    classes = {"ppo": PPOConfig, "alol": ALoLConfig, "grpo": GRPOConfig}
    return lambda **kwargs: classes[request.param](output_dir=str(tmp_path), report_to="none", **kwargs)


def test_no_accelerator_pins_no_memory_and_runs_bf16_on_the_cpu(config, monkeypatch):
    monkeypatch.setattr(devices, "has_accelerator", lambda: False)
    args = config()
    assert args.dataloader_pin_memory is False
    args = config(bf16=True)
    assert args.use_cpu is True and args.bf16 is True


def test_several_processes_without_an_accelerator_train_together_on_the_cpu(monkeypatch):
    """`accelerate launch --config_file multi_cpu.yaml` sets WORLD_SIZE: without use_cpu every process
    trained alone (two separate runs writing one directory); with it they join one gloo group. (The
    rule on a stand-in: a real config would start the process group.)"""
    from types import SimpleNamespace

    monkeypatch.setattr(devices, "has_accelerator", lambda: False)
    for world_size, use_cpu in (("1", False), ("2", True)):
        monkeypatch.setenv("WORLD_SIZE", world_size)
        args = SimpleNamespace(bf16=False, use_cpu=False, dataloader_pin_memory=True)
        devices.cpu_defaults(args)
        assert args.use_cpu is use_cpu
    monkeypatch.setattr(devices, "has_accelerator", lambda: True)  # GPUs: NCCL as usual
    args = SimpleNamespace(bf16=False, use_cpu=False, dataloader_pin_memory=True)
    devices.cpu_defaults(args)
    assert args.use_cpu is False


def test_with_an_accelerator_pinning_is_left_to_the_user(monkeypatch):
    """The rule itself, on a stand-in for the config (a real one would look for the GPU)."""
    monkeypatch.setattr(devices, "has_accelerator", lambda: True)

    class Args:
        bf16, use_cpu, dataloader_pin_memory = True, False, True

    devices.cpu_defaults(Args)
    assert Args.dataloader_pin_memory is True and Args.use_cpu is False
    Args.use_cpu = True  # an explicit CPU run on a GPU machine: pinning buys nothing
    devices.cpu_defaults(Args)
    assert Args.dataloader_pin_memory is False


def test_a_cpu_run_does_not_warn_about_pinned_memory(tiny_causal_dir, make_config):
    from datasets import Dataset

    from hfrl import PPOTrainer
    from hfrl.testing import digit_reward

    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=make_config(num_iterations=1),
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2", "3"] * 4}),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(iter(trainer.get_train_dataloader()))
    assert not [w for w in caught if "pin_memory" in str(w.message)], [str(w.message) for w in caught]
