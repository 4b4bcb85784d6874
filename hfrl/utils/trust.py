"""A run directory is data: names read from a file never import or run code unless the user opts in.

hfrl resolves tasks, algorithms, rewards and metrics through its registries, and also accepts a
``module:attr`` path to the user's own code, and the ``evaluate`` reward or metric, which runs an
`evaluate` module's script. Typed on the command line (``--task my_tasks:build``) or passed in Python,
that is the user's choice. Read from a file (a run's ``config.yaml``, a ``--config`` file, a task's
YAML), it would let whoever wrote the file run code on this machine: a downloaded run's
``config.yaml`` naming ``os:system`` ran a shell command under ``hfrl eval``. Files are therefore
checked when they are read (:func:`check_file`), and a file that names code is refused with one line,
unless the user trusts it: ``--trust-code`` on the command line (named like transformers'
``trust_remote_code``), or ``with hfrl.utils.trust.trusted_code():`` / ``trust_code=True`` in Python.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from typing import Any

from hfrl.utils.registry import UnknownNameError

CODE_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")  # package.module:attr
RUNS_CODE = ("evaluate",)  # registry ids whose arguments name code to run (an `evaluate` module's script)

_TRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar("hfrl_trust_code", default=False)


class UntrustedCodeError(UnknownNameError):
    """A file names code to import or run, and the user did not opt in (the CLI exits with code 2)."""


@contextlib.contextmanager
def trusted_code(enabled: bool = True) -> Iterator[None]:
    """Inside, files may name code (``module:attr`` paths, ``evaluate`` modules): the user trusts them."""
    token = _TRUSTED.set(enabled or _TRUSTED.get())
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def code_trusted() -> bool:
    return _TRUSTED.get()


def names_code(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first ``(place, name)`` in a parsed file that names code, or None.

    >>> names_code({"task": "numbers", "rewards": [{"id": "subprocess:Popen", "args": {"args": "x"}}]})
    ('rewards[0].id', 'subprocess:Popen')
    >>> names_code({"metrics": ["rouge", {"id": "evaluate", "args": {"path": "./m.py"}}]})
    ('metrics[1].id', 'evaluate')
    >>> names_code({"task": "numbers", "learning_rate": 1e-3, "revision": "refs/pr/1", "url": "http://x"}) is None
    True
    """
    if isinstance(value, str):
        return (where, value) if CODE_PATH.match(value) else None
    if isinstance(value, dict):
        if value.get("id") in RUNS_CODE:
            return (f"{where}.id" if where else "id", str(value["id"]))
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        if where.split(".")[-1] in ("rewards", "metrics"):
            for i, item in enumerate(value):
                if item in RUNS_CODE:
                    return (f"{where}[{i}]", str(item))
        items = ((f"[{i}]", item) for i, item in enumerate(value))
    else:
        return None
    for key, item in items:
        place = f"{where}{key}" if str(key).startswith("[") else f"{where}.{key}" if where else str(key)
        found = names_code(item, place)
        if found:
            return found
    return None


def check_file(data: Any, source: str) -> Any:
    """``data`` parsed from the file ``source``, or :class:`UntrustedCodeError` when it names code
    and the user does not trust it."""
    found = None if code_trusted() else names_code(data)
    if found:
        place, name = found
        raise UntrustedCodeError(
            f"{source} names code to run ({place}: {name!r}); hfrl runs code only from names you type or pass in "
            "Python: use a registered name (hfrl list tasks|rewards|metrics), type it on the command line, or "
            "pass --trust-code if you trust this file"
        )
    return data


def is_secret(name: str) -> bool:
    """A field that holds a secret (``hub_token``, any ``*_token``): it never reaches a file."""
    return name == "token" or name.endswith("_token")


__all__ = ["UntrustedCodeError", "check_file", "code_trusted", "is_secret", "names_code", "trusted_code"]
