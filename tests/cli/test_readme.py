"""The README, run as a new user runs it: every fenced ``bash`` and ``python`` block, read from README.md
itself, in order, in one fresh folder, by the machinery the docs site's examples share
(:mod:`hfrl.testing.examples`, whose docstring has the rules: ``pip install`` and the test suite left
out, each ``hfrl train`` shortened, the ``<!-- readme-test: skip|requires: ... -->`` markers).

The blocks depend on the ones before them (the first run's folder...): run the module as a whole. A
block that trains the real model (``conftest.slow_example``) runs in the slow tier (``pytest -m slow``,
which CI runs after the default tier); no later block reads what it writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import slow_example

from hfrl.testing.examples import Block, Walk, code_blocks, requirement_missing

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced ``bash`` / ``python`` block of the README, with the marker on the line before it."""
    return code_blocks(README.read_text() if text is None else text)


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Walk:
    """The user's folder and shell: a fresh directory, the environment, the assignments made so far."""
    return Walk(tmp_path_factory.mktemp("readme-walk"), label="README line")


BLOCKS = readme_blocks()


def test_the_readme_has_its_blocks():
    """The collector sees the README's sections (a changed fence would silently drop commands)."""
    commands = [b.code for b in BLOCKS if b.lang == "bash"]
    assert any("hfrl train --task numbers --alg ppo --model tiny" in c for c in commands)
    assert any("mkdocs serve" in c for c in commands)
    assert sum(b.lang == "python" for b in BLOCKS) >= 1
    assert all(b.marker is None or b.marker[0] in ("skip", "requires") for b in BLOCKS)
    # the tiers: the real model's run is slow, the first run and the next commands are in every run of the tests
    assert any(slow_example(b) and "--model smollm2" in b.code for b in BLOCKS)
    assert not any(slow_example(b) for b in BLOCKS if "--model tiny" in b.code)


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if slow_example(b) else []) for b in BLOCKS]
)
def test_readme_block(block: Block, session: Walk, monkeypatch, capsys):
    if block.marker is not None and block.marker[0] == "skip":
        pytest.skip(f"README line {block.line}: {block.marker[1]}")
    if block.marker is not None and block.marker[0] == "requires":
        why = requirement_missing(block.marker[1])
        if why:
            pytest.skip(f"README line {block.line} needs {block.marker[1]}: {why}")
    session.run(block, monkeypatch, capsys)


def test_the_runs_hold_what_the_readme_says(session: Walk):
    """After the blocks: the first run holds what "Start here" says, the second run of the task has its
    own numbered folder, the evaluation its report, the Python run its model."""
    runs = session.folder / "runs"
    if not (runs / "numbers-ppo").is_dir():
        pytest.skip("the README blocks did not run (run the module as a whole)")
    first = runs / "numbers-ppo"
    for name in ("config.yaml", "trainer_state.json", "iterations.jsonl", "reward_curve.png", "README.md",
                 "value_head.safetensors", "tokenizer.json", "eval/test.json"):  # fmt: skip
        assert (first / name).is_file(), name
    assert (runs / "numbers-nlpo" / "config.yaml").is_file()
    assert (runs / "digits" / "model.safetensors").is_file()
