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
import os
from collections.abc import Iterator
from typing import Any

from hfrl.utils.registry import UnknownNameError, is_code_path

RUNS_CODE = ("evaluate",)  # registry ids whose arguments name code to run (an `evaluate` module's script)


def _names_hub_kernel(value: Any) -> bool:  # attn_implementation="org/kernel-repo" downloads and runs a kernel
    return isinstance(value, str) and "/" in value


# Keys that make a library load code, wherever they appear in a mapping read from a file (model_init_kwargs,
# generation_kwargs, eval_generation_kwargs, task_args...): key -> whether this value loads code.
CODE_KEYS: dict[str, Any] = {
    "trust_remote_code": bool,  # transformers: a model folder's or repo's own modules (auto_map), custom_generate
    "custom_generate": lambda value: (
        value is not None
    ),  # transformers 5 generate(): a repo's custom_generate/generate.py
    "auto_map": lambda value: bool(value),  # a config naming its own classes to import
    "use_kernels": bool,  # transformers: kernels downloaded from the Hub and loaded
    "attn_implementation": _names_hub_kernel,
    "experts_implementation": _names_hub_kernel,  # transformers 5: a mixture-of-experts kernel, by Hub repo too
}
# Keys of a PEFT adapter_config.json that make PEFT import a module by name (peft 0.21): `megatron_config`
# imports `megatron_core` (peft/tuners/lora/tp_layer.py, "megatron.core" by default: a folder of that name
# in the current directory would do), and `auto_mapping` imports its `parent_library` (peft/auto.py). hfrl
# loads adapters with PeftModel onto a base it loads itself: a transformers class is the only one allowed.
ADAPTER_CODE_KEYS: dict[str, Any] = {
    "megatron_config": lambda value: value is not None,
    "megatron_core": lambda value: value not in (None, "megatron.core"),
    "auto_mapping": lambda value: (
        bool(value)
        and not str((value if isinstance(value, dict) else {}).get("parent_library", "")).startswith("transformers.")
    ),
}
CODE_HINT = "pass --trust-code (trust_code=True in Python) only if you trust it"

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
    """Whether the user opted into code here (``--trust-code``, :func:`trusted_code`): files may then
    name code, and every ``from_pretrained`` / ``generate`` gets ``trust_remote_code=True``."""
    return _TRUSTED.get()


def names_code(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first ``(place, name)`` in a parsed file that names code, or None: a name a resolver would
    import (:func:`hfrl.utils.registry.is_code_path`, the resolvers' own test), a registry id that runs
    code (``evaluate``), or a key that makes a library load code (:data:`CODE_KEYS`), at any depth.

    >>> names_code({"task": "numbers", "rewards": [{"id": "subprocess:Popen", "args": {"args": "x"}}]})
    ('rewards[0].id', 'subprocess:Popen')
    >>> names_code({"metrics": ["rouge", {"id": "evaluate", "args": {"path": "./m.py"}}]})
    ('metrics[1].id', 'evaluate')
    >>> names_code({"task": "evil:"})
    ('task', 'evil:')
    >>> names_code({"eval_generation_kwargs": {"do_sample": False, "custom_generate": "runs/evil"}})
    ('eval_generation_kwargs.custom_generate', 'runs/evil')
    >>> names_code({"model_init_kwargs": {"trust_remote_code": True}})
    ('model_init_kwargs.trust_remote_code', 'True')
    >>> names_code({"task": "numbers", "learning_rate": 1e-3, "revision": "refs/pr/1", "url": "http://x"}) is None
    True
    >>> names_code({"model_init_kwargs": {"trust_remote_code": False}}) is None
    True
    """
    if isinstance(value, str):
        return (where, value) if is_code_path(value) else None
    if isinstance(value, dict):
        if value.get("id") in RUNS_CODE:
            return (f"{where}.id" if where else "id", str(value["id"]))
        for key, item in value.items():
            if key in CODE_KEYS and CODE_KEYS[key](item):
                return (f"{where}.{key}" if where else str(key), str(item))
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


def loads_code(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first ``(place, value)`` where a key of :data:`CODE_KEYS` makes a library load code, at any
    depth (what even the user's own command line may set only through ``--trust-code``).

    >>> loads_code({"model_init_kwargs": {"dtype": "float32", "trust_remote_code": True}})
    ('model_init_kwargs.trust_remote_code', 'True')
    >>> loads_code({"rewards": ["mymod:reward"]}) is None
    True
    """
    if isinstance(value, dict):
        for key, item in value.items():
            place = f"{where}.{key}" if where else str(key)
            if key in CODE_KEYS and CODE_KEYS[key](item):
                return place, str(item)
            found = loads_code(item, place)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = loads_code(item, f"{where}[{i}]")
            if found:
                return found
    return None


def check_file(data: Any, source: str, names_as_text: bool = False) -> Any:
    """``data`` parsed from the file ``source``, or :class:`UntrustedCodeError` when it names code
    and the user does not trust it. With ``names_as_text`` (a reader that only shows the names, such as
    the model card) a task's or reward's code name passes; a key that makes a library load code
    (:data:`CODE_KEYS`) is still refused."""
    found = None if code_trusted() else (loads_code if names_as_text else names_code)(data)
    if found:
        place, name = found
        raise UntrustedCodeError(
            f"{source} names code to run ({place}: {name!r}); hfrl runs code only from names you type or pass in "
            "Python: use a registered name (hfrl list tasks|rewards|metrics), type it on the command line, or "
            "pass --trust-code if you trust this file"
        )
    return data


def check_command_line(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` given on the command line, or :class:`UntrustedCodeError` when one of them makes a
    library load code (``--model_init_kwargs '{trust_remote_code: true}'``) without ``--trust-code``:
    the one switch for code, so that a copied command line cannot turn it on in passing."""
    found = None if code_trusted() else loads_code(values)
    if found:
        place, value = found
        raise UntrustedCodeError(
            f"--{place.split('.')[0]} sets {place.split('.')[-1]}={value}, which loads code to run; "
            f"pass --trust-code instead if you trust that code"
        )
    return values


MODEL_FOLDER_FILES = ("config.json", "tokenizer_config.json", "generation_config.json")


def remote_code(name_or_path: Any = None, files: tuple[str, ...] = MODEL_FOLDER_FILES) -> bool:
    """The ``trust_remote_code`` hfrl passes to every ``from_pretrained`` / ``generate`` call: the user's
    opt-in (:func:`code_trusted`), never a file's. For a local folder whose ``config.json``,
    ``tokenizer_config.json`` or ``generation_config.json`` names code to load (``auto_map``, a Hub kernel
    as ``attn_implementation``, any key of :data:`CODE_KEYS` at any depth) and no opt-in, a one-line
    :class:`UntrustedCodeError` now (transformers would ask "[y/N]" on the terminal, or fail later)."""
    if code_trusted():
        return True
    _no_prompt()
    if isinstance(name_or_path, (str, os.PathLike)) and os.path.isdir(name_or_path):
        from pathlib import Path

        from hfrl.utils.bounded import load_json

        for name in files:
            path = Path(name_or_path, name)
            if not path.is_file():
                continue
            data = load_json(path, f"model folder {name_or_path}: {name}")  # not JSON, too large, too deep: one line
            found = loads_code(data)
            if found:
                place, value = found
                raise UntrustedCodeError(
                    f"model folder {name_or_path}: {name} names code to load ({place}: {value[:80]}); {CODE_HINT}"
                )
    return False


def check_adapter_config(data: Any, source: str) -> Any:
    """``data`` (a PEFT ``adapter_config.json``, parsed) unless a key of :data:`ADAPTER_CODE_KEYS` makes
    PEFT import a module by name and the user did not opt in: then a one-line :class:`UntrustedCodeError`.

    >>> check_adapter_config({"peft_type": "LORA", "megatron_core": "megatron.core", "megatron_config": None}, "x")
    {'peft_type': 'LORA', 'megatron_core': 'megatron.core', 'megatron_config': None}
    >>> check_adapter_config({"peft_type": "LORA", "megatron_config": {"tensor_model_parallel_size": 1}}, "a")
    Traceback (most recent call last):
    hfrl.utils.trust.UntrustedCodeError: a names code to import (megatron_config: PEFT then imports megatron.core ...
    """
    if not isinstance(data, dict):
        return data
    _check_adapter_patterns(data, source)  # a pattern that never finishes matching is no code, but a hang
    if code_trusted():
        return data
    for key, loads in ADAPTER_CODE_KEYS.items():
        if key in data and loads(data[key]):
            raise UntrustedCodeError(f"{source} names code to import ({key}: {_adapter_door(key, data)}); {CODE_HINT}")
    return data


# Keys of a PEFT adapter_config.json whose text PEFT matches as a regular expression against every
# module name of the base model (peft 0.21: check_target_module_exists, layers_pattern, the keys of
# rank_pattern / alpha_pattern); a list of names is matched as names, not as patterns.
ADAPTER_PATTERN_KEYS = ("target_modules", "exclude_modules", "layers_pattern", "rank_pattern", "alpha_pattern")


def _check_adapter_patterns(data: dict[str, Any], source: str) -> None:
    """A one-line ``ValueError`` for a regular expression of :data:`ADAPTER_PATTERN_KEYS` that may backtrack
    for ever (:func:`hfrl.utils.bounded.regex_problem`): ``(.*)*Z`` kept ``hfrl eval`` matching for hours."""
    from hfrl.utils.bounded import BoundedInputError, regex_problem

    for key in ADAPTER_PATTERN_KEYS:
        value = data.get(key)
        patterns = [value] if isinstance(value, str) else list(value) if isinstance(value, dict) else []
        if key == "layers_pattern" and isinstance(value, list):
            patterns = [v for v in value if isinstance(v, str)]
        for pattern in patterns:
            problem = regex_problem(str(pattern))
            if problem:
                raise BoundedInputError(
                    f"{source}: {key} {str(pattern)[:80]!r} is a regular expression PEFT would match against every "
                    f"module name, and it may never finish ({problem}); list the module names, or write a plain "
                    "pattern such as '.*\\.(q_proj|v_proj)$'"
                )


def _adapter_door(key: str, data: dict[str, Any]) -> str:
    """What PEFT would import for ``key`` of the adapter config ``data``, in a few words."""
    if key == "megatron_config":
        return f"PEFT then imports {data.get('megatron_core') or 'megatron.core'} by name"
    if key == "megatron_core":
        return f"a module PEFT imports by name: {data[key]!r}"
    library = data[key].get("parent_library") if isinstance(data[key], dict) else data[key]
    return f"PEFT's AutoPeftModel imports {str(library)!r}"


@contextlib.contextmanager
def cwd_off_path() -> Iterator[None]:
    """Inside, the current folder is not on ``sys.path`` (``python -m`` and ``PYTHONPATH=.`` put it there):
    a library that imports a module by name (PEFT's ``megatron.core``, an optional package transformers
    probes) never finds one planted in the folder hfrl was started from. Your own code still loads by
    its file (``--rewards my_rewards.py:digits``) or as an installed module."""
    import sys

    here = os.path.realpath(os.getcwd())
    removed = [(i, p) for i, p in enumerate(sys.path) if os.path.realpath(p or ".") == here]
    for i, _ in reversed(removed):
        del sys.path[i]
    try:
        yield
    finally:
        for i, p in removed:  # back where they were
            if p not in sys.path:
                sys.path.insert(i, p)


def _no_prompt() -> None:
    """No "[y/N]" prompt for code: a library call that names no ``trust_remote_code`` (bert-score's, a
    Hub repo with code) fails at once in this process instead of asking on the terminal (where ``echo y |``
    answered it). transformers asks only while its ``TIME_OUT_REMOTE_CODE`` is positive."""
    import sys

    module: Any = sys.modules.get("transformers.dynamic_module_utils")  # a module: its attributes unknown to mypy
    if module is None:
        import importlib

        module = importlib.import_module("transformers.dynamic_module_utils")
    module.TIME_OUT_REMOTE_CODE = 0


__all__ = [
    "ADAPTER_CODE_KEYS",
    "UntrustedCodeError",
    "check_adapter_config",
    "check_command_line",
    "check_file",
    "code_trusted",
    "cwd_off_path",
    "loads_code",
    "names_code",
    "remote_code",
    "trusted_code",
]
