"""Helpers for hfrl's tests (and for users testing their own rewards and tasks with hfrl).

from hfrl.testing import run_cli, digit_reward, requires_wordnet

Optional system resources are checked here, once: a test that needs one is marked with its
``requires_*`` marker and skipped with the reason (and how to install it) where it is missing. Under
``CI=true`` nothing is skipped: CI installs them, and a skip there would hide a broken install.
"""

from __future__ import annotations

import os
from typing import Any


def run_cli(args: list[str], capsys: Any) -> tuple[int, str, str]:
    """Run ``hfrl ARGS`` through the CLI's error boundary; ``(exit code, stdout, stderr)``."""
    import pytest

    from hfrl.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(args)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def digit_reward(prompts: list, completions: list[str], **kwargs: Any) -> list[float]:
    """Fraction of characters that are digits: a plain TRL-style reward for tests.

    >>> digit_reward(prompts=["", ""], completions=["a1", ""])
    [0.5, 0.0]
    """
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def wordnet_missing() -> str | None:
    """Why METEOR cannot run on this machine (how to install WordNet), or None when it can."""
    from hfrl.metrics.wordnet import load_wordnet

    try:
        load_wordnet()
    except RuntimeError as err:
        return str(err)
    return None


def requires_wordnet() -> Any:
    """A pytest mark: skip (saying how to install it) where WordNet, which METEOR reads, is missing."""
    import pytest

    reason = None if os.environ.get("CI") else wordnet_missing()
    return pytest.mark.skipif(reason is not None, reason=f"WordNet is not installed: {reason}")
