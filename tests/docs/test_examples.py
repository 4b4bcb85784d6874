"""Every example of the docs site runs: each fenced ``bash`` and ``python`` block of ``docs/**/*.md``, as
a reader runs it, by the README test's machinery (:mod:`hfrl.testing.examples`: its docstring has the
rules). The blocks of one page run in order in one fresh folder (its own shell: exports carry from
block to block); each page is its own session. A ``yaml`` block is a config file, checked as
``hfrl train --config`` reads it; a block marked ``<!-- example: file: NAME -->`` is written to NAME
for the blocks after it; ``<!-- example: skip: REASON -->`` says why a block does not run here.
Other blocks (``text``: output, listings) are shown, not run.

The last test prints how many blocks ran, were checked, written and skipped. Run the module as a
whole: a page's blocks depend on the ones before them. A page with a block that launches processes or
trains the real model (``conftest.slow_example``) runs whole in the slow tier (``pytest -m slow``, which CI
runs after the default tier); every other page runs whole in the default tier.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import pytest
from conftest import one_launch_at_a_time, slow_example

from hfrl.testing.examples import RUNNABLE, Block, Walk, check_config_text, code_blocks, requirement_missing

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
ITEMS = [(page, block) for page in PAGES for block in code_blocks(page.read_text(), langs=None)]
COUNTS: Counter[str] = Counter()
SLOW_PAGES = {page for page, block in ITEMS if slow_example(block)}  # the whole page: its blocks build on each other


def _tier(page: Path) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if page in SLOW_PAGES else []


def _page(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


@pytest.fixture(scope="module")
def walks(tmp_path_factory) -> dict[Path, Walk]:
    """One reader's folder and shell per page, made when the page's first block runs."""
    return {}


def _walk(walks: dict[Path, Walk], page: Path, tmp_path_factory) -> Walk:
    if page not in walks:
        folder = tmp_path_factory.mktemp("docs-" + _page(page).replace("/", "-").removesuffix(".md"))
        walks[page] = Walk(folder, label=f"docs/{_page(page)} line")
    return walks[page]


def test_the_pages_have_their_examples():
    """The collector sees the pages (a changed fence would silently drop commands)."""
    by_page = {_page(p): [b for q, b in ITEMS if q == p] for p in PAGES}
    assert len(by_page) >= 16
    first = [b.code for b in by_page["get-started/first-run.md"]]
    assert any("hfrl train --task numbers --alg ppo --model tiny" in c for c in first)
    assert any(b.lang == "python" for b in by_page["get-started/first-run.md"])
    assert any("export HF_HUB_OFFLINE=1" in b.code for b in by_page["how-to/own-data.md"])
    assert all(b.marker is None or b.marker[0] in ("skip", "requires", "file") for _, b in ITEMS)
    assert sum(b.lang in RUNNABLE for _, b in ITEMS) >= 30
    # the tiers: the real model's page and the launches are slow, the first run is in every run of the tests
    assert {DOCS / "how-to/real-model.md", DOCS / "how-to/distributed.md"} <= SLOW_PAGES
    assert DOCS / "get-started/first-run.md" not in SLOW_PAGES


@pytest.mark.parametrize(
    ("page", "block"), [pytest.param(p, b, id=f"{_page(p)}:{b.id}", marks=_tier(p)) for p, b in ITEMS]
)
def test_example(page: Path, block: Block, walks, tmp_path_factory, monkeypatch, capsys):
    where = f"docs/{_page(page)} line {block.line}"
    kind, argument = block.marker or ("", "")
    if kind == "skip":
        COUNTS["skipped"] += 1
        pytest.skip(f"{where}: {argument}")
    if kind == "requires":
        why = requirement_missing(argument)
        if why:
            COUNTS["skipped"] += 1
            pytest.skip(f"{where} needs {argument}: {why}")
    walk = _walk(walks, page, tmp_path_factory)
    if kind == "file":
        walk.write_file(block, argument)
        COUNTS["written"] += 1
    elif block.lang in RUNNABLE:
        launches = "accelerate launch" in block.code  # port 29500: one launch at a time across pytest-xdist workers
        with one_launch_at_a_time(tmp_path_factory) if launches else contextlib.nullcontext():
            walk.run(block, monkeypatch, capsys)
        COUNTS["executed"] += 1
    elif block.lang == "yaml":
        check_config_text(block.code, where)
        COUNTS["checked"] += 1
    else:
        COUNTS["shown"] += 1  # output or a listing: nothing to run


# What the pages' commands leave behind, as the pages say (checked after all the blocks ran).
LEFT = {
    "get-started/first-run.md": ["runs/numbers-ppo/README.md", "runs/numbers-ppo/reward_curve.png",
                                 "runs/numbers-ppo-2/config.yaml", "runs/numbers-from-file/config.yaml",
                                 "runs/digits/model.safetensors", "runs/numbers-python/iterations.jsonl"],
    "get-started/run-folder.md": ["runs/numbers-ppo/iterations.jsonl", "runs/numbers-ppo/value_head.safetensors",
                                  "runs/numbers-ppo-2/config.yaml"],
    "how-to/own-data.md": ["runs/my-ppo/eval/test.json", "runs/questions-ppo/config.yaml"],
    "how-to/lora.md": ["runs/numbers-lora/adapter_config.json", "exported/merged/README.md",
                       "runs/numbers-lora-python/adapter_model.safetensors",
                       "runs/numbers-lora-more/adapter_config.json"],
    "how-to/resume.md": ["runs/numbers-again/config.yaml"],
    "how-to/evaluate-export-push-chat.md": ["runs/numbers-ppo/eval/test.json", "runs/numbers-ppo/eval/test-base.json",
                                            "runs/numbers-ppo/predictions/test.jsonl", "exported/numbers/README.md",
                                            "exported/merged/config.json"],
    "concepts/trust.md": ["runs/mine/config.yaml", "runs/mine-again/config.yaml"],
}  # fmt: skip


@pytest.mark.parametrize("page", [pytest.param(page, marks=_tier(DOCS / page)) for page in sorted(LEFT)])
def test_the_pages_leave_what_they_say(page: str, walks):
    walk = walks.get(DOCS / page)
    if walk is None:
        pytest.skip(f"the blocks of docs/{page} did not run (run the module as a whole)")
    missing = [name for name in LEFT[page] if not (walk.folder / name).exists()]
    assert not missing, f"docs/{page}: its commands did not write {missing}"
    if page == "how-to/resume.md":
        assert list((walk.folder / "runs/numbers-again").glob("checkpoint-*/checkpoint_complete.json"))


def test_report_the_counts(request):
    """How many examples ran: one line in the terminal report (with -q too)."""
    if not COUNTS:
        pytest.skip("no example ran (run the module as a whole)")
    line = (
        f"docs examples: {COUNTS['executed']} bash/python blocks executed, {COUNTS['checked']} YAML config checked, "
        f"{COUNTS['written']} written as files, {COUNTS['skipped']} skipped (marked), {COUNTS['shown']} shown only "
        f"(output, listings); {len(ITEMS)} fenced blocks on {len(PAGES)} pages"
    )
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past the capture, into the terminal report
            reporter.write_line("\n" + line)
    assert COUNTS["executed"] > 0, line
