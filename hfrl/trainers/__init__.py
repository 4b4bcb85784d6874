"""Trainers: one folder per algorithm family (``online/``: PPO, NLPO, A2C, TRPO; ``offline/``: the A-LoL
family, PRO), and ``trl_adapters`` for TRL's own trainers on hfrl tasks.

A trainer registers by declaring ``algs = {"name": "summary"}`` and ``config_class`` on its class
(:mod:`hfrl.trainers.declared`); the registry below derives from those declarations, read from the
source without importing anything (``hfrl list algs`` and a check of ``--alg`` load no torch).
"""

from typing import Any

from hfrl.trainers.declared import algorithms

_DECLARED = algorithms()
# Algorithm name -> "module:Class" of its trainer (each carries its ``config_class``). Imported lazily.
ALGORITHMS: dict[str, str] = {name: path for name, (path, _) in _DECLARED.items()}
# One line per algorithm for `hfrl list algs` (plain text, whole sentences).
SUMMARIES: dict[str, str] = {name: summary for name, (_, summary) in _DECLARED.items()}


def algorithm_trainer(alg: str) -> Any:
    """The trainer class of a registered algorithm name (or a ``module:attr`` path to one's own)."""
    from hfrl.utils.registry import resolve

    return resolve(alg, ALGORITHMS, "algorithm")
