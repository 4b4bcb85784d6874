"""Task data: Parquet files of a Hub dataset at a pinned revision, or the same files in a local folder.

Every GRUE task names its source in its YAML, ``dataset: {asset: daily_dialog}``, an entry of the
asset manifest (``hfrl/assets.yaml``, :mod:`hfrl.utils.assets`) that :func:`hfrl.tasks.base.read_task_yaml`
expands into::

    path: OpenRL/daily_dialog                       # Hub dataset repository
    revision: 1668faf0c0dc44664f108c489fd0666128db2c48  # pinned commit
    files: {train: data/train-*.parquet, ...}       # split -> file pattern(s) inside the repository
    max_samples: null                               # the default row limit per split (wmt16, narrative_qa)

and :func:`load_parquet_splits` reads it with ``load_dataset("parquet", data_files=...)``: from
``hf://datasets/{path}@{revision}/{pattern}``, or, when a local folder is given, from
``{folder}/{pattern}`` through the very same call. The folder is the task's ``data_dir`` argument or
``$HFRL_DATA_DIR/<task name>``; it mirrors the repository's layout. The package's own fixtures
(``hfrl/tasks/fixtures/<task>/``, a few rows per split in the Hub files' exact schema) are such a folder:

    HFRL_DATA_DIR=$(python -c "import hfrl.tasks.data as d; print(d.FIXTURES)") \
        hfrl train --task daily_dialog --alg nlpo --model tiny --num_iterations 2 ...
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from hfrl.utils.assets import FULL_SHA as FULL_SHA_RE

if TYPE_CHECKING:
    from datasets import DatasetDict

    from hfrl.tasks.base import Task

DATA_DIR_ENV = "HFRL_DATA_DIR"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ALL = "all"  # max_samples=all: no row limit, the manifest's default lifted
logger = logging.getLogger(__name__)


def _patterns(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def local_data_dir(task: str, data_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The local folder to read ``task``'s files from: ``data_dir``, else ``$HFRL_DATA_DIR/<task>``, else None."""
    if data_dir is not None:
        return str(data_dir)
    root = os.environ.get(DATA_DIR_ENV)
    return os.path.join(root, task) if root else None


def data_files(
    source: dict[str, Any], data_dir: str | None = None, revision: str | None = None
) -> dict[str, list[Any]]:
    """Split -> file paths or patterns: ``hf://datasets/{path}@{revision}/...`` or ``{data_dir}/...``.

    >>> src = {"path": "me/data", "revision": "abc", "files": {"train": "data/train-*.parquet"}}
    >>> data_files(src)
    {'train': ['hf://datasets/me/data@abc/data/train-*.parquet']}
    >>> data_files(src, data_dir="/tmp/mirror")
    {'train': ['/tmp/mirror/data/train-*.parquet']}
    """
    if data_dir is not None:
        base = str(data_dir).rstrip("/")
    else:
        revision = revision or source.get("revision") or "main"
        base = f"hf://datasets/{source['path']}@{quote(revision, safe='')}"  # refs/convert/parquet -> %2F
    return {split: [f"{base}/{p}" for p in _patterns(patterns)] for split, patterns in source["files"].items()}


def load_parquet_splits(
    task: str,
    source: dict[str, Any],
    data_dir: str | os.PathLike[str] | None = None,
    revision: str | None = None,
) -> DatasetDict:
    """The raw ``DatasetDict`` of a task's Parquet files (Hub or local mirror; see the module docstring)."""
    from datasets import load_dataset

    local = local_data_dir(task, data_dir)
    files = data_files(source, local, revision)
    where = f"local folder {local}" if local else f"Hub dataset {source['path']}@{revision or source.get('revision')}"
    if local is not None:
        missing = [p for paths in files.values() for p in paths if not glob.glob(p)]
        if missing:
            raise FileNotFoundError(
                f"task {task!r}: no file matches {missing[0]} in the {where} (it mirrors the Hub repository "
                f"{source['path']}; unset {DATA_DIR_ENV} or data_dir to download from the Hub)"
            )
    if local is None:
        logger.warning(download_note(task, source, revision))
    try:
        return cast("DatasetDict", load_dataset("parquet", data_files=files))
    except Exception as err:  # noqa: BLE001 - one clear line instead of the network stack's traceback
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = "" if local else f"; offline, point {DATA_DIR_ENV} (or data_dir) at a folder holding the same files"
        raise RuntimeError(f"task {task!r}: cannot load the {where}: {first}{hint}") from err


def download_note(task: str, source: dict[str, Any], revision: str | None = None) -> str:
    """The one line said before a task's Hub files are read: what, at which commit, and about how much.

    >>> print(download_note("wmt16", {"path": "wmt/wmt16", "revision": "41d8a4013aa1489f28fea60ec0932af246086482",
    ...                               "download_mb": 1300, "max_samples": {"train": 100000}}))  # doctest: +ELLIPSIS
    task 'wmt16': reading Hub dataset wmt/wmt16@41d8a40 (~1.3 GB to download unless cached; train cut to 100000 ...
    """
    rev = str(revision or source.get("revision") or "main")
    rev = rev[:7] if FULL_SHA_RE.fullmatch(rev) else rev
    size = source.get("download_mb")
    amount = f"~{size / 1000:.1f} GB" if size and size >= 1000 else f"~{size} MB" if size else "size unknown"
    limits = source.get("max_samples") or {}
    cut = "".join(f"; {split} cut to {n} rows" for split, n in limits.items()) if isinstance(limits, dict) else ""
    return (
        f"task {task!r}: reading Hub dataset {source['path']}@{rev} ({amount} to download unless cached{cut}); "
        f"offline, set {DATA_DIR_ENV} (or data_dir) to a local copy"
    )


def sample_limits(source: dict[str, Any], max_samples: Any) -> int | dict[str, int] | None:
    """The row limit per split: ``max_samples`` as given, the manifest's default when it is None,
    no limit for ``"all"``.

    >>> sample_limits({"max_samples": {"train": 100000}}, None), sample_limits({"max_samples": {"train": 9}}, "all")
    ({'train': 100000}, None)
    >>> sample_limits({}, 50)
    50
    """
    if max_samples is None:
        return source.get("max_samples")
    if max_samples == ALL:
        return None
    if isinstance(max_samples, dict) or (isinstance(max_samples, int) and not isinstance(max_samples, bool)):
        return max_samples
    raise ValueError(f"max_samples is a row count, a mapping split -> count, or {ALL!r}; got {max_samples!r}")


def preprocess_splits(
    raw: DatasetDict,
    preprocess: Callable[[dict[str, list[Any]]], dict[str, list[Any]]],
    max_samples: int | dict[str, int] | None = None,
    seed: int = 0,
    rowwise: bool = False,
) -> DatasetDict:
    """``raw`` (a ``DatasetDict``) mapped by ``preprocess`` (batched: columns -> the task's columns, row
    counts may change), each split optionally cut to ``max_samples`` rows after a seeded shuffle.
    ``rowwise`` (``preprocess`` maps each row to one row): the raw rows are cut before mapping, which
    gives the same rows (a shuffle's order depends only on the length and the seed) without mapping the
    millions of rows that are dropped."""
    from datasets import DatasetDict

    out = {}
    for split, dataset in raw.items():
        limit = max_samples.get(split) if isinstance(max_samples, dict) else max_samples
        if rowwise and limit is not None and limit < len(dataset):
            dataset = dataset.shuffle(seed=seed).select(range(limit))
        mapped = dataset.map(preprocess, batched=True, remove_columns=dataset.column_names, desc=f"{split} split")
        if limit is not None and limit < len(mapped):
            mapped = mapped.shuffle(seed=seed).select(range(limit))
        out[split] = mapped
    return DatasetDict(out)


def build_parquet_task(
    module_file: str,
    preprocess: Callable[[dict[str, list[Any]]], dict[str, list[Any]]],
    spec: dict[str, Any] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    max_samples: int | dict[str, int] | str | None = None,
    split_raw: Callable[[Any], Any] | None = None,
    rowwise: bool = False,
    **overrides: Any,
) -> Task:
    """A GRUE task: its YAML's Parquet files (Hub or local mirror), ``split_raw`` (re-splitting, e.g.
    a validation split carved from train), ``preprocess``, then rewards, metrics and configs.
    ``max_samples`` None takes the manifest's default limit (:func:`sample_limits`)."""
    from hfrl.tasks.base import read_task_yaml, task_from_yaml

    spec = spec if spec is not None else read_task_yaml(module_file)
    limits = sample_limits(spec["dataset"], max_samples)
    raw = load_parquet_splits(spec["name"], spec["dataset"], data_dir, revision)
    if split_raw is not None:
        raw = split_raw(raw)
    dataset = preprocess_splits(raw, preprocess, limits, rowwise=rowwise)
    return task_from_yaml(module_file, dataset, spec=spec, **overrides)


def parquet_builder(
    module_file: str, preprocess: Callable[[dict[str, list[Any]]], dict[str, list[Any]]], what: str
) -> Callable[..., Task]:
    """A GRUE task module's ``build``: :func:`build_parquet_task` of ``module_file`` with ``preprocess``
    (one row per raw row). ``max_samples``: rows per split (an int or ``{split: n}``); None, the
    manifest's default (wmt16, narrative_qa); ``all``, every row."""

    def build(
        data_dir: str | None = None,
        revision: str | None = None,
        max_samples: int | dict[str, int] | str | None = None,
        **overrides: Any,
    ) -> Task:
        return build_parquet_task(
            module_file,
            preprocess,
            data_dir=data_dir,
            revision=revision,
            max_samples=max_samples,
            rowwise=True,
            **overrides,
        )

    build.__doc__ = f"The {what} task."
    return build


__all__ = [
    "ALL",
    "DATA_DIR_ENV",
    "FIXTURES",
    "build_parquet_task",
    "data_files",
    "download_note",
    "load_parquet_splits",
    "local_data_dir",
    "parquet_builder",
    "preprocess_splits",
    "sample_limits",
]
