"""The device defaults every hfrl config applies (online, A-LoL, TRL's): bf16 on a CPU-only machine
autocasts on the CPU, and the dataloader pins memory only for an accelerator; on a CUDA GPU with
bfloat16, bf16 mixed precision over float32 weights unless the user chose (CUDA mocked)."""

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


# ---- the precision rule on a GPU (hfrl.trainers.devices), checked with CUDA mocked -----------------
def test_bf16_default_is_on_only_on_a_bf16_gpu(monkeypatch):
    from types import SimpleNamespace

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert devices.bf16_default(SimpleNamespace(fp16=False, use_cpu=False)) is True
    assert devices.bf16_default(SimpleNamespace(fp16=True, use_cpu=False)) is False  # the user chose fp16
    assert devices.bf16_default(SimpleNamespace(fp16=False, use_cpu=True)) is False  # a CPU run on a GPU box
    args = SimpleNamespace(bf16=None, fp16=False, use_cpu=False, dataloader_pin_memory=True)
    devices.cpu_defaults(args)
    assert args.bf16 is True
    args = SimpleNamespace(bf16=False, fp16=False, use_cpu=False, dataloader_pin_memory=True)
    devices.cpu_defaults(args)
    assert args.bf16 is False  # asked for: kept
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # a V100 / T4
    assert devices.bf16_default(SimpleNamespace(fp16=False, use_cpu=False)) is False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.bf16_default(SimpleNamespace(fp16=False, use_cpu=False)) is False


def test_on_the_cpu_nothing_changes(config):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the CPU rule")
    assert config().bf16 is False


def test_weights_load_in_float32_on_a_gpu_unless_asked(tiny_causal_dir, tmp_path, monkeypatch):
    """A bfloat16 checkpoint: the CPU keeps transformers' default (its own dtype), a CUDA machine
    trains float32 master weights (bf16 is the autocast), and an explicit dtype always wins. The
    attention is SDPA either way (transformers' default; hfrl passes nothing)."""
    import torch

    from hfrl.core import models

    folder = tmp_path / "bf16"
    models.load_model(tiny_causal_dir).to(torch.bfloat16).save_pretrained(folder)
    models.load_tokenizer(tiny_causal_dir).save_pretrained(folder)
    policy, _ = models.load_trainable(str(folder))
    assert policy.dtype == torch.bfloat16 and policy.config._attn_implementation == "sdpa"
    monkeypatch.setattr(models, "_cuda", lambda: True)  # loading stays on the CPU: only the rule is mocked
    policy, _ = models.load_trainable(str(folder))
    assert policy.dtype == torch.float32 and policy.config._attn_implementation == "sdpa"
    policy, _ = models.load_trainable(str(folder), {"dtype": torch.bfloat16})
    assert policy.dtype == torch.bfloat16
