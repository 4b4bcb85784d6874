"""A run directory's files and its ``config.yaml``: the names, the YAML dialect, reading (with the
trust check), writing (header, no secrets, plain values) and what the config says about the task.

The lowest module of the run layer: it imports nothing of hfrl above :mod:`hfrl.utils.trust`, so that
``experiment`` (writes runs), ``runs`` (reads them), ``run_eval``, ``hub`` and ``cards`` share it.
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path
from typing import Any

import yaml

from hfrl.utils.secrets import is_secret, redacted, refuse_tokens

CONFIG_NAME = "config.yaml"  # written by hfrl.runs.experiment.save_run_config
STATE_NAME = "trainer_state.json"
EVAL_DIR = "eval"
PREDICTIONS_DIR = "predictions"
BASE_SUFFIX = "-base"  # eval/{split}-base.json: the base model, before training


class _Loader(yaml.SafeLoader):
    """YAML with only ``true`` / ``false`` as booleans (YAML 1.2): ``--save_strategy no`` stays the string
    ``"no"``, as TrainingArguments' strategies need, instead of YAML 1.1's ``False``."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with YAML 1.2 booleans (see :class:`_Loader`).

    >>> load_yaml("{a: no, b: true, c: 1e-3, d: null}")
    {'a': 'no', 'b': True, 'c': '1e-3', 'd': None}
    """
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


class ConfigFileError(ValueError):
    """A config file that cannot be read or parsed."""


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML mapping; a syntax error is reported with the file and line. A file that names code to
    run is refused unless the user trusts it (:mod:`hfrl.utils.trust`)."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigFileError(f"cannot read config file {path}: {err.strerror}") from err
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigFileError(f"{where}: invalid YAML: {problem}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: a config file is a mapping of field: value, got {type(data).__name__}")
    from hfrl.utils.trust import check_file

    return check_file(data, f"config file {path}")


def sanitize_config(config: dict[str, Any]) -> dict[str, Any]:
    """A run config without secrets (:func:`hfrl.utils.secrets.is_secret`), at any depth."""
    return redacted(dict(config))


def plain_values(values: dict[str, Any]) -> dict[str, Any]:
    """Enums and other non-YAML values as strings."""
    out = {}
    for key, value in values.items():
        if isinstance(value, enum.Enum):
            value = value.value
        elif not isinstance(value, (str, int, float, bool, list, dict, type(None))):
            value = str(value)
        out[key] = value
    return out


def config_text(config: dict[str, Any], path: str | os.PathLike = CONFIG_NAME) -> str:
    """The text of a ``config.yaml`` (at ``path``): a header that says how to repeat the run, then the
    config without secrets, its values made plain."""
    header = f"# hfrl run configuration; repeat the run with: hfrl train --config {path} --output-dir NEW_DIR\n"
    text = header + yaml.safe_dump(plain_values(sanitize_config(config)), sort_keys=False)
    refuse_tokens(text, str(path))
    return text


def task_kwargs(run: dict[str, Any]) -> dict[str, Any]:
    """The task builder's keyword arguments of a run: its ``task_args`` and ``rewards``."""
    args = run.get("task_args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"task_args is a mapping of argument: value, got {args!r}")
    return {**args, **({"rewards": run["rewards"]} if run.get("rewards") else {})}


__all__ = [
    "BASE_SUFFIX",
    "CONFIG_NAME",
    "EVAL_DIR",
    "PREDICTIONS_DIR",
    "STATE_NAME",
    "ConfigFileError",
    "config_text",
    "is_secret",
    "load_yaml",
    "plain_values",
    "read_config_file",
    "sanitize_config",
    "task_kwargs",
]
