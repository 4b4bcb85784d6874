"""TRL's GRPO and RLOO build their vLLM engine in their constructor; under ``use_vllm`` hfrl's factory builds it
(vllm_rollout.vllm_generation_factory: on vLLM's CPU platform the eager engine with the reload sync and a clean
exit). Without vLLM installed, only the swap itself is checked here; tests/vllm_engine runs GRPO on the real engine."""

import importlib
import os
import socket
import sys
from types import SimpleNamespace

import pytest

import hfrl.trainers.trl_adapters as adapters
from hfrl.trainers.online import vllm_rollout


@pytest.mark.parametrize("name", ["GRPOTrainer", "RLOOTrainer"])
def test_under_use_vllm_the_trl_trainer_builds_hfrl_s_engine_and_gets_its_own_back(name, monkeypatch):
    trainer_class = getattr(adapters, name)
    module = sys.modules[next(c for c in trainer_class.__mro__ if c.__module__.startswith("trl.")).__module__]
    own = module.VLLMGeneration
    built = []
    monkeypatch.setattr(vllm_rollout, "vllm_generation_factory", lambda **kwargs: built.append(kwargs) or "engine")
    trainer = object.__new__(trainer_class)

    class Args:
        use_vllm = True

    with adapters._hfrl_engine(trainer, Args()):
        assert module.VLLMGeneration(model="m", mode="colocate") == "engine"
    assert built == [{"model": "m", "mode": "colocate"}]
    assert module.VLLMGeneration is own
    Args.use_vllm = False
    with adapters._hfrl_engine(trainer, Args()):
        assert module.VLLMGeneration is own


TRL_PORTS = (29500, 23456, 12355, 12345)  # trl.trainer.utils._find_free_port's candidates, tried in this order


def test_a_single_process_engine_takes_its_rendezvous_port_from_the_os(monkeypatch):
    """TRL's ensure_master_addr_port gives an unset MASTER_PORT the first free one of fixed candidates (29500
    first): two single-process --use_vllm runs started together both found it free, and the second engine's
    init_process_group failed with EADDRINUSE (issue 53, the vLLM cells run two at a time). A port the OS
    assigns differs between processes; a set port (a launcher's, shared by its ranks) is kept."""
    monkeypatch.delenv("MASTER_PORT", raising=False)
    vllm_rollout.own_rendezvous_port(1)
    port = int(os.environ["MASTER_PORT"])
    assert port not in TRL_PORTS  # outside the OS's ephemeral range (Linux 32768-60999, others 49152-65535)
    with socket.socket() as probe:  # and free: the rendezvous can bind it
        probe.bind(("", port))
    for value in ("0", "auto"):  # TRL's words for "pick one"
        monkeypatch.setenv("MASTER_PORT", value)
        vllm_rollout.own_rendezvous_port(1)
        assert int(os.environ["MASTER_PORT"]) not in TRL_PORTS
    monkeypatch.setenv("MASTER_PORT", "29511")
    vllm_rollout.own_rendezvous_port(1)
    assert os.environ["MASTER_PORT"] == "29511"
    monkeypatch.delenv("MASTER_PORT")
    vllm_rollout.own_rendezvous_port(2)  # several processes: never a port of each rank's own
    assert "MASTER_PORT" not in os.environ


def test_the_colocated_engine_is_built_with_the_os_assigned_port(monkeypatch):
    """TRL's engine class (the GPU path; a stand-in here) sees MASTER_PORT set when it is built in one process."""
    from hfrl.trainers.online import vllm_cpu

    seen = []

    class Engine:  # TRL's VLLMGeneration, as far as the rendezvous goes
        def __init__(self, **kwargs):
            seen.append(os.environ.get("MASTER_PORT"))

    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.setattr(importlib.import_module("trl.import_utils"), "is_vllm_available", lambda: True)
    monkeypatch.setattr(importlib.import_module("trl.generation.vllm_generation"), "VLLMGeneration", Engine)
    monkeypatch.setattr(vllm_cpu, "is_cpu_platform", lambda: False)
    model = SimpleNamespace(name_or_path="some/model")
    accelerator = SimpleNamespace(num_processes=1)
    assert isinstance(vllm_rollout._trl_vllm_generation(model=model, mode="colocate", accelerator=accelerator), Engine)
    assert seen[0] is not None and int(seen[0]) not in TRL_PORTS
