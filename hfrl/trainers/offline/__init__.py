"""Offline trainers: the A-LoL family (nll, wbc, r_gold, r_lol, a_lol, a_lol_ref_free, a_lol_seq, a_lol_kl)
and PRO, imported lazily: the exports derive from the trainers' declarations (:mod:`hfrl.trainers.declared`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfrl.trainers.declared import exports, lazy_getattr

_LAZY = exports("hfrl.trainers.offline")
__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover - for type checkers; tests/unit/test_registration.py keeps it equal to _LAZY
    from hfrl.trainers.offline.alol_config import ALoLConfig  # noqa: F401
    from hfrl.trainers.offline.alol_trainer import ALoLTrainer  # noqa: F401
    from hfrl.trainers.offline.pro_trainer import PROConfig, PROTrainer  # noqa: F401

__getattr__ = lazy_getattr(__name__, _LAZY)
