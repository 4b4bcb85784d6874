"""Online trainers sharing one rollout and advantage core (PPO, NLPO, A2C, TRPO), imported lazily:
the exports derive from the trainers' declarations (:mod:`hfrl.trainers.declared`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfrl.trainers.declared import exports, lazy_getattr

_LAZY = exports("hfrl.trainers.online")
__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover - for type checkers; tests/unit/test_registration.py keeps it equal to _LAZY
    from hfrl.trainers.online.a2c_config import A2CConfig  # noqa: F401
    from hfrl.trainers.online.a2c_trainer import A2CTrainer  # noqa: F401
    from hfrl.trainers.online.nlpo_config import NLPOConfig  # noqa: F401
    from hfrl.trainers.online.nlpo_trainer import NLPOTrainer  # noqa: F401
    from hfrl.trainers.online.online_config import OnlineConfig  # noqa: F401
    from hfrl.trainers.online.online_trainer import OnlineTrainer  # noqa: F401
    from hfrl.trainers.online.ppo_config import PPOConfig  # noqa: F401
    from hfrl.trainers.online.ppo_trainer import PPOTrainer  # noqa: F401
    from hfrl.trainers.online.trpo_config import TRPOConfig  # noqa: F401
    from hfrl.trainers.online.trpo_trainer import TRPOTrainer  # noqa: F401

__getattr__ = lazy_getattr(__name__, _LAZY)
