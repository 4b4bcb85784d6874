"""What an online run carries from iteration to iteration beyond the model, the optimizer, the scheduler
and the RNGs: the KL controller's coefficient, the action space's state (NLPO's mask policy and when it
was refreshed), the entropy watch's first entropy. Saved in every checkpoint as ``online_state.json``
(and the action space's own files), loaded back on resume (:mod:`hfrl.trainers.crash_safe`).

    state = OnlineState(make_kl_controller(0.1, 6.0, 0.1), ActionSpace(), EntropyWatch())
    state.save(folder, iteration=3, advantage_estimator="gae")
    state.load(folder)
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from hfrl.core.action_space import ActionSpace
from hfrl.core.kl import AdaptiveKLController, FixedKLController
from hfrl.trainers.online.entropy_watch import EntropyWatch

ONLINE_STATE_NAME = "online_state.json"


class OnlineState:
    """The KL controller, the action space and the entropy watch of a run, and their ``state_dict``."""

    def __init__(
        self, kl: AdaptiveKLController | FixedKLController, action_space: ActionSpace, entropy_watch: EntropyWatch
    ) -> None:
        self.kl, self.action_space, self.entropy_watch = kl, action_space, entropy_watch

    @property
    def checkpoint_files(self) -> tuple[str, ...]:
        """The files it adds to a checkpoint (named when an incomplete one lacks them)."""
        return (ONLINE_STATE_NAME, *self.action_space.checkpoint_files)

    def state_dict(self, iteration: int, advantage_estimator: str) -> dict[str, Any]:
        """What ``online_state.json`` holds (the ``advantage_estimator``: a value head is saved with gae only)."""
        return {
            "iteration": iteration,
            "kl_controller": self.kl.state_dict(),
            "advantage_estimator": advantage_estimator,
            **self.entropy_watch.state(),
            **self.action_space.state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.kl.load_state_dict(state["kl_controller"])
        self.entropy_watch.load_state(state)
        self.action_space.load_state(state)

    def save(self, folder: str, iteration: int, advantage_estimator: str) -> None:
        """``online_state.json`` and the action space's files in the checkpoint ``folder``."""
        with open(os.path.join(folder, ONLINE_STATE_NAME), "w") as fh:
            json.dump(self.state_dict(iteration, advantage_estimator), fh, indent=2)
        self.action_space.save(folder)

    def load(self, folder: str) -> None:
        """From a checkpoint ``folder`` (verified complete before: ``online_state.json`` is there). A value
        that is not a finite number (a NaN KL coefficient) is refused in one line: loaded, it surfaced as a
        NaN loss one iteration later."""
        path = os.path.join(folder, ONLINE_STATE_NAME)
        with open(path) as fh:
            state = json.load(fh)
        problem = _state_problem(state)
        if problem:
            raise ValueError(
                f"cannot resume from {folder}: {ONLINE_STATE_NAME} {problem}; resume from an earlier checkpoint "
                "(--resume_from_checkpoint PATH) or start the run again"
            )
        self.load_state_dict(state)
        self.action_space.load(folder)


def _state_problem(state: Any) -> str | None:
    """What is wrong with ``online_state.json``'s content, in a few words (None when nothing is): not an
    object, no numeric ``kl_controller.value``, or a number that is not finite at any depth.

    >>> _state_problem({"kl_controller": {"value": float("nan")}, "iteration": 3})
    'holds kl_controller.value = nan (a number must be finite)'
    """
    if not isinstance(state, dict) or not isinstance(state.get("kl_controller"), dict):
        return "is not a checkpoint's state (no kl_controller)"
    value = state["kl_controller"].get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"holds kl_controller.value = {value!r} (a number expected)"
    stack: list[tuple[str, Any]] = [("", state)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"holds {where} = {item} (a number must be finite)"
        if isinstance(item, dict):
            stack += [(f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(item.items()))]
        elif isinstance(item, list):
            stack += [(f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item)))]
    return None


__all__ = ["ONLINE_STATE_NAME", "OnlineState"]
