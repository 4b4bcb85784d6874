"""Every package of hfrl is in pyproject's list, so that a wheel (``pip install .``, not only the
editable install the README uses) holds all of it: a new folder of modules that is missing there
imports from a checkout and fails from a wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(setuptools["packages"]), setuptools["package-dir"]
    roots = {"hfrl": ROOT / "hfrl", **{name: ROOT / folder for name, folder in dirs.items()}}
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if "fixtures" in init.parts:
                continue
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed but no such package: {sorted(listed - found)}"
