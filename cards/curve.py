"""The curve of a run, ``reward_curve.png``, drawn from ``trainer_state.json``'s log history: the mean
reward per iteration (with its spread) for hfrl's online trainers, per logging step for TRL's GRPO and
RLOO, the training loss per step for the trainers that learn from data (SFT, DPO, A-LoL, PRO); and the
evaluation reward (or loss) when the run was evaluated during training.

    python -c "from hfrl.cards.curve import plot_reward_curve; plot_reward_curve('runs/numbers-ppo')"
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CURVE_NAME = "reward_curve.png"


def reward_series(log_history: list[dict[str, Any]]) -> dict[str, list[float]]:
    """``{"iteration", "reward", "reward_std", "eval_iteration", "eval_reward"}`` from a log history:
    one training point per iteration entry, one evaluation point per ``eval_reward`` entry."""
    train = [h for h in log_history if "reward" in h and "iteration" in h]
    steps_per_iteration = train[0]["step"] / train[0]["iteration"] if train and train[0].get("step") else 1.0
    evals = [h for h in log_history if "eval_reward" in h]
    return {
        "iteration": [float(h["iteration"]) for h in train],
        "reward": [float(h["reward"]) for h in train],
        "reward_std": [float(h.get("reward_std", 0.0)) for h in train],
        "eval_iteration": [float(h.get("step", 0)) / steps_per_iteration for h in evals],
        "eval_reward": [float(h["eval_reward"]) for h in evals],
    }


def training_series(log_history: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run logged, as one curve: ``x``, ``y``, ``std``, ``eval_x``, ``eval_y`` and the labels.

    - hfrl's online trainers: the rollout reward per iteration (:func:`reward_series`);
    - TRL's GRPO / RLOO: the reward of each logging step (``reward``, ``reward_std``) per optimizer step;
    - the trainers that learn from data (SFT, DPO, the A-LoL family, PRO): the training loss per step.

    Empty lists when the history holds none of these (a run saved before its first log entry).

    >>> s = training_series([{"loss": 2.0, "step": 10}, {"loss": 1.5, "step": 20}, {"eval_loss": 1.7, "step": 20}])
    >>> s["x"], s["y"], s["eval_y"], s["y_label"], s["x_label"]
    ([10.0, 20.0], [2.0, 1.5], [1.7], 'training loss', 'step')
    """
    rewards = reward_series(log_history)
    if rewards["iteration"]:
        return {
            "x": rewards["iteration"], "y": rewards["reward"], "std": rewards["reward_std"],
            "eval_x": rewards["eval_iteration"], "eval_y": rewards["eval_reward"],
            "x_label": "iteration", "y_label": "reward", "title": "Reward per iteration",
        }  # fmt: skip
    for key, label, title in (("reward", "reward", "Reward per step"), ("loss", "training loss", "Training loss")):
        train = [h for h in log_history if key in h and "step" in h and _number(h[key])]
        if train:
            evals = [h for h in log_history if f"eval_{key}" in h and "step" in h and _number(h[f"eval_{key}"])]
            return {
                "x": [float(h["step"]) for h in train], "y": [float(h[key]) for h in train],
                "std": [float(h.get(f"{key}_std", 0.0)) for h in train],
                "eval_x": [float(h["step"]) for h in evals], "eval_y": [float(h[f"eval_{key}"]) for h in evals],
                "x_label": "step", "y_label": label, "title": title,
            }  # fmt: skip
    return {"x": [], "y": [], "std": [], "eval_x": [], "eval_y": [], "x_label": "", "y_label": "", "title": ""}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def plot_reward_curve(
    log_history: list[dict[str, Any]] | str | os.PathLike[str],
    path: str | os.PathLike[str] | None = None,
    title: str = "",
) -> Path | None:
    """Draw the run's curve (:func:`training_series`: the reward per iteration or step, else the
    training loss) into ``path`` (PNG). ``log_history`` is the list itself or a run directory
    (``path`` then defaults to ``<run>/reward_curve.png``). Returns the path, or None when the history
    has nothing to draw."""
    if not isinstance(log_history, list):
        run = Path(log_history)
        path = path or run / CURVE_NAME
        state = run / "trainer_state.json"
        from hfrl.runs.run_dir import read_json_mapping

        log_history = read_json_mapping(state).get("log_history", []) if state.is_file() else []
    if path is None:
        raise ValueError("plot_reward_curve needs a path for the PNG")
    series = training_series(log_history)
    if not series["x"]:
        return None

    from matplotlib.figure import Figure  # the object API: no pyplot, no display, no global state

    fig = Figure(figsize=(6.4, 3.6), dpi=100)
    ax = fig.add_subplot()
    x, y, std = series["x"], series["y"], series["std"]
    what = series["y_label"]
    label = "rollout reward" if series["x_label"] == "iteration" else what
    ax.plot(x, y, color="tab:blue", linewidth=1.5, marker="o" if len(x) < 30 else None, label=label)
    if any(std):
        ax.fill_between(
            x,
            [m - s for m, s in zip(y, std, strict=True)],
            [m + s for m, s in zip(y, std, strict=True)],
            color="tab:blue",
            alpha=0.15,
            label="± std",
        )
    if series["eval_x"]:
        label = "eval reward" if what == "reward" else "eval loss"
        ax.plot(series["eval_x"], series["eval_y"], "s--", color="tab:orange", label=label)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(series["x_label"])
    ax.set_ylabel(what)
    ax.set_title(title or series["title"])
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path
