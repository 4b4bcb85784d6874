"""Where hfrl keeps what it builds or computes once (the built-in tiny models, A-LoL's prepared datasets,
the config fields the command line is checked against: :mod:`hfrl.trainers.schema`, GGUF files' dense
copies: :func:`hfrl.core.models.plain_model_dir`).

What is in the cache is data (docs/concepts/trust.md, "Caches are data"): nothing read back from it names
code, and a folder built into it records what it was made from and its files' hashes (:func:`write_manifest`),
checked on each use (:func:`manifest_matches`).

``$HFRL_CACHE`` when set, else ``hfrl/`` under the Hugging Face cache home (``$HF_HOME``, by default
``~/.cache/huggingface``), beside the models and datasets the Hub libraries cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """``$HFRL_CACHE``, else ``$HF_HOME/hfrl`` (huggingface_hub's rule for ``HF_HOME``: ``$XDG_CACHE_HOME/huggingface``
    or ``~/.cache/huggingface`` when unset).

    >>> str(cache_root({"HFRL_CACHE": "/tmp/hfrl-cache", "HF_HOME": "/data/hf"}))
    '/tmp/hfrl-cache'
    >>> str(cache_root({"HF_HOME": "/data/hf"}))
    '/data/hf/hfrl'
    """
    if environ.get("HFRL_CACHE"):
        return Path(environ["HFRL_CACHE"]).expanduser()
    default_home = os.path.join(environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(environ.get("HF_HOME", default_home)).expanduser() / "hfrl"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that a kill leaves the old file or the whole new one, never a
    part: a temporary file beside it, flushed to disk, then renamed over it (removed when that fails)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk or Ctrl-C before the rename: no stray part left
            tmp.unlink(missing_ok=True)
        raise


# ---- a folder that records what it holds -------------------------------------------------------------
MANIFEST = "hfrl-manifest.json"  # in a folder hfrl built into the cache: what it was made from, its files' hashes
MAX_MANIFEST_BYTES = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in blocks (about a second per GB)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_manifest(folder: str | os.PathLike[str], made_from: Mapping[str, str]) -> None:
    """Record in ``folder`` (:data:`MANIFEST`) what it was ``made_from`` (a source file's hash...) and the
    SHA-256 of every file in it, for :func:`manifest_matches`. Call it last, on the folder's final files."""
    folder = Path(folder)
    files = {entry.name: file_sha256(entry) for entry in sorted(folder.iterdir()) if entry.name != MANIFEST}
    write_atomic(folder / MANIFEST, json.dumps({"made_from": dict(made_from), "files": files}, indent=1) + "\n")


def manifest_matches(folder: str | os.PathLike[str], made_from: Mapping[str, str]) -> bool:
    """Whether ``folder`` is a folder (not a link) whose :data:`MANIFEST` says it was ``made_from`` that,
    holding exactly the regular files the manifest lists, each with the SHA-256 recorded (every file is
    read: the check costs what reading the folder once does). False for anything else, never an error."""
    folder, record = Path(folder), Path(folder, MANIFEST)
    try:
        if folder.is_symlink() or not folder.is_dir() or record.is_symlink() or not record.is_file():
            return False
        if record.stat().st_size > MAX_MANIFEST_BYTES:
            return False
        manifest = json.loads(record.read_text())
        if not (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)):
            return False
        files = manifest["files"]
        entries = {entry.name: entry for entry in folder.iterdir() if entry.name != MANIFEST}
        if manifest.get("made_from") != dict(made_from) or set(entries) != set(files):
            return False
        for name, entry in entries.items():  # a link or a folder is nothing hfrl wrote there
            if entry.is_symlink() or not entry.is_file() or file_sha256(entry) != files[name]:
                return False
    except (OSError, ValueError):  # unreadable, or not JSON (not UTF-8 is a ValueError too)
        return False
    return True


def discard(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` whatever it is (a link is unlinked, never followed), moved aside first so that a
    folder is never seen half removed; nothing when it is missing."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        aside = path.with_name(f".{path.name}.old{os.getpid()}")
        os.replace(path, aside)
        shutil.rmtree(aside, ignore_errors=True)


def cached_model_ok(folder: str | os.PathLike[str], made_from: Mapping[str, str]) -> bool:
    """Whether a model folder hfrl built into the cache can be used as it is: its manifest matches
    (:func:`manifest_matches`) and none of its configs names code to load (``auto_map``...:
    :func:`hfrl.utils.trust.loads_code`), which no folder hfrl writes does. Else it is built again, even
    under ``--trust-code``: the user trusts their own files with it, not what a cache folder says."""
    if not manifest_matches(folder, made_from):
        return False
    from hfrl.utils.trust import MODEL_FOLDER_FILES, loads_code

    for name in MODEL_FOLDER_FILES:
        path = Path(folder, name)
        try:
            if path.is_file() and loads_code(json.loads(path.read_text())):
                return False
        except (OSError, ValueError):  # hashed above, so written by hfrl: unreadable now means changed
            return False
    return True


@contextlib.contextmanager
def building(out: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the lock of the cache folder ``out`` (an exclusive ``flock`` on a file named by the hash of its
    path, in the system's temporary folder: nothing is left beside the folder) while it is checked and, if
    need be, built: the processes of one ``accelerate launch`` on a fresh cache build it
    once and read it whole (without it one process replaced the folder that another was loading: "Unrecognized
    model ... Should have a `model_type` key"). Where ``fcntl`` is missing (Windows) it holds nothing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    import tempfile

    key = hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:24]
    lock = Path(tempfile.gettempdir(), "hfrl-locks", f"{key}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a")  # noqa: SIM115 - closed below, after the lock's block
    except OSError:  # another user's lock folder, a read-only /tmp: the check alone, as before locks
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _process_rank() -> int:
    """This process's rank in an initialised torch process group, else 0 (torch is not imported here)."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 0
    return int(dist.get_rank())


def ensure_built(
    out: str | os.PathLike[str],
    made_from: Mapping[str, str],
    build: Callable[[], None],
    wait_s: float = 900.0,
    rank: int | None = None,
) -> None:
    """The model folder ``out`` as :func:`cached_model_ok` accepts it: checked under its lock
    (:func:`building`) and built by ``build`` when it is not. In an initialised process group only rank 0
    builds, the others wait for its folder: transformers' ``save_pretrained`` writes no weights off rank 0
    (``should_save_on_this_rank``), so another rank's build held a tokenizer and no model ("Unrecognized
    model ... Should have a `model_type` key", an ``accelerate launch`` on a fresh cache)."""
    rank = _process_rank() if rank is None else rank
    deadline = time.monotonic() + wait_s
    while True:
        with building(out):
            if cached_model_ok(out, made_from):
                return
            if rank == 0:
                build()
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {rank} waited {wait_s:.0f} s for process 0 to build {out}; is it running?")
        time.sleep(0.5)


def put_in_place(tmp: str | os.PathLike[str], out: str | os.PathLike[str], made_from: Mapping[str, str]) -> None:
    """Move the folder ``tmp``, just built and recorded (:func:`write_manifest`), to ``out``: it replaces
    whatever is there (a folder that fails :func:`cached_model_ok`) unless another process (``accelerate
    launch``) put a checked one there meanwhile, which is kept."""
    if cached_model_ok(out, made_from):
        discard(tmp)
        return
    discard(out)
    try:
        os.replace(tmp, out)
    except OSError:  # another process put its folder there in between: kept, if it checks
        discard(tmp)
        if not cached_model_ok(out, made_from):
            raise
