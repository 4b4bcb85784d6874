"""Every test that the code, the docs or the benchmarks cite exists: a docstring's "tested" names a
test that can be run (the collector's docstring cited tests/trainers/test_collector.py for a release
before the file existed)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITING = ["hfrl", "cli", "tasks", "cards", "docs", "benchmarks", "README.md"]
PATH = re.compile(r"\btests/[A-Za-z0-9_/.]*[A-Za-z0-9_]")  # tests/unit/test_x.py, tests/docs/
DOTTED = re.compile(r"\btests\.(?:unit|cli|trainers|docs)\.[A-Za-z0-9_]+")  # tests.trainers.test_collector
NAME = re.compile(r"\btest(?:_[A-Za-z0-9]+){2,}\b")  # test_each_estimator_learns_numbers (test_size: a variable)


def _texts():
    for entry in CITING:
        path = ROOT / entry
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in {".py", ".md", ".yaml"}]
        for file in files:
            if "fixtures" not in file.parts:
                yield file, file.read_text(encoding="utf-8", errors="replace")


def test_every_cited_test_exists():
    tests = ROOT / "tests"
    modules = {p.stem for p in tests.rglob("test_*.py")}
    defined = {m.group(1) for p in tests.rglob("*.py") for m in re.finditer(r"def (test_\w+)", p.read_text())}
    missing = []
    for file, text in _texts():
        where = file.relative_to(ROOT)
        for cited in PATH.findall(text):
            if not (ROOT / cited).exists():
                missing.append(f"{where}: {cited}")
        for cited in DOTTED.findall(text):
            if not (ROOT / (cited.replace(".", "/") + ".py")).exists():
                missing.append(f"{where}: {cited}")
        for name in NAME.findall(text):
            if name not in modules and name not in defined:
                missing.append(f"{where}: {name}")
    assert not missing, "cited tests that do not exist:\n" + "\n".join(sorted(set(missing)))
