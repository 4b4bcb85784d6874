"""How close an hfrl iteration is to its compute floor, and how it compares with TRL's RLOO and GRPO.

For one model and rollout size, in one process: hfrl PPO and NLPO (seconds per iteration by phase,
generated tokens per second over whole iterations, peak memory), the *floor* for the same work
(bare ``generate`` of the same prompts and lengths, plus the forward+backward passes and optimizer
steps the update needs over the same tokens, timed alone; NLPO's floor adds the mask policy's
forward passes, one per generated token), TRL's ``RLOOTrainer`` and ``GRPOTrainer`` doing the same
generation and optimisation with the same reward, and peak memory of PPO with a LoRA adapter
against plain supervised fine-tuning.

    OMP_NUM_THREADS=1 python benchmarks/bench_online.py --model tiny --prompts 32 --new-tokens 32 --json out.json
    python benchmarks/bench_online.py --model gpt2-small --prompts 16 --new-tokens 32 --iterations 2

``--algs ppo,ppo+rloo`` adds hfrl runs with an advantage estimator (``ALG+ESTIMATOR``: ``--generations``
completions per prompt, ``--prompts`` completions in all, no critic but with ``gae``), compared with
TRL's trainers at ``--trl-generations`` completions per prompt (give both the same G to compare GRPO
and RLOO with hfrl's group estimators):

    python benchmarks/bench_online.py --model gpt2-small --algs ppo,ppo+rloo,ppo+group_norm --generations 4 \
        --trl-generations 4 --skip lora
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time

import psutil
import torch
from datasets import Dataset


class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled every 5 ms), in MB."""

    def __enter__(self) -> PeakRSS:
        self._proc, self.peak, self._stop = psutil.Process(), 0, threading.Event()
        self.base = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak, self._proc.memory_info().rss) / 2**20
        self.delta_mb = (max(self.peak, self.base) - self.base) / 2**20


def model_dir(name: str, root: str) -> str:
    """``tiny`` (hfrl's built-in) or ``gpt2-small`` (GPT-2 124M shape, random weights from its config)."""
    from hfrl.core.tiny import tiny_model_path

    if name == "tiny":
        return tiny_model_path("tiny")
    if name != "gpt2-small":
        return name  # any local directory
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    out = os.path.join(root, "gpt2-small")
    if not os.path.isdir(out):
        tok = AutoTokenizer.from_pretrained(tiny_model_path("tiny"))  # offline tokenizer; vocab padded below
        torch.manual_seed(0)
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=50257,
                n_positions=1024,
                eos_token_id=tok.eos_token_id,
                bos_token_id=tok.bos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        )
        model.save_pretrained(out)
        tok.save_pretrained(out)
    return out


def length_reward(prompts, completions, **kwargs):
    """A cheap reward so that the benchmark measures the trainer, not the reward."""
    return [len(c) / 100 for c in completions]


def run_hfrl(alg: str, path: str, n_prompts: int, new_tokens: int, iterations: int, out: str, **extra) -> dict:
    """hfrl's ``alg`` (``ALG+ESTIMATOR``: with that advantage estimator, ``generations`` completions per
    prompt) on ``n_prompts`` completions of ``new_tokens`` per iteration, 4 minibatches."""
    from hfrl.runs.experiment import algorithm_trainer

    alg, _, estimator = alg.partition("+")
    generations = extra.pop("generations", 4)
    groups = generations if estimator else 1
    if estimator:
        extra.setdefault("config", {}).update(advantage_estimator=estimator, num_generations=groups)
    trainer_cls = algorithm_trainer(alg)
    args = trainer_cls.config_class(
        output_dir=out, num_iterations=iterations + 1, rollout_batch_size=n_prompts // groups,
        mini_batch_size=n_prompts // 4,
        num_ppo_epochs=1, max_new_tokens=new_tokens, learning_rate=1e-5, kl_coef=0.05, report_to="none",
        disable_tqdm=True, save_strategy="no", logging_first_step=False,
        generation_kwargs={"do_sample": True, "top_k": 0, "min_new_tokens": new_tokens},
        **extra.pop("config", {}),
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": ["1 2 3 the movie was"] * (n_prompts * 2)})
    trainer = trainer_cls(model=path, args=args, reward_funcs=length_reward, train_dataset=data, **extra)
    with PeakRSS() as mem:
        trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h][1:]  # the first iteration is warm-up
    phases = {k: statistics.mean(h[f"time/{k}"] for h in logs) for k in ("generate", "reward", "score", "update")}
    total = sum(phases.values())
    return {
        "seconds_per_iteration": total,
        **{f"time/{k}": v for k, v in phases.items()},
        "tokens_per_s": statistics.mean(h["tokens_per_second"] for h in logs),
        "peak_rss_mb": mem.peak_mb,
        "peak_rss_delta_mb": mem.delta_mb,
    }


def floor(path: str, n_prompts: int, new_tokens: int, iterations: int, mask_policy: bool) -> dict:
    """The same generation and update work with nothing around it: generate, then the minibatch
    forward+backward passes and optimizer steps (and, for NLPO, the mask policy's forwards).

    Forwards compute logits at the completion positions only (``logits_to_keep``), as hfrl and TRL
    do. NLPO's floor adds the work the algorithm cannot avoid: per generated token, the mask
    policy's forward with its own KV cache and transformers' top-p filter on its logits (sampling
    token t needs the mask at t). The sets it sampled from are kept from generation, so scoring and
    the update need no mask-policy forward (until the stored sets, one per minibatch was counted).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfrl.core.policies import disable_dropout

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    ref = AutoModelForCausalLM.from_pretrained(path).eval()
    masker = AutoModelForCausalLM.from_pretrained(path).eval() if mask_policy else None
    disable_dropout(model)  # as hfrl's trainers do by default
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = tok(["1 2 3 the movie was"] * n_prompts, return_tensors="pt", padding=True)
    keep = new_tokens + 1
    times: dict[str, list[float]] = {"generate": [], "score": [], "update": []}
    for i in range(iterations + 1):
        t0 = time.perf_counter()
        with torch.no_grad():
            model.eval()
            extra = {} if masker is None else {"logits_processor": [_BareTopPMask(masker)]}
            out = model.generate(**ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                                 top_k=0, pad_token_id=tok.pad_token_id, **extra)  # fmt: skip
        t1 = time.perf_counter()
        with torch.no_grad():  # rollout scoring: policy (+ value) and reference, one forward each
            model(out, logits_to_keep=keep)
            ref(out, logits_to_keep=keep)
        t2 = time.perf_counter()
        model.train()
        for chunk in out.split(max(n_prompts // 4, 1)):
            model(chunk, logits_to_keep=keep).logits.float().mean().backward()
            opt.step()
            opt.zero_grad()
        t3 = time.perf_counter()
        if i:  # skip warm-up
            times["generate"].append(t1 - t0)
            times["score"].append(t2 - t1)
            times["update"].append(t3 - t2)
    phases = {k: statistics.mean(v) for k, v in times.items()}
    return {"seconds_per_iteration": sum(phases.values()), **{f"time/{k}": v for k, v in phases.items()}}


class _BareTopPMask:
    """NLPO's per-step work in its plainest form: the mask policy's forward with its own KV cache,
    transformers' ``TopPLogitsWarper`` on its logits (top_p 0.9, 100 tokens kept: NLPOConfig's
    defaults), and the policy's logits outside that set set to -inf."""

    def __init__(self, masker) -> None:
        from transformers import TopPLogitsWarper

        self.masker, self.past = masker, None
        self.warper = TopPLogitsWarper(top_p=0.9, min_tokens_to_keep=100)

    def __call__(self, input_ids, scores):
        step = input_ids if self.past is None else input_ids[:, -1:]
        out = self.masker(step, past_key_values=self.past, use_cache=True, logits_to_keep=1)
        self.past = out.past_key_values
        allowed = self.warper(input_ids, out.logits[:, -1]) > -float("inf")
        return scores.masked_fill(~allowed, -float("inf"))


def run_trl(
    name: str,
    path: str,
    n_prompts: int,
    new_tokens: int,
    iterations: int,
    out: str,
    generations: int = 2,
    bf16: bool = False,
) -> dict:
    """TRL's ``RLOOTrainer`` or ``GRPOTrainer`` (``name``: rloo, grpo) on the same work, ``generations``
    completions per prompt (``bf16``: TRL's bf16 mixed precision, for comparisons on a GPU)."""
    import trl

    config_class, trainer_class = {
        "rloo": (trl.RLOOConfig, trl.RLOOTrainer),
        "grpo": (trl.GRPOConfig, trl.GRPOTrainer),
    }[name]
    # The same work per iteration: n_prompts completions of new_tokens, one pass of updates in 4 minibatches.
    args = config_class(
        output_dir=out, per_device_train_batch_size=n_prompts // 4, steps_per_generation=4, num_generations=generations,
        max_completion_length=new_tokens, max_steps=4 * (iterations + 1), learning_rate=1e-5, report_to="none",
        use_cpu=not torch.cuda.is_available(), bf16=bf16, beta=0.05, save_strategy="no", disable_tqdm=True,
        logging_steps=4, gradient_checkpointing=False, temperature=1.0, top_k=0,
        generation_kwargs={"min_new_tokens": new_tokens},
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": ["1 2 3 the movie was"] * (n_prompts * 2)})
    trainer = trainer_class(model=path, reward_funcs=length_reward, args=args, train_dataset=data)
    step_times: list[float] = []
    last = [time.perf_counter()]

    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):
            now = time.perf_counter()
            step_times.append(now - last[0])
            last[0] = now

    trainer.add_callback(Clock())
    trainer.train()
    per_iteration = [sum(step_times[i : i + 4]) for i in range(4, len(step_times), 4)]  # skip warm-up
    seconds = statistics.mean(per_iteration)
    return {"seconds_per_iteration": seconds, "tokens_per_s": n_prompts * new_tokens / seconds}


def sft_steps(path: str, n_prompts: int, new_tokens: int) -> None:
    """Plain supervised fine-tuning steps on a batch of the same shape (the memory baseline)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (n_prompts, 8 + new_tokens))
    for _ in range(2):
        for chunk in ids.split(max(n_prompts // 4, 1)):
            model(chunk, labels=chunk).loss.backward()
            opt.step()
            opt.zero_grad()


def peak_memory_mb(part: str, path: str, n_prompts: int, new_tokens: int) -> float:
    """Peak RSS (MB) of a fresh process that runs only ``part`` (memory cannot be separated
    reliably inside one process on CPU: the allocator keeps what earlier parts used)."""
    import subprocess
    import sys

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the (large) parent across fork + exec.
    code = (
        "import sys; sys.argv = ['x']; import bench_online as b; "
        f"b.memory_part({part!r}, {path!r}, {n_prompts}, {new_tokens}); "
        "print([int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.abspath(__file__)))  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def memory_part(part: str, path: str, n_prompts: int, new_tokens: int) -> None:
    if part == "sft":
        sft_steps(path, n_prompts, new_tokens)
    else:
        from peft import LoraConfig

        lora = LoraConfig(r=8, target_modules=["c_attn"], fan_in_fan_out=True)
        run_hfrl("ppo", path, n_prompts, new_tokens, 1, tempfile.mkdtemp(), peft_config=lora)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny, gpt2-small, or a local causal model directory")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=3, help="measured iterations (after one warm-up)")
    parser.add_argument("--skip", nargs="*", default=[], help="parts to skip: nlpo trl lora")
    parser.add_argument("--algs", default="ppo,nlpo", help="hfrl runs: ALG or ALG+ESTIMATOR (e.g. ppo,nlpo,ppo+rloo)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt of the ALG+ESTIMATOR runs")
    parser.add_argument("--trl-generations", type=int, default=2, help="completions per prompt of TRL's runs")
    parser.add_argument("--json", help="write the figures to this file")
    a = parser.parse_args(argv)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="hfrl-bench-")
    path = model_dir(a.model, root)

    def work(name: str) -> str:
        return os.path.join(root, name)

    results: dict = {"model": a.model, "prompts": a.prompts, "new_tokens": a.new_tokens,
                     "threads": torch.get_num_threads()}  # fmt: skip
    algs = [alg for alg in a.algs.split(",") if alg and not (alg == "nlpo" and "nlpo" in a.skip)]
    for alg in algs:
        results[alg] = run_hfrl(alg, path, a.prompts, a.new_tokens, a.iterations, work(alg), generations=a.generations)
    if "ppo" in algs:
        results["ppo_floor"] = floor(path, a.prompts, a.new_tokens, a.iterations, mask_policy=False)
        results["ppo_over_floor"] = (
            results["ppo"]["seconds_per_iteration"] / results["ppo_floor"]["seconds_per_iteration"]
        )
    if "nlpo" in algs:
        results["nlpo_floor"] = floor(path, a.prompts, a.new_tokens, a.iterations, mask_policy=True)
        results["nlpo_over_floor"] = (
            results["nlpo"]["seconds_per_iteration"] / results["nlpo_floor"]["seconds_per_iteration"]
        )
    if "trl" not in a.skip:
        results["trl_generations"] = a.trl_generations
        for name in ("rloo", "grpo"):
            results[f"trl_{name}"] = run_trl(name, path, a.prompts, a.new_tokens, a.iterations, work(name),
                                             generations=a.trl_generations)  # fmt: skip
            for alg in algs:
                key = "" if alg == "ppo" else f"{alg}_"
                results[f"{key}tokens_per_s_over_trl_{name}"] = (
                    results[alg]["tokens_per_s"] / results[f"trl_{name}"]["tokens_per_s"]
                )
    if "lora" not in a.skip:
        results["ppo_lora_peak_rss_mb"] = peak_memory_mb("ppo_lora", path, a.prompts, a.new_tokens)
        results["sft_peak_rss_mb"] = peak_memory_mb("sft", path, a.prompts, a.new_tokens)
        results["lora_peak_memory_over_sft"] = results["ppo_lora_peak_rss_mb"] / results["sft_peak_rss_mb"]
    print_table(results)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


def print_table(r: dict) -> None:
    print(f"\nmodel {r['model']}, {r['prompts']} prompts x {r['new_tokens']} new tokens, {r['threads']} threads")
    print(f"{'run':<20}{'s/iter':>9}{'generate':>10}{'reward':>9}{'score':>9}{'update':>9}{'tok/s':>9}")
    names = ["ppo", "ppo_floor", "nlpo", "nlpo_floor"] + [k for k in r if "+" in k and "over" not in k]
    for name in [*names, "trl_rloo", "trl_grpo"]:
        if name in r:
            x = r[name]
            cells = [f"{x.get(f'time/{k}', float('nan')):>9.3f}" for k in ("generate", "reward", "score", "update")]
            print(f"{name:<20}{x['seconds_per_iteration']:>9.3f}{cells[0]:>10}{''.join(cells[1:])}"
                  f"{x.get('tokens_per_s', float('nan')):>9.0f}")  # fmt: skip
    for key in ("ppo_lora_peak_rss_mb", "sft_peak_rss_mb"):
        if key in r:
            print(f"{key}: {r[key]:.0f}")
    keys = ("ppo_over_floor", "nlpo_over_floor", "tokens_per_s_over_trl_rloo", "tokens_per_s_over_trl_grpo",
            "lora_peak_memory_over_sft", *[k for k in r if "+" in k and "over" in k])  # fmt: skip
    for key in keys:
        if key in r:
            print(f"{key}: {r[key]:.2f}")


if __name__ == "__main__":
    main()
