"""Every algorithm's config fields (name, type, default, help), readable without importing torch.

The config dataclasses (``hfrl.PPOConfig`` ... and TRL's, all ``transformers.TrainingArguments``)
are the one source of truth, but importing them imports torch, which takes seconds: a command line
with a typo would wait that long for its one-line error. So the first command that needs their fields
builds them from the classes (:func:`build`: a few seconds, once) into the user cache,
``schema/KEY.json`` under :func:`hfrl.utils.cache.cache_root` (``~/.cache/huggingface/hfrl/schema/``),
and every later command reads that file (milliseconds, no torch). ``hfrl train`` checks names, types,
choices (the registries' names, the libraries': :func:`declared_choices`) and numbers against it, and
the rules between fields (:mod:`hfrl.trainers.field_rules`, with the estimators' and policy losses'
facts it records: :data:`FACTS`), and ``hfrl list fields`` and ``hfrl train --help`` list it, before
torch is imported.

``KEY`` is a hash of what the fields are built from (:func:`current_key`): the source of every
``.py`` file of ``hfrl/trainers/`` (the configs, their bounds, the trainers naming their config
classes, this module) and of the layers under it, all that a config can import (``hfrl/utils``,
``core``, ``rewards``, ``metrics``: the registries whose entries' docstrings are an option's help and
whose names its choices, for one; :func:`source_files`), and the installed versions of Python,
transformers, TRL (their ``TrainingArguments`` and configs) and hfrl. A new field, an upgrade or an
edit is a new key, so the first command after it builds again: there is no file to regenerate. A
damaged cache file is built again; a cache folder that cannot be written means building every time.
An algorithm of your own (``module:attr``) is always read from its class.

The cache is data (docs/concepts/trust.md, "Caches are data"): anyone who can write the folder can change
the file, so it holds field names, types, defaults, help, bounds and choices, and nothing that names code.
What does (a TRL trainer's ``translate_task_defaults``, a ``module:attr`` path) is a fact of the installed
package, read from its source at run time (:func:`hfrl.trainers.declared.translations`). A file of any other
shape, or with a value of the wrong kind, is rebuilt, not trusted (:func:`_valid`).

    python -m hfrl.trainers.schema --where    # the cache file for the installed sources and versions
    python -m hfrl.trainers.schema --print    # the schema as JSON (built and cached first if need be)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from hfrl.trainers.declared import translations
from hfrl.utils.bounded import MAX_BATCH, MAX_COUNT
from hfrl.utils.cache import cache_root, write_atomic

logger = logging.getLogger(__name__)

PACKAGE = Path(__file__).parent.parent  # the installed hfrl/ folder (found without importing anything)
# The folders of hfrl/ whose .py files are hashed: the trainers' layer and the layers under it, all that a config
# may import (tests/unit/test_imports.py keeps imports downward): bounds' caps, registries read for choices and help
SOURCE_FOLDERS = ("utils", "core", "rewards", "metrics", "trainers")
VERSIONED = ("transformers", "trl", "hfrl")  # the libraries whose classes the fields come from, and hfrl
KEEP = 8  # cached schemas kept (other installs sharing the cache, recent edits); older ones are removed

_SEED = {"ge": 0, "le": 2**32 - 1, "note": "numpy's seeds"}  # numpy.random.seed: "Seed must be between 0 and 2**32 - 1"
# Ranges of transformers.TrainingArguments' own fields (bounds: hfrl.utils.bounded.bound_problem), which
# TrainingArguments checks only in part (warmup_steps >= 0, a non-zero logging_steps with the "steps"
# strategy): the rest fail late, after the model loaded (torch.optim's "Invalid learning rate", a
# DataLoader's batch_size 0) or not at all (save_total_limit 0 keeps every checkpoint). Every config
# inherits them; a config's own field_bounds win.
TRAINING_ARGUMENTS_BOUNDS: dict[str, dict[str, Any]] = {
    "learning_rate": {"ge": 0},  # torch.optim: "Invalid learning rate"
    "weight_decay": {"ge": 0},  # torch.optim.AdamW: "Invalid weight_decay value"
    "adam_beta1": {"ge": 0, "lt": 1},  # torch.optim.Adam: "Invalid beta parameter at index 0"
    "adam_beta2": {"ge": 0, "lt": 1},
    "adam_epsilon": {"ge": 0},  # torch.optim: "Invalid epsilon value"
    "max_grad_norm": {"ge": 0, "note": "0: no clipping"},
    "per_device_train_batch_size": {"ge": 1, "cap": MAX_BATCH},
    "per_device_eval_batch_size": {"ge": 1, "cap": MAX_BATCH},
    "gradient_accumulation_steps": {"ge": 1, "cap": MAX_COUNT},
    "eval_accumulation_steps": {"ge": 1, "cap": MAX_COUNT},
    "num_train_epochs": {"ge": 0, "cap": MAX_COUNT},
    "max_steps": {"ge": -1, "cap": MAX_COUNT, "note": "-1: num_train_epochs decides"},
    "warmup_steps": {"ge": 0, "cap": MAX_COUNT, "note": "below 1: a fraction of the run"},
    "logging_steps": {"gt": 0, "cap": MAX_COUNT, "note": "below 1: a fraction of the run"},
    "eval_steps": {"gt": 0, "cap": MAX_COUNT, "note": "below 1: a fraction of the run"},
    "save_steps": {"gt": 0, "cap": MAX_COUNT, "note": "below 1: a fraction of the run"},
    "save_total_limit": {"ge": 1, "note": "None keeps every checkpoint"},  # transformers reads <= 0 as None
    "eval_delay": {"ge": 0},
    "seed": _SEED,
    "data_seed": _SEED,
    "dataloader_num_workers": {"ge": 0},  # torch's DataLoader: "num_workers option should be non-negative"
    "torch_empty_cache_steps": {"gt": 0},  # TrainingArguments' own check
}
# trl.ModelConfig's LoRA numbers, which peft checks only once the model has loaded (torch)
MODEL_CONFIG_BOUNDS: dict[str, dict[str, Any]] = {
    "lora_r": {"ge": 1, "cap": MAX_COUNT},  # peft: "`r` should be a positive integer value"
    "lora_dropout": {"ge": 0, "le": 1},  # torch's Dropout: "dropout probability has to be between 0 and 1"
}
# FieldInfo.also: what a field with choices takes besides them: your own class as a 'module:attr' path
# (the registries' resolvers import it), or a Hub kernel owner/name[@rev][:fn] (transformers' is_kernel)
CODE, KERNEL = "code", "kernel"


def declared_bounds(config_class: type) -> dict[str, dict[str, Any]]:
    """``{field: bounds}`` of a config class: its classes' ``field_bounds``, the nearest class's winning,
    over :data:`TRAINING_ARGUMENTS_BOUNDS` for a ``TrainingArguments`` subclass."""
    mro = config_class.__mro__
    training = any(k.__name__ == "TrainingArguments" and k.__module__.startswith("transformers") for k in mro)
    out: dict[str, dict[str, Any]] = dict(TRAINING_ARGUMENTS_BOUNDS) if training else {}
    if any(k.__name__ == "ModelConfig" and k.__module__.startswith("trl") for k in mro):
        out.update(MODEL_CONFIG_BOUNDS)
    for klass in reversed(mro):
        out.update(vars(klass).get("field_bounds", {}))
    return out


def declared_choices(config_class: type) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """``{field: (choices, also)}`` of a config class: its classes' ``field_choices`` (the registries'
    names: ``advantage_estimator``, ``policy_loss``), the nearest class's winning, over the choices of
    the libraries' fields that they check only once torch is loaded (:func:`library_choices`)."""
    out = library_choices(config_class)
    for klass in reversed(config_class.__mro__):
        out.update(vars(klass).get("field_choices", {}))
    return out


def library_choices(config_class: type) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """The names transformers takes for ``TrainingArguments``' ``lr_scheduler_type`` (an hfrl config
    declares it ``str``: no enum for the argument parser to list) and ``report_to`` (checked when the
    Trainer is built), and for ``trl.ModelConfig``'s ``attn_implementation`` (checked when the model
    loads). Imports transformers: called where the class was imported, to build the schema."""
    mro = config_class.__mro__
    out: dict[str, tuple[tuple[str, ...], str | None]] = {}
    if any(k.__name__ == "TrainingArguments" and k.__module__.startswith("transformers") for k in mro):
        from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
        from transformers.trainer_utils import SchedulerType

        out["lr_scheduler_type"] = (tuple(str(t.value) for t in SchedulerType), None)
        out["report_to"] = (("none", "all", *INTEGRATION_TO_CALLBACK), None)
    if any(k.__name__ == "ModelConfig" and k.__module__.startswith("trl") for k in mro):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        out["attn_implementation"] = (("eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()), KERNEL)
    return out


def generate_fields(config_class: type) -> set[str]:
    """The fields of a config class that hold ``generate`` keyword arguments (its classes' ``generate_fields``)."""
    return {name for klass in config_class.__mro__ for name in vars(klass).get("generate_fields", ())}


@dataclass(frozen=True)
class FieldInfo:
    """One config field: its annotation as written (``"float | None"``), default (plain JSON; a
    value JSON cannot hold is its ``repr``), help text, and how a command line's text becomes its value,
    as transformers' ``HfArgumentParser`` reads the dataclass: ``parse`` (``float``, ``int``, ``bool``,
    ``str`` or ``dict``), ``choices`` (an enum's, a ``Literal``'s or the metadata's values, a registry's
    names: :func:`declared_choices`), ``many`` (a list of them) and ``optional`` (None allowed); and what
    its value must be: ``bounds`` (a number's range, ``{"ge": 1, "cap": 10000000}``:
    :mod:`hfrl.trainers.config_checks`), ``generate`` (a mapping of ``generate`` keyword arguments,
    checked against ``config_checks.GENERATE_KWARGS``) and ``also``, what it takes besides its choices
    (:data:`CODE`: a ``module:attr`` path; :data:`KERNEL`: a Hub kernel)."""

    name: str
    type: str
    default: Any
    help: str
    parse: str = "str"
    choices: tuple[str, ...] | None = None
    many: bool = False
    optional: bool = False
    bounds: dict[str, Any] | None = None
    generate: bool = False
    also: str | None = None


@dataclass(frozen=True)
class ConfigSchema:
    """An algorithm's config: its class name, fields, and the function (``module:attr``) that puts a
    task's shared ``defaults`` in this config's names (TRL's trainers name things differently; never
    read from the cache: :func:`config_schema`)."""

    name: str
    fields: dict[str, FieldInfo]
    translate: str | None = None
    #: the sections of a task's YAML ``configs`` this config reads, in order (each over the one before):
    #: ``defaults``, then one per config class along its bases that names one (``task_section``):
    #: PPO's ``online``, ``ppo``; NLPO's ``online``, ``ppo``, ``nlpo``; A-LoL's ``offline``
    sections: tuple[str, ...] = ("defaults",)

    @property
    def names(self) -> set[str]:
        return set(self.fields)

    def defaults(self) -> dict[str, Any]:
        return {name: f.default for name, f in self.fields.items()}

    def translate_defaults(self, defaults: dict[str, Any]) -> dict[str, Any]:
        if self.translate is None:
            return defaults
        from hfrl.utils.registry import import_path

        return cast(dict[str, Any], import_path(self.translate)(defaults))


# ---- reading -----------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return getattr(value, "value", None) if hasattr(value, "value") else repr(value)


def _parsing(config_class: type) -> dict[str, dict[str, Any]]:
    """``{field: {parse, choices, many, optional}}`` as transformers' ``HfArgumentParser`` reads the
    dataclass (its argparse actions: the type each turns text into, the choices, ``nargs``)."""
    import typing

    from transformers import HfArgumentParser
    from transformers.hf_argparser import DataClassType, string_to_bool

    hints = typing.get_type_hints(config_class)
    out = {}
    for action in HfArgumentParser(DataClassType(config_class))._actions:
        if action.dest == "help":
            continue
        kind = typing.get_origin(action.type) or action.type  # dict[str, Any] -> dict
        parse = "bool" if kind is string_to_bool else kind.__name__ if kind in (float, int, dict) else "str"
        choices = tuple(str(getattr(c, "value", c)) for c in action.choices) if action.choices else None
        optional = type(None) in typing.get_args(hints.get(action.dest, Any))
        out[action.dest] = {"parse": parse, "choices": choices, "many": action.nargs == "+", "optional": optional}
    return out


def fields_of(config_class: type) -> dict[str, FieldInfo]:
    """The init fields of a config dataclass as :class:`FieldInfo` (imports transformers' argument
    parser: this runs where the dataclass was imported)."""
    parsing = _parsing(config_class)
    bounds, generate = declared_bounds(config_class), generate_fields(config_class)
    choices = declared_choices(config_class)
    out = {}
    for f in dataclasses.fields(config_class):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        # argparse's help escapes % as %% (TRL's "~20%% slower"); hfrl prints it as plain text
        help_text = " ".join(str(f.metadata.get("help", "")).split()).replace("%%", "%")
        info = FieldInfo(f.name, str(f.type), _plain(default), help_text, **parsing.get(f.name, {}))
        info = dataclasses.replace(info, bounds=bounds.get(f.name), generate=f.name in generate)
        if f.name in choices:  # a registry's names, or a library's that only torch-time code checks
            info = dataclasses.replace(info, choices=choices[f.name][0], also=choices[f.name][1])
        out[f.name] = info
    return out


def _translate_of(trainer_class: type) -> str | None:
    fn = getattr(trainer_class, "translate_task_defaults", None)
    if fn is None or getattr(fn, "__name__", "") == "<lambda>":
        return None
    return f"{fn.__module__}:{fn.__qualname__}"


def _live(alg: str) -> ConfigSchema:
    from hfrl.tasks.base import task_sections
    from hfrl.trainers import algorithm_trainer

    trainer = algorithm_trainer(alg)
    config = trainer.config_class
    return ConfigSchema(config.__name__, fields_of(config), _translate_of(trainer), task_sections(config))


# ---- the cache -----------------------------------------------------------------------------------
def source_files(package: Path = PACKAGE) -> list[Path]:
    """What the schema is built from, generously: every ``.py`` file in the :data:`SOURCE_FOLDERS` of
    the hfrl package folder ``package``.

    >>> sorted({path.relative_to(PACKAGE).parts[0] for path in source_files()})
    ['core', 'metrics', 'rewards', 'trainers', 'utils']
    """
    return sorted(path for folder in SOURCE_FOLDERS for path in (package / folder).rglob("*.py"))


def versions() -> dict[str, str]:
    """The installed versions of :data:`VERSIONED` (``"none"`` for one not installed), and Python's
    (how a type annotation reads can change with it).

    >>> sorted(versions())
    ['hfrl', 'python', 'transformers', 'trl']
    """
    out = {"python": "{}.{}".format(*sys.version_info)}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "none"
    return out


def schema_key(sources: Iterable[tuple[str, bytes]], versions: Mapping[str, str]) -> str:
    """A short hash of named source texts and library versions: the name of a cached schema.

    >>> key = schema_key([("trainers/a.py", b"x: int = 1")], {"trl": "1.16.0"})
    >>> len(key), key == schema_key([("trainers/a.py", b"x: int = 2")], {"trl": "1.16.0"})
    (16, False)
    >>> key == schema_key([("trainers/a.py", b"x: int = 1")], {"trl": "1.17.0"})
    False
    """
    digest = hashlib.sha256()
    for name, data in sources:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    digest.update(json.dumps(dict(versions), sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _source(path: Path) -> bytes:
    """A file's bytes (for one that cannot be read, such as an editor's dangling lock link, a marker)."""
    try:
        return path.read_bytes()
    except OSError:
        return b"\0unreadable"


def current_key(package: Path = PACKAGE) -> str:
    """:func:`schema_key` of the sources in ``package`` and the installed versions (reads some 120 files:
    milliseconds, no torch)."""
    sources = ((path.relative_to(package).as_posix(), _source(path)) for path in source_files(package))
    return schema_key(sources, versions())


def cache_file(key: str | None = None) -> Path:
    """Where the schema of ``key`` (by default :func:`current_key`) is cached."""
    return cache_root() / "schema" / f"{key or current_key()}.json"


def text(data: Mapping[str, Any]) -> str:
    """A schema as the JSON text it is cached as."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


PARTS = ("algorithms", "training_arguments", "configs", "model_config")  # what every cached schema holds
PARSES = ("float", "int", "bool", "str", "dict")  # FieldInfo.parse: what _parsing writes
BOUND_NUMBERS = ("ge", "gt", "le", "lt", "cap")  # hfrl.utils.bounded.bound_problem's keys, and "note"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _valid_bounds(bounds: Any) -> bool:
    if bounds is None:
        return True
    if not isinstance(bounds, dict) or not set(bounds) <= {*BOUND_NUMBERS, "note"}:
        return False
    return all(_number(v) for k, v in bounds.items() if k != "note") and isinstance(bounds.get("note", ""), str)


def _valid_field(info: Any) -> bool:
    """Whether ``info`` is a cached :class:`FieldInfo` (less its name): each value of its kind."""
    known = {f.name for f in dataclasses.fields(FieldInfo)} - {"name"}
    if not (isinstance(info, dict) and {"type", "default", "help"} <= info.keys() <= known):
        return False
    return (
        isinstance(info["type"], str)
        and isinstance(info["help"], str)
        and info.get("parse", "str") in PARSES
        and (info.get("choices") is None or _strings(info["choices"]))
        and all(isinstance(info.get(flag, False), bool) for flag in ("many", "optional", "generate"))
        and _valid_bounds(info.get("bounds"))
        and info.get("also") in (None, CODE, KERNEL)
    )


def _valid_facts(table: Any, names: tuple[str, ...]) -> bool:
    """Whether ``table`` holds registered classes' facts (:data:`FACTS`): ``names`` only, each a boolean
    (``loss_aggregation``: an aggregation's name or None; ``reads``: a list of field names)."""
    if not isinstance(table, dict):
        return False
    for facts in table.values():
        if not (isinstance(facts, dict) and facts.keys() <= set(names)):
            return False
        for name, value in facts.items():
            if name == "reads":  # setting names, nothing that could name code
                if not (isinstance(value, list) and all(isinstance(v, str) and v.isidentifier() for v in value)):
                    return False
            elif not (isinstance(value, bool) or (name == "loss_aggregation" and isinstance(value, (str, type(None))))):
                return False
    return True


def _valid(data: Any, key: str) -> bool:
    """Whether ``data`` has the shape of a schema :func:`schema_data` cached for ``key``: its parts, each
    registered algorithm's config class name and task sections (nothing else: what names code, such as
    a trainer's ``translate_task_defaults``, is read from the installed source), the estimators' facts,
    and fields that :class:`FieldInfo` can be made of, each value of its kind (``None``: one a config
    lacks). Anything else is rebuilt, not trusted: the cache is data that anyone who can write the
    folder can change.

    >>> _valid({"key": "k", "algorithms": {}, "training_arguments": {}, "configs": {}, "model_config": {}}, "k")
    True
    >>> _valid({"key": "k", "algorithms": {"ppo": {"config": "PPOConfig"}}}, "k")
    False
    >>> _valid({"key": "k", "algorithms": {"ppo": {"config": "C", "sections": ["defaults"], "translate": "os:system"}},
    ...         "training_arguments": {}, "configs": {"C": {}}, "model_config": {}}, "k")
    False
    """
    from hfrl.trainers import ALGORITHMS

    top = {"key", "versions", *FACTS, *PARTS}
    if not (isinstance(data, dict) and data.get("key") == key and data.keys() <= top):
        return False
    if not all(isinstance(data.get(part), dict) for part in PARTS):
        return False
    versions = data.get("versions", {})
    if not (isinstance(versions, dict) and all(isinstance(v, str) for v in versions.values())):
        return False
    if not all(_valid_facts(data.get(kind, {}), names) for kind, names in FACTS.items()):
        return False
    configs = data["configs"]
    for alg, entry in data["algorithms"].items():
        if alg not in ALGORITHMS or not (isinstance(entry, dict) and entry.keys() == {"config", "sections"}):
            return False
        if not (isinstance(entry["config"], str) and entry["config"] in configs and _strings(entry["sections"])):
            return False
    if not all(isinstance(table, dict) for table in configs.values()):
        return False
    own = (info for table in configs.values() for info in table.values() if info is not None)  # None: not a field
    base = (info for part in ("training_arguments", "model_config") for info in data[part].values())
    return all(_valid_field(info) for info in (*own, *base))


def _read(path: Path, key: str) -> dict[str, Any] | None:
    """The schema cached at ``path`` for ``key``; None when it is missing, unreadable or damaged."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # a damaged file may not even be UTF-8: UnicodeDecodeError is a ValueError
        return None
    return data if _valid(data, key) else None


def _prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` newest schemas in ``folder`` (what cannot be removed stays)."""
    with contextlib.suppress(OSError):  # another process may be removing the same files
        schemas = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in schemas[keep:]:
            old.unlink(missing_ok=True)


def _write(path: Path, data: Mapping[str, Any]) -> None:
    """Cache ``data`` at ``path`` (atomically), then :func:`_prune`; a folder that cannot be written
    is left alone (the schema is built again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text(data))
    except OSError as exc:
        logger.debug("the config schema is not cached (%s): it is built again next time", exc)
        return
    _prune(path.parent)


@functools.cache
def schema_data() -> dict[str, Any]:
    """The schema of the installed configs: the cached file of :func:`current_key`, else :func:`build`
    (imports torch: seconds) written there."""
    key = current_key()
    path = cache_file(key)
    data = _read(path, key)
    if data is None:
        data = {"key": key, **build()}
        _write(path, data)
    return data


def _info(name: str, info: dict[str, Any]) -> FieldInfo:
    """A field read back from the file (JSON lists back to tuples)."""
    info = dict(info)
    if info.get("choices") is not None:
        info["choices"] = tuple(info["choices"])
    return FieldInfo(name, **info)


def config_schema(alg: str) -> ConfigSchema:
    """The config schema of algorithm ``alg``: a registered one's from :func:`schema_data`, one's own
    (``module:attr``) from its class (an unknown name raises the registry's one-line error)."""
    from hfrl.trainers import ALGORITHMS

    if alg not in ALGORITHMS:
        return _live(alg)
    data = schema_data()
    entry = data["algorithms"].get(alg)
    if entry is None:  # registered after the schema was built (the key covers hfrl/trainers/: not expected)
        return _live(alg)
    merged = {**data["training_arguments"], **data["configs"][entry["config"]]}
    fields = {name: _info(name, info) for name, info in merged.items() if info is not None}
    # the translation names code: the installed trainer's, read from its source (declared), never from the cache
    translate = translations().get(alg)
    return ConfigSchema(entry["config"], fields, translate, tuple(entry["sections"] or ("defaults",)))


def training_arguments_fields() -> dict[str, FieldInfo]:
    """``transformers.TrainingArguments``' own fields (every config inherits them)."""
    return {name: _info(name, info) for name, info in schema_data()["training_arguments"].items()}


def model_config_fields() -> dict[str, FieldInfo]:
    """``trl.ModelConfig``'s fields (LoRA and 4/8-bit loading flags)."""
    return {name: _info(name, info) for name, info in schema_data()["model_config"].items()}


# ---- what a person reads -------------------------------------------------------------------------
TRAINING_ARGUMENTS_URL = "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments"


def option_rows(alg: str) -> list[tuple[str, str]]:
    """``(--field, help and default)`` for every field of ``alg``'s config that is its own or differs
    from ``TrainingArguments``, then TRL's ModelConfig flags and where the other TrainingArguments fields
    are documented: what ``hfrl list fields``, ``hfrl train --help`` and the options page show."""
    from hfrl.core.model_args import MODEL_KEYS

    inherited = training_arguments_fields()
    rows = []
    for name, f in config_schema(alg).fields.items():
        if name in inherited and inherited[name] == f:
            continue  # TrainingArguments' own, unchanged: listed once below
        if name == "overwrite_output_dir":
            continue  # the Python API's; hfrl train has its own flag of that name (cli/train.py)
        listed = f.choices and len(f.choices) <= 8 and f.also != CODE  # a registry's help lists its names itself
        choices = f" One of: {', '.join(f.choices or ())}." if listed else ""
        rows.append((f"--{name}", f"{f.help}{choices} (default: {f.default!r})"))
    rows.append(("--use_peft ...", f"trl.ModelConfig's flags for LoRA and 4/8-bit loading: {', '.join(MODEL_KEYS)}"))
    rows.append(
        (
            "...",
            "and every transformers.TrainingArguments field (report_to, logging_dir, seed, bf16, save_total_limit, "
            f"...): {TRAINING_ARGUMENTS_URL}",
        )
    )
    return rows


# ---- building ----------------------------------------------------------------------------------
def build() -> dict[str, Any]:
    """The schema from the dataclasses themselves (imports every trainer: torch, transformers, TRL)."""
    from transformers import TrainingArguments
    from trl import ModelConfig

    from hfrl.trainers import ALGORITHMS

    def as_json(fields: dict[str, FieldInfo]) -> dict[str, Any]:
        return {
            name: _plain({k: v for k, v in dataclasses.asdict(f).items() if k != "name"}) for name, f in fields.items()
        }

    base = as_json(fields_of(TrainingArguments))
    algorithms, configs = {}, {}
    for alg in ALGORITHMS:
        live = _live(alg)
        if translations().get(alg) != live.translate:  # what config_schema serves must be what the class does
            raise RuntimeError(
                f"{ALGORITHMS[alg]}.translate_task_defaults is {live.translate}, but its source reads as "
                f"{translations().get(alg)}: set it as `translate_task_defaults = staticmethod(NAME)`, NAME a function "
                "imported by name (hfrl.trainers.declared reads it without importing the trainer)"
            )
        # data only: the config's name and task sections; what names code (the translation) is not cached
        algorithms[alg] = {"config": live.name, "sections": list(live.sections)}
        own = as_json(live.fields)
        # what differs from TrainingArguments (None: a field of it this config does not have)
        configs[live.name] = {k: v for k, v in own.items() if base.get(k) != v} | {
            k: None for k in base if k not in own
        }
    return {
        "versions": versions(),
        "algorithms": algorithms,
        **{kind: registry_facts(kind) for kind in FACTS},
        "training_arguments": base,
        "configs": configs,
        "model_config": as_json(fields_of(ModelConfig)),
    }


# The class attributes of the registered advantage estimators and policy losses that resolving and checking
# a run reads (hfrl.trainers.field_rules), recorded when the schema is built: no torch once it is cached
FACTS: dict[str, tuple[str, ...]] = {
    "estimators": ("needs_critic", "unit_scale", "needs_groups", "loss_aggregation"),
    "policy_losses": ("needs_whole_sequences", "needs_groups", "surrogate", "loss_aggregation", "reads"),
}


def registry_facts(kind: str) -> dict[str, dict[str, Any]]:
    """``{name: {fact: value}}`` of each class the registry ``kind`` (a key of :data:`FACTS`) holds,
    read from the classes (imported: torch); a policy loss's ``loss_aggregation`` is its ``defaults``'."""
    if kind == "estimators":
        from hfrl.core.estimators import ESTIMATORS as registry
        from hfrl.core.estimators import estimator_class as resolve
    else:
        from hfrl.core.policy_losses import POLICY_LOSSES as registry
        from hfrl.core.policy_losses import policy_loss_class as resolve
    out = {}
    for name in registry:
        cls = resolve(name)
        facts = {
            **(getattr(cls, "defaults", None) or {}),
            **{k: getattr(cls, k) for k in FACTS[kind] if hasattr(cls, k)},
        }
        out[name] = {k: _fact_value(k, facts.get(k)) for k in FACTS[kind]}
    return out


def _fact_value(name: str, value: Any) -> Any:
    """A fact as the schema stores it: an aggregation's name (or None), the settings a loss reads (a list
    of names), else a boolean."""
    if name == "loss_aggregation":
        return value
    if name == "reads":
        return [str(v) for v in value or ()]
    return bool(value)


def estimator_facts() -> dict[str, dict[str, Any]]:
    """Each registered advantage estimator's facts (:func:`registry_facts`)."""
    return registry_facts("estimators")


def cached_facts(kind: str, name: str) -> dict[str, Any] | None:
    """The facts of the class registered as ``name`` in ``kind`` (:data:`FACTS`), read from the schema (no
    torch once it is cached); None for a name the registry does not hold (a ``module:attr`` path is not
    imported here).

    >>> cached_facts("estimators", "rloo")["needs_groups"], cached_facts("policy_losses", "gspo")["loss_aggregation"]
    (True, 'seq-mean-token-mean')
    >>> cached_facts("estimators", "pkg.mod:Mine") is None
    True
    """
    table = schema_data().get(kind)
    if not isinstance(table, dict):  # a cache written before these facts were recorded: the classes themselves
        table = registry_facts(kind)
    entry = table.get(name)
    return dict(entry) if isinstance(entry, dict) else None


def estimator_needs_critic(name: str) -> bool | None:
    """Whether the registered estimator ``name`` trains a critic, read from the schema (no torch once it is
    cached); None for a name the registry does not hold (a ``module:attr`` path is not imported here).

    >>> estimator_needs_critic("gae"), estimator_needs_critic("rloo"), estimator_needs_critic("pkg.mod:Mine")
    (True, False, None)
    """
    entry = cached_facts("estimators", name)
    return bool(entry["needs_critic"]) if entry is not None and "needs_critic" in entry else None


def main(argv: list[str] | None = None) -> int:
    """``--where``: print the cache file of the installed sources and versions; ``--print``: print the
    schema (built and cached first if need be)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--where"]:
        print(cache_file())
        return 0
    if args == ["--print"]:
        sys.stdout.write(text(schema_data()))
        return 0
    print("usage: python -m hfrl.trainers.schema --where | --print", file=sys.stderr)
    return 2


__all__ = [
    "CODE",
    "FACTS",
    "KERNEL",
    "MODEL_CONFIG_BOUNDS",
    "TRAINING_ARGUMENTS_BOUNDS",
    "option_rows",
    "ConfigSchema",
    "FieldInfo",
    "build",
    "cache_file",
    "cached_facts",
    "config_schema",
    "current_key",
    "declared_bounds",
    "declared_choices",
    "fields_of",
    "generate_fields",
    "library_choices",
    "model_config_fields",
    "registry_facts",
    "schema_data",
    "schema_key",
    "source_files",
    "training_arguments_fields",
    "versions",
]

if __name__ == "__main__":
    raise SystemExit(main())
