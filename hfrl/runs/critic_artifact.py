"""A trained critic as an artifact: what ``hfrl export`` / ``hfrl push`` ship of it, the card section
that says what it predicts, and ``critic_from``, which starts a new run's critic from it.

    hfrl export runs/arith-ppo --out exported/arith-ppo          # value_head.safetensors (+ critic/) go too
    hfrl train --task arith_chains --alg ppo --critic_from runs/arith-ppo
    hfrl train --task arith_chains --alg ppo --critic_from me/arith-ppo   # a Hub repo from hfrl push

    from hfrl.runs.critic_artifact import critic_files, load_critic

A critic is ``value_head.safetensors`` (``Linear(hidden, 1)`` on the last hidden state) and, for a
``separate_critic`` run, ``critic/``: its own backbone (``config.json`` and ``model*.safetensors``).
A shared critic's head reads the policy's features: ``critic_from`` loads the head only, so its values
equal the source's where the new run's policy is the source's (``--model`` the same run). Loading is
data only: ``safetensors`` files are read into the new run's own modules (nothing is built from a
``config.json``, no code runs, ``.bin`` pickles are refused), the folder's links must stay inside it
(:func:`hfrl.utils.folders.check_folder`), and a Hub id (``namespace/name``) is downloaded pinned as
every Hub load in hfrl is (:func:`hfrl.utils.assets.hub_kwargs`). Tested in
``tests/unit/test_critic_artifact.py`` and ``tests/cli/test_critic_from.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hfrl.trainers.online.critic_from import CRITIC_DIR, CRITIC_PATTERNS, VALUE_HEAD_NAME

EV_WINDOW = 5  # the card's explained variance: mean of the last iterations' logged values


def critic_files(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``{path in an export or push: file}`` of the critic a run folder holds (empty for a run without
    one), each a regular file inside ``folder`` (:func:`hfrl.utils.folders.regular_file`)."""
    from hfrl.utils.folders import regular_file

    root = Path(folder)
    found = {p for pattern in CRITIC_PATTERNS for p in root.glob(pattern) if p.is_file()}
    return {p.relative_to(root).as_posix(): regular_file(p, root) for p in sorted(found)}


# ---- what it predicts (the card) ---------------------------------------------------------------------
def critic_facts(config: dict[str, Any], history: list[dict[str, Any]], rewards: list[str]) -> dict[str, Any]:
    """What the card says of a run's critic, from its config (``config.yaml``'s fields) and logged history:
    the return it predicts (rewards and their weights, the KL penalty in the reward or not, gamma, the
    critic's lambda and the actor's) and the explained variance of the last :data:`EV_WINDOW` iterations."""
    evs = [float(h["explained_variance"]) for h in history if "explained_variance" in h and "iteration" in h]
    lam = config.get("lam", 0.95)
    kl_coef = float(config.get("kl_coef") or 0.0)
    kl_in_reward = (kl_coef > 0 or config.get("kl_target") is not None) and not config.get("kl_in_loss")
    gamma = config.get("gamma")
    return {
        "rewards": rewards,
        "reward_weights": config.get("reward_weights"),
        "kl_in_reward": kl_in_reward,
        "kl_coef": kl_coef,
        "gamma": 0.99 if gamma is None else gamma,  # OnlineConfig's default with a critic
        "lam": lam,
        "lam_critic": lam if config.get("lam_critic") is None else config["lam_critic"],
        "separate": bool(config.get("separate_critic")),
        "critic_from": config.get("critic_from"),
        "explained_variance": sum(evs[-EV_WINDOW:]) / len(evs[-EV_WINDOW:]) if evs else None,
        "ev_iterations": len(evs[-EV_WINDOW:]),
        "ev_last": evs[-1] if evs else None,
    }


def critic_card_section(
    facts: dict[str, Any], ref: str, value_table: str | None = None, heading: str = "## The critic"
) -> str:
    """The card's Markdown section on the critic (:func:`critic_facts`), with how to start a new run's
    critic from ``ref`` and, when given, the value-at-step table (:mod:`hfrl.runs.value_at_step`)."""
    weights = facts["reward_weights"] or [1.0] * len(facts["rewards"])
    terms = [f"{w:g} x {r}" if w != 1 else r for r, w in zip(facts["rewards"], weights, strict=False)]
    reward = " + ".join(terms) or "the run's reward"
    if facts["kl_in_reward"]:
        reward += f", minus the per-token KL penalty to the reference (beta {facts['kl_coef']:g} at the start)"
    layout = (
        "its own backbone in `critic/` (a copy of the starting model, trained with the head)"
        if facts["separate"]
        else "the policy's last hidden state (a shared backbone: the head is the whole critic)"
    )
    if facts["explained_variance"] is None:
        ev = "Its explained variance was not logged."
    else:
        ev = (
            f"Explained variance of its values against the returns: {facts['explained_variance']:.3f}, the mean of "
            f"the last {facts['ev_iterations']} iterations as logged on the training rollouts (not held-out "
            f"rollouts); {facts['ev_last']:.3f} in the last."
        )
    warm = f" It started from the critic of `{facts['critic_from']}`." if facts.get("critic_from") else ""
    lines = [
        heading,
        "",
        f"`value_head.safetensors` is the run's critic: a `Linear(hidden, 1)` on {layout}. At each completion "
        f"token it predicts the return of {reward}, discounted with gamma = {facts['gamma']:g}; its targets are "
        f"GAE returns at lambda = {facts['lam_critic']:g} (the actor's advantages use lambda = {facts['lam']:g})."
        f"{warm} {ev}",
        "",
        f"Start a new run's critic from it: `hfrl train ... --critic_from {ref}` (same hidden size, "
        f"separate_critic {str(facts['separate']).lower()}, and the same LoRA setting).",
    ]
    if value_table:
        lines += ["", value_table.strip()]
    return "\n".join(lines) + "\n"


def run_critic_section(
    run_dir: str | os.PathLike[str],
    ref: str,
    history: list[dict[str, Any]] | None = None,
    rewards: list[str] | None = None,
) -> str | None:
    """The critic section of the run folder's card, or None when the run has no critic."""
    from hfrl.runs.run_dir import open_run
    from hfrl.runs.value_at_step import read_table_markdown

    folder = Path(run_dir)
    if not (folder / VALUE_HEAD_NAME).is_file():
        return None
    run = open_run(folder, names_as_text=True)
    if not rewards:
        from hfrl.cards.render import task_info

        rewards = [str(r).strip("`") for r in task_info(run)["rewards"]]
    facts = critic_facts(run.config, history if history is not None else run.log_history(), rewards or [])
    return critic_card_section(facts, ref, read_table_markdown(folder))


__all__ = [
    "CRITIC_DIR",
    "CRITIC_PATTERNS",
    "critic_card_section",
    "critic_facts",
    "critic_files",
    "run_critic_section",
]
