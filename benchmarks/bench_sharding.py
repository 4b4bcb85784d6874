"""DeepSpeed ZeRO-2 / ZeRO-3 against DDP: what each process holds, and whether the weights agree.

For each algorithm, ``hfrl train`` is launched three times as 2 processes by ``accelerate launch`` with
hfrl's shipped configs (``multi_cpu.yaml``: DDP over gloo; ``deepspeed_zero2.yaml`` and
``deepspeed_zero3.yaml``: DeepSpeed's CPU accelerator over gloo, ``--mixed_precision no``), same seed,
same data. Each run writes ``distributed.json`` (hfrl's start-up report: parameter and optimizer
elements per process); the final weights (``model.safetensors``, and the value head where there is
one) are compared with the DDP run's.

    OMP_NUM_THREADS=1 python benchmarks/bench_sharding.py --out benchmarks/results-sharding.json

The tests (tests/trainers/test_sharding.py, test_sharding_algs.py) run the same functions on fewer algorithms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CONFIGS = ("multi_cpu", "deepspeed_zero2", "deepspeed_zero3")
ONLINE = ["--task", "numbers", "--model", "tiny", "--num_iterations", "2", "--rollout_batch_size", "8",
          "--mini_batch_size", "4", "--num_ppo_epochs", "1"]  # fmt: skip
OFFLINE_HH = ["--task-arg", "reward_config=offline", "--max_steps", "4"]  # ROUGE-L, not the Hub reward model
# per algorithm: the command line after `hfrl train` (2 processes each; numbers and the hh fixtures are offline)
ALGS: dict[str, list[str]] = {
    "ppo": ["--alg", "ppo", *ONLINE, "--save_every", "1"],
    "ppo_separate_critic": ["--alg", "ppo", *ONLINE, "--separate_critic", "true"],
    "a2c": ["--alg", "a2c", *ONLINE],
    "ppo_rloo": ["--alg", "ppo", *ONLINE, "--advantage_estimator", "rloo", "--num_generations", "2"],
    "nlpo": ["--alg", "nlpo", *ONLINE],
    "grpo": ["--alg", "grpo", "--task", "numbers", "--model", "tiny", "--max_steps", "2"],
    "rloo": ["--alg", "rloo", "--task", "numbers", "--model", "tiny", "--max_steps", "2"],
    "sft": ["--alg", "sft", "--task", "hh", "--model", "tiny", "--max_steps", "4"],
    "dpo": ["--alg", "dpo", "--task", "hh", "--model", "tiny", "--max_steps", "4"],
    "a_lol": ["--alg", "a_lol", "--task", "hh", "--model", "tiny", *OFFLINE_HH],
    # rewarded by a tiny reward model (a BERT classifier, one output): partitioned under ZeRO-3 as TRL does
    "ppo_reward_model": ["--alg", "ppo", *ONLINE, "--reward_model", "{reward_model}"],
    "grpo_reward_model": [
        "--alg",
        "grpo",
        "--task",
        "numbers",
        "--model",
        "tiny",
        "--max_steps",
        "2",
        "--reward_model",
        "{reward_model}",
    ],  # fmt: skip
}


def config_path(name: str) -> str:
    import hfrl

    return os.path.join(os.path.dirname(hfrl.__file__), "accelerate_configs", f"{name}.yaml")


def launch(config: str, args: list[str], out: Path, extra_env: dict[str, str] | None = None,
           timeout: int = 600) -> subprocess.CompletedProcess:  # fmt: skip
    """``accelerate launch --config_file CONFIG --num_processes 2 -m hfrl.cli train ARGS -o OUT``."""
    cmd = ["accelerate", "launch", "--config_file", config_path(config), "--num_processes", "2",
           "--mixed_precision", "no", "-m", "hfrl.cli", "train", *args, "--disable_tqdm", "true",
           "-o", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path), **(extra_env or {})}
    env.pop("ACCELERATE_USE_CPU", None)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def weights(folder: Path) -> dict[str, Any]:
    """The saved weights (model and value head), tied copies dropped as the model's own loading ties them."""
    from safetensors.torch import load_file

    out = dict(load_file(str(folder / "model.safetensors")))
    config = json.loads((folder / "config.json").read_text())
    if config.get("tie_word_embeddings", True):
        out.pop("lm_head.weight", None)
    head = folder / "value_head.safetensors"
    if head.exists():
        out.update({f"value_head.{k}": v for k, v in load_file(str(head)).items()})
    return out


def largest_gap(a: dict[str, Any], b: dict[str, Any]) -> float:
    if set(a) != set(b):
        raise AssertionError(f"different tensors: {sorted(set(a) ^ set(b))}")
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def shares(folder: Path) -> dict[str, Any]:
    """``distributed.json`` as shares: the most any process holds over the model's elements."""
    report = json.loads((folder / "distributed.json").read_text())
    params = max(r["parameters"] for r in report["ranks"]) / report["model_parameters"]
    state = max(r["optimizer"] for r in report["ranks"]) / max(report["trainable_parameters"], 1)
    return {"type": report["distributed_type"], "zero_stage": report["zero_stage"],
            "parameter_share": round(params, 4), "optimizer_share": round(state, 4)}  # fmt: skip


def compare(alg: str, root: Path, configs: tuple[str, ...] = CONFIGS) -> list[dict[str, Any]]:
    """Launch ``alg`` under each config (``multi_cpu`` first: the reference) and report each."""
    rows, reference = [], None
    env = {"HFRL_DATA_DIR": _fixtures(), "HF_HUB_OFFLINE": "1"}
    for config in configs:
        out = root / f"{alg}-{config}"
        start = time.perf_counter()
        args = [tiny_reward_model(root) if a == "{reward_model}" else a for a in ALGS[alg]]
        proc = launch(config, args, out, env)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{alg} under {config} failed:\n{proc.stderr[-4000:]}")
        saved = weights(out)
        reference = reference if reference is not None else saved
        start_weights = {k: v for k, v in weights(Path(_tiny())).items() if k in saved}
        moved = largest_gap({k: saved[k] for k in start_weights}, start_weights)  # did it train at all
        rows.append({"alg": alg, "config": config, **shares(out), "max_abs_diff_vs_ddp": largest_gap(saved, reference),
                     "moved_from_start": moved, "seconds": round(seconds, 1)})  # fmt: skip
    return rows


def tiny_reward_model(root: Path) -> str:
    """A tiny reward model (BERT, one output, the tiny tokenizer; seeded) saved once under ``root``."""
    folder = root / "reward-model"
    if not (folder / "config.json").exists():
        import torch
        from transformers import BertConfig, BertForSequenceClassification

        from hfrl.core.tiny import build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, pad_token_id=tokenizer.pad_token_id, num_labels=1)  # fmt: skip
        torch.manual_seed(0)
        BertForSequenceClassification(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return str(folder)


def _tiny() -> str:
    from hfrl.core.tiny import tiny_model_path

    return tiny_model_path("tiny")


def _fixtures() -> str:
    from hfrl.tasks.data import FIXTURES

    return str(FIXTURES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algs", nargs="+", default=list(ALGS), choices=list(ALGS))
    parser.add_argument("--root", default="/tmp/hfrl-bench-sharding")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = []
    for alg in args.algs:
        for row in compare(alg, Path(args.root)):
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"command": "python benchmarks/bench_sharding.py", "threads": 1,
                                              "processes": 2, "rows": rows}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
