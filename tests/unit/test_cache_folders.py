"""The model folders hfrl builds into its cache (the built-in tiny models; GGUF files' dense copies:
tests/cli/test_gguf.py) are data: each records what it was made from and its files' hashes, is checked on
each use, and is built again when it is not what hfrl wrote, a folder whose config names code included,
even under --trust-code (docs/concepts/trust.md, "Caches are data")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hfrl.core.tiny import tiny_model_path
from hfrl.utils.cache import MANIFEST, file_sha256, write_manifest

EVIL = "open({marker!r}, 'w').close()\nfrom transformers import GPT2Config as EvilConfig\n"


def _plant(kind: str, good: Path, out: Path, marker: Path) -> None:
    """At ``out``, where the tiny model goes: another built-in model (no manifest), or the tiny model
    with a config naming code of its folder (``auto_map``, a module writing ``marker``) and a manifest
    rewritten to match, as anyone who can write the cache could."""
    if kind == "another model":
        shutil.copytree(tiny_model_path("tiny-t5"), out)
        return
    shutil.copytree(good, out)
    (out / "evil_config.py").write_text(EVIL.format(marker=str(marker)))
    config = json.loads((out / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil_config.EvilConfig"}
    (out / "config.json").write_text(json.dumps(config))
    (out / MANIFEST).unlink(missing_ok=True)
    write_manifest(out, {"built_in": out.name})


@pytest.mark.parametrize("kind", ["another model", "code with a matching manifest"])
def test_a_tiny_model_folder_planted_in_the_cache_is_rebuilt(kind, tmp_path, monkeypatch):
    """``--model tiny`` with a folder planted where the tiny model goes: it is built again, and under
    ``--trust-code`` (trusted_code) the planted module is never imported."""
    from hfrl.core.models import load_config
    from hfrl.utils.trust import trusted_code

    good = Path(tiny_model_path("tiny", cache_dir=tmp_path / "built"))
    monkeypatch.setenv("HFRL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "cache" / good.name
    marker = tmp_path / "ran"
    _plant(kind, good, out, marker)
    with trusted_code():
        config = load_config("tiny")
    assert not marker.exists(), "a cached model folder ran code"
    assert config.model_type == "gpt2" and "auto_map" not in json.loads((out / "config.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in good.iterdir())
    assert file_sha256(out / "model.safetensors") == file_sha256(good / "model.safetensors")  # the recipe's


def test_a_checked_tiny_model_folder_is_not_built_again(tmp_path, monkeypatch):
    import hfrl.core.tiny as tiny

    first = tiny.tiny_model_path("tiny", cache_dir=tmp_path)
    monkeypatch.setattr(tiny, "_build", lambda *a, **k: pytest.fail("built again"))
    assert tiny.tiny_model_path("tiny", cache_dir=tmp_path) == first
