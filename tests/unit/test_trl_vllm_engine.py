"""TRL's GRPO and RLOO build their vLLM engine in their constructor; under ``use_vllm`` hfrl's factory builds it
(vllm_rollout.vllm_generation_factory: on vLLM's CPU platform the eager engine with the reload sync and a clean
exit). Without vLLM installed, only the swap itself is checked here; tests/vllm_engine runs GRPO on the real engine."""

import sys

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
