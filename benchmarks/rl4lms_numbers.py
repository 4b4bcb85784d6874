"""RL4LMs' synthetic increasing-numbers PPO setup, rebuilt through hfrl's public API: mean reward
per iteration (sample efficiency) and seconds per iteration, over several seeds, for PPO and NLPO.

The setup is RL4LMs' ``synthetic_generate_increasing_numbers`` PPO config as measured on a 2-core
CPU (its curve: docs/algorithms.md §12): GPT-2 with 2 layers, 2 heads, 64 dims and 128 positions from random
weights; a WordLevel tokenizer of 278 whitespace-split tokens; the prompt ``<|endoftext|>``; at
most 20 new tokens, an episode ending at EOS; 1,280 transitions per iteration; 5 epochs of
64-transition minibatches; learning rate 1e-3; KL coefficient 0.02 with target 2; SB3's defaults
otherwise. PPO samples with ``top_k`` 50 (``--top-k``: RL4LMs' GPT-2 PPO config gives none, so
transformers took 50; at 0 PPO learns half as fast here), NLPO with ``top_k`` 0 under its top-p
mask (RL4LMs' ``gpt2_nlpo.yml``). The variant ``hfrl`` lays the update out hfrl's way (whole
completions per minibatch, rollout whitening, shared backbone), ``rl4lms`` as SB3 does (token
minibatches, per-minibatch normalisation, a separate value model); the other VARIANTS change one
setting each; ``hfrl-60-steps`` (the default) spends the same samples in 3 epochs, 60 optimizer
steps instead of 100, at learning rate 1.5e-3. RL4LMs' own PPO run reached a mean reward of 0.170
at iteration 10 and 0.302 at iteration 20; its NLPO stayed at ~0.085. Results: benchmarks/RESULTS.md.

    OMP_NUM_THREADS=1 python benchmarks/rl4lms_numbers.py --seeds 0 1 2 --iterations 30 --json out.json
    OMP_NUM_THREADS=1 python benchmarks/rl4lms_numbers.py --algs ppo --variant rl4lms-sequences --json out.json
    python benchmarks/rl4lms_numbers.py --table out.json  # the ablation table of every variant run so far

``--json`` merges: each run is stored under ``variants[NAME]`` (``--variant``, or ``--name``) and the
issue's figures (``ppo_reward_at_10``, ``ppo_reward_at_20``, ``nlpo_reward_at_30``,
``ppo_seconds_per_iteration``) sit at the top, from the ``hfrl-60-steps`` variant once it has run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
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


#: Named settings for the ablation (``--variant``): a layout of :func:`setup_config` and the
#: overrides that make the one difference; generation overrides update ``generation_kwargs``.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "hfrl": ("hfrl", {}),
    "rl4lms": ("rl4lms", {}),
    "rl4lms-sequences": ("rl4lms", {"minibatch_unit": "sequences"}),
    "rl4lms-whiten-rollout": ("rl4lms", {"whiten_scope": "rollout"}),
    "rl4lms-fixed-kl": ("rl4lms", {"kl_target": None}),
    "rl4lms-shared-critic": ("rl4lms", {"separate_critic": False}),
    "hfrl-tokens": ("hfrl", {"minibatch_unit": "tokens"}),
    "hfrl-whiten-minibatch": ("hfrl", {"whiten_scope": "minibatch"}),
    "hfrl-fixed-kl": ("hfrl", {"kl_target": None}),
    "hfrl-separate-critic": ("hfrl", {"separate_critic": True}),
    "hfrl-no-eos": ("hfrl", {"generation_kwargs": {"min_new_tokens": 20}}),  # every episode 20 tokens
    "hfrl-top-k-0": ("hfrl", {"generation_kwargs": {"top_k": 0}}),
    "hfrl-ent-0": ("hfrl", {"ent_coef": 0.0}),
    # the same samples in 60 optimizer steps instead of 100, at 1.5x the step size: the headline
    "hfrl-60-steps": ("hfrl", {"num_ppo_epochs": 3, "learning_rate": 1.5e-3}),
    # the "nearest settings": 80 completions, 4-sequence minibatches, fixed KL, separate critic
    "issue-nearest": (
        "hfrl",
        {
            "rollout_tokens": None,
            "rollout_batch_size": 80,
            "mini_batch_size": 4,
            "kl_target": None,
            "separate_critic": True,
        },
    ),  # fmt: skip
}


def variant_config(name: str, top_k: int = 50) -> dict[str, Any]:
    """The config of a named :data:`VARIANTS` entry."""
    if name not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {name!r}")
    layout, overrides = VARIANTS[name]
    config = setup_config(layout, top_k)
    apply_overrides(config, overrides)
    return config


def apply_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> None:
    """``config.update(overrides)``, except that ``generation_kwargs`` are merged key by key."""
    for key, value in overrides.items():
        if key == "generation_kwargs" and value is not None:
            config[key] = {**config.get(key, {}), **value}
        else:
            config[key] = value


#: NLPO samples from the whole vocabulary under its own top-p mask (RL4LMs' gpt2_nlpo.yml: top_k 0)
NLPO_CONFIG: dict[str, Any] = dict(
    generation_kwargs={"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0},
    top_mask=0.9,
    min_tokens_to_keep=100,
    mask_update_every=1,
)


class _IterationClock(TrainerCallback):
    """The wall-clock time at the end of every iteration (its log entry); with ``label``, also one
    progress line per iteration on stderr (for long runs in the background)."""

    def __init__(self, label: str | None = None) -> None:
        self.times: list[float] = []
        self.cpu: list[float] = []  # this process's CPU seconds (every thread): the work, whatever else runs
        self.label = label

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.times.append(time.perf_counter())
            self.cpu.append(time.process_time())
            if self.label:
                print(
                    f"{self.label} iteration {len(self.times) - 1}: reward {logs['reward']:.3f}, length "
                    f"{logs['completion_length']:.1f}, {self.times[-1] - self.times[-2]:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )


def run(
    alg: str, seed: int, iterations: int, config: dict[str, Any], root: str, progress: bool = False
) -> dict[str, Any]:
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
        model=model_dir,
        args=args,
        reward_funcs=IncreasingNumbers(min_tokens=20, rl4lms_exact=True),
        train_dataset=prompts,
    )
    trainer.remove_callback(PrinterCallback)  # no log dict per iteration on stdout
    clock = _IterationClock(f"{alg} seed {seed}" if progress else None)
    trainer.add_callback(clock)
    clock.times.append(time.perf_counter())
    clock.cpu.append(time.process_time())
    trainer.train()
    seconds = [b - a for a, b in zip(clock.times, clock.times[1:], strict=False)]
    cpu = [b - a for a, b in zip(clock.cpu, clock.cpu[1:], strict=False)]
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return {
        "reward": [h["reward"] for h in logs],
        "completion_length": [h["completion_length"] for h in logs],
        "num_completions": [h["num_completions"] for h in logs],
        "transitions": [round(h["completion_length"] * h["num_completions"]) for h in logs],
        "kl": [h.get("kl") for h in logs],  # per-token mean KL to the reference, and the KL coefficient
        "beta": [h.get("beta") for h in logs],
        "mask_kept_tokens": [h["mask/kept_tokens"] for h in logs] if alg == "nlpo" else None,
        # the first iteration also pays for the Trainer's start: left out when there are others
        "seconds_per_iteration": statistics.mean(seconds[1:] or seconds),
        "cpu_seconds_per_iteration": statistics.mean(cpu[1:] or cpu),
        "phase_seconds": {k: statistics.mean(h[k] for h in logs) for k in PHASES},
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds at the reported iterations (None past the last iteration run)."""
    iterations = len(runs[0]["reward"])
    out: dict[str, Any] = {
        "seconds_per_iteration": statistics.mean(r["seconds_per_iteration"] for r in runs),
        "cpu_seconds_per_iteration": statistics.mean(r["cpu_seconds_per_iteration"] for r in runs),
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
    """``FIELD=VALUE`` pairs, values read as YAML, numbers as the config field's type (``2e-3``)."""
    from hfrl.runs.experiment import coerce_numbers
    from hfrl.trainers.schema import config_schema

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set takes FIELD=VALUE, got {item!r}")
        out[key.replace("-", "_")] = yaml.safe_load(value)
    return coerce_numbers(out, config_schema("nlpo"))


#: the figures the issue asks for, copied to the top of the JSON from the default variant: hfrl's
#: layout in 3 epochs (60 optimizer steps) at learning rate 1.5e-3, which gains as much reward per
#: sample as 5 epochs (100 steps, RL4LMs' count) at 1e-3 in 60% of the update time (RESULTS.md)
HEADLINE = ("ppo_reward_at_10", "ppo_reward_at_20", "nlpo_reward_at_30", "ppo_seconds_per_iteration")
DEFAULT_VARIANT = "hfrl-60-steps"


def print_curve(alg: str, name: str, summary: dict[str, Any], seeds: list[int], threads: int, runs: list) -> None:
    """The reward table of one algorithm and variant: mean (std) over seeds and each seed's value."""
    print(f"\n{alg.upper()}, variant {name}, seeds {seeds}, {threads} thread(s)")
    print("| iteration | mean reward (std over seeds) | per seed | RL4LMs PPO | completion length | completions |")
    print("| --- | --- | --- | --- | --- | --- |")
    for it in (i for i in REPORT_AT if summary[f"reward_at_{i}"] is not None):
        per_seed = " / ".join(f"{r['reward'][it - 1]:.3f}" for r in runs)
        print(
            f"| {it} | {summary[f'reward_at_{it}']:.3f} ({summary[f'reward_std_at_{it}']:.3f}) | {per_seed} | "
            f"{RL4LMS_PPO.get(it, '')} | {summary[f'length_at_{it}']:.1f} | {summary[f'completions_at_{it}']:.0f} |"
        )
    print(
        f"seconds per iteration: {summary['seconds_per_iteration']:.3f} ({threads} thread(s); CPU seconds "
        f"{summary['cpu_seconds_per_iteration']:.3f}); "
        f"transitions per iteration: {summary['transitions_per_iteration']:.0f}"
    )


def ablation_table(results: dict[str, Any]) -> str:
    """A markdown table of every variant in a (merged) results JSON: mean reward at each reported
    iteration, the completion length at the last, seconds per iteration."""
    lines = [
        "| variant | alg | seeds | " + " | ".join(f"@{i}" for i in REPORT_AT) + " | length (last) | s/iteration |",
        "| --- | --- | --- | " + " | ".join("---" for _ in REPORT_AT) + " | --- | --- |",
    ]
    for name, variant in results.get("variants", {}).items():
        for alg in ("ppo", "nlpo"):
            if alg not in variant:
                continue
            s = variant[alg]["summary"]
            done = [i for i in REPORT_AT if s.get(f"reward_at_{i}") is not None]
            cells = " | ".join(f"{s[f'reward_at_{i}']:.3f}" if i in done else "" for i in REPORT_AT)
            lines.append(
                f"| {name} | {alg} | {len(variant[alg]['runs'])} | {cells} | {s[f'length_at_{done[-1]}']:.1f} | "
                f"{s['seconds_per_iteration']:.2f} ({variant['threads']}t) |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--algs", nargs="+", default=["ppo", "nlpo"], choices=["ppo", "nlpo"])
    parser.add_argument(
        "--variant", default=DEFAULT_VARIANT, choices=list(VARIANTS), help="named settings (VARIANTS): one ablation"
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=50,
        help="PPO's rollout sampling top_k: 50 is what RL4LMs' gpt2_ppo.yml sampled with (no top_k given, so "
        "transformers took the model config's 50); 0 samples from the whole vocabulary (NLPO: see NLPO_CONFIG)",
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="config overrides, every algorithm")
    parser.add_argument("--nlpo-set", nargs="*", default=[], metavar="FIELD=VALUE", help="config overrides, NLPO only")
    parser.add_argument("--name", help="the name the run is stored under in --json (default: the variant's)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--progress", action="store_true", help="one line per iteration on stderr")
    parser.add_argument(
        "--json", help="write the figures and every run's curve here; an existing file gains this variant (merge)"
    )
    parser.add_argument("--table", metavar="JSON", help="print the ablation table of a results JSON and exit")
    args = parser.parse_args(argv)
    if args.table:
        with open(args.table) as fh:
            print(ablation_table(json.load(fh)))
        return {}
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides, nlpo_overrides = parse_overrides(args.set, parser), parse_overrides(args.nlpo_set, parser)
    name = args.name or args.variant

    threads = torch.get_num_threads()
    variant: dict[str, Any] = {
        "threads": threads,
        "seeds": args.seeds,
        "top_k": args.top_k,
        "overrides": overrides,
        "nlpo_overrides": nlpo_overrides,
    }
    with tempfile.TemporaryDirectory() as root:
        for alg in args.algs:
            config = variant_config(args.variant, args.top_k)
            if alg == "nlpo":
                apply_overrides(config, NLPO_CONFIG)
                apply_overrides(config, nlpo_overrides)
            apply_overrides(config, overrides)
            runs = [run(alg, seed, args.iterations, config, root, args.progress) for seed in args.seeds]
            summary = summarise(runs)
            variant[alg] = {"config": config, "summary": summary, "runs": runs}
            for key, value in summary.items():
                variant[f"{alg}_{key}"] = value
            print_curve(alg, name, summary, args.seeds, threads, runs)
            if overrides or (alg == "nlpo" and nlpo_overrides):
                print(f"overrides: {overrides} {nlpo_overrides if alg == 'nlpo' else ''}")
    results: dict[str, Any] = {}
    if args.json and os.path.exists(args.json):
        with open(args.json) as fh:
            results = json.load(fh)
    stored = results.setdefault("variants", {}).setdefault(name, {})
    stored.update(variant)  # a second run of the same name with other --algs adds to it
    main_variant = results["variants"].get(DEFAULT_VARIANT, stored)
    results.update({key: main_variant.get(key) for key in HEADLINE})  # the figures, at the top
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
