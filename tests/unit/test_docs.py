"""The maths document ``docs/algorithms.md``: every reference to it names a section that exists, and no
code cites the team document it replaced (which is not in the repository)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "algorithms.md"
SCANNED = ("hfrl", "cli", "cards", "tasks", "tests", "benchmarks", "docs", "README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".jinja"}
# "docs/algorithms.md §6", "docs/algorithms.md §9-§10", "docs/algorithms.md §2 (PPO), §4 (A2C)": every
# section named on the rest of the line; "docs/algorithms.md#3-nlpo": an anchor.
SECTION_REF = re.compile(r"docs/algorithms\.md( §.*)$", re.MULTILINE)
ANCHOR_REF = re.compile(r"algorithms\.md#(\d+-[a-z0-9-]+)")
OWN_ANCHOR = re.compile(r"\]\(#(\d+-[a-z0-9-]+)\)")  # the document's own contents links


def headings() -> dict[int, str]:
    """Section number -> title of the ``## N. Title`` headings."""
    return {int(n): title for n, title in re.findall(r"^## (\d+)\. (.+)$", DOC.read_text(), re.MULTILINE)}


def anchor(number: int, title: str) -> str:
    """GitHub's anchor of the heading ``## N. Title``: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^a-z0-9 -]", "", f"{number}. {title}".lower()).replace(" ", "-")


def texts():
    for name in SCANNED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES)
        for file in files:
            if "fixtures" not in file.parts:
                yield file, file.read_text(encoding="utf-8")


def test_sections_are_numbered_one_to_n():
    numbers = sorted(headings())
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 10
    assert anchor(3, headings()[3]) == "3-nlpo"  # the anchor form the code may cite


def test_every_reference_names_an_existing_section():
    sections = headings()
    anchors = {anchor(n, t) for n, t in sections.items()}
    found, bad = 0, []
    for file, text in texts():
        for rest in SECTION_REF.findall(text):
            found += 1
            for number in re.findall(r"§(\d+)", rest):
                if int(number) not in sections:
                    bad.append(f"{file.relative_to(ROOT)}: §{number}")
        for name in (OWN_ANCHOR if file == DOC else ANCHOR_REF).findall(text):
            found += 1
            if name not in anchors:
                bad.append(f"{file.relative_to(ROOT)}: #{name}")
    assert not bad, f"references to sections docs/algorithms.md does not have: {bad}"
    assert found >= 20  # the code does cite the document (this test is not vacuous)


def test_nothing_cites_the_document_outside_the_repository():
    old = "ALGORITHMS" + ".md"  # spelled in two pieces so that this file does not match itself
    citing = [str(file.relative_to(ROOT)) for file, text in texts() if old in text]
    assert not citing, f"{old} is not in the repository; cite docs/algorithms.md instead: {citing}"
