"""Every algorithm's config fields (name, type, default, help), readable without importing torch.

The config dataclasses (``hfrl.PPOConfig`` ... and TRL's, all ``transformers.TrainingArguments``)
are the one source of truth, but importing them imports torch, which takes seconds: a command line
with a typo would wait that long for its one-line error. So their fields are also written, by this
module, into ``config_schema.json`` beside it (``python -m hfrl.trainers.schema --write``), and a
test checks that the file equals what the dataclasses say. ``hfrl train`` checks names, types and
numbers against it, and ``hfrl list fields`` lists it, before torch is imported.

The file records the transformers and TRL versions it was written with; with other versions
installed (their ``TrainingArguments`` or configs may have other fields) the dataclasses themselves
are read instead, at the cost of importing them. An algorithm of your own (``module:attr``) is
always read from its class.

    python -m hfrl.trainers.schema --check    # exit 1 when the file is out of date
    python -m hfrl.trainers.schema --write
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hfrl.utils.bounded import MAX_BATCH, MAX_COUNT

SCHEMA_FILE = Path(__file__).with_name("config_schema.json")
VERSIONED = ("transformers", "trl")  # the libraries whose classes the fields come from

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


def declared_bounds(config_class: type) -> dict[str, dict[str, Any]]:
    """``{field: bounds}`` of a config class: its classes' ``field_bounds``, the nearest class's winning,
    over :data:`TRAINING_ARGUMENTS_BOUNDS` for a ``TrainingArguments`` subclass."""
    mro = config_class.__mro__
    training = any(k.__name__ == "TrainingArguments" and k.__module__.startswith("transformers") for k in mro)
    out: dict[str, dict[str, Any]] = dict(TRAINING_ARGUMENTS_BOUNDS) if training else {}
    for klass in reversed(mro):
        out.update(vars(klass).get("field_bounds", {}))
    return out


def generate_fields(config_class: type) -> set[str]:
    """The fields of a config class that hold ``generate`` keyword arguments (its classes' ``generate_fields``)."""
    return {name for klass in config_class.__mro__ for name in vars(klass).get("generate_fields", ())}


@dataclass(frozen=True)
class FieldInfo:
    """One config field: its annotation as written (``"float | None"``), default (plain JSON; a
    value JSON cannot hold is its ``repr``), help text, and how a command line's text becomes its value,
    as transformers' ``HfArgumentParser`` reads the dataclass: ``parse`` (``float``, ``int``, ``bool``,
    ``str`` or ``dict``), ``choices`` (an enum's, a ``Literal``'s or the metadata's values), ``many`` (a
    list of them) and ``optional`` (None allowed); and what its value must be: ``bounds`` (a number's
    range, ``{"ge": 1, "cap": 10000000}``: :mod:`hfrl.trainers.config_checks`) and ``generate`` (a
    mapping of ``generate`` keyword arguments, checked against ``config_checks.GENERATE_KWARGS``)."""

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


@dataclass(frozen=True)
class ConfigSchema:
    """An algorithm's config: its class name, fields, and the function (``module:attr``) that puts a
    task's shared ``defaults`` in this config's names (TRL's trainers name things differently)."""

    name: str
    fields: dict[str, FieldInfo]
    translate: str | None = None

    @property
    def names(self) -> set[str]:
        return set(self.fields)

    def defaults(self) -> dict[str, Any]:
        return {name: f.default for name, f in self.fields.items()}

    def translate_defaults(self, defaults: dict[str, Any]) -> dict[str, Any]:
        if self.translate is None:
            return defaults
        from hfrl.utils.registry import import_path

        return import_path(self.translate)(defaults)


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
        help_text = " ".join(str(f.metadata.get("help", "")).split())
        info = FieldInfo(f.name, str(f.type), _plain(default), help_text, **parsing.get(f.name, {}))
        out[f.name] = dataclasses.replace(info, bounds=bounds.get(f.name), generate=f.name in generate)
    return out


def _translate_of(trainer_class: type) -> str | None:
    fn = getattr(trainer_class, "translate_task_defaults", None)
    if fn is None or getattr(fn, "__name__", "") == "<lambda>":
        return None
    return f"{fn.__module__}:{fn.__qualname__}"


def _live(alg: str) -> ConfigSchema:
    from hfrl.trainers import algorithm_trainer

    trainer = algorithm_trainer(alg)
    return ConfigSchema(trainer.config_class.__name__, fields_of(trainer.config_class), _translate_of(trainer))


@functools.cache
def _file() -> dict[str, Any] | None:
    """The schema file, when it was written with the installed transformers and TRL (else None)."""
    try:
        data = json.loads(SCHEMA_FILE.read_text())
    except (OSError, ValueError):
        return None
    try:
        installed = {name: metadata.version(name) for name in VERSIONED}
    except metadata.PackageNotFoundError:
        return None
    return data if data.get("versions") == installed else None


def _info(name: str, info: dict[str, Any]) -> FieldInfo:
    """A field read back from the file (JSON lists back to tuples)."""
    info = dict(info)
    if info.get("choices") is not None:
        info["choices"] = tuple(info["choices"])
    return FieldInfo(name, **info)


def config_schema(alg: str) -> ConfigSchema:
    """The config schema of algorithm ``alg``: from the file when it is current, else from the class
    (an unknown name raises the registry's one-line error)."""
    data = _file()
    entry = (data or {}).get("algorithms", {}).get(alg)
    if entry is None:
        return _live(alg)
    assert data is not None
    merged = {**data["training_arguments"], **data["configs"][entry["config"]]}
    fields = {name: _info(name, info) for name, info in merged.items() if info is not None}
    return ConfigSchema(entry["config"], fields, entry.get("translate"))


def training_arguments_fields() -> dict[str, FieldInfo]:
    """``transformers.TrainingArguments``' own fields (every config inherits them)."""
    data = _file()
    if data is None:
        from transformers import TrainingArguments

        return fields_of(TrainingArguments)
    return {name: _info(name, info) for name, info in data["training_arguments"].items()}


def model_config_fields() -> dict[str, FieldInfo]:
    """``trl.ModelConfig``'s fields (LoRA and 4/8-bit loading flags)."""
    data = _file()
    if data is None:
        from trl import ModelConfig

        return fields_of(ModelConfig)
    return {name: _info(name, info) for name, info in data["model_config"].items()}


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
        choices = f" One of: {', '.join(f.choices)}." if f.choices and len(f.choices) <= 8 else ""
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


# ---- writing -----------------------------------------------------------------------------------
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
        algorithms[alg] = {"config": live.name, "translate": live.translate}
        own = as_json(live.fields)
        # what differs from TrainingArguments (None: a field of it this config does not have)
        configs[live.name] = {k: v for k, v in own.items() if base.get(k) != v} | {
            k: None for k in base if k not in own
        }
    return {
        "versions": {name: metadata.version(name) for name in VERSIONED},
        "algorithms": algorithms,
        "training_arguments": base,
        "configs": configs,
        "model_config": as_json(fields_of(ModelConfig)),
    }


def text() -> str:
    return json.dumps(build(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        SCHEMA_FILE.write_text(text())
        return 0
    if args == ["--check"]:
        current = SCHEMA_FILE.read_text() if SCHEMA_FILE.is_file() else ""
        if current != text():
            print(f"{SCHEMA_FILE} is out of date: python -m hfrl.trainers.schema --write", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m hfrl.trainers.schema --write | --check", file=sys.stderr)
    return 2


__all__ = [
    "SCHEMA_FILE",
    "TRAINING_ARGUMENTS_BOUNDS",
    "option_rows",
    "ConfigSchema",
    "FieldInfo",
    "build",
    "config_schema",
    "declared_bounds",
    "fields_of",
    "generate_fields",
    "model_config_fields",
    "training_arguments_fields",
]

if __name__ == "__main__":
    raise SystemExit(main())
