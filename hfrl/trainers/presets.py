"""Presets: named sets of settings of the online core, shipped as YAML in ``hfrl/presets/``.

A preset is what a paper changes in PPO's recipe, written as the configs' own fields (``vapo``:
value pretraining, decoupled and length-adaptive GAE, clip-higher, the positive-example LM loss),
so that ``hfrl train --task T --alg ppo --preset vapo`` is the task's tuning with the paper's
techniques; a config file or the command line still wins over the preset, which wins over the task.
The run's ``config.yaml`` records the preset's name beside the values it set, and the model card
names it. A preset's ``critic_warmup_iterations`` (the papers' 50, for runs of thousands of iterations)
takes at most half of the run's ``num_iterations``, said in one line
(:func:`hfrl.runs.experiment.fit_preset_warmup`); one given on the command line or in ``--config`` is
kept. Each file holds a ``description`` (its line in ``hfrl list presets``), the ``paper`` (a key of
``hfrl/trainers/papers.bib``) and the ``settings``. docs/algorithms.md §16.

    from hfrl.trainers.presets import preset_settings
    PPOConfig(output_dir="runs/demo", **preset_settings("vapo"))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"


@dataclass(frozen=True)
class Preset:
    """One preset file: its name, its one-line description, its paper's key and its settings."""

    name: str
    description: str
    paper: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


def preset_names() -> list[str]:
    """The shipped presets' names, sorted.

    >>> {"vapo", "vc_ppo"} <= set(preset_names())
    True
    """
    return sorted(path.stem for path in PRESET_DIR.glob("*.yaml"))


def read_preset(name: str) -> Preset:
    """The preset ``name``; an unknown name is one line with the known ones and the closest match."""
    from hfrl.utils.bounded import load_yaml
    from hfrl.utils.registry import unknown

    names = preset_names()
    if name not in names:
        raise unknown("preset", name, names, hint="; `hfrl list presets` describes them")
    path = PRESET_DIR / f"{name}.yaml"
    spec = load_yaml(path.read_text(), str(path)) or {}
    return Preset(name, str(spec.get("description", "")), spec.get("paper"), dict(spec.get("settings") or {}))


def preset_settings(name: str) -> dict[str, Any]:
    """The settings of the preset ``name`` (a copy: a config's keyword arguments).

    >>> preset_settings("vc_ppo")
    {'critic_warmup_iterations': 50, 'lam_critic': 1.0, 'lam': 0.95}
    """
    return dict(read_preset(name).settings)


__all__ = ["PRESET_DIR", "Preset", "preset_names", "preset_settings", "read_preset"]
