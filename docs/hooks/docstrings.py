"""A griffe extension (mkdocs.yml: mkdocstrings' ``extensions``): hfrl's docstrings are written for
``help()`` and doctest, in reStructuredText's habits. For the site, doctest examples become ``pycon``
code blocks (not paragraphs whose ``[...]`` Markdown would read as links) and Sphinx roles
(``:func:`x```, ``:class:`x```) become code spans.
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
