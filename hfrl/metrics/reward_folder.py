"""Whether a local folder given as a reward model (``--reward_model RUN``, the ``reward_model`` reward's
``model``) is one, said in one line when the reward is made: before the policy loads and generates.

``AutoModelForSequenceClassification`` loads any causal LM with a freshly initialised ``score`` head (a
warning, no error): a PPO run given as ``--reward_model`` trained on random scores and exited 0. So a
folder is read first, as data and cheaply (its JSON files and the safetensors header, never the
weights): it must stay inside itself (:func:`hfrl.utils.folders.check_folder`), name no code to load
(:func:`hfrl.utils.trust.remote_code`), be no hfrl run of another algorithm (``config.yaml``'s
``alg``), name a sequence classifier in ``config.json`` (or one of hfrl's reward architectures) of a
model type transformers knows, and hold weights with a head beside the base model and a tokenizer.
A Hub id is left to the Hub; a name that can only be a local path and is not there is refused here.

    from hfrl.metrics.reward_folder import check_reward_model
    check_reward_model("runs/hh-reward")   # nothing, or a one-line ValueError naming what to change
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

# what the user can give instead, at the end of every refusal
USE = "give an `hfrl train --alg reward` run folder, a reward model's folder or its Hub id"
# hfrl's own reward architectures (hfrl.core.auto_classes), which are no *ForSequenceClassification by name
REWARD_ARCHITECTURES = ("GPTNeoXRewardModel",)
# files any one of which lets AutoTokenizer load (transformers' own names)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "spiece.model",
                   "tokenizer.model", "sentencepiece.bpe.model")  # fmt: skip
MAX_HEADER = 100 << 20  # bytes of a safetensors JSON header (a 70B model's is about 100 KiB)


def check_reward_model(name: str) -> None:
    """Nothing when ``name`` is a Hub id or a local folder that loads as a reward model; else a one-line
    ``ValueError`` (``UntrustedCodeError`` for code, ``FolderLinkError`` for a link out) naming it."""
    from hfrl.core.models import BUILTIN_MODELS
    from hfrl.utils.hub_access import missing_local_path

    name = str(name)
    if name in BUILTIN_MODELS:
        raise ValueError(f"reward model {name}: a built-in language model, not a reward model; {USE}")
    if missing_local_path(name):  # said now, not after the Hub's retries for an "owner/name"
        raise FileNotFoundError(f"no such folder: {name} (the reward model); {USE}")
    if not os.path.exists(name):
        return  # a Hub id: the Hub's to answer (offline and not cached: one line where it loads)
    path = Path(name)
    if not path.is_dir():
        raise ValueError(f"reward model {name} is a file; {USE}")
    from hfrl.utils.folders import check_folder
    from hfrl.utils.trust import remote_code

    check_folder(path, "reward model folder")  # data, all the way down: no link out (tokenizer.json -> ~/x)
    remote_code(path)  # auto_map, a Hub kernel as attn_implementation: refused now, not at the first reward
    _not_another_run(path, name)
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        _adapter(path, name)
        return
    config = _json(path / "config.json", name, "holds no model (no config.json)")
    if not isinstance(config, dict):
        raise ValueError(f"reward model {name}: config.json is no JSON mapping; {USE}")
    architectures = [str(a) for a in config.get("architectures") or []]
    if architectures and not any(a.endswith("ForSequenceClassification") or a in REWARD_ARCHITECTURES
                                 for a in architectures):  # fmt: skip
        raise ValueError(
            f"{name} is not a reward model: its config.json names {', '.join(architectures)}, not a sequence "
            f"classifier (*ForSequenceClassification), and would score with a freshly initialised head; {USE}"
        )
    _known_type(config.get("model_type"), name)
    _weights_have_head(path, name)
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ValueError(f"reward model {name} holds no tokenizer (tokenizer.json, vocab.txt...); copy it beside the "
                         "weights, or save the model again with its tokenizer")  # fmt: skip


def _json(file: Path, name: str, missing: str) -> Any:
    from hfrl.utils.bounded import load_json

    if not file.is_file():
        raise ValueError(f"reward model {name} {missing}; {USE}")
    return load_json(file, f"reward model {name}: {file.name}")  # not JSON, too large, too deep: one line


def _not_another_run(path: Path, name: str) -> None:
    """An hfrl run of another algorithm (a PPO or SFT run: a causal LM) is said as such."""
    import re

    from hfrl.utils.bounded import load_yaml, read_text

    file = path / "config.yaml"
    if not file.is_file() and re.fullmatch(r"checkpoint-\d+", path.name):
        file = path.parent / "config.yaml"  # a checkpoint of a run: the run's config
    if not file.is_file():
        return
    config = load_yaml(read_text(file, f"{file}"), f"{file}")
    alg = config.get("alg") if isinstance(config, dict) else None
    if alg is not None and str(alg) != "reward":
        raise ValueError(
            f"{name} is an hfrl {alg} run (its config.yaml: alg: {alg}), not a reward model: it would score with a "
            f"freshly initialised head; {USE} (hfrl train --task TASK --alg reward --model {name} fits one)"
        )


def _adapter(path: Path, name: str) -> None:
    """A PEFT adapter folder: a reward model's is of ``task_type: SEQ_CLS``."""
    from hfrl.utils.trust import check_adapter_config

    data = check_adapter_config(_json(path / "adapter_config.json", name, "holds no adapter"), f"reward model {name}")
    task_type = data.get("task_type") if isinstance(data, dict) else None
    if task_type != "SEQ_CLS":
        raise ValueError(f"{name} is not a reward model: its adapter_config.json has task_type {task_type!r}, not "
                         f"'SEQ_CLS' (a sequence classifier's adapter); {USE}")  # fmt: skip


def _known_type(model_type: Any, name: str) -> None:
    """A model type transformers (with hfrl's own architectures) knows; its config table imports torch,
    which the policy loads next anyway."""
    if not model_type:
        raise ValueError(f"reward model {name}: its config.json names no model_type; save the model again")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if str(model_type) not in CONFIG_MAPPING:
        from transformers import __version__

        from hfrl.core.auto_classes import ARCHITECTURES

        raise ValueError(
            f"reward model {name}: its model type {model_type!r} is not one that transformers {__version__} knows "
            f"(hfrl adds {', '.join(ARCHITECTURES)}); {USE} of a type it knows"
        )


def weight_names(path: Path) -> list[str] | None:
    """The tensor names of a folder's safetensors weights (the index's ``weight_map``, or the file's
    header), read without torch; None for weights in another format (``pytorch_model.bin``: a pickle).
    A damaged header or index is one line."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        from hfrl.utils.bounded import load_json

        data = load_json(index, f"{index}")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index} has no weight_map; download, copy or export the model again")
        return [str(k) for k in weight_map]
    file = path / "model.safetensors"
    if not file.is_file():
        return None
    with open(file, "rb") as fh:  # safetensors: 8 bytes little-endian header length, then the JSON header
        head = fh.read(8)
        size = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        ok = 0 < size <= min(MAX_HEADER, os.path.getsize(file) - 8)
        try:
            header = json.loads(fh.read(size)) if ok else None
        except (ValueError, UnicodeDecodeError):
            header = None
    if not isinstance(header, dict):
        raise ValueError(f"the weights in {file} are damaged (no safetensors header); download, copy or export the "
                         "model again")  # fmt: skip
    return [k for k in header if k != "__metadata__"]


def _weights_have_head(path: Path, name: str) -> None:
    """Weights there, and a head beside the base model: a sequence classifier's top-level modules are
    its base (``transformer``, ``model``, ``bert``...) and its head (``score``, ``classifier``,
    ``out_proj``...); a causal LM's are its base and at most ``lm_head``."""
    files = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    if not any((path / f).is_file() for f in files):
        raise ValueError(f"reward model {name} holds no weights (model.safetensors or pytorch_model.bin); {USE}")
    names = weight_names(path)
    if names is None:
        return  # a pickle: its names are read only by torch, when it loads
    tops = {n.split(".", 1)[0] for n in names} - {"lm_head"}
    if len(tops) < 2:
        raise ValueError(
            f"{name} is not a reward model: its weights hold no classification head (only "
            f"{', '.join(t + '.*' for t in sorted(tops)) or 'lm_head'}), so it would score with a freshly "
            f"initialised one; {USE}"
        )


__all__ = ["check_reward_model", "weight_names"]
