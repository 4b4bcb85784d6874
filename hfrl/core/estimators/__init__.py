"""Advantage estimators: the step between the rewards and the update (docs/algorithms.md §13).

``penalised per-token rewards -> estimator(rewards, mask, group ids[, values]) -> advantages, returns``,
selected by name with the online configs' ``advantage_estimator`` (OpenRLHF's ``--advantage_estimator``,
verl's ``adv_estimator``). Each estimator is one small module with its formula and source on the
lines that compute it; this registry is a dict literal of name -> class, imported lazily.

A new estimator is one file and one line here: a subclass of
:class:`hfrl.core.estimators.base.AdvantageEstimator` with its ``estimate`` (``rloo.py`` is the
example: see the commit that added it), registered below; a ``module:attr`` path to one's own class works too
(``advantage_estimator: my_package.my_module:MyEstimator``, from Python or the command line).

    python -m pytest tests/unit/test_estimators.py
"""

from __future__ import annotations

from typing import Any

ESTIMATORS: dict[str, str] = {
    "gae": "hfrl.core.estimators.gae:GAE",
    "rloo": "hfrl.core.estimators.rloo:RLOO",
    "group_norm": "hfrl.core.estimators.group_norm:GroupNorm",
    "dr_grpo": "hfrl.core.estimators.dr_grpo:DrGRPO",
    "reinforce_baseline": "hfrl.core.estimators.reinforce_baseline:ReinforceBaseline",
    "reinforce": "hfrl.core.estimators.reinforce:Reinforce",
}


def estimator_class(name: str) -> Any:
    """The estimator class registered as ``name`` (or at the ``module:attr`` path ``name``); an
    unknown name fails with the known ones and the closest match."""
    from hfrl.utils.registry import resolve

    return resolve(name, ESTIMATORS, "advantage estimator")


__all__ = ["estimator_class"]
