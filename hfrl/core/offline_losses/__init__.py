"""The offline losses: the A-LoL family and its baselines (Baheti et al. 2024, "Leftover Lunch",
docs/algorithms.md §6), one class per variant, named by ``ALoLConfig.algorithm``.

A dict literal of name -> class, imported lazily (:func:`offline_loss_class`); the batch loss is
:func:`hfrl.core.losses.alol_loss`. A new variant is one file and one line here.

    python -m pytest tests/unit/test_alol_losses.py
"""

from __future__ import annotations

from typing import Any

OFFLINE_LOSSES: dict[str, str] = {
    "nll": "hfrl.core.offline_losses.nll:NLL",
    "wbc": "hfrl.core.offline_losses.wbc:WBC",
    "r_gold": "hfrl.core.offline_losses.r_gold:RGold",
    "r_lol": "hfrl.core.offline_losses.ratio_weighted:RLoL",
    "a_lol": "hfrl.core.offline_losses.ratio_weighted:ALoL",
    "a_lol_ref_free": "hfrl.core.offline_losses.a_lol_ref_free:ALoLRefFree",
    "a_lol_seq": "hfrl.core.offline_losses.a_lol_seq:ALoLSeq",
    "a_lol_kl": "hfrl.core.offline_losses.a_lol_kl:ALoLKL",
}


def offline_loss_class(name: str) -> Any:
    """The offline loss registered as ``name``; an unknown name fails with the known ones (a ``ValueError``)."""
    from hfrl.utils.registry import import_path, unknown

    if name not in OFFLINE_LOSSES:
        raise unknown("A-LoL algorithm", name, OFFLINE_LOSSES)
    return import_path(OFFLINE_LOSSES[name])


def weight_of(name: str) -> str | None:
    """What weighs each example of the variant ``name``: "reward", "advantage" or None (also for a loss that
    is not a variant of this family: PRO's)."""
    return offline_loss_class(name).weight if name in OFFLINE_LOSSES else None


def needs_reference(name: str) -> bool:
    """Whether the variant ``name`` reads the reference policy's log-probs (a ratio, a KL)."""
    return name in OFFLINE_LOSSES and bool(offline_loss_class(name).needs_reference)
