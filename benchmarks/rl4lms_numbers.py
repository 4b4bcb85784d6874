"""RL4LMs' synthetic increasing-numbers PPO setup, rebuilt through hfrl's public API: mean reward
per iteration (sample efficiency) and seconds per iteration, over several seeds, for PPO and NLPO.

The setup is RL4LMs' ``synthetic_generate_increasing_numbers`` PPO config as measured on a 2-core
CPU (ALGORITHMS.md §1, §3): GPT-2 with 2 layers, 2 heads, 64 dims and 128 positions from random
weights; a WordLevel tokenizer of 278 whitespace-split tokens; the prompt ``<|endoftext|>``; at
most 20 new tokens sampled with top_k 0, an episode ending at EOS; 1,280 transitions per
iteration; 5 epochs of 64-transition minibatches; learning rate 1e-3; KL coefficient 0.02 with
target 2; a separate value model; SB3's defaults otherwise. RL4LMs' own run reached a mean
reward of 0.170 at iteration 10 and 0.302 at iteration 20.

    OMP_NUM_THREADS=1 python benchmarks/rl4lms_numbers.py --seeds 0 1 2 --iterations 30 --json out.json
    OMP_NUM_THREADS=1 python benchmarks/rl4lms_numbers.py --algs ppo --set minibatch_unit=sequences  # one ablation
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

import torch
import yaml
from datasets import Dataset
from transformers import TrainerCallback

#: RL4LMs' published curve on this setup (one run, lr 1e-3): iteration -> mean rollout reward
RL4LMS_PPO = {1: 0.087, 4: 0.106, 10: 0.170, 20: 0.302}
REPORT_AT = (1, 5, 10, 20, 30)
LAYOUTS = ("hfrl", "rl4lms")
PHASES = ("time/generate", "time/reward", "time/score", "time/update")

_NUMBER_WORDS = str.split(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million"
)
# none parses as a float (no "nan" / "inf"): the reward counts the tokens that float() reads
_FILLER_WORDS = str.split(
    "the a of and to in is was it for on with as at by this that from or an be are have has not but day "
    "date year month time number count list first next last good bad more some many all each"
)


def build_tokenizer():
    """WordLevel over whitespace-split tokens: ``<|endoftext|>`` (bos = eos) 0, ``<pad>`` 1,
    ``<unk>`` 2, the numbers 0-199, then number words and filler words: 278 tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens = ["<|endoftext|>", "<pad>", "<unk>", *map(str, range(200)), *_NUMBER_WORDS, *_FILLER_WORDS]
    assert len(tokens) == len(set(tokens)) == 278, len(tokens)
    backend = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<unk>",
        pad_token="<pad>",
        padding_side="left",
    )


def build_model(out: str, seed: int) -> str:
    """GPT-2, 2 layers x 2 heads x 64 dims, 128 positions, random weights from ``seed``, saved with
    its tokenizer in ``out`` (the policy, the value model and the reference all start from it)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_layer=2,
        n_head=2,
        n_embd=64,
        n_positions=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def setup_config(layout: str = "hfrl", top_k: int = 50) -> dict[str, Any]:
    """RL4LMs' setup in hfrl's config fields. Both layouts spend the same samples and steps per
    iteration: at least 1,280 transitions (whole completions, at least 40), 5 epochs of 40 / 2 = 20
    minibatches (~64 transitions each). ``"rl4lms"`` also copies how RL4LMs / SB3 update: minibatches
    of transitions drawn across completions, advantages normalised per minibatch, a separate value
    model. ``"hfrl"`` keeps hfrl's defaults for those: whole completions per minibatch, advantages
    whitened over the rollout, the value head on the policy's backbone (which spares the rollout a
    policy forward)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    config: dict[str, Any] = dict(
        max_new_tokens=20,  # episodes end at EOS or after 20 tokens; no minimum length
        generation_kwargs={"do_sample": True, "top_k": top_k, "top_p": 1.0, "temperature": 1.0},
        rollout_tokens=1280,  # 10 envs x 128 steps
        rollout_batch_size=40,
        mini_batch_size=2,
        scoring_batch_size=256,
        num_ppo_epochs=5,
        learning_rate=1e-3,
        kl_coef=0.02,
        kl_target=2.0,
        gamma=0.99,
        lam=0.95,
        cliprange=0.2,
        vf_coef=0.5,
        ent_coef=0.001,  # RL4LMs' gpt2_ppo.yml (SB3's default is 0)
        max_grad_norm=0.5,
    )
    if layout == "rl4lms":
        config.update(minibatch_unit="tokens", whiten_scope="minibatch", separate_critic=True)
    return config


#: NLPO samples from the whole vocabulary under its own top-p mask (RL4LMs' gpt2_nlpo.yml: top_k 0)
NLPO_CONFIG: dict[str, Any] = dict(
    generation_kwargs={"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0},
    top_mask=0.9,
    min_tokens_to_keep=100,
    mask_update_every=1,
)


class _IterationClock(TrainerCallback):
    """The wall-clock time at the end of every iteration (its log entry)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.times.append(time.perf_counter())


def run(alg: str, seed: int, iterations: int, config: dict[str, Any], root: str) -> dict[str, Any]:
    """One training run; per-iteration reward, completion length and seconds."""
    from transformers.trainer_callback import PrinterCallback

    from hfrl import NLPOConfig, NLPOTrainer, PPOConfig, PPOTrainer
    from hfrl.rewards.synthetic import IncreasingNumbers

    config_class, trainer_class = (PPOConfig, PPOTrainer) if alg == "ppo" else (NLPOConfig, NLPOTrainer)
    model_dir = build_model(os.path.join(root, f"model-{seed}"), seed)
    args = config_class(
        output_dir=os.path.join(root, f"{alg}-{seed}"),
        num_iterations=iterations,
        seed=seed,
        report_to="none",
        disable_tqdm=True,
        save_strategy="no",
        **config,
    )
    # RL4LMs' 50 prompts are all "<|endoftext|>": as many copies as one rollout takes
    prompts = Dataset.from_dict({"prompt": ["<|endoftext|>"] * max(50, args.rollout_batch_size)})
    trainer = trainer_class(
        model=model_dir, args=args, reward_funcs=IncreasingNumbers(min_tokens=20), train_dataset=prompts
    )
    trainer.remove_callback(PrinterCallback)  # no log dict per iteration on stdout
    clock = _IterationClock()
    trainer.add_callback(clock)
    clock.times.append(time.perf_counter())
    trainer.train()
    seconds = [b - a for a, b in zip(clock.times, clock.times[1:], strict=False)]
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return {
        "reward": [h["reward"] for h in logs],
        "completion_length": [h["completion_length"] for h in logs],
        "num_completions": [h["num_completions"] for h in logs],
        "transitions": [round(h["completion_length"] * h["num_completions"]) for h in logs],
        "mask_kept_tokens": [h["mask/kept_tokens"] for h in logs] if alg == "nlpo" else None,
        # the first iteration also pays for the Trainer's start: left out when there are others
        "seconds_per_iteration": statistics.mean(seconds[1:] or seconds),
        "phase_seconds": {k: statistics.mean(h[k] for h in logs) for k in PHASES},
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds at the reported iterations (None past the last iteration run)."""
    iterations = len(runs[0]["reward"])
    out: dict[str, Any] = {
        "seconds_per_iteration": statistics.mean(r["seconds_per_iteration"] for r in runs),
        "transitions_per_iteration": statistics.mean(statistics.mean(r["transitions"]) for r in runs),
    }
    for it in REPORT_AT:
        done = it <= iterations
        rewards = [r["reward"][it - 1] for r in runs] if done else []
        out[f"reward_at_{it}"] = statistics.mean(rewards) if done else None
        out[f"reward_std_at_{it}"] = statistics.pstdev(rewards) if done else None
        out[f"length_at_{it}"] = statistics.mean(r["completion_length"][it - 1] for r in runs) if done else None
        out[f"completions_at_{it}"] = statistics.mean(r["num_completions"][it - 1] for r in runs) if done else None
    return out


def parse_overrides(items: list[str], parser: argparse.ArgumentParser) -> dict[str, Any]:
    """``FIELD=VALUE`` pairs, values read as YAML."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set takes FIELD=VALUE, got {item!r}")
        out[key.replace("-", "_")] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--algs", nargs="+", default=["ppo", "nlpo"], choices=["ppo", "nlpo"])
    parser.add_argument("--layout", default="hfrl", choices=LAYOUTS, help="how the update is laid out (setup_config)")
    parser.add_argument(
        "--top-k",
        type=int,
        default=50,
        help="PPO's rollout sampling top_k: 50 is what RL4LMs' gpt2_ppo.yml sampled with (no top_k given, so "
        "transformers took the model config's 50); 0 samples from the whole vocabulary (NLPO: 0, see NLPO_CONFIG)",
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="config overrides, every algorithm")
    parser.add_argument("--nlpo-set", nargs="*", default=[], metavar="FIELD=VALUE", help="config overrides, NLPO only")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--json", help="write the figures and every run's curve here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides, nlpo_overrides = parse_overrides(args.set, parser), parse_overrides(args.nlpo_set, parser)

    threads = torch.get_num_threads()
    results: dict[str, Any] = {
        "threads": threads,
        "seeds": args.seeds,
        "layout": args.layout,
        "top_k": args.top_k,
        "overrides": overrides,
        "nlpo_overrides": nlpo_overrides,
    }
    with tempfile.TemporaryDirectory() as root:
        for alg in args.algs:
            config = setup_config(args.layout, args.top_k)
            if alg == "nlpo":
                config.update(NLPO_CONFIG, **nlpo_overrides)
            config.update(overrides)
            runs = [run(alg, seed, args.iterations, config, root) for seed in args.seeds]
            summary = summarise(runs)
            results[alg] = {"config": config, "summary": summary, "runs": runs}
            for key, value in summary.items():
                results[f"{alg}_{key}"] = value
            print(f"\n{alg.upper()}, layout {args.layout}, top_k {args.top_k}, seeds {args.seeds}, {threads} thread(s)")
            if overrides or (alg == "nlpo" and nlpo_overrides):
                print(f"overrides: {overrides} {nlpo_overrides if alg == 'nlpo' else ''}")
            print("| iteration | mean reward (std over seeds) | RL4LMs PPO | completion length | completions |")
            print("| --- | --- | --- | --- | --- |")
            for it in (i for i in REPORT_AT if summary[f"reward_at_{i}"] is not None):
                ref = RL4LMS_PPO.get(it, "")
                print(
                    f"| {it} | {summary[f'reward_at_{it}']:.3f} ({summary[f'reward_std_at_{it}']:.3f}) | {ref} | "
                    f"{summary[f'length_at_{it}']:.1f} | {summary[f'completions_at_{it}']:.0f} |"
                )
            print(
                f"seconds per iteration: {summary['seconds_per_iteration']:.3f} ({threads} thread(s)); "
                f"transitions per iteration: {summary['transitions_per_iteration']:.0f}"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
