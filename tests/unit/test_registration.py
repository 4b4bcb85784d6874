"""One registration point: a trainer declares ``algs = {name: summary}`` and ``config_class``; the
algorithm registry and the packages' lazy exports derive from those declarations (read from the source,
nothing imported), and the static import lists kept for type checkers say the same."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from hfrl.trainers.declared import _declarations, algorithms, exports

ROOT = Path(__file__).resolve().parents[2]


def test_every_registered_name_is_declared_by_its_trainer():
    from hfrl.trainers import ALGORITHMS, SUMMARIES, algorithm_trainer

    assert list(ALGORITHMS)[:4] == ["ppo", "a2c", "nlpo", "trpo"] and "pro" in ALGORITHMS and "grpo" in ALGORITHMS
    for name in ALGORITHMS:
        trainer = algorithm_trainer(name)
        assert trainer.algs[name] == SUMMARIES[name], name  # the class's own declaration, not a copy
        module, _, _ = ALGORITHMS[name].partition(":")
        assert trainer.__module__ == module


def test_a_new_trainer_is_one_declaration():
    source = """
from hfrl.trainers.online.ppo_config import PPOConfig as Settings
class MyTrainer(Base):
    algs = {"mine": "online: my algorithm."}
    config_class = Settings
"""
    [declared] = _declarations("hfrl.trainers.online.my_trainer", source)
    assert declared.algs == (("mine", "online: my algorithm."),)
    assert (declared.config_module, declared.config_name) == ("hfrl.trainers.online.ppo_config", "Settings")


def _type_checking_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            names |= {alias.name for item in node.body if isinstance(item, ast.ImportFrom) for alias in item.names}
    return names


def test_the_static_import_lists_equal_the_derived_exports():
    online, offline = exports("hfrl.trainers.online"), exports("hfrl.trainers.offline")
    assert {"PPOTrainer", "PPOConfig", "OnlineTrainer", "OnlineConfig", "TRPOConfig"} <= set(online)
    assert {"ALoLTrainer", "ALoLConfig", "PROTrainer", "PROConfig"} == set(offline)
    assert _type_checking_imports(ROOT / "hfrl" / "trainers" / "online" / "__init__.py") == set(online)
    assert _type_checking_imports(ROOT / "hfrl" / "trainers" / "offline" / "__init__.py") == set(offline)
    assert _type_checking_imports(ROOT / "hfrl" / "__init__.py") == set(online) | set(offline)


def test_the_registry_and_the_exports_load_no_torch():
    script = (
        "import sys, hfrl\nfrom hfrl.trainers import ALGORITHMS\nimport hfrl.trainers.online as o\n"
        "assert 'PPOTrainer' in hfrl.__all__ and 'ppo' in ALGORITHMS and 'NLPOConfig' in o.__all__\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert set(algorithms()) >= {"ppo", "nlpo", "a2c", "trpo", "a_lol", "pro"}
