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


def test_only_the_first_process_of_a_launch_builds_a_cache_folder(tmp_path):
    """transformers' save_pretrained writes no weights off rank 0 of a process group: a folder another rank
    built held a tokenizer and no model, and an accelerate launch on a fresh cache stopped ("Unrecognized
    model"). Another rank waits for rank 0's folder and never builds; rank 0 builds it once."""
    import threading

    import pytest

    from hfrl.utils.cache import ensure_built, write_manifest

    out, made_from, built = tmp_path / "model", {"built_in": "model"}, []

    def build() -> None:
        out.mkdir()
        (out / "config.json").write_text('{"model_type": "gpt2"}')
        write_manifest(out, made_from)
        built.append(1)

    with pytest.raises(RuntimeError, match=r"^process 1 waited 0 s for process 0 to build"):
        ensure_built(out, made_from, lambda: built.append("rank 1"), wait_s=0.2, rank=1)
    waiting = threading.Thread(target=ensure_built, args=(out, made_from, lambda: built.append("rank 1")),
                               kwargs={"wait_s": 30, "rank": 1})  # fmt: skip
    waiting.start()
    ensure_built(out, made_from, build, rank=0)
    waiting.join(timeout=30)
    assert not waiting.is_alive() and built == [1]  # rank 1 took rank 0's folder; nobody built twice
    ensure_built(out, made_from, build, rank=0)
    assert built == [1]  # a checked folder is used as it is
