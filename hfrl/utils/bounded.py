"""Bounded reading of what hfrl did not write: YAML and JSON read with limits on size, nesting, alias
expansion and the length of one value, a time budget for code that may never end (a chat template), and
the ranges a number read from a file or the command line must be in (:func:`bound_problem`).
Each refusal is one line (a ``ValueError``) that names what was read and says what to change, and it
comes at once: the limits are checked before (size) or while (the rest) the text is parsed, never by
walking what a parser built.

Why: a 430-byte YAML file of nested anchors and aliases ("billion laughs": 9 lists of 9 aliases of the
list before) is a graph of 9**9 values once expanded, which whatever walks it (the secret redaction, the
check for NaN) never finishes; a 20,000-deep list ends in ``RecursionError``; a 50 MB value takes
PyYAML's pure-Python reader minutes. The limits are far above any real config (a run's ``config.yaml``
is a few KiB, nests 3 levels and holds a few hundred values).

    from hfrl.utils.bounded import load_json, load_yaml, read_text, time_budget
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

MAX_TEXT_BYTES = 1 << 20  # 1 MiB: one config file, task file or command-line value (a config is a few KiB)
MAX_JSON_BYTES = 64 << 20  # 64 MiB: one JSON file (a tokenizer's tokenizer.json is a few MiB)
MAX_VALUE_CHARS = 64 << 10  # 64 KiB: one YAML value (a path, a prompt template, a chat template)
MAX_DEPTH = 100  # nesting levels of lists and mappings (a config nests 3 or 4)
# Values once every alias (*name) is replaced by what its anchor (&name) holds: a config has a few
# hundred; nine levels of nine aliases ("billion laughs") have 9**9 = 387,420,489.
MAX_VALUES = 10_000

# Caps: limits on what a number can mean, far above any real run (a value beyond one is a typo: 1e30).
MAX_COUNT = 10**7  # iterations, steps, epochs, "every N": ten million PPO iterations of the tiny model take a month
MAX_BATCH = 10**6  # prompts or completions in one batch, rollout or generate call
MAX_TOKENS = 10**6  # tokens in one prompt or completion: the longest context windows hold about 10^6
CAP_WHY = "a larger value cannot be meant: check it for a typo"
BOUND_KEYS = ("ge", "gt", "le", "lt", "cap", "note")  # what a number's bounds may say: bound_problem

# libyaml's parser when PyYAML was built with it: 20 to 50 times faster than the pure-Python one
FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class BoundedInputError(ValueError):
    """Text over one of this module's limits, or code over its time budget (the CLI: exit code 2)."""


def size_text(n: int) -> str:
    """``1048576`` -> ``'1 MiB'``; ``65536`` -> ``'64 KiB'``; ``300`` -> ``'300 bytes'``.

    >>> size_text(MAX_TEXT_BYTES), size_text(MAX_VALUE_CHARS), size_text(300), size_text(52_428_801)
    ('1 MiB', '64 KiB', '300 bytes', '50.0 MiB')
    """
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}" if n % scale == 0 else f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_size(n: int, what: str, limit: int | None, hint: str) -> None:
    """A one-line refusal when ``n`` bytes (or characters) are over ``limit`` (None: no limit)."""
    if limit is not None and n > limit:
        raise BoundedInputError(f"{what} is {size_text(n)}, over the limit of {size_text(limit)}; {hint}")


SIZE_HINT = "a config holds field: value lines: keep data in data files (--task FILE) and long text in files"


def read_text(
    path: str | os.PathLike[str], what: str, limit: int | None = MAX_TEXT_BYTES, hint: str = SIZE_HINT
) -> str:
    """The UTF-8 text of the file at ``path``, refused in one line when it is over ``limit`` bytes
    (checked before reading: at most ``limit + 1`` bytes are read, whatever the file claims) or not
    UTF-8. ``OSError`` (no such file, a folder) is the caller's to report."""
    with open(path, "rb") as fh:
        if limit is not None:
            check_size(os.fstat(fh.fileno()).st_size, what, limit, hint)
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None:
        check_size(len(data), what, limit, hint)  # a pipe or a file that grew: its size said nothing
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BoundedInputError(
            f"{what} is not UTF-8 text (byte 0x{data[err.start]:02x} at position {err.start}); save it as UTF-8"
        ) from None


# ---- numbers ---------------------------------------------------------------------------------------
def _shown(x: Any) -> str:
    """A bound as it reads: ``1``, ``0.5``, ``4294967295``."""
    return str(int(x)) if isinstance(x, float) and x.is_integer() and abs(x) < 1e16 else str(x)


def range_text(bounds: dict[str, Any]) -> str:
    """``>= 1``, ``> 0``, ``in (0, 1]``, ``in [0, 1)``: the range ``bounds`` allow (``cap`` aside).

    >>> range_text({"ge": 1}), range_text({"gt": 0, "le": 1}), range_text({"ge": 0, "lt": 1}), range_text({"le": 5})
    ('>= 1', 'in (0, 1]', 'in [0, 1)', '<= 5')
    """
    low = ("[", ">=", bounds["ge"]) if "ge" in bounds else ("(", ">", bounds["gt"]) if "gt" in bounds else None
    high = ("]", "<=", bounds["le"]) if "le" in bounds else (")", "<", bounds["lt"]) if "lt" in bounds else None
    if low and high:
        return f"in {low[0]}{_shown(low[2])}, {_shown(high[2])}{high[0]}"
    side = low or high
    return f"{side[1]} {_shown(side[2])}" if side else "any number"


def bound_problem(value: Any, bounds: dict[str, Any] | None, optional: bool = False) -> str | None:
    """What is wrong with the number ``value`` under ``bounds``, as the words after its name, or None
    (also for what is no number: its type is another check's). ``bounds`` may hold ``ge`` / ``gt``
    (the value must be >= / > this number), ``le`` / ``lt`` (<= / <), ``cap`` (a limit on what can be
    meant: :data:`MAX_COUNT`...) and ``note`` (why, shown in parentheses); ``optional``: None is allowed.

    >>> bound_problem(-3, {"ge": 1}), bound_problem(0, {"ge": 1, "note": "one per prompt"}, optional=True)
    ('must be >= 1', 'must be >= 1 or None (one per prompt)')
    >>> bound_problem(10**30, {"ge": 1, "cap": MAX_COUNT})
    'must be <= 10000000 (a larger value cannot be meant: check it for a typo)'
    >>> bound_problem(0.5, {"gt": 0, "le": 1}), bound_problem("abc", {"ge": 1})
    (None, None)
    """
    if not bounds or isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    ok = (
        ("ge" not in bounds or value >= bounds["ge"])
        and ("gt" not in bounds or value > bounds["gt"])
        and ("le" not in bounds or value <= bounds["le"])
        and ("lt" not in bounds or value < bounds["lt"])
    )
    if not ok:
        note = f" ({bounds['note']})" if bounds.get("note") else ""
        return f"must be {range_text(bounds)}{' or None' if optional else ''}{note}"
    if "cap" in bounds and value > bounds["cap"]:
        return f"must be <= {_shown(bounds['cap'])} ({CAP_WHY})"
    return None


# ---- YAML ------------------------------------------------------------------------------------------
def _refusal(what: str, event: Any, problem: str, change: str) -> BoundedInputError:
    line = getattr(getattr(event, "start_mark", None), "line", None)
    where = f" (line {line + 1})" if line is not None else ""
    return BoundedInputError(f"{what}: {problem}{where}; {change}")


def check_yaml(text: str, what: str, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Refuse, in one line, YAML whose lists and mappings nest deeper than ``max_depth``, that holds
    more than ``max_values`` values once its aliases are expanded (an alias counts as many values as
    its anchor holds: what walking the result would visit), an alias inside its own anchor (a loop),
    or one value longer than :data:`MAX_VALUE_CHARS`. It reads the event stream (libyaml's parser
    when there is one: no tree is built, nothing recurses) and stops at the first problem. A syntax
    error is ``yaml.YAMLError``, as from ``yaml.load``.

    >>> check_yaml("a: &a [x, x, x]\\nb: [*a, *a]", "c.yaml")  # mapping, 2 keys, [x, x, x], [*a, *a]: 1 + 2 + 4 + 1 + 2 * 4
    >>> check_yaml("a: &a [x, x, x]\\nb: [*a, *a]", "c.yaml", max_values=15)
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: c.yaml: YAML whose aliases (*name) expand to more than 15 values (line 2); write the values out, or use fewer aliases
    >>> check_yaml("[[[[1]]]]", "--x", max_depth=3)
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: --x: YAML nested deeper than 3 levels (line 1); flatten it: a config nests a few levels
    """  # noqa: E501 - a doctest's expected line
    try:
        _check_events(text, what, max_depth, max_values)
    except yaml.MarkedYAMLError as err:  # libyaml 0.2.5's scanner (PyYAML >= 6.0.4) stops at 1000 levels itself
        if "maximum nesting depth" not in str(err.problem):
            raise
        raise _refusal(what, err.problem_mark and _At(err.problem_mark), f"YAML nested deeper than {max_depth} levels",
                       "flatten it: a config nests a few levels") from None  # fmt: skip


class _At:
    """Where a scanner error was, as an event's ``start_mark``."""

    def __init__(self, mark: Any) -> None:
        self.start_mark = mark


def _check_events(text: str, what: str, max_depth: int, max_values: int) -> None:
    values, depth = 0, 0
    expanded: dict[str, int] = {}  # anchor -> the values it holds, aliases expanded
    open_anchors: list[tuple[str | None, int]] = []  # the collections being read: (anchor, values before)
    for event in yaml.parse(text, Loader=FAST_LOADER):
        if isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_anchors):
                raise _refusal(what, event, f"the alias *{event.anchor} is inside its own anchor", "remove the loop")
            values += expanded.get(event.anchor, 1)  # an unknown anchor: yaml.load says so
        elif isinstance(event, yaml.ScalarEvent):
            values += 1
            if len(event.value) > MAX_VALUE_CHARS:
                problem = f"a value of {size_text(len(event.value))}, over the limit of {size_text(MAX_VALUE_CHARS)}"
                raise _refusal(what, event, problem, "put long text in a file and give its path")
            if event.anchor:
                expanded[event.anchor] = 1
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            values, depth = values + 1, depth + 1
            open_anchors.append((event.anchor, values - 1))
            if depth > max_depth:
                problem = f"YAML nested deeper than {max_depth} levels"
                raise _refusal(what, event, problem, "flatten it: a config nests a few levels")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
            anchor, before = open_anchors.pop()
            if anchor:
                expanded[anchor] = values - before
        if values > max_values:
            problem = f"YAML whose aliases (*name) expand to more than {max_values} values"
            raise _refusal(what, event, problem, "write the values out, or use fewer aliases")


def load_yaml(text: str, what: str, loader: type = FAST_LOADER, limit: int | None = MAX_TEXT_BYTES) -> Any:
    """``yaml.load(text, loader)`` once ``text`` is within ``limit`` bytes and :func:`check_yaml`
    passes; syntax errors are ``yaml.YAMLError`` (the caller says where). ``loader``: a SafeLoader
    (``yaml.SafeLoader``, ``yaml.CSafeLoader`` or a subclass).

    >>> load_yaml("{a: 1, b: [x, y]}", "--x")
    {'a': 1, 'b': ['x', 'y']}
    >>> load_yaml("x" * 2_000_000, "--x")
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: --x is 1.9 MiB, over the limit of 1 MiB; a config holds ...
    """
    check_size(len(text.encode("utf-8", "surrogatepass")), what, limit, SIZE_HINT)
    check_yaml(text, what)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader, as the docstring says


def invalid_yaml(err: yaml.YAMLError, path: str | os.PathLike[str]) -> str:
    """``PATH:LINE: invalid YAML: PROBLEM``, one line for a syntax error in the file at ``path``."""
    mark = getattr(err, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    return f"{where}: invalid YAML: {getattr(err, 'problem', None) or str(err).splitlines()[0]}"


# ---- JSON ------------------------------------------------------------------------------------------
def json_depth(value: Any) -> int:
    """How deep lists and mappings nest in ``value`` (iterative: any depth).

    >>> json_depth(1), json_depth([1, {"a": [2]}]), json_depth({})
    (0, 3, 1)
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json(
    source: str | os.PathLike[str], what: str, limit: int | None = MAX_JSON_BYTES, max_depth: int = MAX_DEPTH
) -> Any:
    """JSON from ``source``: a path (``pathlib.Path`` or another ``os.PathLike``: the file is read with
    :func:`read_text`) or the JSON text itself (a ``str``), refused in one line when it is over
    ``limit`` bytes, nests deeper than ``max_depth`` (or than Python's parser recurses, some 900 levels:
    the same line), or is not JSON (with the line and column). ``OSError`` reading a file is the
    caller's to report.

    >>> load_json('{"a": [1, 2]}', "x.json")
    {'a': [1, 2]}
    >>> load_json("[" * 30000, "x.json")
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: x.json: JSON nested deeper than 100 levels; it is no file hfrl reads: ...
    >>> load_json('{"a": 1,}', "x.json")
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: x.json: invalid JSON at line 1, column 9: Expecting property name enclosed ...
    """
    hint = "it is no file hfrl reads: check that it is the right one"
    if isinstance(source, str):
        check_size(len(source.encode("utf-8", "surrogatepass")), what, limit, hint)
        text = source
    else:
        text = read_text(Path(source), what, limit, hint)
    too_deep = BoundedInputError(f"{what}: JSON nested deeper than {max_depth} levels; {hint}")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError as err:
        raise BoundedInputError(f"{what}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    if json_depth(value) > max_depth:
        raise too_deep
    return value


# ---- regular expressions ---------------------------------------------------------------------------
# A pattern read from a file is matched by Python's backtracking engine (PEFT's target_modules against
# every module name): a repeat inside a repeat ("(.*)*Z") or alternatives under one ("(\\w|\\w)*Z")
# backtrack exponentially, and k repeats in a row take (name length)**k steps. Real patterns have none of
# the first two and at most three repeats (PEFT's example: ".*decoder.*(SelfAttention|EncDecAttention).*(q|k|v|o)$").
MAX_PATTERN_REPEATS = 3
MAX_PATTERN_CHARS = 1000


def regex_problem(pattern: str) -> str | None:
    """What makes ``pattern`` slow to match (a few words), or None for a plain, safe pattern.

    >>> regex_problem(r".*\\.(q_proj|v_proj)$"), regex_problem("(.*)*Z"), regex_problem("(a|a)+Z")
    (None, 'a repeat inside a repeat', 'alternatives inside a repeat')
    >>> regex_problem(".*.*.*.*Z"), regex_problem("(")
    ('4 repeats, more than 3', 'not a regular expression: missing ), unterminated subpattern at position 0')
    """
    import re

    parser: Any = getattr(re, "_parser", None)  # Python 3.11+; sre_parse before
    if parser is None:
        import sre_parse as parser
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"{len(pattern):,} characters, more than {MAX_PATTERN_CHARS:,}"
    try:
        tree = parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as err:
        return f"not a regular expression: {err}"
    consts = parser  # the node names (MAX_REPEAT, BRANCH ...) live beside the parser
    repeats = (consts.MAX_REPEAT, consts.MIN_REPEAT, getattr(consts, "POSSESSIVE_REPEAT", consts.MAX_REPEAT))
    count = 0

    def walk(items: Any, inside: bool) -> str | None:
        nonlocal count
        for op, arg in items:
            if op in repeats:
                low, high, sub = arg
                if high > 1:  # *, +, {n,m}: ? and {0,1} do not repeat
                    if inside:
                        return "a repeat inside a repeat"
                    count += 1
                found = walk(sub, inside or high > 1)
            elif op is consts.BRANCH:
                if inside:
                    return "alternatives inside a repeat"
                found = next((p for p in (walk(b, inside) for b in arg[1]) if p), None)
            elif op is consts.SUBPATTERN:
                found = walk(arg[-1], inside)
            elif op in (consts.ASSERT, consts.ASSERT_NOT):
                found = walk(arg[1], inside)
            elif op is consts.GROUPREF_EXISTS:
                found = next((p for p in (walk(b, inside) for b in arg[1:] if b is not None) if p), None)
            elif op is getattr(consts, "ATOMIC_GROUP", None):
                found = walk(arg, inside)
            else:
                found = None
            if found:
                return found
        return None

    found = walk(tree, False)
    if found is None and count > MAX_PATTERN_REPEATS:
        found = f"{count} repeats, more than {MAX_PATTERN_REPEATS}"
    return found


# ---- time --------------------------------------------------------------------------------------------
class _Expired(Exception):  # noqa: N818 - raised by the alarm, turned into the caller's one line
    pass


def can_time() -> bool:
    """Whether :func:`time_budget` can interrupt: a Unix process's main thread (``SIGALRM``)."""
    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_budget(seconds: float, message: str) -> Iterator[None]:
    """Run the block for at most ``seconds``, then stop it with ``BoundedInputError(message)``.

    ``SIGALRM`` interrupts pure-Python work (a template's loops) between two bytecodes; a call inside a C
    library that does not return to Python is not interrupted. A no-op where there is no ``SIGALRM``
    (Windows) or off the main thread; inside another budget that ends sooner, that one stays in charge
    (an outer budget that ends later is re-armed with what is left of it).

    >>> with time_budget(0.05, "too slow"):
    ...     while True:
    ...         pass
    Traceback (most recent call last):
    hfrl.utils.bounded.BoundedInputError: too slow
    """
    outer, _ = signal.getitimer(signal.ITIMER_REAL) if can_time() else (0.0, 0.0)
    if not can_time() or (outer and outer <= seconds):
        yield
        return
    armed = [True]  # False once the block is over: an alarm then is ignored

    def expire(signum: int, frame: Any) -> None:
        if armed[0]:
            raise _Expired

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Expired:
        raise BoundedInputError(message) from None
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


__all__ = [
    "BOUND_KEYS",
    "CAP_WHY",
    "FAST_LOADER",
    "MAX_BATCH",
    "MAX_COUNT",
    "MAX_TOKENS",
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_VALUES",
    "MAX_VALUE_CHARS",
    "MAX_PATTERN_REPEATS",
    "BoundedInputError",
    "bound_problem",
    "can_time",
    "invalid_yaml",
    "check_size",
    "check_yaml",
    "json_depth",
    "load_json",
    "load_yaml",
    "range_text",
    "read_text",
    "regex_problem",
    "size_text",
    "time_budget",
]
