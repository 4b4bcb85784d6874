"""A function run in a forked child with a hard time limit and a memory cap: for code read from a file
that may never return to Python (a chat template's ``{{ 'x' * 2000000000 }}``, one C-level operation
that ``SIGALRM`` cannot interrupt) or may fill the machine's memory (a 10 GB string built in a loop).

The child is forked at the first call, so it holds what the caller held (a tokenizer: nothing is
pickled but each call's argument and result) and serves the calls that follow; it ends itself after
:data:`IDLE_SECONDS` without one, so that it never keeps the parent's freed memory alive for long (a
forked child shares its pages until either side writes). A call over its time is ended with ``SIGKILL``;
the child's address space is capped at what the parent had mapped plus :data:`HEADROOM_BYTES`, so that
a huge allocation is a ``MemoryError`` in the child, reported, not the machine swapping.

    worker = ForkedWorker(lambda messages: tokenizer.apply_chat_template(messages, tokenize=False))
    text = worker.call(messages, seconds=5.0)   # WorkerTimeout, WorkerFailed (with the child's error)
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

IDLE_SECONDS = 2.0  # the child ends after this long without a call
HEADROOM_BYTES = 1 << 30  # 1 GiB of address space over the parent's: a chat template's prompt is a few MiB
_HEADER = struct.Struct("<Q")


class WorkerTimeout(Exception):  # noqa: N818 - the caller turns it into its one line
    """The call did not return within its time: the child was killed."""


class WorkerFailed(Exception):  # noqa: N818
    """The call raised in the child (``kind`` its exception's class name), or the child died."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def can_fork() -> bool:
    """Whether :class:`ForkedWorker` runs here: Linux (``fork`` is unsafe with macOS's system libraries)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _address_space() -> int | None:
    """The bytes this process has mapped (``/proc/self/statm``'s first field), or None."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _close_all_but(*keep: int) -> None:
    """Close every descriptor of this (child) process but 0-2 and ``keep``."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _write(fd: int, data: bytes) -> None:
    data = _HEADER.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; :class:`WorkerTimeout` past ``deadline``."""
    chunks, left = [], n
    while left:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise WorkerTimeout
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ForkedWorker:
    """``fn`` called in a forked child (see the module docstring); ``max_result_bytes`` caps the pickled
    result the parent accepts."""

    def __init__(self, fn: Callable[[Any], Any], max_result_bytes: int = 64 << 20) -> None:
        self.fn = fn
        self.max_result_bytes = max_result_bytes
        self.pid: int | None = None
        self._to_child = self._from_child = -1

    # ---- the child ---------------------------------------------------------------------------------
    def _serve(self, requests: int, replies: int) -> None:
        """The child's loop: a call per request until none comes for IDLE_SECONDS or the parent is gone."""
        for name in ("SIGTERM", "SIGINT", "SIGALRM"):  # the parent's handlers are not the child's
            signal.signal(getattr(signal, name), signal.SIG_DFL if name != "SIGINT" else signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the libraries' warnings are the parent's to show, once
        os.dup2(devnull, 2)
        mapped = _address_space()
        if mapped is not None:
            import resource

            limit = mapped + HEADROOM_BYTES
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        while True:
            ready, _, _ = select.select([requests], [], [], IDLE_SECONDS)
            if not ready:
                return
            header = _read_exactly(requests, _HEADER.size, None)
            if header is None:
                return
            (size,) = _HEADER.unpack(header)
            arg = pickle.loads(_read_exactly(requests, size, None) or b"")
            try:
                reply = pickle.dumps(("ok", self.fn(arg)))
            except BaseException as err:  # noqa: BLE001 - whatever it raised goes back as words
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                try:
                    reply = pickle.dumps(("error", type(err).__name__, first[:1000]))
                except MemoryError:
                    reply = pickle.dumps(("error", "MemoryError", ""))
            _write(replies, reply)

    def _start(self) -> None:
        requests, to_child = os.pipe()
        from_child, replies = os.pipe()
        # tokenizers prints a warning in a child forked after its threads ran, unless this is set
        unset, pid = "TOKENIZERS_PARALLELISM" not in os.environ, -1
        if unset:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
                pid = os.fork()
        finally:
            if unset and pid != 0:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
        if pid == 0:  # the child: never returns into the parent's code
            code = 0
            try:
                _close_all_but(requests, replies)  # a lock's descriptor (the run folder's) is the parent's alone
                self._serve(requests, replies)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(requests)
        os.close(replies)
        self.pid, self._to_child, self._from_child = pid, to_child, from_child

    def close(self, kill: bool = False) -> None:
        """End the child (``kill``: at once) and reap it."""
        if self.pid is None:
            return
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0 if kill else os.WNOHANG)
        self.pid = None

    def _alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done = self.pid
        if done:  # it ended itself (idle): its pipes go with it
            for fd in (self._to_child, self._from_child):
                os.close(fd)
            self.pid = None
        return self.pid is not None

    # ---- the parent --------------------------------------------------------------------------------
    def call(self, arg: Any, seconds: float) -> Any:
        """``fn(arg)`` in the child, within ``seconds``: its result, or :class:`WorkerTimeout` (the child
        is killed) or :class:`WorkerFailed` (what it raised, or that it died)."""
        for attempt in (1, 2):  # a child that ended itself (idle) just as the call came: once more
            if not self._alive():
                self._start()
            deadline = time.monotonic() + seconds
            try:
                _write(self._to_child, pickle.dumps(arg))
                header = _read_exactly(self._from_child, _HEADER.size, deadline)
                if header is not None:
                    (size,) = _HEADER.unpack(header)
                    if size > self.max_result_bytes:
                        self.close(kill=True)
                        raise WorkerFailed("ResultTooLarge", f"a result of {size:,} bytes")
                    data = _read_exactly(self._from_child, size, deadline)
                    if data is not None:
                        reply = pickle.loads(data)
                        if reply[0] == "ok":
                            return reply[1]
                        raise WorkerFailed(reply[1], reply[2])
            except WorkerTimeout:
                self.close(kill=True)
                raise
            except BrokenPipeError:
                pass
            pid = self.pid
            self.close(kill=True)
            if attempt == 2 or pid is None:
                break
        raise WorkerFailed("WorkerDied", "the process it ran in ended (out of memory?)")


__all__ = ["ForkedWorker", "WorkerFailed", "WorkerTimeout", "can_fork"]
