"""The option schema (hfrl.trainers.schema) is built from the config dataclasses the first time it is
needed and kept in the user cache under a key of its sources and library versions: the cache serves
what the dataclasses say, a warm cache is read without torch, a changed source or version is a new
key, and a damaged file or an unwritable cache folder is never an error."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hfrl.trainers import ALGORITHMS, algorithm_trainer, schema
from tests.cli.test_bad_input import imported


def test_the_cache_serves_what_the_dataclasses_say():
    served = schema.schema_data()
    assert {k: v for k, v in served.items() if k != "key"} == schema.build()
    assert json.loads(schema.cache_file().read_text()) == served  # conftest's _warm_schema wrote it
    for alg in ALGORITHMS:
        assert schema.config_schema(alg) == schema._live(alg), alg


def hfrl_python(*args: str, cache: Path) -> tuple[str, bool]:
    """``python -X importtime ARGS`` with ``HFRL_CACHE=cache``: (stdout, torch imported?)."""
    env = {**os.environ, "HFRL_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, any(imported(line) == "torch" for line in proc.stderr.splitlines())


READ_ALL = (
    "from hfrl.trainers import ALGORITHMS, schema\n"
    "print(sum(len(schema.config_schema(a).fields) for a in ALGORITHMS), len(schema.model_config_fields()))\n"
)


def test_a_warm_cache_is_read_by_another_process_without_torch(tmp_path):
    path = tmp_path / "schema" / f"{schema.current_key()}.json"
    path.parent.mkdir()
    path.write_text(schema.text(schema.schema_data()))
    where, torch = hfrl_python("-m", "hfrl.trainers.schema", "--where", cache=tmp_path)
    assert where.strip() == str(path) and not torch  # the key is computed without torch, and is the same
    counts, torch = hfrl_python("-c", READ_ALL, cache=tmp_path)
    assert not torch, "reading the warm cache imported torch"
    expected = sum(len(schema.config_schema(a).fields) for a in ALGORITHMS), len(schema.model_config_fields())
    assert counts.split() == [str(n) for n in expected]


def copy_sources(package: Path) -> Path:
    """A copy of the hashed sources of the installed hfrl in ``package`` (a folder named like hfrl/)."""
    for folder in schema.SOURCE_FOLDERS:
        shutil.copytree(schema.PACKAGE / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def test_a_changed_source_or_version_is_a_new_key(tmp_path, monkeypatch):
    package = copy_sources(tmp_path / "hfrl")
    key = schema.current_key(package)
    assert key == schema.current_key()  # the same sources elsewhere: the same key
    config = package / "trainers" / "online" / "ppo_config.py"
    config.write_text(config.read_text() + "\n# a field added\n")
    edited = schema.current_key(package)
    assert edited != key
    (package / "trainers" / "online" / "new_config.py").write_text("")
    added = schema.current_key(package)
    assert added not in (key, edited)  # a new file counts too
    (package / "utils" / "bounded.py").write_text("MAX_COUNT = 1\n")
    assert schema.current_key(package) not in (key, edited, added)
    installed = schema.versions()
    for library in [*schema.VERSIONED, "python"]:
        monkeypatch.setattr(schema, "versions", lambda library=library: {**installed, library: "99.0"})
        assert schema.current_key() != key, library


def test_the_key_covers_every_config_class_and_what_its_module_imports():
    """The classes of every registered config that hfrl defines, and the hfrl modules that a config module
    (``*config*.py``) imports from, are in files the key hashes."""
    hashed = {path.resolve() for path in schema.source_files()}
    files = {
        Path(inspect.getfile(klass)).resolve()
        for alg in ALGORITHMS
        for klass in algorithm_trainer(alg).config_class.__mro__
        if klass.__module__.startswith("hfrl.")
    }
    assert files <= hashed
    for path in [p for p in files if "config" in p.name]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hfrl."):
                spec = importlib.util.find_spec(node.module or "")
                assert spec and spec.origin and Path(spec.origin).resolve() in hashed, (path.name, node.module)


# ---- the cache's own rules, with a stand-in for build (it would import every trainer) --------------
FAKE = {"algorithms": {}, "training_arguments": {}, "configs": {}, "model_config": {}, "versions": {}}


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """An empty cache in ``tmp_path`` and a :func:`schema.build` that counts its calls."""
    calls = []
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path))
    monkeypatch.setattr(schema, "build", lambda: calls.append(1) or dict(FAKE))
    schema.schema_data.cache_clear()
    yield calls
    schema.schema_data.cache_clear()  # back to the session's cache


def test_a_cold_cache_is_built_once_then_read(fake_build):
    assert schema.schema_data() == {"key": schema.current_key(), **FAKE}
    assert json.loads(schema.cache_file().read_text()) == schema.schema_data()
    schema.schema_data.cache_clear()
    schema.schema_data()
    assert len(fake_build) == 1
    assert [p.name for p in schema.cache_file().parent.iterdir()] == [schema.cache_file().name]  # no stray part


@pytest.mark.parametrize(
    "damage",
    [b"", b'{"key": "', b"\xff\xfe", b"[]", b'{"key": "other"}', b"null"],
    ids=["empty", "cut", "not UTF-8", "a list", "another key", "null"],
)
def test_a_damaged_cache_file_is_built_again(fake_build, damage):
    path = schema.cache_file()
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    assert schema.schema_data()["key"] == schema.current_key() and len(fake_build) == 1
    assert json.loads(path.read_text())["key"] == schema.current_key()


def test_a_field_of_the_wrong_shape_is_damage(fake_build):
    path = schema.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": schema.current_key(), **FAKE, "model_config": {"use_peft": {"type": "bool"}}}))
    schema.schema_data()
    assert len(fake_build) == 1


def test_an_unwritable_cache_means_building_each_time(fake_build, tmp_path, monkeypatch, caplog):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path / "a-file"))  # the schema folder cannot be made under a file
    for _ in range(2):
        schema.schema_data.cache_clear()
        assert schema.schema_data()["key"] == schema.current_key()
    assert len(fake_build) == 2
    assert not [r for r in caplog.records if r.levelname != "DEBUG"]


def test_old_schemas_are_removed_but_the_newest(fake_build):
    folder = schema.cache_file().parent
    folder.mkdir(parents=True)
    for n in range(schema.KEEP + 3):
        old = folder / f"old{n:02}.json"
        old.write_text("{}")
        os.utime(old, (1000 + n, 1000 + n))
    schema.schema_data()
    kept = sorted(p.name for p in folder.iterdir())
    assert len(kept) == schema.KEEP and schema.cache_file().name in kept and "old00.json" not in kept


def test_the_module_prints_where_and_what(capsys):
    assert schema.main(["--where"]) == 0 and capsys.readouterr().out.strip() == str(schema.cache_file())
    assert schema.main(["--print"]) == 0 and json.loads(capsys.readouterr().out) == schema.schema_data()
    assert schema.main(["--write"]) == 2 and "usage:" in capsys.readouterr().err


# ---- the cache is data: nothing in it names code (docs/concepts/trust.md, "Caches are data") ------------
RUN_FAST = ["--num_iterations", "1", "--rollout_batch_size", "4", "--mini_batch_size", "4", "--num_ppo_epochs", "1",
            "--max_new_tokens", "4", "--disable_tqdm", "true", "--save_strategy", "no"]  # fmt: skip


@pytest.mark.parametrize("loader", ["as it is", "fooled"])
def test_a_cached_schema_naming_code_never_runs_it(loader, tmp_path, monkeypatch, capsys):
    """A schema file whose algorithms name a translation (``evil.py:f``, writing a marker when imported):
    ``hfrl train --alg ppo`` trains without importing it, the file is rebuilt, and even a loader that
    took the file whole (``fooled``) serves the installed trainers' translations, read from their source."""
    from hfrl.testing import run_cli

    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef f(defaults):\n    return defaults\n")
    planted = json.loads(schema.text(schema.schema_data()))  # the session's schema, valid but for what is added
    for entry in planted["algorithms"].values():
        entry["translate"] = f"{evil}:f"
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path / "cache"))
    path = schema.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(schema.text(planted))
    if loader == "fooled":
        monkeypatch.setattr(schema, "_valid", lambda data, key: True)
    schema.schema_data.cache_clear()
    try:
        code, _, err = run_cli(["train", "--task", "numbers", "--alg", "ppo", "--model", "tiny",
                                "--output-dir", str(tmp_path / "run"), *RUN_FAST], capsys)  # fmt: skip
        assert not marker.exists(), "a cached schema ran code"
        assert code == 0, err
        assert schema.config_schema("grpo").translate == "hfrl.trainers.task_defaults:online_defaults_to_trl"
        assert schema.config_schema("ppo").translate is None
    finally:
        schema.schema_data.cache_clear()  # back to the session's cache
    if loader == "as it is":
        assert "translate" not in json.loads(path.read_text())["algorithms"]["ppo"]  # rebuilt, not trusted


VALID = {**FAKE, "configs": {"PPOConfig": {"kl_coef": {"type": "float", "default": 0.05, "help": "", "parse": "float",
                                                       "bounds": {"ge": 0, "note": "0: no KL"}}}},
         "algorithms": {"ppo": {"config": "PPOConfig", "sections": ["defaults", "online", "ppo"]}},
         "estimators": {"gae": {"needs_critic": True, "unit_scale": False}}}  # fmt: skip
KL = VALID["configs"]["PPOConfig"]["kl_coef"]
PLANTED = {  # what is changed in a valid file: (part, name, value) sets data[part][name] = value
    "a translation": ("algorithms", "ppo", {**VALID["algorithms"]["ppo"], "translate": "os:system"}),
    "an unregistered algorithm": ("algorithms", "evil", {"config": "PPOConfig", "sections": ["defaults"]}),
    "sections not a list": ("algorithms", "ppo", {"config": "PPOConfig", "sections": "defaults"}),
    "another part": ("hooks", "after_build", "os:system"),
    "an unknown parse": ("PPOConfig", "kl_coef", {**KL, "parse": "eval"}),
    "a bound as text": ("PPOConfig", "kl_coef", {**KL, "bounds": {"ge": "0"}}),
    "an unknown bound": ("PPOConfig", "kl_coef", {**KL, "bounds": {"call": 1}}),
    "choices as text": ("PPOConfig", "kl_coef", {**KL, "choices": "ab"}),
    "a flag as text": ("PPOConfig", "kl_coef", {**KL, "many": "yes"}),
    "help not text": ("PPOConfig", "kl_coef", {**KL, "help": ["x"]}),
    "a base field missing": ("training_arguments", "seed", None),
    "an estimator fact as text": ("estimators", "gae", {"needs_critic": "yes"}),
    "a version not text": ("versions", "trl", 1),
}


@pytest.mark.parametrize("planted", list(PLANTED), ids=list(PLANTED))
def test_a_cached_schema_of_another_shape_or_kind_is_rebuilt(fake_build, planted):
    """The cached file holds data of known kinds only; anything else (a key naming code, a value of another
    kind) is rebuilt, not trusted. The same file without the change is read as it is (first assertion)."""
    path = schema.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": schema.current_key(), **VALID}))
    assert schema.schema_data()["algorithms"] == VALID["algorithms"] and not fake_build  # read: valid as it is
    data = json.loads(path.read_text())
    part, name, value = PLANTED[planted]
    (data["configs"][part] if part in data["configs"] else data.setdefault(part, {}))[name] = value
    path.write_text(json.dumps(data))
    schema.schema_data.cache_clear()
    assert schema.schema_data()["key"] == schema.current_key() and len(fake_build) == 1, planted


TRAINERS = """
from pkg.defaults import to_trl
class _Base:
    translate_task_defaults = staticmethod(lambda defaults: defaults)
class _Online(_Base):
    translate_task_defaults = staticmethod(to_trl)
class A(Mixin, _Online):
    algs = {"a": "inherits to_trl"}
    config_class = AConfig
class B(_Base):
    algs = {"b": "a lambda: none"}
    config_class = BConfig
class C(_Online):
    algs = {"c": "a method: not read, so the schema's build fails"}
    config_class = CConfig
    def translate_task_defaults(defaults):
        return defaults
"""


def test_a_translation_is_read_from_the_trainers_source():
    """What the schema serves as a trainer's translate_task_defaults is read from its module's source, along
    its bases there (hfrl.trainers.declared); a form it does not read is "?", which build() refuses."""
    from hfrl.trainers.declared import _declarations

    found = {t.name: t.translate for t in _declarations("pkg.trainers", TRAINERS)}
    assert found == {"A": "pkg.defaults:to_trl", "B": None, "C": "?"}
