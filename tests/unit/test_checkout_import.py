"""``import hfrl.tasks`` (and ``hfrl.cli``, ``hfrl.cards``) works from a checkout that is not installed: at
the repository root, before ``pip install -e .``, the root's tasks/ is hfrl.tasks as pyproject's
package-dir maps it (issue 54.7; ``hfrl._CheckoutFinder``).

    python -m pytest -q tests/unit/test_checkout_import.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import hfrl

ROOT = Path(__file__).resolve().parents[2]

# The child drops the editable install's finder (setuptools' __editable___hfrl_*_finder, added by its .pth
# at start-up), so that only the checkout on PYTHONPATH can be found, as in a fresh clone.
NOT_INSTALLED = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in repr(h)]
sys.path_importer_cache.clear()
import hfrl, hfrl.tasks, hfrl.cli, hfrl.cards, hfrl.tasks.numbers
print(hfrl.__file__, hfrl.tasks.__file__, hfrl.cli.__file__, hfrl.cards.__file__, hfrl.tasks.numbers.__file__)
# the control: without hfrl's finder the checkout's hfrl.tasks is not found (the editable finder is gone)
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_CheckoutFinder"]
for name in [m for m in sys.modules if m.startswith("hfrl.tasks")]:
    del sys.modules[name]
try:
    import hfrl.tasks
except ModuleNotFoundError as err:
    print("without the finder:", err)
"""


def test_hfrl_tasks_imports_at_the_root_of_a_checkout_that_is_not_installed():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONNOUSERSITE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", NOT_INSTALLED], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths, control = proc.stdout.strip().splitlines()[-2:]
    expected = ["hfrl/__init__.py", "tasks/__init__.py", "cli/__init__.py", "cards/__init__.py", "tasks/numbers.py"]
    assert paths.split() == [str(ROOT / path) for path in expected]
    assert control == "without the finder: No module named 'hfrl.tasks'"


def test_the_mapped_folders_are_pyprojects_package_dirs():
    with open(ROOT / "pyproject.toml", "rb") as fh:
        package_dir = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    assert package_dir == hfrl.PACKAGE_DIRS
