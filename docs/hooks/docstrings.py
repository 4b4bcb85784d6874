"""Griffe extensions (mkdocs.yml: mkdocstrings' ``extensions``). ``DoctestFences``: hfrl's docstrings
are written for ``help()`` and doctest, in reStructuredText's habits; for the site, doctest examples
become ``pycon`` code blocks (not paragraphs whose ``[...]`` Markdown would read as links) and Sphinx
roles (``:func:`x```, ``:class:`x```) become code spans. ``TrainerInits``: each trainer shows the
constructor it runs, its parameters described, ``args`` typed with its own config.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """Wrap every run of doctest lines (a ``>>>`` line, its ``...`` continuations and its output, up to
    a blank line) in a ``pycon`` fence; turn Sphinx roles into code spans."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith(">>>"):
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
                i += 1
            out += [f"{indent}```pycon", *(indent + line for line in block), f"{indent}```"]
            continue
        out.append(_ROLE.sub(r"`\1`", lines[i]))
        i += 1
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)


def _passes_through(function: griffe.Function) -> bool:
    """An ``__init__`` that hands ``*args`` on (``TrainerMixin``'s, TRPO's): the one it calls documents it."""
    return any(p.kind is griffe.ParameterKind.var_positional for p in function.parameters)


class TrainerInits(griffe.Extension):
    """A trainer's page shows the constructor it runs, with its parameters' descriptions and its own
    config: a class that declares ``config_class`` and inherits its ``__init__`` (``PPOTrainer``, from
    ``OnlineTrainer``) or passes it through gets a copy of the ``__init__`` it runs, its ``args``
    annotated with that config (``PPOConfig``, not ``OnlineConfig``). Only the site's model changes."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: object) -> None:
        for cls in _classes(pkg):
            config = cls.members.get("config_class")
            if not isinstance(config, griffe.Attribute) or config.value is None:
                continue
            init = _init_it_runs(cls)
            if init is None or (init.parent is cls and not _annotated_otherwise(init, config.value)):
                continue
            cls.set_member("__init__", _with_config(init, config.value))


def _init_it_runs(cls: griffe.Class) -> griffe.Function | None:
    """The first ``__init__`` in ``cls``'s method resolution order that does not pass ``*args`` on."""
    try:
        chain = [cls, *cls.mro()]
    except ValueError:  # a base griffe cannot resolve
        return None
    for owner in chain:
        init = owner.members.get("__init__")
        if isinstance(init, griffe.Function) and not _passes_through(init):
            return init
    return None


def _classes(module: griffe.Module):
    for member in module.members.values():
        if isinstance(member, griffe.Module):
            yield from _classes(member)
        elif isinstance(member, griffe.Class):
            yield member


def _annotated_otherwise(init: griffe.Function, config: object) -> bool:
    args = next((p for p in init.parameters if p.name == "args"), None)
    return args is not None and str(config) not in str(args.annotation)


def _with_config(init: griffe.Function, config: str | griffe.Expr) -> griffe.Function:
    """A copy of ``init`` whose ``args`` is annotated ``config | None``."""
    params = [
        griffe.Parameter(
            p.name,
            annotation=griffe.ExprBinOp(config, "|", "None") if p.name == "args" else p.annotation,
            kind=p.kind,
            default=p.default,
        )
        for p in init.parameters
    ]
    docstring = None
    if init.docstring is not None:
        docstring = griffe.Docstring(
            init.docstring.value, parser=init.docstring.parser, parser_options=init.docstring.parser_options
        )
    return griffe.Function("__init__", parameters=griffe.Parameters(*params), returns=init.returns, docstring=docstring)
