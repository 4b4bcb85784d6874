"""NLPO's generation against PPO's, in one process, rollouts alternated (LoRA or full fine-tuning).

NLPO samples through its mask policy's top-p set: per generated token, one forward of the mask
policy with its own KV cache (its prompt once, then one token a step), so its generation should cost
about two of PPO's. This builds a PPO and an NLPO trainer on the same model, prompts and settings
(the real-model benchmark's: 16 completions of 16 tokens, top_k 50, ``min_new_tokens`` 16) and times
their rollouts' generation (``RolloutCollector.generate_rollout``) in turns, so that a busy neighbour
slows both alike. It also counts the model forwards per rollout.

    OMP_NUM_THREADS=1 python benchmarks/bench_nlpo_generation.py --model smollm2 --mode lora --repeats 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_online import model_dir  # noqa: E402

OPENING = (
    "My friends had talked about Hollow Creek for weeks, so I finally watched this crime drama about a small town "
    "that stops aging overnight. The special effects look"
)


def build(alg: str, path: str, mode: str, prompts: int, new_tokens: int):
    from peft import LoraConfig

    import hfrl

    trainer_class = {"ppo": hfrl.PPOTrainer, "nlpo": hfrl.NLPOTrainer}[alg]
    extra = {"mask_update_every": 4} if alg == "nlpo" else {}
    args = trainer_class.config_class(
        output_dir=tempfile.mkdtemp(), num_iterations=1, rollout_batch_size=prompts, mini_batch_size=prompts // 4,
        num_ppo_epochs=1, max_new_tokens=new_tokens, kl_coef=0.05, report_to="none", disable_tqdm=True,
        generation_kwargs={"do_sample": True, "top_k": 50, "min_new_tokens": new_tokens}, **extra,
    )  # fmt: skip
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    data = Dataset.from_dict({"prompt": [f"{i}. {OPENING}" for i in range(2 * prompts)]})
    trainer = trainer_class(
        model=path, args=args, reward_funcs=lambda prompts, completions, **kw: [0.0] * len(completions),
        train_dataset=data, peft_config=lora if mode == "lora" else None,
    )  # fmt: skip
    return trainer, [trainer.train_dataset[i] for i in range(prompts)]


def forwards(trainer, batch) -> int:
    """Model forwards (of the policy and, for NLPO, the mask policy) during one rollout's generation."""
    from hfrl.core.policies import base_lm

    count = [0]
    models = [base_lm(trainer.model.policy)]  # under LoRA the mask policy is an adapter of this very model
    mask = getattr(getattr(trainer.action_space, "mask_policy", None), "model", None)
    if mask is not None:  # full fine-tuning: its own copy
        models.append(mask)
    hooks = [m.register_forward_pre_hook(lambda *a: count.__setitem__(0, count[0] + 1)) for m in models]
    try:
        trainer.collector.generate_rollout(trainer.model_wrapped, batch, 0)
    finally:
        for hook in hooks:
            hook.remove()
    return count[0]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, gpt2-small or a local causal model")
    parser.add_argument("--mode", default="lora", choices=("lora", "full"))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=4, help="timed rollouts of each (after one warm-up each)")
    parser.add_argument("--json", help="write the figures to this file")
    a = parser.parse_args(argv)
    torch.manual_seed(0)
    path = a.model if a.model == "smollm2" else model_dir(a.model, tempfile.mkdtemp(prefix="hfrl-bench-"))
    trainers = {alg: build(alg, path, a.mode, a.prompts, a.new_tokens) for alg in ("ppo", "nlpo")}
    counts = {alg: forwards(*trainers[alg]) for alg in trainers}  # also the warm-up
    times: dict[str, list[float]] = {alg: [] for alg in trainers}
    for _ in range(a.repeats):
        for alg, (trainer, batch) in trainers.items():
            start = time.perf_counter()
            trainer.collector.generate_rollout(trainer.model_wrapped, batch, 0)
            times[alg].append(time.perf_counter() - start)
    results = {
        "model": a.model, "mode": a.mode, "prompts": a.prompts, "new_tokens": a.new_tokens,
        "threads": torch.get_num_threads(), "forwards_per_rollout": counts, "raw": times,
        **{f"{alg}_generate_seconds": statistics.mean(t) for alg, t in times.items()},
    }  # fmt: skip
    results["nlpo_over_ppo"] = results["nlpo_generate_seconds"] / results["ppo_generate_seconds"]
    print(
        f"{a.model} {a.mode}, {a.prompts} x {a.new_tokens} tokens, {results['threads']} threads: generation PPO "
        f"{results['ppo_generate_seconds']:.2f} s, NLPO {results['nlpo_generate_seconds']:.2f} s per rollout "
        f"({results['nlpo_over_ppo']:.2f}x); forwards per rollout {counts}"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
