"""Name -> object lookup for the registries (dict literals of ``name -> "module:attr"``).

A name that is not registered may be a ``module:attr`` path to user code. An unknown name fails
with the known names and the closest match.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class UnknownNameError(ValueError):
    """An unknown task, algorithm, reward, metric, model or config key (the CLI exits with code 2)."""


def unknown(kind: str, name: str, known: Iterable[str], hint: str = "", max_listed: int = 30) -> UnknownNameError:
    """The error for an unknown name: the closest match and the known names (or, when there are
    more than ``max_listed``, the closest few)."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    if len(known) <= max_listed:
        listed = f"known: {', '.join(known)}"
    else:
        nearby = difflib.get_close_matches(name, known, n=5, cutoff=0.3)
        listed = f"{len(known)} known" + (f", nearest: {', '.join(nearby)}" if nearby else "")
    return UnknownNameError(f"unknown {kind} {name!r}{guess} ({listed}){hint}")


# What a resolver imports: a name that is not registered and reads as ``package.module:attr`` (the
# attribute may be empty: ``module:`` imports the module itself). :func:`is_code_path` is the one test
# that both the resolvers and the trust check of files (:mod:`hfrl.utils.trust`) use, so that a file is
# refused for exactly the names a resolver would import.
# A Python file of yours is named by its path: ``my_rewards.py:digits``, ``src/rewards.py:Score``.
_CODE_PATH = re.compile(r"(?:[A-Za-z_][\w.]*|[^:\s]+\.py):[\w.]*")


def is_code_path(name: Any) -> bool:
    """Whether a resolver given ``name`` (unregistered) imports it as ``module:attr`` or ``file.py:attr``.

    >>> is_code_path("os:system"), is_code_path("evil:"), is_code_path("pkg.mod:Cls.method")
    (True, True, True)
    >>> is_code_path("my_rewards.py:digits"), is_code_path("../src/r.py:f"), is_code_path("/abs/x.py:")
    (True, True, True)
    >>> is_code_path("rouge"), is_code_path("http://x"), is_code_path("data/my.jsonl"), is_code_path(":x")
    (False, False, False, False)
    """
    return isinstance(name, str) and _CODE_PATH.fullmatch(name) is not None


def import_path(path: str) -> Any:
    """``"package.module:attr"`` -> the object (``"module:"``: the module); ``"path/to/file.py:attr"``
    loads that file as a module of its own (nothing is added to ``sys.path``)."""
    module, _, attr = path.partition(":")
    obj: Any = _load_file(module) if module.endswith(".py") else _import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def _import_module(module: str) -> Any:
    """``importlib.import_module``; a module that is not importable but is a file in the current folder
    gets the hint to name the file (the current folder is not on ``sys.path`` when hfrl loads models)."""
    import os

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        file = module.replace(".", os.sep) + ".py"
        if err.name == module.split(".")[0] and os.path.isfile(file):
            raise ModuleNotFoundError(
                f"{err}; to use the file {file} of this folder, name it by its path: {file}:NAME"
            ) from None
        raise


def _load_file(file: str) -> Any:
    """The Python file ``file`` as a module named after its resolved path (loaded once per process)."""
    import hashlib
    import importlib.util
    import os
    import sys

    real = os.path.realpath(file)
    if not os.path.isfile(real):
        raise ModuleNotFoundError(f"no Python file {file}", name=file)
    stem = re.sub(r"\W", "_", os.path.basename(real)[:-3])
    name = f"hfrl_user_{stem}_{hashlib.sha256(real.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, real)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: its own imports of itself, pickling by reference
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@dataclass(frozen=True)
class Entry:
    """A registry entry that says what it needs: ``path`` (``module:attr``, imported only when used),
    the dataset ``inputs`` it reads besides prompts and completions (``references``, ``table``...; a run
    whose train split lacks one is refused: :func:`hfrl.rewards.missing_inputs_problem`), the
    ``optional_inputs`` it reads when the data has them (else it falls back, on the prompt), the
    ``range`` of its per-sample score, what it ``needs`` that a plain install lacks (``wordnet``,
    ``model``: a download, ``java``...), and for a metric, the per-sample score a reward takes
    (``reward``: ``""`` for its only one, or a name; None: not a reward) and how (``reward_transform``).
    Its description and arguments are its class's docstring and signature (:func:`describe`)."""

    path: str
    inputs: tuple[str, ...] = ()
    range: str = ""
    needs: tuple[str, ...] = ()
    reward: str | None = None
    reward_transform: str | None = None
    optional_inputs: tuple[str, ...] = ()


def path_of(entry: str | Entry) -> str:
    return entry.path if isinstance(entry, Entry) else entry


def resolve(name: str, registry: Mapping[str, str | Entry], kind: str) -> Any:
    """The object registered as ``name``, or the object at the ``module:attr`` path ``name``."""
    if name in registry:
        return import_path(path_of(registry[name]))
    if is_code_path(name):
        try:
            return import_path(name)
        except (ImportError, AttributeError) as err:
            raise UnknownNameError(f"cannot import {kind} {name!r}: {err}") from err
    raise unknown(kind, name, registry, hint=f", or a 'module:attr' path to your own {kind}")


def spec_parts(spec: Any, kind: str) -> tuple[Any, dict[str, Any]]:
    """``(id, args)`` of a ``kind``'s spec: an id (or ``module:attr`` path) or a mapping ``{id, args}``.

    >>> spec_parts({"id": "rouge", "args": {"rouge_type": "rougeL"}}, "reward")
    ('rouge', {'rouge_type': 'rougeL'})
    """
    if isinstance(spec, str):
        spec = {"id": spec}
    if not isinstance(spec, dict) or "id" not in spec:
        raise ValueError(f"a {kind} is an id or a mapping with 'id' (and optional 'args'), got {spec!r}")
    return spec["id"], dict(spec.get("args") or {})


def built(obj: Any, args: dict[str, Any], kind: str, name: Any) -> Any:
    """A registered class built with ``args`` (an argument it does not take is an unknown name); a
    registered function as it is (it takes no args)."""
    if isinstance(obj, type):
        import inspect

        params = inspect.signature(obj).parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            known = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            for key in args:
                if key not in known:
                    raise unknown(f"argument of {kind} {name!r}", key, known)
        return obj(**args)
    if args:
        raise ValueError(f"{kind} {name!r} is a function and takes no args; got {sorted(args)}")
    return obj


def registry_help(registry: Mapping[str, str | Entry], default: str) -> str:
    """A registry-backed option's help text from the registry itself (each entry's docstring line, read
    from its source without importing it: :func:`describe_path`), the default marked.

    >>> registry_help({"unknown": "hfrl.utils.registry:UnknownNameError"}, "unknown")[:40]
    'One of: unknown (default): An unknown ta'
    """
    lines = [f"{name}{' (default)' if name == default else ''}: {describe_path(path_of(entry)).rstrip('.')}"
             for name, entry in registry.items()]  # fmt: skip
    return "One of: " + "; ".join(lines) + ". A 'module:attr' or 'path/to/file.py:Class' path names your own."


def describe_path(path: str) -> str:
    """:func:`describe` of the object at ``"package.module:Class"`` read from its source, without
    importing the module (``hfrl list algs`` lists the advantage estimators without loading torch).

    >>> describe_path("hfrl.utils.registry:UnknownNameError")
    'An unknown task, algorithm, reward, metric, model or config key (the CLI exits with code 2).'
    """
    import ast
    import importlib.util

    module, _, attr = path.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == attr:
            return describe(type("", (), {"__doc__": ast.get_docstring(node)}))
    return ""


def describe(obj: Any) -> str:
    r"""The first paragraph of an object's docstring on one line, as plain text (RST's double
    backticks become quotes).

    >>> class Reward:
    ...     __doc__ = "``f`` is a reward whose description\n    spans two lines.\n\n    Details."
    >>> describe(Reward)
    "'f' is a reward whose description spans two lines."
    """
    doc = (getattr(obj, "__doc__", None) or "").strip()
    paragraph = " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines())
    return re.sub(r"``(.+?)``", r"'\1'", paragraph)
