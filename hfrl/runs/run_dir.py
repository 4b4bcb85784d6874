"""A trained run (or any model) as ``hfrl eval / push / export / chat`` see it: what it holds and how
to load it, without loading anything until asked.

    from hfrl.runs.run_dir import open_run
    run = open_run("runs/numbers-ppo")   # a run dir, a checkpoint, a model dir, tiny, smollm2, a .gguf file or a Hub id
    model, tokenizer = run.load()        # the full model, or the base model with the PEFT adapter

A run directory from ``hfrl train`` holds the policy (a full model, or only a PEFT adapter),
``value_head.safetensors``, the tokenizer, ``config.yaml`` (task, algorithm, model and config
fields), ``trainer_state.json`` and, after ``hfrl eval``, ``eval/{split}.json`` (after training) and
``eval/{split}-base.json`` (the base model: before training).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfrl.core.models import model_config_dict
from hfrl.runs.run_config import BASE_SUFFIX, CONFIG_NAME, EVAL_DIR, STATE_NAME, read_config_file

MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model-*-of-*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model-*-of-*.bin",
    "pytorch_model.bin.index.json",
)
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def is_hub_id(name: str | None) -> bool:
    """A name that can only be a Hub model id: not a local path, a GGUF file or a built-in model."""
    from hfrl.core.models import BUILTIN_MODELS, is_gguf

    return (
        bool(name)
        and name not in BUILTIN_MODELS
        and not is_gguf(name)
        and not os.path.exists(str(name))
        and bool(_HUB_ID.match(str(name)))
    )


@dataclass
class Run:
    """What a run directory or model name holds. ``path`` is None for a Hub id or a built-in model."""

    name: str
    path: Path | None
    config: dict[str, Any] = field(default_factory=dict)
    adapter_config: dict[str, Any] | None = None
    model_config: dict[str, Any] = field(default_factory=dict)
    has_config_file: bool = False

    # ---- what it is -------------------------------------------------------------------------
    @property
    def is_adapter(self) -> bool:
        return self.adapter_config is not None

    @property
    def task(self) -> str | None:
        return self.config.get("task")

    @property
    def alg(self) -> str | None:
        return self.config.get("alg")

    @property
    def model_ref(self) -> str:
        """What :func:`hfrl.core.models.load_model` gets: the local directory, or the name (a Hub id, a
        built-in model or a GGUF file)."""
        return str(self.path) if self.path is not None else self.name

    @property
    def base_model(self) -> str | None:
        """The model training started from, as the user named it (``tiny``, ``smollm2``, a Hub id or a path)."""
        if self.config.get("model"):
            return str(self.config["model"])
        if self.adapter_config and self.adapter_config.get("base_model_name_or_path"):
            from hfrl.core.models import builtin_name

            return builtin_name(self.adapter_config["base_model_name_or_path"])
        return None

    @property
    def adapter_base(self) -> str | None:
        """The base model the adapter loads onto: the saved path when it still exists, else the
        run config's base model (a run that started from an adapter on a named base), else its model."""
        if not self.adapter_config:
            return None
        saved = self.adapter_config.get("base_model_name_or_path")
        named = self.config.get("base_model") or self.config.get("model")
        if saved and (os.path.exists(saved) or not named):  # a folder or a GGUF file
            return saved
        return str(named) if named else None

    @property
    def is_seq2seq(self) -> bool:
        if self.adapter_config:
            if self.adapter_config.get("task_type") == "SEQ_2_SEQ_LM":
                return True
            if self.adapter_config.get("task_type") == "CAUSAL_LM":
                return False
            return model_config_dict(self.adapter_base).get("is_encoder_decoder", False)
        return bool(self.model_config.get("is_encoder_decoder", False))

    def files(self, patterns: tuple[str, ...]) -> list[Path]:
        """Files of the run directory matching ``patterns`` (sorted, no duplicates)."""
        if self.path is None:
            return []
        found = {p for pattern in patterns for p in self.path.glob(pattern) if p.is_file()}
        return sorted(found)

    def model_files(self) -> list[Path]:
        return self.files(ADAPTER_FILES if self.is_adapter else MODEL_FILES)

    def tokenizer_files(self) -> list[Path]:
        return self.files(TOKENIZER_FILES)

    # ---- what it recorded -------------------------------------------------------------------
    def log_history(self) -> list[dict[str, Any]]:
        if self.path is None or not (self.path / STATE_NAME).is_file():
            return []
        history = read_json_mapping(self.path / STATE_NAME).get("log_history", [])
        return [entry for entry in history if isinstance(entry, dict)] if isinstance(history, list) else []

    def eval_results(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{split: {"before": report, "after": report}}`` from ``eval/*.json`` (either may be missing)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        folder = self.path / EVAL_DIR if self.path is not None else None
        if folder is None or not folder.is_dir():
            return out
        for path in sorted(folder.glob("*.json")):
            split, which = path.stem, "after"
            if split.endswith(BASE_SUFFIX):
                split, which = split[: -len(BASE_SUFFIX)], "before"
            out.setdefault(split, {})[which] = read_json_mapping(path)
        return out

    # ---- loading ----------------------------------------------------------------------------
    def load(self, base_model: str | None = None) -> tuple[Any, Any]:
        """``(model, tokenizer)`` in eval mode: the full model, or ``base_model`` (default: the
        adapter's own base) with the PEFT adapter on top. The tokenizer pads with EOS when it has
        no pad token."""
        from hfrl.core.models import fix_tokenizer, load_model, load_tokenizer
        from hfrl.utils.registry import UnknownNameError

        if self.is_adapter:
            from peft import PeftModel

            from hfrl.core.models import read_adapter_config

            assert self.path is not None  # an adapter is a local folder
            read_adapter_config(self.path)  # a peft_type PEFT does not know: one line, not its KeyError

            base = base_model or self.adapter_base
            if base is None:
                raise ValueError(
                    "cannot load the adapter's base model: the run names none; "
                    "pass --base-model with its Hub id or path"
                )
            try:
                lm = load_model(base)
            except UnknownNameError as err:
                raise ValueError(
                    f"cannot load the adapter's base model {base!r}; pass --base-model with its Hub id or path"
                ) from err
            lm = PeftModel.from_pretrained(lm, str(self.path))
            tokenizer_source = str(self.path) if self.tokenizer_files() else base
        else:
            lm = load_model(self.model_ref)
            tokenizer_source = self.model_ref
        return lm.eval(), fix_tokenizer(load_tokenizer(tokenizer_source), lm)


def scorer_kind(run: Run) -> str | None:
    """What makes ``run`` a model that scores texts and generates none, in a few words, or None: an
    ``hfrl train --alg reward`` run, or a sequence classifier (``config.json``'s architectures, a
    ``SEQ_CLS`` adapter)."""
    if run.alg == "reward":
        return "a reward model (hfrl train --alg reward)"
    if run.adapter_config and run.adapter_config.get("task_type") == "SEQ_CLS":
        return "a sequence classifier's adapter (task_type SEQ_CLS)"
    heads = [str(a) for a in run.model_config.get("architectures") or []]
    if heads and all(a.endswith("ForSequenceClassification") or a.endswith("RewardModel") for a in heads):
        return f"a sequence classifier ({heads[0]})"
    return None


def refuse_scorer(run: Run, command: str, task: str | None = None) -> None:
    """``hfrl chat`` / ``hfrl eval`` (``command``; ``task``: the one it was given) on a reward model: one
    line saying how it is used (as a policy's reward, on ``task`` or the run's), instead of transformers
    loading the classifier as a causal LM with a fresh LM head (answers of replacement characters) or
    ``hfrl eval`` loading the task's own classifier."""
    kind = scorer_kind(run)
    if kind is None:
        return
    import shlex

    from hfrl.core.models import BUILTIN_MODELS

    start = run.base_model
    causal = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
    if start and start not in BUILTIN_MODELS:  # the SFT run it started from is the policy; an encoder is none
        config = Path(start) / "config.json"
        names = read_json_mapping(config).get("architectures") if config.is_file() else None
        start = start if any(str(a).endswith(causal) for a in names or []) else None
    policy = f" --model {shlex.quote(start)}" if start else ""
    task = task or run.task
    task = shlex.quote(task) if task else "TASK"
    path = shlex.quote(run.name)
    heldout = sorted(run.path.glob(f"{EVAL_DIR}/*.json")) if run.path is not None else []
    held = f" (its held-out accuracy: {heldout[0]})" if heldout and command == "eval" else ""
    does = "chat" if command == "chat" else "generate text to evaluate"
    raise ValueError(
        f"{run.name} is {kind}: it scores, it does not {does}{held}; use it as a policy's reward: hfrl train --task "
        f"{task} --alg ppo{policy} --reward_model {path}, then hfrl {command} that run"
    )


def read_json_mapping(path: Path) -> dict[str, Any]:
    """A JSON file of a folder hfrl did not write in this command, as a mapping: bounded in size and
    depth (:func:`hfrl.utils.bounded.load_json`), or a one-line ``ValueError`` naming the file."""
    from hfrl.utils.bounded import load_json

    data = load_json(path, str(path))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON mapping, got {type(data).__name__}; is it the file hfrl wrote?")
    return data


def require_hub_model(name: str) -> None:
    """A Hub model that is neither cached nor reachable is one line at once (an ``OSError``: the CLI's
    exit code 1), instead of the Hub client's retries."""
    from hfrl.utils.assets import model_revision
    from hfrl.utils.hub_access import cached_revisions, hub_reachable

    revision = model_revision(name)
    cached = cached_revisions("model", name)
    if (revision in cached) if revision else bool(cached):
        return
    online, why = hub_reachable()
    if not online:
        raise OSError(
            f"model {name} is not in the Hugging Face cache and the Hub cannot be reached ({why}): download it where "
            f"it can (`hf download {name}`), or give a local folder"
        )


def open_run(name_or_path: str | os.PathLike[str], names_as_text: bool = False) -> Run:
    """Describe a run directory, a checkpoint inside one, a model directory, a built-in model
    (tiny, tiny-t5, smollm2), a GGUF file or a Hub id. A local directory must hold a model
    (``config.json``) or an adapter. A config naming code (``task: my_tasks.py:build``) is refused
    unless trusted, except with ``names_as_text`` (only the model card, which writes such names as text
    and never loads what they name; every command that opens a run refuses them)."""
    from hfrl.core.models import BUILTIN_MODELS, is_gguf
    from hfrl.utils.hub_access import missing_local_path

    name = str(name_or_path)
    path = Path(name)
    if missing_local_path(name):  # said at once, not after the Hub's retries for an "owner/name"
        raise ValueError(
            f"no run or model at {name!r}: no such folder or file; give a run directory (from hfrl train), a model "
            f"directory, a .gguf file, a Hub model id or a built-in model ({', '.join(BUILTIN_MODELS)})"
        )
    if not path.exists() and is_hub_id(name):
        require_hub_model(name)
    if not path.exists() and (name in BUILTIN_MODELS or is_hub_id(name)):
        return Run(name=name, path=None, model_config=model_config_dict(name))
    if is_gguf(name) and path.is_file():
        return Run(name=name, path=None, model_config=model_config_dict(name))
    if not path.exists():
        raise ValueError(
            f"no run or model at {name!r}: give a run directory (from hfrl train), a model directory, "
            f"a .gguf file, a Hub model id or a built-in model ({', '.join(BUILTIN_MODELS)})"
        )
    if not path.is_dir():
        raise ValueError(f"{name} is a file; give the run directory that holds it (or a .gguf model file)")
    from hfrl.core.models import read_adapter_config
    from hfrl.runs.run_folder import restore_replaced
    from hfrl.utils.folders import check_folder
    from hfrl.utils.trust import remote_code

    checkpoint = re.fullmatch(r"checkpoint-\d+", path.name) is not None
    folder = path.parent if checkpoint and (path.parent / CONFIG_NAME).is_file() else path  # a checkpoint's run
    check_folder(folder, "run folder")  # data, all the way down: no link out, for reading and writing alike
    restore_replaced(folder)  # a run that an interrupted --overwrite_output_dir had moved aside
    if not (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        raise ValueError(
            f"{name} holds no model: expected config.json (a full model) or adapter_config.json (a PEFT adapter); "
            "save the trained model first (trainer.save_model())"
        )
    config_file = path / CONFIG_NAME
    if not config_file.is_file() and checkpoint:
        config_file = path.parent / CONFIG_NAME  # a checkpoint of a run: the run's config
    # first: no heavy import before it
    config = read_config_file(config_file, names_as_text) if config_file.is_file() else {}
    if config:
        from hfrl.runs.config_values import check_config

        config = check_config(config, f"config file {config_file}")
    remote_code(path)  # a folder naming its own code (auto_map) is refused here, whatever the command does next
    adapter_config = None
    if (path / "adapter_config.json").is_file():
        adapter_config = read_adapter_config(path, known_type=False)  # its peft_type: when it loads
    model_config = read_json_mapping(path / "config.json") if (path / "config.json").is_file() else {}
    return Run(
        name=name,
        path=path,
        config=config,
        adapter_config=adapter_config,
        model_config=model_config,
        has_config_file=config_file.is_file(),
    )


__all__ = ["Run", "is_hub_id", "open_run", "read_json_mapping", "refuse_scorer", "scorer_kind"]
