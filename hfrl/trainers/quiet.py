"""Warnings a user cannot act on, raised by hfrl's dependencies when hfrl drives them, kept quiet:
:mod:`hfrl.utils.quiet` (kept here for the trainers that import it from this module)."""

from __future__ import annotations

from hfrl.utils.quiet import DEPRECATED_BY_TRANSFORMERS, quiet, quiet_dependency_warnings

__all__ = ["DEPRECATED_BY_TRANSFORMERS", "quiet", "quiet_dependency_warnings"]
