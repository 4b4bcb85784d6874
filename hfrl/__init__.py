"""hfrl: reinforcement-learning fine-tuning of language models on the Hugging Face stack.

Heavy imports are lazy: ``import hfrl`` is cheap; ``from hfrl import PPOTrainer`` loads torch. The
exports are hfrl's own trainers and their configs, derived from the trainers' declarations
(:mod:`hfrl.trainers.declared`, read from their source when first asked for). ``import hfrl`` also
registers hfrl's own model types (OpenAssistant's GPT-NeoX reward models) with transformers' Auto
classes, as soon as that costs no torch import (:mod:`hfrl.core.auto_classes`). In a checkout that is not
installed, it finds ``hfrl.tasks``, ``hfrl.cli`` and ``hfrl.cards`` in the root's folders, as pyproject maps them
(``_CheckoutFinder``; tested in tests/unit/test_checkout_import.py).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

#: pyproject's ``[tool.setuptools.package-dir]``: packages of hfrl whose source is a folder of the
#: repository root, not of hfrl/ (tests/unit/test_checkout_import.py keeps the two equal)
PACKAGE_DIRS = {"hfrl.cli": "cli", "hfrl.tasks": "tasks", "hfrl.cards": "cards"}


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``hfrl.tasks`` (and ``hfrl.cli``, ``hfrl.cards``) in the repository root of a checkout that
    is not installed (``python -c "import hfrl.tasks"`` at the root, before ``pip install -e .``), as
    setuptools' package-dir maps them; an installed wheel holds them inside hfrl/, and an editable
    install's own finder maps them first."""

    def __init__(self, root: Path, names: set[str]) -> None:
        self.root, self.names = str(root), names

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])  # root/tasks as hfrl.tasks


def _find_checkout_packages() -> None:
    """Add :class:`_CheckoutFinder` when hfrl/ is a checkout's (beside pyproject.toml) and hfrl/ lacks
    the mapped folders; nothing for a wheel's hfrl/, which holds them."""
    here = Path(__file__).resolve().parent
    root = here.parent
    names = {
        name
        for name, folder in PACKAGE_DIRS.items()
        if not (here / name.rpartition(".")[2]).exists() and (root / folder / "__init__.py").is_file()
    }
    if names and (root / "pyproject.toml").is_file():
        sys.meta_path.append(_CheckoutFinder(root, names))


_find_checkout_packages()

from hfrl.core import auto_classes as _auto_classes  # noqa: E402 - after the finder (stdlib only above)

_auto_classes.install()

from hfrl.utils.quiet import quiet_deepspeed_cpu_note as _quiet_deepspeed  # noqa: E402 - stdlib only

_quiet_deepspeed()  # before anything imports deepspeed (a launch's configs do): not a run's first line

__version__ = "0.1.0"


@functools.cache
def _lazy() -> dict[str, str]:
    """Exported class name -> its module: the online and offline trainers and their configs."""
    from hfrl.trainers.declared import exports

    return exports("hfrl.trainers.online", "hfrl.trainers.offline")


if TYPE_CHECKING:  # pragma: no cover - for type checkers; tests/unit/test_registration.py keeps it equal to _lazy()
    from hfrl.trainers.offline.alol_config import ALoLConfig  # noqa: F401
    from hfrl.trainers.offline.alol_trainer import ALoLTrainer  # noqa: F401
    from hfrl.trainers.offline.pro_trainer import PROConfig, PROTrainer  # noqa: F401
    from hfrl.trainers.online.a2c_config import A2CConfig  # noqa: F401
    from hfrl.trainers.online.a2c_trainer import A2CTrainer  # noqa: F401
    from hfrl.trainers.online.nlpo_config import NLPOConfig  # noqa: F401
    from hfrl.trainers.online.nlpo_trainer import NLPOTrainer  # noqa: F401
    from hfrl.trainers.online.online_config import OnlineConfig  # noqa: F401
    from hfrl.trainers.online.online_trainer import OnlineTrainer  # noqa: F401
    from hfrl.trainers.online.ppo_config import PPOConfig  # noqa: F401
    from hfrl.trainers.online.ppo_trainer import PPOTrainer  # noqa: F401
    from hfrl.trainers.online.trpo_config import TRPOConfig  # noqa: F401
    from hfrl.trainers.online.trpo_trainer import TRPOTrainer  # noqa: F401


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return [*_lazy(), "__version__"]
    if name in _lazy():
        return getattr(importlib.import_module(_lazy()[name]), name)
    raise AttributeError(f"module 'hfrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_lazy()])
