"""Which trainer serves which algorithm name, read from the trainers' own declarations.

A trainer registers by declaring, on its class, the algorithm names it serves with a one-line
summary each, and its config class::

    class PPOTrainer(OnlineTrainer):
        algs = {"ppo": "online: clipped-ratio policy updates ..."}
        config_class = PPOConfig

That is the one registration point: the algorithm registry (``hfrl.trainers.ALGORITHMS``, what
``--alg`` accepts, and ``SUMMARIES``, what ``hfrl list algs`` prints) and the lazy exports of
``hfrl``, ``hfrl.trainers.online`` and ``hfrl.trainers.offline`` derive from these declarations.
They are read from the source with ``ast`` (nothing is imported: ``hfrl --help`` and ``hfrl list``
load no torch), in the families' order (online, TRL's trainers, offline), the default algorithm
first. A base class declares ``algs = {}``: exported, no name of its own.

    python -m pytest tests/unit/test_registration.py
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent
FAMILIES = ("online", "trl_adapters.py", "offline")  # the order `hfrl list algs` shows them in
DEFAULT_ALG = "ppo"  # listed first: `hfrl train`'s default


class Declared(NamedTuple):
    """One trainer class that declares ``algs``."""

    module: str  # hfrl.trainers.online.ppo_trainer
    name: str  # PPOTrainer
    config_module: str  # hfrl.trainers.online.ppo_config
    config_name: str  # PPOConfig
    algs: tuple[tuple[str, str], ...]  # (name, summary) pairs
    # "module:function" of its translate_task_defaults (None: the task's defaults as they are): what names code
    # is read from the installed source, never from a cache (hfrl.trainers.schema)
    translate: str | None = None

    @property
    def package(self) -> str:
        return self.module.rpartition(".")[0]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for family in FAMILIES:
        path = ROOT / family
        files = [path] if path.is_file() else sorted(path.glob("*.py"))
        out += [(".".join(("hfrl", "trainers", *f.relative_to(ROOT).with_suffix("").parts)), f) for f in files]
    return out


TRANSLATE = "translate_task_defaults"  # a trainer's function putting a task's shared defaults in its config's names


def _translation(
    node: ast.ClassDef, classes: dict[str, ast.ClassDef], imported: dict[str, str], module: str
) -> str | None:
    """What ``translate_task_defaults = staticmethod(NAME)`` names on ``node`` or the first of its bases in the
    module that sets it (depth-first, as the MRO of these single chains): ``"module:NAME"`` for a function
    imported by name or defined here, ``""`` for a lambda (the defaults as they are), None where no class
    sets it, ``"?"`` for a form not read here (:func:`hfrl.trainers.schema.build` then fails: it checks
    this against the class)."""
    for item in node.body:
        target = item.targets[0] if isinstance(item, ast.Assign) else getattr(item, "target", None)
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == TRANSLATE:
            return "?"
        if not (isinstance(target, ast.Name) and target.id == TRANSLATE):
            continue
        value = getattr(item, "value", None)
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "staticmethod"):
            return "?"
        arg = value.args[0] if len(value.args) == 1 else None
        if isinstance(arg, ast.Lambda):
            return ""
        if isinstance(arg, ast.Name):
            return f"{imported.get(arg.id, module)}:{arg.id}"
        return "?"
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id != node.name:
            found = _translation(classes[base.id], classes, imported, module)
            if found is not None:
                return found
    return None


def _declarations(module: str, source: str) -> list[Declared]:
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        values = {}
        for item in node.body:
            target = item.targets[0] if isinstance(item, ast.Assign) else getattr(item, "target", None)
            if isinstance(target, ast.Name) and getattr(item, "value", None) is not None:
                values[target.id] = item.value  # type: ignore[attr-defined]
        algs, config = values.get("algs"), values.get("config_class")
        if not isinstance(algs, ast.Dict) or not isinstance(config, ast.Name):
            continue
        pairs = tuple(
            (key.value, value.value)
            for key, value in zip(algs.keys, algs.values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
            and isinstance(value, ast.Constant) and isinstance(value.value, str)
        )  # fmt: skip
        translate = _translation(node, classes, imported, module) or None
        found.append(Declared(module, node.name, imported.get(config.id, module), config.id, pairs, translate))
    return found


@functools.cache
def declared_trainers() -> tuple[Declared, ...]:
    """Every trainer class under ``hfrl/trainers`` that declares ``algs`` (and ``config_class``)."""
    found: list[Declared] = []
    for module, path in _modules():
        source = path.read_text(encoding="utf-8")
        if "algs = {" in source or "algs: ClassVar" in source:
            found += _declarations(module, source)
    return tuple(found)


def algorithms() -> dict[str, tuple[str, str]]:
    """Algorithm name -> (``"module:Class"`` of its trainer, its one-line summary), in listing order."""
    rows = [(name, (f"{t.module}:{t.name}", summary)) for t in declared_trainers() for name, summary in t.algs]
    rows.sort(key=lambda row: row[0] != DEFAULT_ALG)  # stable: the families' order otherwise
    return dict(rows)


def translations() -> dict[str, str | None]:
    """Algorithm name -> ``"module:function"`` of its trainer's ``translate_task_defaults`` (None: none),
    read from the source like :func:`algorithms` (nothing imported)."""
    return {name: t.translate for t in declared_trainers() for name, _ in t.algs}


def exports(*packages: str) -> dict[str, str]:
    """Class name -> module, for the trainers of ``packages`` (and the packages below them) and their
    config classes: what those packages (and ``hfrl``) export lazily."""
    out: dict[str, str] = {}
    for t in declared_trainers():
        if any(t.package == p or t.package.startswith(p + ".") for p in packages):
            out[t.name] = t.module
            out[t.config_name] = t.config_module
    return out


def lazy_getattr(package: str, lazy: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) that imports an export from its module when first
    asked for (``lazy``: :func:`exports`' name -> module), so that importing the package costs no torch."""
    import importlib

    def __getattr__(name: str) -> Any:
        if name in lazy:
            return getattr(importlib.import_module(lazy[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
