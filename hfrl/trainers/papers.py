"""The papers of hfrl's own algorithms, for their model cards: one BibTeX entry each in
``papers.bib`` beside this module (data, read once).

>>> p = paper("schulman2017proximal")
>>> p["title"], p["id"], p["citation"].splitlines()[0]
('Proximal Policy Optimization Algorithms', '1707.06347', '@article{schulman2017proximal,')
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

BIB = Path(__file__).with_name("papers.bib")


@functools.cache
def _entries() -> dict[str, str]:
    """Key -> the whole entry, from ``@type{key,`` to the ``}`` that closes it at the line start."""
    text = BIB.read_text(encoding="utf-8")
    return {m.group(2): m.group(0) for m in re.finditer(r"^@(\w+)\{([^,\s]+),\n.*?^\}$", text, re.M | re.S)}


def _field(entry: str, name: str) -> str:
    """A field's value, outer braces and line breaks removed."""
    m = re.search(rf"^\s+{name}\s*=\s*\{{(.*?)\}},?$", entry, re.M | re.S)
    if m is None:
        raise KeyError(f"{BIB.name}: the entry has no {name} field:\n{entry}")
    return " ".join(m.group(1).strip("{}").split())


def paper(key: str) -> dict[str, str]:
    """A trainer's ``_paper``: the ``title``, the arXiv ``id`` (the entry's ``eprint``) and the BibTeX
    ``citation`` of the entry ``key``."""
    entry = _entries()[key]
    return {"title": _field(entry, "title"), "id": _field(entry, "eprint"), "citation": entry}


__all__ = ["paper"]
