"""The manifest of external assets (``hfrl/assets.yaml``): the Hub datasets and models hfrl's tasks,
rewards and metrics load, each at a pinned commit, with the files and columns read, sizes, licences
and the public evidence for each pin.

The code reads repositories and revisions from here, in one place: a task YAML names its data with
``dataset: {asset: NAME}`` (:func:`dataset_source`), and every ``from_pretrained`` of a Hub id asks
:func:`model_revision` for the commit to load (None for a local folder, an id the manifest does not
list, or an entry whose ``revision`` is null: those follow ``main``). A file from PyPI (``packages``: the
vaderSentiment sdist the ``movie_snippets`` task reads) is named by its URL and SHA-256 (:func:`package_entry`).

>>> dataset_source("common_gen")["path"]
'GEM/gem'
>>> model_revision("google-t5/t5-base")
'a9723ea7f1b39c1eae772870f3b547bf6ef7e6c1'
>>> model_revision("/some/local/folder") is None
True
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).resolve().parents[1] / "assets.yaml"
FULL_SHA = re.compile(r"[0-9a-f]{40}")


@functools.cache
def manifest() -> dict[str, Any]:
    """The parsed manifest (``datasets``, ``models`` and ``packages``)."""
    import yaml

    with open(MANIFEST) as fh:
        data = yaml.safe_load(fh)
    return {
        "datasets": data.get("datasets") or {},
        "models": data.get("models") or {},
        "packages": data.get("packages") or {},
    }


def dataset_entry(name: str) -> dict[str, Any]:
    """The manifest entry of dataset ``name`` (a copy); an unknown name is a ValueError."""
    entries = manifest()["datasets"]
    if name not in entries:
        known = ", ".join(sorted(entries))
        raise ValueError(f"no dataset {name!r} in the asset manifest {MANIFEST.name}: one of {known}")
    return copy.deepcopy(entries[name])


def dataset_source(name: str) -> dict[str, Any]:
    """What a task's loader reads for dataset ``name``: ``path`` (the repository), ``revision``,
    ``files`` (split -> patterns), ``max_samples`` (the default row limit, or None), ``asset``."""
    entry = dataset_entry(name)
    return {
        "asset": name,
        "path": entry["repo"],
        "revision": entry["revision"],
        "files": entry["files"],
        "max_samples": entry.get("max_samples"),
        "download_mb": entry.get("download_mb"),
    }


def resolve_dataset(spec: Any) -> Any:
    """A task YAML's ``dataset`` section with ``asset: NAME`` replaced by the manifest's source (keys
    the YAML sets besides ``asset`` win); any other value is returned as it is."""
    if not isinstance(spec, dict) or "asset" not in spec:
        return spec
    extra = {k: v for k, v in spec.items() if k != "asset"}
    return {**dataset_source(str(spec["asset"])), **extra}


def package_entry(name: str) -> dict[str, Any]:
    """The manifest entry of PyPI file ``name`` (a copy: ``url``, ``version``, ``file``, ``sha256``...).

    >>> package_entry("vaderSentiment")["file"]
    'vaderSentiment-3.3.2.tar.gz'
    """
    entries = manifest()["packages"]
    if name not in entries:
        raise ValueError(
            f"no package {name!r} in the asset manifest {MANIFEST.name}: one of {', '.join(sorted(entries))}"
        )
    return copy.deepcopy(entries[name])


def model_entry(repo_id: str) -> dict[str, Any] | None:
    """The manifest entry of Hub model ``repo_id``, or None."""
    entry = manifest()["models"].get(str(repo_id))
    return copy.deepcopy(entry) if entry is not None else None


def model_revision(name: Any) -> str | None:
    """The pinned commit of Hub model ``name``, or None (not a manifest id, or listed as unpinned)."""
    entry = model_entry(name) if isinstance(name, str) else None
    return entry.get("revision") if entry else None


def hub_kwargs(name: Any, **kwargs: Any) -> dict[str, Any]:
    """``kwargs`` plus ``revision=<pin>`` when ``name`` is a pinned manifest model and no revision is
    given: what a ``from_pretrained(name, ...)`` call passes.

    >>> hub_kwargs("openai-community/gpt2")["revision"][:7], hub_kwargs("./local")
    ('607a30d', {})
    """
    revision = model_revision(name)
    if revision is not None and kwargs.get("revision") is None:
        kwargs["revision"] = revision
    return kwargs


__all__ = [
    "FULL_SHA",
    "MANIFEST",
    "dataset_entry",
    "dataset_source",
    "hub_kwargs",
    "manifest",
    "model_entry",
    "model_revision",
    "package_entry",
    "resolve_dataset",
]
