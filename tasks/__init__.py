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
from typing import Any

from hfrl.tasks.base import TASK_OVERRIDES, Task, TaskSpec
from hfrl.utils.registry import import_path, is_code_path, unknown

TASKS: dict[str, str] = {
    "numbers": "hfrl.tasks.numbers:build",
    "dates": "hfrl.tasks.dates:build",
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


def check_arguments(builder: Any, name: str, kwargs: dict[str, Any]) -> None:
    """Fail with the builder's arguments when ``kwargs`` holds one it does not take."""
    try:
        signature = inspect.signature(builder)
    except (TypeError, ValueError):  # builtins and the like: let the call decide
        return
    params = signature.parameters
    known = {p for p, param in params.items() if param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)}
    if any(param.kind is param.VAR_KEYWORD for param in params.values()):
        if not getattr(builder, "__module__", "").startswith("hfrl.tasks"):
            return  # user code taking **kwargs: its own business
        known |= set(TASK_OVERRIDES)  # hfrl's builders pass the rest to task_from_yaml
    for key in kwargs:
        if key not in known:
            raise unknown(f"argument of task {name!r}", key, known)


def _checked_builder(name: str, kwargs: dict[str, Any]) -> Any:
    """The builder of ``name`` (a function, or a ready :class:`Task`) once ``kwargs`` fit it."""
    builder = task_builder(name)
    if isinstance(builder, Task):
        if kwargs:
            raise ValueError(f"task {name!r} is a ready Task object and takes no arguments; got {sorted(kwargs)}")
        return builder
    if not callable(builder):
        raise ValueError(f"task {name!r} is neither a Task nor a function returning one ({type(builder).__name__})")
    check_arguments(builder, name, kwargs)
    return builder


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

    builder = _checked_builder(name, kwargs)
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
    builder = _checked_builder(name, kwargs)
    if isinstance(builder, Task):
        return builder
    task = builder(**kwargs)
    if not isinstance(task, Task):
        raise ValueError(f"task builder {name!r} returned {type(task).__name__}, not an hfrl.tasks.Task")
    return task


__all__ = ["TASKS", "Task", "TaskSpec", "describe_task", "load_task"]
