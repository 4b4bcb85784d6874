"""Run the code blocks of a Markdown page as a new user runs them: the machinery of the README's test
(``tests/cli/test_readme.py``) and the docs site's (``tests/docs/test_examples.py``).

Every fenced ``bash`` and ``python`` block of a page runs, in order, in one fresh folder (a shell's
exports carried from block to block, as in one terminal). A bare ``hfrl ...`` line runs through the
CLI's entry point in this process (the same code, without importing torch again for each line); any
other line (an assignment before it, ``$(...)``, ``&&``, a redirection, ``accelerate launch``,
``python -c``) runs in bash. ``pip install`` is left out (the test runs in that install), and so is
the test suite itself; each ``hfrl train`` gets ``--num_iterations 1`` (online algorithms) or
``--max_steps 2`` (TRL's trainers) appended; the offline trainers' commands run as printed.

A marker on the line before a block (``readme-test`` or its neutral alias ``example``):

- ``<!-- example: skip: REASON -->``: not run (the network, a GPU, a package hfrl does not install);
- ``<!-- example: requires: wordnet -->``: runs where WordNet is installed (always under CI);
  ``requires: deepspeed``: where the deepspeed package is (the dev extra installs it);
- ``<!-- example: file: NAME -->``: the block is a file the next blocks use: written to ``NAME`` in
  the page's folder, not run (a YAML config file is checked as ``hfrl train --config`` reads it).

A ``yaml`` block without a marker is a config file too: checked, not written.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKER = re.compile(r"^<!-- (?:readme-test|example): (skip|requires|file): (.+?) -->$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]+)[^`]*$")
RUNNABLE = ("bash", "python")
ONLINE = {"ppo", "nlpo", "a2c", "trpo"}
TRL = {"grpo", "rloo", "sft", "dpo", "reward"}
FAST = {"online": ["--num_iterations", "1"], "trl": ["--max_steps", "2"]}
ASSIGNMENT = re.compile(r"^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=(?P<value>.*)$")
PLAIN = re.compile(r"^hfrl [^$|&;<>`*]*$")  # a bare hfrl command: run in this process (no import time per line)


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: its language, text (indentation removed), line number and marker
    (kind, argument)."""

    lang: str
    code: str
    line: int
    marker: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        """A short test id: the line, the language and the first command."""
        first = next((ln for ln in self.code.splitlines() if ln.strip() and not ln.startswith("#")), "")
        return f"L{self.line}-{self.lang}-{re.sub(r'[^A-Za-z0-9]+', '-', first)[:40].strip('-')}"


def code_blocks(text: str, langs: tuple[str, ...] | None = RUNNABLE) -> list[Block]:
    """The fenced blocks of ``text`` in ``langs`` (None: every language), each with the marker on the
    line before it. An indented fence (inside an admonition or a list) is read without its indentation.

    >>> [(b.lang, b.code, b.marker) for b in code_blocks("<!-- readme-test: skip: GPU -->\\n```bash\\nls\\n```\\n")]
    [('bash', 'ls\\n', ('skip', 'GPU'))]
    >>> [(b.lang, b.code, b.marker) for b in code_blocks("<!-- example: file: c.yaml -->\\n  ```yaml\\n  a: 1\\n  ```",
    ...                                                  langs=None)]
    [('yaml', 'a: 1\\n', ('file', 'c.yaml'))]
    """
    lines = text.splitlines(keepends=True)
    blocks, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i].rstrip("\n"))
        if not fence:
            i += 1
            continue
        start, lang, indent = i, fence.group("lang"), fence.group("indent")
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = MARKER.match(before)
        body = "".join(ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[start + 1 : j])
        if langs is None or lang in langs:
            blocks.append(Block(lang, body, start + 1, marker.groups() if marker else None))  # type: ignore[arg-type]
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
    match = ASSIGNMENT.match(strip_comment(line))
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


def strip_comment(line: str) -> str:
    """The command without its trailing ``# comment`` (a ``#`` outside quotes, after a blank).

    >>> strip_comment('hfrl chat x --message "a # b"   # interactive')
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


def train_alg(tokens: list[str], workdir: Path) -> str:
    """The algorithm of an ``hfrl train`` command: --alg, else its --config file's (or the resumed
    run's config.yaml), else ppo."""
    import yaml

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
    """The command the test runs for a page's line (the module's rules); None to leave it out.

    >>> fast_variant("pip install -e . && hfrl train --task numbers --alg grpo  # TRL", Path("."))
    'hfrl train --task numbers --alg grpo --max_steps 2'
    >>> fast_variant("OMP_NUM_THREADS=1 python -m pytest", Path(".")) is None
    True
    """
    command = strip_comment(line)
    if not command.strip() or "pytest" in command:
        return None
    kept = []
    for part in (p.strip() for p in command.split("&&")):
        if part.startswith("pip install"):
            continue
        tokens = shlex.split(part)
        train = next(
            (k for k, t in enumerate(tokens[:-1]) if t in ("hfrl", "hfrl.cli") and tokens[k + 1] == "train"), None
        )
        if train is not None:
            alg = train_alg(tokens, workdir)
            kind = "online" if alg in ONLINE else "trl" if alg in TRL else None
            part = part + ("" if kind is None else " " + shlex.join(FAST[kind]))
        kept.append(part)
    return " && ".join(kept) if kept else None


def requirement_missing(what: str) -> str | None:
    """Why a ``requires`` block cannot run here (None: it can; under ``CI=true`` it always can)."""
    if what.strip() == "wordnet":
        from hfrl.testing import wordnet_missing

        return None if os.environ.get("CI") else wordnet_missing()
    if what.strip() == "deepspeed":  # in the dev extra: CI installs it
        import importlib.util

        return None if importlib.util.find_spec("deepspeed") else 'not installed (pip install "hfrl[deepspeed]")'
    return f"unknown requirement {what!r}"


def check_config_text(text: str, source: str) -> dict[str, Any]:
    """A YAML config file's text checked as ``hfrl train --config`` reads it: valid YAML naming no code
    (:func:`hfrl.runs.run_config.read_config_file`), run keys of the right kind and values of the
    algorithm's fields' types (:func:`hfrl.runs.config_values.check_config`), and every key a run key, a
    field of the algorithm's config or a ``trl.ModelConfig`` flag; a ``ValueError`` otherwise.

    >>> check_config_text("alg: ppo\\nlearning_rate: 5e-4\\n", "c.yaml")["learning_rate"]
    0.0005
    >>> check_config_text("learning_rat: 5e-4\\n", "c.yaml")
    Traceback (most recent call last):
    ValueError: c.yaml: unknown field 'learning_rat' of ppo; did you mean 'learning_rate'?
    """
    import difflib
    import tempfile

    from hfrl.runs.config_values import RUN_KEYS, check_config
    from hfrl.runs.run_config import read_config_file
    from hfrl.trainers.schema import config_schema, model_config_fields

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.yaml")
        path.write_text(text)
        data = read_config_file(path)
    checked = check_config(data, source)
    alg = str(checked.get("alg", "ppo"))
    known = {*RUN_KEYS, *dict(config_schema(alg).fields), *model_config_fields()}
    for key in checked:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{source}: unknown field {key!r} of {alg}{hint}")
    return checked


@dataclass
class Walk:
    """A user's folder and shell for one page: a fresh directory, the environment, the assignments
    (``export X=...``) made so far."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    assignments: list[str] = field(default_factory=list)
    label: str = "line"

    def __post_init__(self) -> None:
        if not self.env:
            self.env = dict(os.environ)
            self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
            self.env.pop("PYTEST_CURRENT_TEST", None)

    def exported(self) -> dict[str, str]:
        """The variables the assignments so far export (evaluated by bash, as the user's shell does)."""
        if not self.assignments:
            return {}
        script = "set -e\n" + "\n".join(self.assignments) + "\nenv -0\n"
        proc = subprocess.run(["bash", "-c", script], cwd=self.folder, env=self.env, capture_output=True, text=True,
                              check=True)  # fmt: skip
        pairs = (item.partition("=") for item in proc.stdout.split("\0") if "=" in item)
        return {k: v for k, _, v in pairs if self.env.get(k) != v and k not in ("_", "SHLVL", "PWD", "OLDPWD")}

    def write_file(self, block: Block, name: str) -> Path:
        """A ``file:`` block written into the folder (a YAML file checked as a config file first)."""
        if block.lang == "yaml":
            check_config_text(block.code, f"{self.label} {block.line}: {name}")
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code)
        return path

    def run(self, block: Block, monkeypatch: Any, capsys: Any) -> None:
        """Run a ``bash`` or ``python`` block; an ``AssertionError`` with its output if a command fails."""
        if block.lang == "python":
            script = self.folder / f"block_line_{block.line}.py"
            script.write_text(block.code)
            proc = subprocess.run([sys.executable, str(script)], cwd=self.folder, env=self.env, capture_output=True,
                                  text=True, stdin=subprocess.DEVNULL, timeout=900)  # fmt: skip
            assert proc.returncode == 0, (
                f"{self.label} {block.line}: python block\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
            return
        for offset, line in enumerate(block.code.splitlines()):
            if is_assignment(line):  # `export X=$(...)`: kept for what follows, as in one terminal
                self.assignments.append(line)
                continue
            command = fast_variant(line, self.folder)
            if command is None:
                continue
            where = f"{self.label} {block.line + 1 + offset}: {command}"
            if PLAIN.match(command):
                code, output = self._in_process(command, monkeypatch, capsys)
                assert code == 0, f"{where}\nexit {code}\n{output}"
                continue
            shell = "set -e\n" + "\n".join(self.assignments) + "\n" + command + "\n"
            proc = subprocess.run(["bash", "-c", shell], cwd=self.folder, env=self.env, capture_output=True,
                                  text=True, stdin=subprocess.DEVNULL, timeout=900)  # fmt: skip
            assert proc.returncode == 0, (
                f"{where}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )

    def _in_process(self, command: str, monkeypatch: Any, capsys: Any) -> tuple[int, str]:
        """A bare ``hfrl ...`` line through the CLI's entry point, in the folder and environment."""
        from hfrl.testing import run_cli

        with monkeypatch.context() as patch:
            patch.chdir(self.folder)
            for key, value in self.exported().items():
                patch.setenv(key, value)
            code, out, err = run_cli(shlex.split(command)[1:], capsys)
        return code, out[-3000:] + "\n" + err[-3000:]
