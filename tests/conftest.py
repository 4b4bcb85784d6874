"""Shared fixtures: offline, one thread, tiny models built once per session in a temp cache."""

from __future__ import annotations

import os

# Before torch / transformers / datasets are imported anywhere.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("HFRL_DEBUG", None)

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def _isolated_caches(tmp_path_factory):
    """HF and hfrl caches in a session temp dir, so tests never touch the user's."""
    root = tmp_path_factory.mktemp("caches")
    old = {k: os.environ.get(k) for k in ("HF_HOME", "HFRL_CACHE")}
    os.environ["HF_HOME"] = str(root / "hf")
    os.environ["HFRL_CACHE"] = str(root / "hfrl")
    yield
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def tiny_causal_dir(_isolated_caches) -> str:
    from hfrl.core.tiny import tiny_model_path

    return tiny_model_path("tiny")


@pytest.fixture(scope="session")
def tiny_seq2seq_dir(_isolated_caches) -> str:
    from hfrl.core.tiny import tiny_model_path

    return tiny_model_path("tiny-t5")


@pytest.fixture
def make_config(tmp_path):
    """``make_config(config_class=PPOConfig, **overrides)``: a small, fast config of any online
    algorithm writing into the test's temp dir."""
    from hfrl import PPOConfig

    def make(config_class=PPOConfig, **overrides):
        fields = dict(
            output_dir=str(tmp_path / "run"),
            num_iterations=2,
            rollout_batch_size=8,
            mini_batch_size=4,
            num_ppo_epochs=2,
            max_new_tokens=8,
            learning_rate=1e-3,
            report_to="none",
            disable_tqdm=True,
            seed=0,
        )
        fields.update(overrides)
        return config_class(**fields)

    return make
