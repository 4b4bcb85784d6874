"""hfrl's modules import downward only: no import cycle, lazy (function-level) imports included.

The graph is read from the source with ``ast`` (nothing is imported): an edge A -> B for every
``import hfrl.B`` / ``from hfrl.B import name`` anywhere in A, at module level, inside a function or
under ``if TYPE_CHECKING``. ``from hfrl.pkg import name`` points at the submodule ``hfrl.pkg.name``
when that is a module, else at the package. Implicit parent-package imports are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pyproject's package-dir: hfrl.cli, hfrl.tasks and hfrl.cards live beside hfrl/
PACKAGE_DIRS = {
    "hfrl": ROOT / "hfrl",
    "hfrl.cli": ROOT / "cli",
    "hfrl.tasks": ROOT / "tasks",
    "hfrl.cards": ROOT / "cards",
}


def _modules() -> dict[str, Path]:
    """Module name -> source file, for every module of the installed packages."""
    out: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "fixtures" in parts:  # tasks/fixtures: data-building scripts, not part of the package
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The module that ``name`` (a module or a module's attribute) is read from."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x / from ..y import z
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target == "hfrl" or target.startswith("hfrl."):
                    found = _target(target, modules)
                    if found is not None and found != name:
                        graph[name].add(found)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_graph_is_read():
    graph = import_graph()
    assert {"hfrl.cli.app", "hfrl.tasks.base", "hfrl.cards.render", "hfrl.runs"} <= set(graph)
    assert "hfrl.runs" in graph["hfrl.hub"]  # a module-level import
    assert "hfrl.tasks" in graph["hfrl.experiment"]  # a function-level (lazy) import
    assert "hfrl.cards.curve" in graph["hfrl.cards.render"]


def test_find_cycle_reports_the_loop():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
