"""Your own data as a task: a ``.jsonl`` / ``.json`` / ``.csv`` / ``.tsv`` / ``.parquet`` file, a folder of
such files (one per split, named ``train``, ``validation`` / ``valid`` / ``dev`` and ``test``; any
other name counts as train) or a Hub dataset id (``owner/name`` or ``hf://datasets/...``).

The prompt column (``prompt_column``, default ``prompt``) becomes ``prompt``; the references column
(``references_column``, default ``references``: a string or a list of strings per row) becomes
``references``; every other column is passed to the rewards as a keyword argument. The default
reward is ROUGE-L against the references; ``rewards`` (``--rewards`` on the command line) replaces
it, and then no references are needed. Preference pairs (``chosen`` / ``rejected`` columns) are kept
for ``--alg dpo`` and ``--alg reward``, which also reads scored texts (``text`` and ``score`` in [0, 1]);
these need no prompt column.

    hfrl train --task my.jsonl --alg ppo --model tiny
    hfrl train --task data/ --prompt-column question --references-column answers
    hfrl train --task someone/dataset --task-arg subset=en --task-arg revision=<commit>
    hfrl train --task my.jsonl --task-arg test_size=0.1     # one file: a tenth of it held out as test
"""

from __future__ import annotations

import functools
import glob
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfrl.tasks.base import Task, read_task_yaml, task_from_yaml

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
SPLITS = {"train": "train", "validation": "validation", "valid": "validation", "val": "validation"}
SPLITS.update({"dev": "validation", "test": "test"})
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_own_data(name: str) -> bool:
    """A data file or folder (existing or named with a data extension) or a Hub dataset id."""
    if name.startswith("hf://") or Path(name).suffix.lower() in FORMATS or os.path.isdir(name):
        return True
    return bool(_HUB_ID.match(name))


def builder(source: str) -> Callable[..., Task]:
    """``build`` bound to ``source`` (what ``load_task`` calls with the task arguments)."""
    return functools.partial(build, source)


def _format_of(files: list[str], where: str) -> str:
    other = next((f for f in files if Path(f).suffix.lower() not in FORMATS), None)
    if other is not None:  # a relative path looks like a Hub id (data/x.py): a file of another kind
        code = " (a task of your own in a Python file: name its builder, FILE.py:build)"
        code = code if other.endswith(".py") else ""
        raise ValueError(f"{other} is not a data file ({', '.join(FORMATS)}){code}")
    formats = {FORMATS[Path(f).suffix.lower()] for f in files}
    seps = {Path(f).suffix.lower() == ".tsv" for f in files}
    if len(formats) > 1 or len(seps) > 1:
        raise ValueError(f"{where}: mixes data formats ({', '.join(sorted({Path(f).suffix for f in files}))}); use one")
    return formats.pop()


def _load_local(source: str) -> DatasetDict:
    from datasets import DatasetDict, load_dataset

    if os.path.isdir(source):
        files = sorted(f for ext in FORMATS for f in glob.glob(os.path.join(source, f"*{ext}")))
        if not files:
            raise FileNotFoundError(f"folder {source} holds no data file ({', '.join(FORMATS)})")
        by_split: dict[str, list[str]] = {}
        for f in files:
            stem = re.split(r"[-_.]", Path(f).name.lower(), maxsplit=1)[0]
            by_split.setdefault(SPLITS.get(stem, "train"), []).append(f)
    elif os.path.isfile(source):
        files, by_split = [source], {"train": [source]}
    else:
        raise FileNotFoundError(f"no such data file or folder: {source}")
    kwargs = {"delimiter": "\t"} if Path(files[0]).suffix.lower() == ".tsv" else {}
    builder = _format_of(files, source)
    for path in files:
        if not Path(path).read_bytes().strip():
            raise ValueError(f"data file {path} is empty: it holds no rows")
    # one split at a time: each file's column types are its own (a string or a list of references)
    splits = {}
    for split, split_files in by_split.items():
        try:
            splits[split] = load_dataset(builder, data_files=split_files, split="train", **kwargs)
        except Exception as err:  # noqa: BLE001 - datasets says "An error occurred while generating the dataset"
            raise _unreadable(split_files, builder, err) from err
    return DatasetDict(splits)


def _unreadable(files: list[str], builder: str, err: BaseException) -> ValueError:
    """One line naming the file and the first real cause (datasets wraps it twice)."""
    causes: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and len(causes) < 5:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    where = files[0] if len(files) == 1 else f"one of {', '.join(files)}"
    decode = next((c for c in causes if isinstance(c, UnicodeDecodeError)), None)
    if decode is not None:
        return ValueError(
            f"data file {where} is not UTF-8 text (byte 0x{decode.object[decode.start]:02x} at position "
            f"{decode.start}); save it as UTF-8"
        )
    detail = next((str(c) for c in causes[1:] if str(c).strip()), str(err)).strip().splitlines()[0]
    return ValueError(f"data file {where} cannot be read as {builder}: {detail}")


def _load_hub(source: str, subset: str | None, revision: str | None) -> Any:
    from datasets import load_dataset

    name = source.removeprefix("hf://datasets/")
    try:
        return load_dataset(name, subset, revision=revision)
    except Exception as err:  # noqa: BLE001 - one line, not the network stack
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RuntimeError(f"cannot load Hub dataset {name!r}: {first}") from err


def _hold_out(raw: DatasetDict, test_size: Any, source: str) -> DatasetDict:
    """``raw`` with ``test_size`` rows of train (a fraction in (0, 1) or a count) as its test split."""
    from datasets import DatasetDict

    if "test" in raw:
        raise ValueError(f"{source} has a test split already: drop --task-arg test_size")
    fraction = isinstance(test_size, float) and 0 < test_size < 1
    count = isinstance(test_size, int) and not isinstance(test_size, bool) and 0 < test_size < len(raw["train"])
    if not (fraction or count):
        raise ValueError(
            f"test_size takes a fraction in (0, 1) or a row count below the {len(raw['train'])} train rows, "
            f"got {test_size!r}"
        )
    parts = raw["train"].train_test_split(test_size=test_size, seed=0)
    return DatasetDict({**raw, "train": parts["train"], "test": parts["test"]})


def _check_texts(dataset: Dataset, source: str, columns: tuple[str, ...]) -> None:
    """The pair columns (``chosen``, ``rejected``; ``text`` of scored texts) hold text or chat messages: a
    number there is one line naming the column, not an ``AttributeError`` inside TRL's tokenization."""
    for name in columns:
        feature = dataset.features.get(name)
        dtype = getattr(feature, "dtype", None)  # a Value's; a list of chat messages has none
        if dtype is not None and dtype not in ("string", "large_string"):
            raise ValueError(
                f"{source}: column {name!r} holds {dtype} values; it takes text (or a list of chat messages)"
            )


def _as_references(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v is not None]


def to_task_columns(
    dataset: Dataset, source: str, prompt_column: str, references_column: str, needs_references: bool
) -> Dataset:
    """One split with ``prompt`` and ``references`` (list[str]); a clear error naming the columns it has."""
    columns = dataset.column_names
    listed = ", ".join(columns)
    whole_texts = {"chosen", "rejected"} <= set(columns) or {"text", "score"} <= set(columns)  # for --alg reward
    if prompt_column == "prompt" and prompt_column not in columns and whole_texts:
        dataset = dataset.add_column("prompt", [""] * len(dataset))  # nothing before the texts
        columns = dataset.column_names
    if prompt_column not in columns:
        raise ValueError(
            f"{source}: no prompt column {prompt_column!r} (its columns: {listed}); name it with --prompt-column"
        )
    if prompt_column != "prompt":
        dataset = dataset.remove_columns([c for c in ("prompt",) if c in columns]).rename_column(
            prompt_column, "prompt"
        )
    if references_column in columns:
        refs = [_as_references(v) for v in dataset[references_column]]
        dataset = dataset.remove_columns([c for c in {references_column, "references"} if c in dataset.column_names])
        return dataset.add_column("references", refs)
    if references_column != "references" or needs_references:
        raise ValueError(
            f"{source}: no references column {references_column!r} (its columns: {listed}); name it with "
            "--references-column, or pass --rewards with a reward that needs no references"
        )
    return dataset.add_column("references", [[] for _ in range(len(dataset))])


def build(
    source: str,
    prompt_column: str = "prompt",
    references_column: str = "references",
    subset: str | None = None,
    revision: str | None = None,
    max_samples: int | None = None,
    rewards: list[Any] | None = None,
    metrics: Any = None,
    test_size: float | int | None = None,
) -> Task:
    """The task of your data at ``source`` (see the module docstring). ``test_size`` (a fraction or a
    row count) holds that many rows of train out as the test split, seeded, when the data has none."""
    from datasets import DatasetDict

    local = not (source.startswith("hf://") or (_HUB_ID.match(source) and not os.path.exists(source)))
    raw = _load_local(source) if local else _load_hub(source, subset, revision)
    if not isinstance(raw, DatasetDict):
        raw = DatasetDict(train=raw)
    if test_size is not None:
        raw = _hold_out(raw, test_size, source)
    out = {}
    for split, dataset in raw.items():
        pairs = {"chosen", "rejected"} <= set(dataset.column_names) or {"text", "score"} <= set(dataset.column_names)
        if pairs:
            _check_texts(dataset, source, ("chosen", "rejected", "text"))
        needs_references = rewards is None and not pairs  # the default reward (ROUGE-L) reads references
        dataset = to_task_columns(dataset, source, prompt_column, references_column, needs_references)
        if max_samples is not None:
            dataset = dataset.select(range(min(max_samples, len(dataset))))
        out[split] = dataset
    return task_from_yaml(__file__, DatasetDict(out), spec=task_spec(source), rewards=rewards, metrics=metrics)


def task_spec(source: str, **_: Any) -> dict[str, Any]:
    """own_data.yaml named after the data at ``source``."""
    name = Path(source.rstrip("/")).stem or source
    return {**read_task_yaml(__file__), "name": name, "description": f"Your data: {source}."}
