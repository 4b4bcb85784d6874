"""Warnings a user cannot act on, raised by hfrl's dependencies when hfrl drives them, kept quiet.

TRL 1.16 and PEFT call transformers' ``gradient_checkpointing_enable`` / ``_disable`` and
``is_gradient_checkpointing``, which transformers 5 deprecates in favour of the
``activation_checkpointing`` names: every GRPO, RLOO and A-LoL run printed three FutureWarnings
about code that is not the user's. Only those messages are filtered.
"""

from __future__ import annotations

import warnings

DEPRECATED_BY_TRANSFORMERS = (
    "gradient_checkpointing_enable",
    "gradient_checkpointing_disable",
    "is_gradient_checkpointing",
)


def quiet_dependency_warnings() -> None:
    """Ignore transformers' deprecation warnings about the checkpointing methods TRL and PEFT call."""
    for name in DEPRECATED_BY_TRANSFORMERS:
        warnings.filterwarnings("ignore", message=f"`{name}` is deprecated", category=FutureWarning)
