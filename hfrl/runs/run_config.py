"""A run directory's files and its ``config.yaml``: the names, the YAML dialect, reading (with the
trust check), writing (header, no secrets, plain values) and what the config says about the task.

The lowest module of the run layer: it imports nothing of hfrl above :mod:`hfrl.utils.trust`, so that
``experiment`` (writes runs), ``runs`` (reads them), ``run_eval``, ``hub`` and ``cards`` share it.
"""

from __future__ import annotations

import enum
import os
import re
import stat
from typing import Any

import yaml

from hfrl.utils.bounded import FAST_LOADER, invalid_yaml, read_text
from hfrl.utils.bounded import load_yaml as bounded_yaml
from hfrl.utils.secrets import is_secret, mask_tokens, redacted, refuse_tokens

CONFIG_NAME = "config.yaml"  # written by hfrl.runs.experiment.save_run_config
STATE_NAME = "trainer_state.json"
EVAL_DIR = "eval"
PREDICTIONS_DIR = "predictions"
BASE_SUFFIX = "-base"  # eval/{split}-base.json: the base model, before training
CONFIG_HEADER = "# hfrl run configuration"  # config.yaml's first line: what marks a folder as an hfrl run


class _Loader(FAST_LOADER):  # libyaml's SafeLoader, or PyYAML's own
    """YAML with only ``true`` / ``false`` as booleans (YAML 1.2): ``--save_strategy no`` stays the string
    ``"no"``, as TrainingArguments' strategies need, instead of YAML 1.1's ``False``."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()  # libyaml's: the same Resolver's
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class ConfigFileError(ValueError):
    """A config file (or a command-line value) that cannot be read or parsed."""


def load_yaml(text: str, what: str | None = None) -> Any:
    """``yaml.safe_load`` with YAML 1.2 booleans (see :class:`_Loader`), bounded: text over 1 MiB,
    nested deeper than 100 levels, with aliases that expand to more than 10,000 values or a value over
    64 KiB is refused in one line (:func:`hfrl.utils.bounded.load_yaml`), and so is a syntax error.
    ``what`` names the text in those lines (``--task-arg size``; default: its first characters).

    >>> load_yaml("{a: no, b: true, c: 1e-3, d: null}")
    {'a': 'no', 'b': True, 'c': '1e-3', 'd': None}
    >>> load_yaml("[1, 2", "--reward_weights")
    Traceback (most recent call last):
    hfrl.runs.run_config.ConfigFileError: --reward_weights: invalid YAML: ...
    """
    what = what or f"the value {mask_tokens(text if len(text) <= 40 else text[:37] + '...')!r}"
    try:
        return bounded_yaml(text, what, _Loader)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigFileError(f"{what}: invalid YAML: {problem}") from None


def read_config_file(path: str | os.PathLike[str], names_as_text: bool = False) -> dict[str, Any]:
    """A YAML mapping; a syntax error is reported with the file and line, a file over 1 MiB (or any
    other limit of :func:`load_yaml`) in one line naming it. A file that names code to run is refused
    unless the user trusts it (:mod:`hfrl.utils.trust`; ``names_as_text``: for a reader that only shows
    the names of a task or reward, such as the model card)."""
    what = f"config file {path}"
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # open() of a FIFO waits for a writer forever
            raise ConfigFileError(f"config file {path} is not a regular file (a FIFO or a device); give a YAML file")
        text = read_text(path, what)
    except OSError as err:
        raise ConfigFileError(f"cannot read config file {path}: {err.strerror}") from err
    try:
        data = bounded_yaml(text, what, _Loader)
    except yaml.YAMLError as err:
        raise ConfigFileError(invalid_yaml(err, path)) from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: a config file is a mapping of field: value, got {type(data).__name__}")
    from hfrl.utils.trust import check_file

    return check_file(data, f"config file {path}", names_as_text)


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


def config_text(config: dict[str, Any], path: str | os.PathLike[str] = CONFIG_NAME) -> str:
    """The text of a ``config.yaml`` (at ``path``): a header that says how to repeat the run, then the
    config without secrets, its values made plain."""
    header = f"{CONFIG_HEADER}; repeat the run with: hfrl train --config {path} --output-dir NEW_DIR\n"
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
