"""The README, run as a new user runs it: every fenced ``bash`` and ``python`` block, read from README.md
itself, in order, in one fresh folder (a shell's exports carried from block to block, as in one terminal).

A bare ``hfrl ...`` line runs through the CLI's entry point in this process (the same code, without
importing torch again for each line); any other line (an assignment before it, ``$(...)``, ``&&``,
a redirection, ``accelerate launch``, ``python -c``) runs in bash. What the test changes, as the
README says under "Tests by layer": ``pip install`` is left out (the test
runs in that install), and so is the test suite itself; each ``hfrl train`` gets ``--num_iterations 1``
(online algorithms) or ``--max_steps 2`` (TRL's trainers) appended; the offline trainers' commands
run as printed. A block preceded by ``<!-- readme-test: skip: REASON -->`` (the network, a GPU, a
package hfrl does not install) is skipped with its reason; ``<!-- readme-test: requires: wordnet -->``
runs where WordNet is installed (always under CI).

The blocks depend on the ones before them (the first run's folder...): run the module as a whole.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- readme-test: (skip|requires): (.+?) -->$")
ONLINE = {"ppo", "nlpo", "a2c", "trpo"}
TRL = {"grpo", "rloo", "sft", "dpo"}
FAST = {"online": ["--num_iterations", "1"], "trl": ["--max_steps", "2"]}
ASSIGNMENT = re.compile(r"^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=(?P<value>.*)$")

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Block:
    """A fenced block of the README: its language, text, line number and marker (kind, reason)."""

    lang: str
    code: str
    line: int
    marker: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        first = next((ln for ln in self.code.splitlines() if ln.strip() and not ln.startswith("#")), "")
        return f"L{self.line}-{self.lang}-{re.sub(r'[^A-Za-z0-9]+', '-', first)[:40].strip('-')}"


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced ``bash`` / ``python`` block of the README, with the marker on the line before it.

    >>> [(b.lang, b.code, b.marker) for b in readme_blocks("<!-- readme-test: skip: GPU -->\\n```bash\\nls\\n```\\n")]
    [('bash', 'ls\\n', ('skip', 'GPU'))]
    """
    lines = (README.read_text() if text is None else text).splitlines(keepends=True)
    blocks, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w+)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i, fence.group(1)
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = MARKER.match(before)
        if lang in ("bash", "python"):
            blocks.append(Block(lang, "".join(lines[start + 1 : j]), start + 1, marker.groups() if marker else None))
        i = j + 1
    return blocks


def is_assignment(line: str) -> bool:
    """A shell variable set on a line of its own (``export X=...``, ``X=$(...)``), not a command run
    with a variable (``OMP_NUM_THREADS=1 python -m pytest``): kept for the lines that follow.

    >>> is_assignment("export HF_HUB_OFFLINE=1"), is_assignment('D=$(python -c "print(1)")')
    (True, True)
    >>> is_assignment("OMP_NUM_THREADS=1 python -m pytest")
    False
    """
    match = ASSIGNMENT.match(_strip_comment(line))
    if match is None:
        return False
    value = match.group("value").strip()
    if value.startswith("$(") and value.endswith(")"):
        return True
    quote = None
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch.isspace():
            return False
    return True


def _strip_comment(line: str) -> str:
    """The command without its trailing ``# comment`` (a ``#`` outside quotes, after a blank).

    >>> _strip_comment('hfrl chat x --message "a # b"   # interactive')
    'hfrl chat x --message "a # b"'
    """
    out, quote = [], None
    for k, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()


def _train_alg(tokens: list[str], workdir: Path) -> str:
    """The algorithm of an ``hfrl train`` command: --alg, else its --config file's (or the resumed
    run's config.yaml), else ppo."""

    def value(*flags: str) -> str | None:
        return next((tokens[tokens.index(f) + 1] for f in flags if f in tokens[:-1]), None)

    alg = value("--alg", "-a")
    if alg:
        return alg
    config = value("--config", "-c")
    if config is None and "--resume" in tokens and value("--output-dir", "-o"):
        config = str(Path(str(value("--output-dir", "-o"))) / "config.yaml")
    path = workdir / config if config else None
    if path is not None and path.is_file():
        return str((yaml.safe_load(path.read_text()) or {}).get("alg", "ppo"))
    return "ppo"


def fast_variant(line: str, workdir: Path) -> str | None:
    """The command the test runs for a README line (the module docstring's rules); None to leave it out."""
    command = _strip_comment(line)
    if not command.strip() or "pytest" in command:
        return None
    parts = [p.strip() for p in command.split("&&")]
    kept = []
    for part in parts:
        if part.startswith("pip install"):
            continue
        tokens = shlex.split(part)
        train = next(
            (k for k, t in enumerate(tokens[:-1]) if t in ("hfrl", "hfrl.cli") and tokens[k + 1] == "train"), None
        )
        if train is not None:
            alg = _train_alg(tokens, workdir)
            kind = "online" if alg in ONLINE else "trl" if alg in TRL else None
            part = part + ("" if kind is None else " " + shlex.join(FAST[kind]))
        kept.append(part)
    return " && ".join(kept) if kept else None


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The user's folder and shell: a fresh directory, the environment, the assignments made so far."""
    folder = tmp_path_factory.mktemp("readme-walk")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYTEST_CURRENT_TEST", None)
    return {"dir": folder, "env": env, "assignments": []}


def _requires(what: str) -> str | None:
    """Why a ``requires`` block cannot run here (None: it can)."""
    if what.strip() == "wordnet":
        from hfrl.testing import wordnet_missing

        return None if os.environ.get("CI") else wordnet_missing()
    return f"unknown requirement {what!r}"


BLOCKS = readme_blocks()


def test_the_readme_has_its_blocks():
    """The collector sees the README's sections (a changed fence would silently drop commands)."""
    commands = [b.code for b in BLOCKS if b.lang == "bash"]
    assert any("hfrl train --task numbers --alg ppo --model tiny" in c for c in commands)
    assert any("export HF_HUB_OFFLINE=1" in c for c in commands)
    assert sum(b.lang == "python" for b in BLOCKS) >= 2
    assert all(b.marker is None or b.marker[0] in ("skip", "requires") for b in BLOCKS)


PLAIN = re.compile(r"^hfrl [^$|&;<>`*]*$")  # a bare hfrl command: run in this process (no import time per line)


def _exported(session) -> dict[str, str]:
    """The variables the README's assignments so far export (evaluated by bash, as the user's shell does)."""
    if not session["assignments"]:
        return {}
    script = "set -e\n" + "\n".join(session["assignments"]) + "\nenv -0\n"
    proc = subprocess.run(["bash", "-c", script], cwd=session["dir"], env=session["env"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    pairs = (item.partition("=") for item in proc.stdout.split("\0") if "=" in item)
    return {k: v for k, _, v in pairs if session["env"].get(k) != v and k not in ("_", "SHLVL", "PWD", "OLDPWD")}


def _run_in_process(command: str, session, monkeypatch, capsys) -> tuple[int, str]:
    """A bare ``hfrl ...`` line through the CLI's entry point, in the README's folder and environment."""
    from hfrl.testing import run_cli

    with monkeypatch.context() as patch:
        patch.chdir(session["dir"])
        for key, value in _exported(session).items():
            patch.setenv(key, value)
        code, out, err = run_cli(shlex.split(command)[1:], capsys)
    return code, out[-3000:] + "\n" + err[-3000:]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block(block: Block, session, monkeypatch, capsys):
    if block.marker is not None and block.marker[0] == "skip":
        pytest.skip(f"README line {block.line}: {block.marker[1]}")
    if block.marker is not None and block.marker[0] == "requires":
        why = _requires(block.marker[1])
        if why:
            pytest.skip(f"README line {block.line} needs {block.marker[1]}: {why}")
    folder, env = session["dir"], session["env"]
    if block.lang == "python":
        script = folder / f"readme_line_{block.line}.py"
        script.write_text(block.code)
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, (
            f"README line {block.line}: python block\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
        return
    for offset, line in enumerate(block.code.splitlines()):
        if is_assignment(line):  # `export X=$(...)`: kept for what follows, as in one terminal
            session["assignments"].append(line)
            continue
        command = fast_variant(line, folder)
        if command is None:
            continue
        where = f"README line {block.line + 1 + offset}: {command}"
        if PLAIN.match(command):
            code, output = _run_in_process(command, session, monkeypatch, capsys)
            assert code == 0, f"{where}\nexit {code}\n{output}"
            continue
        script = "set -e\n" + "\n".join(session["assignments"]) + "\n" + command + "\n"
        proc = subprocess.run(
            ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, f"{where}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_runs_hold_what_the_readme_says(session):
    """After the blocks: every saved run has its card and curve, the repeated run its checkpoint, the
    second run of a task its own numbered folder, the exports their cards."""
    runs = session["dir"] / "runs"
    if not (runs / "numbers-ppo").is_dir():
        pytest.skip("the README blocks did not run (run the module as a whole)")
    saved = [p for p in runs.iterdir() if (p / "config.yaml").is_file() and (p / "README.md").is_file()]
    assert {"numbers-ppo", "numbers-ppo-2", "numbers-ppo-3", "numbers-again", "numbers-lora"} <= {p.name for p in saved}
    assert [p.name for p in saved if not (p / "reward_curve.png").is_file()] == []
    assert list((runs / "numbers-again").glob("checkpoint-*/checkpoint_complete.json"))
    assert (runs / "numbers-lora" / "adapter_config.json").is_file()
    exported = session["dir"] / "exported"
    assert (exported / "numbers" / "README.md").is_file() and (exported / "merged" / "README.md").is_file()
