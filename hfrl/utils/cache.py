"""Where hfrl keeps what it builds or computes once (the built-in tiny models, A-LoL's prepared datasets,
the config fields the command line is checked against: :mod:`hfrl.trainers.schema`).

``$HFRL_CACHE`` when set, else ``hfrl/`` under the Hugging Face cache home (``$HF_HOME``, by default
``~/.cache/huggingface``), beside the models and datasets the Hub libraries cache.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
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


def write_atomic(path: str | os.PathLike, text: str) -> None:
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
