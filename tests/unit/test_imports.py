"""hfrl's modules import downward only: no import cycle, lazy (function-level) imports included, every
import names a module that exists, and each layer imports only itself and the layers below it.

The graph is read from the source with ``ast`` (nothing is imported): an edge A -> B for every
``import hfrl.B`` / ``from hfrl.B import name`` anywhere in A, at module level, inside a function or
under ``if TYPE_CHECKING``. ``from hfrl.pkg import name`` points at the submodule ``hfrl.pkg.name``
when that is a module, else at the package. Implicit parent-package imports are not edges.

The layers, bottom to top (README.md, "Code layout"):

    hfrl.utils                      name lookup, the gate on names read from files, the cache folder
    hfrl.core                       maths and tensors, policies, model loading
    hfrl.rewards, hfrl.metrics      rewards (and their combination), metrics: they use each other
    hfrl.tasks                      datasets, rewards and configs per task
    hfrl.trainers                   the trainers and their configs, in-training evaluation
    hfrl.runs, hfrl.cards           run directories (build, open, evaluate, export, push, chat), model cards
    hfrl.cli, hfrl.testing, hfrl    the commands, test helpers, the public API (hfrl/__init__.py)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# pyproject's package-dir: hfrl.cli, hfrl.tasks and hfrl.cards live beside hfrl/
PACKAGE_DIRS = {
    "hfrl": ROOT / "hfrl",
    "hfrl.cli": ROOT / "cli",
    "hfrl.tasks": ROOT / "tasks",
    "hfrl.cards": ROOT / "cards",
}
LAYERS = [  # bottom to top: a module may import its own layer and the layers below
    ("hfrl.utils",),
    ("hfrl.core",),
    ("hfrl.rewards", "hfrl.metrics"),
    ("hfrl.tasks",),
    ("hfrl.trainers",),
    ("hfrl.runs", "hfrl.cards"),
    ("hfrl.cli", "hfrl.testing", "hfrl"),
]
# Upward arrows that are allowed, each for a reason. A trainer writes its model card on save_model
# and pushes its run on push_to_hub (transformers' Trainer contract): card_and_push calls the run layer
# lazily, at save / push time.
ALLOWED_UPWARD = {
    ("hfrl.trainers.card_and_push", "hfrl.cards"),
    ("hfrl.trainers.card_and_push", "hfrl.runs.hub"),
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
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


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """``(imported name, is a from-import)`` for every absolute or relative import of hfrl in one module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [(alias.name, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from ..y import z
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found += [(f"{base}.{alias.name}", True) for alias in node.names]
    return [(target, is_from) for target, is_from in found if target == "hfrl" or target.startswith("hfrl.")]


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, _ in _imports(name, path):
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


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest layer prefix of ``module`` (``hfrl`` itself: only the package)."""
    best: tuple[int, int] | None = None
    for index, names in enumerate(LAYERS):
        for prefix in names:
            hit = module == prefix or (prefix != "hfrl" and module.startswith(prefix + "."))
            if hit and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def upward_arrows(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every edge from a module to a module of a higher layer (modules in no layer left out)."""
    ranks = {name: layer_of(name) for name in {*graph, *(b for targets in graph.values() for b in targets)}}
    return {
        (a, b)
        for a, targets in graph.items()
        for b in targets
        if ranks[a] is not None and ranks[b] is not None and ranks[b] > ranks[a]  # type: ignore[operator]
    }


def test_the_graph_is_read():
    graph = import_graph()
    assert {"hfrl.cli.app", "hfrl.tasks.base", "hfrl.cards.render", "hfrl.runs.run_dir"} <= set(graph)
    assert "hfrl.runs.run_dir" in graph["hfrl.runs.hub"]  # a module-level import
    assert "hfrl.tasks" in graph["hfrl.runs.experiment"]  # a function-level (lazy) import
    assert "hfrl.cards.curve" in graph["hfrl.cards.render"]


def test_find_cycle_reports_the_loop():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _defined(path: Path) -> set[str]:
    """Names a module defines at top level (under ``if`` / ``try`` too); with a module ``__getattr__``,
    also the string keys of its top-level dict literals (hfrl's lazy exports, ``_LAZY``)."""
    names: set[str] = set()
    keys: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
                if isinstance(node.value, ast.Dict):
                    keys.update(
                        k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    )
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(_tree(path).body)
    names |= {"__file__", "__name__", "__doc__", "__path__", "__spec__", "__loader__", "__package__"}
    return names | (keys if "__getattr__" in names else set())


def test_every_import_names_what_exists():
    """A moved module or function leaves no import behind, lazy ones included (those fail only when run):
    ``import hfrl.x`` needs the module, ``from hfrl.x import name`` a submodule or a name hfrl.x defines."""
    modules = _modules()
    defined = {name: _defined(path) for name, path in modules.items()}
    # the package's modules, and the tests and benchmarks that import them (by file: not modules of hfrl)
    importers = dict(modules)
    for folder in ("tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "fixtures" not in path.relative_to(ROOT).parts:
                importers[str(path.relative_to(ROOT))] = path
    dangling = []
    for name, path in importers.items():
        for target, is_from in _imports(name, path):
            parent, _, attr = target.rpartition(".")
            ok = target in modules or (is_from and parent in modules and attr in defined[parent])
            if not ok:
                dangling.append(f"{name}: {'from ' + parent + ' import ' + attr if is_from else 'import ' + target}")
    assert not dangling, f"imports of what does not exist: {dangling}"


def test_layer_of():
    assert layer_of("hfrl.core.rollout") == 1 and layer_of("hfrl.metrics.base") == 2
    assert layer_of("hfrl") == 6 and layer_of("hfrl.cli.app") == 6 and layer_of("hfrl.stray") is None
    assert upward_arrows(
        {"hfrl.core.a": {"hfrl.runs.b", "hfrl.utils.c"}, "hfrl.runs.b": set(), "hfrl.utils.c": set()}
    ) == {("hfrl.core.a", "hfrl.runs.b")}


def test_every_module_sits_in_a_layer():
    stray = sorted(name for name in import_graph() if layer_of(name) is None)
    assert not stray, (
        f"modules in no layer (move them into hfrl/core, hfrl/runs, ... or name their layer in LAYERS): {stray}"
    )


def test_layers_import_downward_only():
    graph = import_graph()
    if any(layer_of(name) is None for name in graph):
        return  # test_every_module_sits_in_a_layer reports those
    upward = sorted(upward_arrows(graph) - ALLOWED_UPWARD)
    assert not upward, "imports of a higher layer: " + ", ".join(f"{a} -> {b}" for a, b in upward)
    stale = sorted(ALLOWED_UPWARD - upward_arrows(graph))
    assert not stale, f"allowed upward imports that no longer exist (remove them from ALLOWED_UPWARD): {stale}"


def test_core_and_rewards_stay_below_the_run_layer():
    """Issue 15's rules, spelled out: the maths core imports nothing of the run layer, the trainers,
    the CLI, the tasks or the cards; rewards and metrics nothing of the run layer or the trainers."""
    rules = {
        "hfrl.core.": (
            "hfrl.runs",
            "hfrl.trainers",
            "hfrl.cli",
            "hfrl.tasks",
            "hfrl.cards",
            "hfrl.rewards",
            "hfrl.metrics",
        ),
        "hfrl.rewards": ("hfrl.runs", "hfrl.trainers", "hfrl.cli", "hfrl.cards"),
        "hfrl.metrics": ("hfrl.runs", "hfrl.trainers", "hfrl.cli", "hfrl.cards"),
    }
    bad = [
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in targets
        for prefix, forbidden in rules.items()
        if a.startswith(prefix) and any(b == f or b.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, f"layering: {bad}"


def test_registries_name_their_own_layer_or_below():
    """A registry's dotted path is an import made later: the rewards' registry named
    ``hfrl.tasks.hh:OpenAssistantReward``, a layer above it (issue 54). Every entry of the registries in the
    layers under the tasks names a module of its own layer or a lower one."""
    from hfrl.core.estimators import ESTIMATORS
    from hfrl.core.policy_losses import POLICY_LOSSES
    from hfrl.metrics import METRICS
    from hfrl.rewards import REWARDS

    registries = {
        "hfrl.core.estimators": ESTIMATORS,
        "hfrl.core.policy_losses": POLICY_LOSSES,
        "hfrl.metrics": METRICS,
        "hfrl.rewards": REWARDS,
    }
    upward = []
    for owner, registry in registries.items():
        for name, entry in registry.items():
            path = str(getattr(entry, "path", None) or getattr(entry, "where", None) or entry)
            module = path.partition(":")[0]
            if layer_of(module) is not None and layer_of(module) > layer_of(owner):  # type: ignore[operator]
                upward.append(f"{owner}[{name!r}] -> {module}")
    assert not upward, f"registry entries naming a higher layer: {upward}"
