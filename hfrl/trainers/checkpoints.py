"""Complete checkpoints: a ``checkpoint-N`` folder counts only once everything in it is written.

transformers' ``Trainer`` writes ``checkpoint-N/`` in place, one file after another (weights,
optimizer, scheduler, RNG states, ``trainer_state.json``), and hfrl's trainers add their own state
after it (``online_state.json``: the KL controller; an action space's files,
:mod:`hfrl.core.action_space`). A run killed in between leaves a folder that looks like a
checkpoint: resuming from it silently reset the KL coefficient or NLPO's mask, or failed with a
bare ``[Errno 2]`` or a safetensors header error.

So the last file written into a checkpoint is ``checkpoint_complete.json``, the list of every file
of the checkpoint with its size and SHA-256, written atomically (a temporary name, then ``os.replace``)
after every process has finished writing. A folder without it is incomplete; one whose files no longer
match it (deleted, truncated, changed in place at the same size, or a file added that it does not list:
a shard index beside the weights would be loaded instead of them) is damaged, and every file is
verified before the Trainer reads any. The marker also records which run wrote the checkpoint
(:func:`run_identity`: the run's id, what defines it on the command line, ``task``, ``alg``, ``model``,
``rewards``, ``task_args``, and the settings that define what a step is): a checkpoint of another run
copied in, or a run whose ``config.yaml`` was edited since, is refused with the fields that differ
instead of being continued with the wrong ones. A marker written before hfrl recorded all of this
(:data:`MARKER_FORMAT`) counts as another run's, unless the checkpoint is named explicitly
(``--resume --resume_from_checkpoint PATH``, ``train(resume_from_checkpoint=PATH)``).
:func:`newest_complete_checkpoint` (``hfrl train
--resume``, ``train(resume_from_checkpoint=True)``) takes the newest complete checkpoint and warns,
in one line, about the newer ones it skipped; a checkpoint named explicitly is refused with what is
missing. The Trainer's rotation (``save_total_limit``) runs once the new checkpoint is complete, so
an interrupted write never leaves the run without a complete checkpoint. A marker was preferred to
writing into a temporary folder and renaming it: the Trainer names the folder itself
(``checkpoint-{global_step}`` in ``_save_checkpoint``, transformers 5.23), and a marker covers its
files and hfrl's alike without copying that method.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger(__name__)

COMPLETE_NAME = "checkpoint_complete.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # transformers' PREFIX_CHECKPOINT_DIR-{global_step}
MARKER_FORMAT = 2  # 2: the run's definition (task, alg, model, rewards, task_args) is part of its identity
# the run keys of config.yaml that define it; the preset too: edited before a resume, it relabelled the
# card (its settings are fields of their own, recorded below, and config.yaml's fields win over them)
RUN_DEFINITION = ("task", "alg", "model", "rewards", "task_args", "preset")


# What a resumed run may change: when and how it is saved, evaluated, logged and batched for speed, and
# how long it goes on (``hfrl train --resume`` checks the command; :func:`run_identity` leaves them out).
RESUMABLE = frozenset(
    {
        "num_iterations", "max_steps", "num_train_epochs", "save_every", "save_steps", "save_strategy",
        "save_total_limit", "save_only_model", "eval_every", "eval_steps", "eval_strategy", "eval_test",
        "logging_steps", "logging_dir", "logging_first_step", "report_to", "run_name", "disable_tqdm",
        "log_completions", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo", "hub_token",
        "hub_revision", "dataloader_num_workers", "generation_batch_size", "scoring_batch_size",
        "per_device_eval_batch_size", "use_cpu", "resume_from_checkpoint", "overwrite_output_dir",
    }
)  # fmt: skip
# transformers.TrainingArguments fields that define the optimisation (the rest say where and how to run)
OPTIMIZATION_FIELDS = frozenset(
    {
        "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
        "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "optim", "optim_args",
        "seed", "data_seed", "gradient_accumulation_steps", "per_device_train_batch_size", "bf16", "fp16",
    }
)  # fmt: skip


def run_identity(args: Any, run_id: str | None = None, definition: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a checkpoint records about the run that wrote it: ``run_id``, its ``definition`` (the run keys
    of :data:`RUN_DEFINITION` that ``hfrl train`` resolved; None from Python) and the settings that define
    what a step is (the algorithm's own fields and the optimisation fields of ``TrainingArguments``,
    but those a resume may change, :data:`RESUMABLE`, and secrets), as plain JSON values."""
    from transformers import TrainingArguments

    from hfrl.utils.secrets import is_secret

    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    config = {}
    for f in dataclasses.fields(args):
        if not f.init or f.name in RESUMABLE or is_secret(f.name):
            continue
        if f.name in inherited and f.name not in OPTIMIZATION_FIELDS:
            continue
        value = getattr(args, f.name, None)
        config[f.name] = _plain(value)
    plain = None if definition is None else {k: _plain(definition.get(k)) for k in RUN_DEFINITION}
    return {"run_id": run_id, "definition": plain, "config": config}


def _plain(value: Any) -> Any:
    from hfrl.utils.secrets import redacted

    return json.loads(json.dumps(redacted(value), default=str, sort_keys=True))


def identity_problem(folder: str, identity: dict[str, Any], explicit: bool = False) -> str | None:
    """None when the checkpoint ``folder`` was written by the run ``identity`` describes, else what
    differs, in a few words. A marker of an older format (no run identity, or none of its definition)
    is another run's unless the checkpoint was named ``explicit``-ly."""
    marker = _marker(folder)
    recorded = marker.get("run")
    if not isinstance(recorded, dict) or marker.get("format", 1) < MARKER_FORMAT:
        if explicit:
            return None
        return (
            "it was written by an older hfrl that did not record which run wrote it; name it to resume from it "
            f"anyway: --resume --resume_from_checkpoint {folder}"
        )
    if recorded.get("run_id") and identity.get("run_id") and recorded["run_id"] != identity["run_id"]:
        return f"it belongs to another run (run id {recorded['run_id']}; this run is {identity['run_id']})"
    changed = _differences(recorded.get("definition"), identity.get("definition"), recorded_only=True)
    changed += _differences(recorded.get("config") or {}, identity.get("config") or {})
    if not changed:
        return None
    from hfrl.utils.secrets import mask_tokens

    shown = mask_tokens(", ".join(changed[:6]))
    return f"it was written with other settings ({shown}{', ...' if len(changed) > 6 else ''})"


def _differences(saved: dict[str, Any] | None, now: dict[str, Any] | None, recorded_only: bool = False) -> list[str]:
    """``key old -> new`` for each key whose value differs (nothing when either side records none);
    ``recorded_only``: the keys ``saved`` holds (a key added to :data:`RUN_DEFINITION` later, ``preset``,
    was not recorded by the hfrl that wrote an older checkpoint)."""
    if saved is None or now is None:
        return []
    missing = object()
    keys = sorted(set(saved) if recorded_only else set(saved) | set(now))
    keys = [k for k in keys if saved.get(k, missing) != now.get(k, missing)]
    return [f"{k} {saved.get(k)!r} -> {now.get(k)!r}" for k in keys]


def _marker(folder: str) -> dict[str, Any]:
    """The completion marker of ``folder`` ({} when there is none, or it is unreadable, not JSON, too
    large or too deep: :func:`hfrl.utils.bounded.load_json`)."""
    from pathlib import Path

    from hfrl.utils.bounded import load_json

    try:
        data = load_json(Path(folder, COMPLETE_NAME), COMPLETE_NAME)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(folder: str) -> dict[str, int] | None:
    """``{relative path: size in bytes}`` recorded in a checkpoint's completion marker, or None when
    the folder has no readable marker."""
    files = _marker(folder).get("files")
    if not isinstance(files, dict) or not all(isinstance(size, int) for size in files.values()):
        return None
    return {str(name): size for name, size in files.items()}


def _listed(folder: str) -> list[str]:
    """Every file below ``folder`` (links included, not followed), as a path relative to it with ``/``."""
    out = []
    for root, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            out.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
    return out


def mark_complete(folder: str, identity: dict[str, Any] | None = None) -> None:
    """Write ``checkpoint_complete.json`` listing every file now in ``folder`` with its size and
    SHA-256, and the run's ``identity`` (:func:`run_identity`): the last file of a checkpoint.
    Atomic: a kill leaves either no marker or the whole one."""
    files, hashes = {}, {}
    for relative in _listed(folder):
        if relative not in (COMPLETE_NAME, COMPLETE_NAME + ".tmp"):
            path = os.path.join(folder, relative)
            files[relative] = os.path.getsize(path)
            hashes[relative] = file_sha256(path)
    tmp = os.path.join(folder, COMPLETE_NAME + ".tmp")
    marker: dict[str, Any] = {
        "format": MARKER_FORMAT,
        "files": dict(sorted(files.items())),
        "sha256": dict(sorted(hashes.items())),
    }
    if identity is not None:
        marker["run"] = identity
    with open(tmp, "w") as fh:
        json.dump(marker, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(folder, COMPLETE_NAME))


def checkpoint_problem(folder: str, expected: Iterable[str] = ()) -> str | None:
    """None for a complete checkpoint, else what is wrong with it in a few words. ``expected``: file
    names a complete checkpoint holds, named when missing from a folder that has no marker."""
    if not os.path.isdir(folder):
        return "it does not exist"
    files = manifest(folder)
    if files is None:
        missing = [name for name in expected if not os.path.exists(os.path.join(folder, name))]
        found = f"; missing {', '.join(missing)}" if missing else ""
        return f"incomplete: its writing was interrupted (no {COMPLETE_NAME}{found})"
    missing = [name for name in files if not os.path.isfile(os.path.join(folder, name))]
    if missing:
        return f"damaged: missing {', '.join(missing)}"
    extra = sorted(set(_listed(folder)) - set(files) - {COMPLETE_NAME})
    if extra:
        shown = ", ".join(extra[:4]) + (", ..." if len(extra) > 4 else "")
        return f"damaged: it holds files added after it was written ({shown}), which its {COMPLETE_NAME} does not list"
    changed = [name for name, size in files.items() if os.path.getsize(os.path.join(folder, name)) != size]
    if changed:
        return f"damaged: {', '.join(changed)} changed size after the checkpoint was written"
    hashes = _marker(folder).get("sha256") or {}
    if set(hashes) != set(files):
        unlisted = ", ".join(sorted(set(files) ^ set(hashes))[:4])
        return f"unverifiable: its {COMPLETE_NAME} (an older hfrl's) lists no SHA-256 for {unlisted}"
    altered = [name for name, digest in hashes.items() if file_sha256(os.path.join(folder, name)) != digest]
    if altered:
        return f"damaged: {', '.join(altered)} changed after the checkpoint was written (its SHA-256 differs)"
    return None


def checkpoints_newest_first(output_dir: str) -> list[str]:
    """The ``checkpoint-N`` folders of a run directory, highest step first."""
    if not os.path.isdir(output_dir):
        return []
    found = [(int(m.group(1)), name) for name in os.listdir(output_dir) if (m := _CHECKPOINT.match(name))]
    return [os.path.join(output_dir, name) for _, name in sorted(found, reverse=True)]


def newest_complete_checkpoint(output_dir: str, expected: Iterable[str] = ()) -> str | None:
    """The complete checkpoint with the highest step in ``output_dir``, None if there is no
    ``checkpoint-*`` folder. Newer incomplete ones are named, with what is wrong with each, in one
    warning line; if none is complete, in a one-line ``ValueError``."""
    folders = checkpoints_newest_first(output_dir)
    chosen = next((f for f in folders if checkpoint_problem(f) is None), None)
    names = list(manifest(chosen) or {}) if chosen else list(expected)  # what a complete one holds
    skipped = [f for f in folders if chosen is None or _step(f) > _step(chosen)]
    reasons = "; ".join(f"{os.path.basename(f)}: {checkpoint_problem(f, names)}" for f in skipped)
    if chosen is None:
        if folders:
            raise ValueError(f"no complete checkpoint in {output_dir} to resume from ({reasons}); start the run again")
        return None
    if skipped:
        logger.warning(f"skipped {reasons}; resuming from {os.path.basename(chosen)}")
    return chosen


def require_complete(folder: str, expected: Iterable[str] = ()) -> None:
    """Raise a one-line ``ValueError`` naming what is missing unless ``folder`` is a complete checkpoint."""
    problem = checkpoint_problem(folder, expected)
    if problem is None:
        return
    parent = os.path.dirname(os.path.abspath(folder))
    others = [f for f in checkpoints_newest_first(parent) if f != os.path.abspath(folder)]
    good = next((f for f in others if checkpoint_problem(f) is None), None)
    hint = f"resume from {good} (the newest complete one)" if good else "start the run again"
    raise ValueError(f"cannot resume from checkpoint {folder}: {problem}; {hint}, or delete it")


def _step(folder: str) -> int:
    match = _CHECKPOINT.match(os.path.basename(folder))
    return int(match.group(1)) if match else -1


__all__ = [
    "COMPLETE_NAME",
    "MARKER_FORMAT",
    "OPTIMIZATION_FIELDS",
    "RESUMABLE",
    "RUN_DEFINITION",
    "identity_problem",
    "run_identity",
    "checkpoint_problem",
    "checkpoints_newest_first",
    "mark_complete",
    "newest_complete_checkpoint",
    "require_complete",
]
