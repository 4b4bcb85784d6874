"""Tasks: each packages a dataset builder, its reward pipeline, metrics and default configs.

A task is named by its registered name (``hfrl list tasks``), a ``module:attr`` path to your own
builder (a function returning a :class:`Task`, or a :class:`Task`), or your own data: a ``.jsonl``,
``.json``, ``.csv``, ``.tsv`` or ``.parquet`` file, a folder of them, or a Hub dataset id
(``hfrl.tasks.own_data``). Keyword arguments go to the builder (``data_dir``, ``prompt_column``...).

>>> task = load_task("numbers")
>>> sorted(task.dataset), task.reward_funcs[0].__name__
(['test', 'train', 'validation'], 'increasing_numbers')
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from hfrl.tasks.base import TASK_OVERRIDES, Task, TaskSpec
from hfrl.utils.registry import import_path, is_code_path, unknown

TASKS: dict[str, str] = {
    "numbers": "hfrl.tasks.numbers:build",
    "dates": "hfrl.tasks.dates:build",
    "arith_chains": "hfrl.tasks.arith_chains:build",
    "hh": "hfrl.tasks.hh:build",
    # GRUE (RL4LMs' benchmark)
    "imdb": "hfrl.tasks.imdb:build",
    "common_gen": "hfrl.tasks.common_gen:build",
    "cnn_dailymail": "hfrl.tasks.cnn_dailymail:build",
    "totto": "hfrl.tasks.totto:build",
    "narrative_qa": "hfrl.tasks.narrative_qa:build",
    "iwslt2017": "hfrl.tasks.iwslt2017:build",
    "wmt16": "hfrl.tasks.wmt16:build",
    "daily_dialog": "hfrl.tasks.daily_dialog:build",
    # Leftover Lunch (A-LoL's tasks beyond hh)
    "reddit_pos": "hfrl.tasks.reddit_pos:build",
    "reddit_neg": "hfrl.tasks.reddit_neg:build",
    "wow": "hfrl.tasks.wow:build",
    "faithdial": "hfrl.tasks.faithdial:build",
    "faithdial_wow": "hfrl.tasks.faithdial_wow:build",
    "comet": "hfrl.tasks.comet:build",
    # real human-rated text, offline: the movie-review snippets of the vaderSentiment sdist (PyPI)
    "movie_snippets": "hfrl.tasks.movie_snippets:build",
}

UNKNOWN_HINT = (
    ", or a 'module:attr' path to your own task, a data file (.jsonl, .json, .csv, .tsv, .parquet), "
    "a folder of them or a Hub dataset id"
)


def check_task_name(name: str) -> None:
    """Fail at once (before torch and transformers are imported) for a name that can be no task."""
    from hfrl.tasks import own_data

    if name not in TASKS and not own_data.is_own_data(name) and not is_code_path(name):
        raise unknown("task", name, TASKS, hint=UNKNOWN_HINT)
    from hfrl.utils.hub_access import missing_local_path

    if name not in TASKS and not is_code_path(name) and missing_local_path(name):
        raise FileNotFoundError(f"--task {name}: no such data file or folder (see `hfrl list tasks` for the tasks)")


def task_builder(name: str) -> Any:
    """The builder behind a task name: a registered task, a ``module:attr`` path, or own data."""
    from hfrl.tasks import own_data

    if name in TASKS:
        return import_path(TASKS[name])
    if is_code_path(name):  # before own data: a name that reads as module:attr is always code
        try:
            return import_path(name)
        except (ImportError, AttributeError) as err:
            from hfrl.utils.registry import UnknownNameError

            raise UnknownNameError(f"cannot import task {name!r}: {err}") from err
    if own_data.is_own_data(name):
        return own_data.builder(name)
    raise unknown("task", name, TASKS, hint=UNKNOWN_HINT)


def check_arguments(builder: Any, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as the builder takes them (:func:`argument_value`: ``train_size=1e3`` is 1000); a
    one-line error with the builder's arguments when ``kwargs`` holds one it does not take, or naming
    the argument whose value is of the wrong kind (``train_size=abc``)."""
    try:
        signature = inspect.signature(builder)
    except (TypeError, ValueError):  # builtins and the like: let the call decide
        return kwargs
    params = signature.parameters
    known = {p for p, param in params.items() if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)}
    if any(param.kind is param.VAR_KEYWORD for param in params.values()):
        if not getattr(builder, "__module__", "").startswith("hfrl.tasks"):
            return kwargs  # user code taking **kwargs: its own business
        known |= set(TASK_OVERRIDES)  # hfrl's builders pass the rest to task_from_yaml
    for key in kwargs:
        if key not in known:
            raise unknown(f"argument of task {name!r}", key, known)
    return {
        key: argument_value(value, params[key].annotation, f"task {name!r}: argument {key}") if key in params else value
        for key, value in kwargs.items()
    }


# A task argument's kinds, by the name its builder's annotation gives them (``int | None``), and how a
# value read as YAML becomes one; an annotation naming any other type (Any, os.PathLike) is not checked.
_KINDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "text", "dict": "a mapping"}
_KINDS |= {"list": "a list", "None": "null"}


def _kinds(annotation: Any) -> list[str] | None:
    """``"int | dict[str, int] | None"`` -> ``["int", "dict", "None"]``; None when some kind is not in
    :data:`_KINDS` (or the annotation is not written as text: ``from __future__ import annotations``)."""
    text = annotation.__name__ if isinstance(annotation, type) else annotation
    if not isinstance(text, str):
        return None
    kinds = [part.strip().split("[")[0] for part in text.split("|")]
    return kinds if all(kind in _KINDS for kind in kinds) else None


def _as_kind(value: Any, kind: str) -> tuple[bool, Any]:
    """(whether ``value`` can be a ``kind``, that value): a number written as text (``1e3``, YAML 1.1's
    reading) is a number; a whole float a whole number; a number a text."""
    if kind == "None" or kind == "bool":
        return (value is None, None) if kind == "None" else (isinstance(value, bool), value)
    if isinstance(value, bool) or value is None:
        return False, value
    if kind in ("int", "float") and isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except ValueError:
            return False, value
        if kind == "float":
            return math.isfinite(number), value if isinstance(value, (int, float)) else number
        return number.is_integer(), int(number) if number.is_integer() else value
    if kind == "str":
        return isinstance(value, (str, int, float)), value if isinstance(value, str) else str(value)
    containers: dict[str, tuple[type, ...]] = {"dict": (dict,), "list": (list, tuple)}
    return isinstance(value, containers.get(kind, ())), value


def argument_value(value: Any, annotation: Any, where: str) -> Any:
    """``value`` (read as YAML) as the annotation ``annotation`` takes it: as it is when its type is one
    the annotation names, else made one (``"1e3"`` for an ``int``: 1000); a one-line ``ValueError``
    naming ``where`` when it cannot be.

    >>> argument_value("1e3", "int", "train_size"), argument_value(None, "int | None", "max_samples")
    (1000, None)
    >>> argument_value("abc", "int", "task 'numbers': argument train_size")
    Traceback (most recent call last):
    ValueError: task 'numbers': argument train_size takes a whole number, got 'abc'
    >>> argument_value([1], "float | int | None", "test_size")
    Traceback (most recent call last):
    ValueError: test_size takes a number or a whole number or null, got [1]
    """
    kinds = _kinds(annotation)
    if kinds is None:
        return value
    exact = {"int": int, "float": float, "str": str, "dict": dict, "list": list}
    for kind in kinds:  # a value of a kind the annotation names stays as it is
        if kind in exact and isinstance(value, exact[kind]) and not isinstance(value, bool):
            return value
    for kind in kinds:
        ok, made = _as_kind(value, kind)
        if ok:
            return made
    raise ValueError(f"{where} takes {' or '.join(_KINDS[kind] for kind in kinds)}, got {value!r}")


def _checked_builder(name: str, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The builder of ``name`` (a function, or a ready :class:`Task`) and ``kwargs`` as it takes them,
    once they fit it (:func:`check_arguments`)."""
    builder = task_builder(name)
    if isinstance(builder, Task):
        if kwargs:
            raise ValueError(f"task {name!r} is a ready Task object and takes no arguments; got {sorted(kwargs)}")
        return builder, kwargs
    if not callable(builder):
        raise ValueError(f"task {name!r} is neither a Task nor a function returning one ({type(builder).__name__})")
    return builder, check_arguments(builder, name, kwargs)


def describe_task(name: str, /, **kwargs: Any) -> TaskSpec | None:
    """What task ``name`` built with ``kwargs`` declares (name, default model, per-algorithm configs),
    read without building its dataset, rewards or metrics, and with ``kwargs`` checked as
    :func:`load_task` checks them. A registered task: its YAML as its module's ``task_spec(**kwargs)``
    shapes it (the plain YAML for a module without one), then ``reward_config`` and the name, model,
    description and configs arguments. Your data: ``own_data.yaml`` named after the data. A ready
    :class:`Task`: its own fields. None for a builder function of your own: only building it tells.

    >>> spec = describe_task("imdb", reward="vader", data="openings")
    >>> spec.name, spec.default_model, spec.configs["ppo"]["learning_rate"]
    ('imdb', 'lvwerra/gpt2-imdb', 4e-05)
    """
    from hfrl.tasks import own_data
    from hfrl.tasks.base import read_task_yaml

    builder, kwargs = _checked_builder(name, kwargs)
    if isinstance(builder, Task):
        return TaskSpec.of(builder)
    if name in TASKS:
        module = import_path(TASKS[name].partition(":")[0])
        shaped = getattr(module, "task_spec", None)
        spec = shaped(**kwargs) if shaped is not None else read_task_yaml(module.__file__)
        return TaskSpec.from_yaml(spec, kwargs)
    if not is_code_path(name) and own_data.is_own_data(name):
        return TaskSpec.from_yaml(own_data.task_spec(name), kwargs)
    return None


def load_task(name: str, /, **kwargs: Any) -> Task:
    """The task ``name`` built with ``kwargs`` (see the module docstring for what ``name`` can be)."""
    from hfrl.utils.quiet import quiet_dataset_bars

    builder, kwargs = _checked_builder(name, kwargs)
    if isinstance(builder, Task):
        return builder
    with quiet_dataset_bars():  # datasets' "Generating train split" bars of a task's own files
        task = builder(**kwargs)
    if not isinstance(task, Task):
        raise ValueError(f"task builder {name!r} returned {type(task).__name__}, not an hfrl.tasks.Task")
    return task


__all__ = ["TASKS", "Task", "TaskSpec", "describe_task", "load_task"]
