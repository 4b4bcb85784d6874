"""hfrl: reinforcement-learning fine-tuning of language models on the Hugging Face stack.

Heavy imports are lazy: ``import hfrl`` is cheap; ``from hfrl import PPOTrainer`` loads torch.
``import hfrl`` also registers hfrl's own model types (OpenAssistant's GPT-NeoX reward models) with
transformers' Auto classes, as soon as that costs no torch import (:mod:`hfrl.core.auto_classes`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hfrl.core import auto_classes as _auto_classes

_auto_classes.install()

__version__ = "0.1.0"

_LAZY = {
    "ALoLConfig": "hfrl.trainers.offline",
    "ALoLTrainer": "hfrl.trainers.offline",
    "A2CConfig": "hfrl.trainers.online",
    "A2CTrainer": "hfrl.trainers.online",
    "TRPOConfig": "hfrl.trainers.online",
    "TRPOTrainer": "hfrl.trainers.online",
    "NLPOConfig": "hfrl.trainers.online",
    "NLPOTrainer": "hfrl.trainers.online",
    "OnlineConfig": "hfrl.trainers.online",
    "OnlineTrainer": "hfrl.trainers.online",
    "PPOConfig": "hfrl.trainers.online",
    "PPOTrainer": "hfrl.trainers.online",
}

__all__ = [*_LAZY, "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from hfrl.trainers.offline import ALoLConfig, ALoLTrainer  # noqa: F401
    from hfrl.trainers.online import (  # noqa: F401
        A2CConfig,
        A2CTrainer,
        NLPOConfig,
        NLPOTrainer,
        OnlineConfig,
        OnlineTrainer,
        PPOConfig,
        PPOTrainer,
        TRPOConfig,
        TRPOTrainer,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hfrl' has no attribute {name!r}")
