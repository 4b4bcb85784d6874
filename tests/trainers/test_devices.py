"""The device defaults every hfrl config applies (online, A-LoL, TRL's): bf16 on a CPU-only machine
autocasts on the CPU, and the dataloader pins memory only for an accelerator; on a CUDA GPU with
bfloat16, bf16 mixed precision over float32 weights unless the user chose (CUDA mocked)."""

import os
import subprocess
import sys
import textwrap
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


CLOSE_GROUPS = textwrap.dedent("""
    import os, socket, sys
    import torch, torch.distributed as dist
    from hfrl.trainers.devices import close_process_group

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(probe.getsockname()[1]))
    dist.init_process_group("gloo", rank=0, world_size=1)
    sub = dist.new_group([0])
    dist.all_reduce(torch.ones(2), group=sub)

    class Engine:  # holds a group as DeepSpeed's engine, optimizer and parameters do
        pass

    engine = Engine()
    engine.group = sub  # an attribute (kept without a dict since Python 3.11)
    table = {"group": dist.group.WORLD, "ranks": [0]}
    items = [sub, 1]
    hook = (lambda g: lambda: g)(sub)  # a closure's cell
    import torch.distributed.nn.functional  # as DDP imports it: its defaults bind group=WORLD
    del sub

    def gloo_threads():
        names = [open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task")]
        return sorted(name for name in names if "gloo" in name)

    before = gloo_threads()
    close_process_group()
    print(str(before).replace(" ", ""), gloo_threads(), engine.group, table, items, hook())
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are listed from Linux's /proc")
def test_closing_the_process_group_frees_every_group_that_python_objects_still_hold():
    """``destroy_process_group`` leaves a gloo group's threads running while anything still holds the group
    (DeepSpeed's engine, its optimizer and each partitioned parameter do); alive at exit, they ran into the
    interpreter's teardown and a few ZeRO-3 runs aborted there. ``close_process_group`` drops the references."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", CLOSE_GROUPS], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = proc.stdout.strip().split(" ", 1)
    assert before.startswith("['gloo_tcp_loop',") and "'pt_gloo_runloop'" in before, before  # two groups' threads
    assert after == "[] None {'group': None, 'ranks': [0]} [None, 1] None"  # (some may not be named yet)


def test_closing_without_a_process_group_does_nothing():
    devices.close_process_group()  # not initialised: no barrier, no error
    assert devices.drop_references(()) == 0


def test_closing_forgets_the_accelerator_and_the_partitioned_classifiers_that_hfrl_kept():
    """Under ZeRO-3 hfrl keeps the run's accelerator (to partition reward classifiers as they load) and the
    classifiers it partitioned: both hold the run's process groups, and go when the run closes them."""
    from types import SimpleNamespace

    from hfrl.metrics import base, learned

    plugin = SimpleNamespace(zero_stage=3)
    accelerator = SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin), num_processes=2)
    partitioned, whole = ("classifier", "judge", "cpu", True), ("classifier", "judge", "cpu", False)
    try:
        assert learned.shard_classifiers(accelerator) and learned.classifiers_sharded()
        base.cached(partitioned, object)
        base.cached(whole, object)
        learned.release_sharded_classifiers()
        assert not learned.classifiers_sharded()
        assert partitioned not in base._CACHE and whole in base._CACHE
    finally:
        learned.shard_classifiers(None)
        base.uncache(lambda key: key in (partitioned, whole))
