"""Whether the Hugging Face Hub can be reached, what its cache holds, and which names are local paths:
what lets a command say at once that a model is missing, instead of retrying the network for 30 s.

- :func:`hub_reachable`: ``HF_HUB_OFFLINE``, else one TCP connection to the Hub's endpoint (3 s at most).
- :func:`cached_revisions`: commit -> snapshot folder of a repository in huggingface_hub's cache.
- :func:`missing_local_path`: a name that can only mean a local file or folder, and is not there.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

PROBE_TIMEOUT = 3.0  # seconds to decide whether the Hub is reachable
# endings that name a file, never a Hub repository
FILE_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".jsonl", ".json", ".csv", ".tsv", ".parquet", ".yaml")


def hub_reachable(timeout: float = PROBE_TIMEOUT) -> tuple[bool, str]:
    """``(online, why not)``: HF_HUB_OFFLINE, else one TCP connection to the Hub's endpoint."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False, "HF_HUB_OFFLINE=1"
    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True, ""
    except OSError as err:
        return False, f"{url.hostname} unreachable ({type(err).__name__})"


def cached_revisions(repo_type: str, repo_id: str) -> dict[str, str]:
    """Commit -> snapshot folder of ``repo_id`` in huggingface_hub's cache (its own cache scan)."""
    from huggingface_hub import constants, scan_cache_dir

    try:
        info = scan_cache_dir(constants.HF_HUB_CACHE)  # the cache hf_hub_download writes to now
    except Exception:  # noqa: BLE001 - no cache folder yet (CacheNotFound) or an unreadable one: nothing cached
        return {}
    for repo in info.repos:
        if repo.repo_type == repo_type and repo.repo_id == repo_id:
            return {rev.commit_hash: str(rev.snapshot_path) for rev in repo.revisions}
    return {}


def missing_local_path(name: str) -> bool:
    """Whether ``name`` can only be a local path, and nothing is there: it starts with ``.``, ``/`` or
    ``~``, has more than one ``/`` or a ``\\``, ends like a file (``.gguf``, ``.csv``...), its
    first part is a folder here (``runs/typo`` beside a ``runs/`` folder), or it is no valid Hub id
    (huggingface_hub's ``validate_repo_id``: ``my model``, ``a--b``). A Hub id (``owner/name``) otherwise.

    >>> missing_local_path("./no-such-model"), missing_local_path("a/b/c"), missing_local_path("data.csv")
    (True, True, True)
    >>> missing_local_path(".nope"), missing_local_path("my model")
    (True, True)
    >>> missing_local_path("openai-community/gpt2"), missing_local_path("tiny")
    (False, False)
    """
    name = str(name)
    if not name or os.path.exists(os.path.expanduser(name)):
        return False
    if name.startswith((".", "/", "~")) or "\\" in name:  # a Windows separator too: no Hub id has one
        return True
    if name.count("/") > 1 or Path(name).suffix.lower() in FILE_SUFFIXES:
        return True
    first = name.split("/", 1)[0]
    return ("/" in name and os.path.isdir(first)) or not _hub_id(name)


def _hub_id(name: str) -> bool:
    """Whether ``name`` passes huggingface_hub's own check of a repository id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


__all__ = ["PROBE_TIMEOUT", "cached_revisions", "hub_reachable", "missing_local_path"]
