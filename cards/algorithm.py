"""An algorithm as a model card names it: its card name, tags, paper and description.

from hfrl.cards.algorithm import algorithm_name
algorithm_name("a_lol_seq")   # 'A-LoL seq'
"""

from __future__ import annotations

from typing import Any


def algorithm_info(algorithm: Any = None, alg: str | None = None) -> dict[str, Any]:
    """Card metadata of an algorithm: a trainer class (``_name``, ``_tag_names``, ``_paper``), a dict
    with those keys, or the run's registered algorithm name."""
    from hfrl.utils.registry import UnknownNameError, describe

    if algorithm is None and alg:
        from hfrl.trainers.offline.alol_config import DISPLAY_NAMES

        try:
            from hfrl.trainers import SUMMARIES, algorithm_trainer

            algorithm = algorithm_trainer(alg)
        except UnknownNameError:
            algorithm = {"name": alg.upper(), "tags": ["hfrl", alg]}
        else:
            if alg in DISPLAY_NAMES:  # one trainer, several algorithms (the A-LoL family): the run's own
                loss = SUMMARIES.get(alg, "").removeprefix("offline: ")
                algorithm = {
                    "name": DISPLAY_NAMES[alg],
                    "tags": [*getattr(algorithm, "_tag_names", ["hfrl"]), alg.replace("_", "-")],
                    "paper": dict(getattr(algorithm, "_paper", {}) or {}),
                    "description": f"offline RL on (prompt, completion, reward) data; the loss: {loss}",
                }
    if algorithm is None:
        return {"name": "RL", "tags": ["hfrl"], "paper": {}, "description": ""}
    if isinstance(algorithm, dict):
        return {"paper": {}, "description": "", **algorithm}
    return {
        "name": getattr(algorithm, "_name", algorithm.__name__),
        "tags": list(getattr(algorithm, "_tag_names", ["hfrl"])),
        "paper": dict(getattr(algorithm, "_paper", {}) or {}),
        "description": describe(algorithm),
    }


def algorithm_name(alg: str) -> str:
    """The card name of a registered algorithm: the A-LoL family's own names, else the trainer's."""
    from hfrl.trainers.offline.alol_config import DISPLAY_NAMES

    return DISPLAY_NAMES.get(alg) or algorithm_info(alg=alg)["name"]


__all__ = ["algorithm_info", "algorithm_name"]
