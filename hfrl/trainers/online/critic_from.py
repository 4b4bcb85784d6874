"""``critic_from``: a new run's critic started from a trained one (a run folder, an ``hfrl export``, or a
Hub repo from ``hfrl push``), in place, once the trainer has built its ``ActorCritic``.

    hfrl train --task arith_chains --alg ppo --critic_from runs/arith-ppo
    hfrl train --task arith_chains --alg ppo --critic_from me/arith-ppo   # namespace/name on the Hub

A critic is ``value_head.safetensors`` (``Linear(hidden, 1)`` on the last hidden state) and, for a
``separate_critic`` run, ``critic/``: its own backbone's ``model*.safetensors``. A shared critic's head
reads the policy's features: only the head is loaded, so its values equal the source's where the new
run's policy is the source's (``--model`` the same run). Loading is data only: ``safetensors`` files are
read into the new run's own modules (nothing is built from a ``config.json``, no code runs, a pickle is
refused), the folder's links must stay inside it (:func:`hfrl.utils.folders.check_folder`), and a Hub id
is downloaded pinned as every Hub load in hfrl is (:func:`hfrl.utils.assets.hub_kwargs`). A critic of
another hidden size, layout or LoRA setting is refused in one line. What ships it and says what it
predicts: :mod:`hfrl.runs.critic_artifact`. Tested in ``tests/cli/test_critic_from.py``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VALUE_HEAD_NAME = "value_head.safetensors"  # the value head beside a saved policy (checkpointing.save_policy)
CRITIC_DIR = "critic"
CRITIC_PATTERNS = (  # what an export or a push ships of a critic, and what a Hub download fetches
    VALUE_HEAD_NAME,
    f"{CRITIC_DIR}/config.json",
    f"{CRITIC_DIR}/generation_config.json",
    f"{CRITIC_DIR}/model.safetensors",
    f"{CRITIC_DIR}/model-*-of-*.safetensors",
    f"{CRITIC_DIR}/model.safetensors.index.json",
)
_HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class CriticSource:
    """A trained critic found in a folder: ``head`` (the value head's file), ``backbone`` (``critic/``, or
    None for a shared critic), ``hidden_size`` (read from the head's weight) and ``lora`` (whether it was
    trained with a LoRA adapter: the run's adapter_config.json, or LoRA weights in ``critic/``)."""

    name: str
    folder: Path
    head: Path
    backbone: Path | None
    hidden_size: int
    lora: bool


def resolve_critic_folder(ref: str) -> Path:
    """A local folder for ``ref``: the folder itself (its links checked), or the Hub repo
    ``namespace/name`` downloaded (the critic's files only, at the manifest's pin if it lists the id)."""
    from hfrl.utils.folders import check_folder

    ref = str(ref)
    if os.path.isdir(ref):
        return check_folder(ref, "critic_from folder")
    if os.path.exists(ref):
        raise ValueError(f"critic_from {ref}: a file, not a folder; give the run folder that holds {VALUE_HEAD_NAME}")
    if not _HUB_REPO.match(ref):
        raise ValueError(
            f"critic_from {ref}: no such folder, and not a Hub id (namespace/name); give a run folder, an hfrl export "
            "or a Hub repo from hfrl push"
        )
    from huggingface_hub import snapshot_download

    from hfrl.utils.assets import hub_kwargs

    try:
        path = snapshot_download(ref, allow_patterns=[*CRITIC_PATTERNS, "adapter_config.json"], **hub_kwargs(ref))
    except Exception as err:  # noqa: BLE001 - offline, unknown repo, no access: one line
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"critic_from {ref}: cannot download it from the Hub ({reason})") from None
    return check_folder(path, "critic_from folder")


def open_critic(ref: str) -> CriticSource:
    """The critic in ``ref`` (:func:`resolve_critic_folder`), checked to be safetensors files it can load."""
    from safetensors import safe_open

    folder = resolve_critic_folder(ref)
    head = folder / VALUE_HEAD_NAME
    if not head.is_file():
        raise ValueError(
            f"critic_from {ref}: no {VALUE_HEAD_NAME} in it; it was trained without a critic (a critic-free "
            "estimator or algorithm): give a run trained with one"
        )
    with _damaged_named(head), safe_open(str(head), "pt") as f:
        names = list(f.keys())  # a safe_open handle has no __contains__
        shape = f.get_slice("summary.weight").get_shape() if "summary.weight" in names else None
    if not shape or len(shape) != 2 or shape[0] != 1:
        raise ValueError(f"critic_from {ref}: {VALUE_HEAD_NAME} holds no value head (summary.weight of shape [1, H])")
    backbone = folder / CRITIC_DIR
    if backbone.is_dir() and not list(backbone.glob("model*.safetensors")):
        raise ValueError(
            f"critic_from {ref}: critic/ holds no model.safetensors (hfrl loads critics from safetensors only, "
            "never a pickle); save or export the run again with hfrl"
        )
    lora = (folder / "adapter_config.json").is_file() or (backbone.is_dir() and _has_lora_keys(backbone))
    return CriticSource(ref, folder, head, backbone if backbone.is_dir() else None, int(shape[1]), lora)


def load_critic(model: Any, ref: str) -> CriticSource:
    """Start ``model``'s critic (an :class:`hfrl.core.policies.ActorCritic`) from the critic in ``ref``:
    its value head and, for a separate critic, its backbone's weights, in place. A critic of another
    hidden size, layout (separate / shared) or LoRA setting is refused in one line naming what to change."""
    from safetensors.torch import load_file

    from hfrl.core.policies import hidden_size_of, is_peft_model

    if model.value_head is None:
        raise ValueError(f"critic_from {ref}: this run trains no critic (a critic-free estimator); drop critic_from")
    source = open_critic(ref)
    hidden = hidden_size_of(model.config)
    if source.hidden_size != hidden:
        raise ValueError(
            f"critic_from {ref}: its value head reads hidden size {source.hidden_size}, this run's model has "
            f"{hidden}; start from a run of the same model (--model)"
        )
    separate = model.critic is not None
    if (source.backbone is not None) != separate:
        have = "a separate critic (critic/)" if source.backbone is not None else "a shared critic (no critic/)"
        raise ValueError(
            f"critic_from {ref}: it holds {have}; set separate_critic {str(not separate).lower()} to start from it"
        )
    lora = is_peft_model(model.policy)
    if source.lora != lora:
        its = "with a LoRA adapter" if source.lora else "without LoRA (full fine-tuning)"
        fix = "add --use_peft with its LoRA settings" if source.lora else "drop --use_peft"
        raise ValueError(f"critic_from {ref}: its critic was trained {its}; {fix} to start from it")
    with _damaged_named(source.head):
        head = load_file(str(source.head))
    _load_exact(model.value_head, head, ref, VALUE_HEAD_NAME)
    if source.backbone is not None:
        with _damaged_named(source.backbone):
            weights: dict[str, Any] = {}
            for path in sorted(source.backbone.glob("model*.safetensors")):
                weights.update(load_file(str(path)))
        _load_exact(model.critic, weights, ref, f"{CRITIC_DIR}/", tied=True)
    return source


def _load_exact(module: Any, weights: dict[str, Any], ref: str, what: str, tied: bool = False) -> None:
    """``weights`` into ``module``: every key and shape its own (tied weights, which ``save_pretrained``
    writes once, may be missing), else one line with the first difference."""
    own = module.state_dict()
    unexpected = sorted(set(weights) - set(own))
    missing = sorted(set(own) - set(weights))
    if tied:  # save_pretrained drops the tied copies (the LM head of a tied embedding)
        tied_keys = set(getattr(module, "_tied_weights_keys", None) or {})
        missing = [k for k in missing if k not in tied_keys and not k.endswith("lm_head.weight")]
    wrong = [k for k in sorted(set(weights) & set(own)) if tuple(weights[k].shape) != tuple(own[k].shape)]
    if unexpected or missing or wrong:
        if wrong:
            key = wrong[0]
            detail = f"{key} has shape {list(weights[key].shape)}, this run's {list(own[key].shape)}"
        else:
            detail = f"unexpected {unexpected[0]}" if unexpected else f"missing {missing[0]}"
        raise ValueError(
            f"critic_from {ref}: {what} does not fit this run's critic ({detail}); start from a run of the same "
            "model and LoRA settings"
        )
    module.load_state_dict(weights, strict=False)
    if tied and callable(getattr(module, "tie_weights", None)):
        module.tie_weights()


def _has_lora_keys(backbone: Path) -> bool:
    from safetensors import safe_open

    for path in backbone.glob("model*.safetensors"):
        with _damaged_named(path), safe_open(str(path), "pt") as f:
            names = list(f.keys())
        if any(".lora_" in key for key in names):
            return True
    return False


def _damaged_named(where: Any) -> Any:
    from hfrl.core.models import damaged_weights_named

    return damaged_weights_named(where)


__all__ = [
    "CRITIC_DIR",
    "CRITIC_PATTERNS",
    "VALUE_HEAD_NAME",
    "CriticSource",
    "load_critic",
    "open_critic",
    "resolve_critic_folder",
]
