"""A folder hfrl did not write in this command is data, all the way down: every path read or written
inside it stays inside it.

A run folder, a model or adapter folder and a checkpoint may come from anyone (a download, an archive,
a bug report). A link inside one that points out of it would make hfrl read a file of yours (``vocab.txt
-> ~/.ssh/id_rsa``, which ``hfrl export`` copied and ``hfrl push`` uploaded) or write over one
(``predictions/test.jsonl -> ~/.bashrc``, which ``hfrl eval`` overwrote with prompts from the data).
So every command that opens such a folder checks it first (:func:`check_folder`): each link in it must
resolve inside it, and each entry must be a regular file, a folder or such a link (a FIFO named
``vocab.txt`` would hang a read forever). The first that is not is refused in one line naming it and
its target. One exception keeps the Hub's own cache loadable by path: a snapshot folder of it
(``models--org--name/snapshots/REV``) holds links into its repository's ``blobs/``.

``hfrl export`` and ``hfrl push`` then copy regular files only (:func:`regular_file`), each scanned
whole, in blocks, for a string shaped like a Hub token (:func:`find_token_in_file`).

    from hfrl.utils.folders import check_folder
    check_folder("runs/numbers-ppo", "run folder")   # the path, resolved; or a one-line FolderLinkError
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

MAX_ENTRIES = 200_000  # a run with thousands of checkpoints has tens of thousands: beyond this it is no run
_HUB_CACHE_KINDS = ("models--", "datasets--", "spaces--")


class FolderLinkError(ValueError):
    """A folder holds a link that leaves it, or an entry that is not a file, folder or link (exit code 2)."""


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _allowed_roots(root: str) -> tuple[str, ...]:
    """The folder itself, and for a Hub cache snapshot (``.../models--org--name/snapshots/REV``) its
    repository's ``blobs/``, where huggingface_hub keeps the files its links point at."""
    parent = os.path.dirname(root)
    repo = os.path.dirname(parent)
    if os.path.basename(parent) == "snapshots" and os.path.basename(repo).startswith(_HUB_CACHE_KINDS):
        return root, os.path.join(repo, "blobs")
    return (root,)


def folder_problem(path: str | os.PathLike[str]) -> str | None:
    """What makes ``path`` unsafe to read or write inside, in a few words, or None: the first link whose
    target leaves it, or an entry that is not a regular file, a folder or a link. Links are not
    followed (a link to a folder is checked as a link, and its target stays inside or is refused).

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.symlink("/etc/hostname", os.path.join(root, "vocab.txt"))
    >>> folder_problem(root)
    'vocab.txt is a link to /etc/hostname, outside the folder'
    """
    root = os.path.realpath(path)
    allowed = _allowed_roots(root)
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            seen += 1
            if seen > MAX_ENTRIES:
                return f"it holds more than {MAX_ENTRIES:,} files and folders, more than any run or model"
            entry = os.path.join(folder, name)
            relative = os.path.relpath(entry, root)
            mode = os.lstat(entry).st_mode
            if stat.S_ISLNK(mode):
                target = os.path.realpath(entry)
                if not any(_within(target, r) for r in allowed):
                    return f"{relative} is a link to {target}, outside the folder"
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return f"{relative} is not a regular file or folder (a {_kind(mode)})"
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def check_folder(path: str | os.PathLike[str], what: str = "folder") -> Path:
    """``path`` resolved, once :func:`folder_problem` finds nothing; else a one-line
    :class:`FolderLinkError` naming the folder (``what``: "run folder", "model folder"...), the entry
    and what to do. Nothing happens for a path that is not a folder."""
    if not os.path.isdir(path):
        return Path(path)
    problem = folder_problem(path)
    if problem is not None:
        raise FolderLinkError(
            f"{what} {path}: {problem}; hfrl reads and writes only inside a folder it did not make: replace the "
            "link with a copy of the file it points to, or remove it"
        )
    return Path(os.path.realpath(path))


def inside(root: str | os.PathLike[str], relative: str | os.PathLike[str]) -> Path:
    """``root / relative`` resolved, or a one-line :class:`FolderLinkError` when it leaves ``root``
    (``..``, an absolute path, a link out).

    >>> inside("/data/run", "eval/test.json").as_posix()
    '/data/run/eval/test.json'
    >>> inside("/data/run", "../../etc/passwd")
    Traceback (most recent call last):
    hfrl.utils.folders.FolderLinkError: ../../etc/passwd leaves /data/run; name a file inside it
    """
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, relative))
    if not _within(target, real_root):
        raise FolderLinkError(f"{relative} leaves {root}; name a file inside it")
    return Path(target)


def regular_file(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """``path`` (a file inside ``root``) resolved, when what it names is a regular file inside ``root``;
    else a one-line :class:`FolderLinkError`: what ``hfrl export`` and ``hfrl push`` copy."""
    target = inside(root, os.path.relpath(path, root))
    mode = os.stat(target).st_mode
    if not stat.S_ISREG(mode):
        raise FolderLinkError(f"{path} is not a regular file (a {_kind(mode)}); hfrl copies regular files only")
    return target


_BLOCK = 8 * 2**20
_OVERLAP = 256  # longer than any token


def _blocks(path: str | os.PathLike[str], overlap: int) -> Iterator[bytes]:
    """The file read whole in blocks of 8 MiB, each starting with the last ``overlap`` bytes of the one
    before: a string shorter than ``overlap`` that straddles two blocks is seen whole in the second."""
    tail = b""
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            data = tail + block
            yield data
            tail = data[-overlap:] if overlap else b""


def find_token_in_file(path: str | os.PathLike[str]) -> str | None:
    """The first string shaped like a Hub token in the file ``path``, read whole (weights included: a
    token appended to a 70 MB file is found), shortened for a message; or None.

    >>> import tempfile
    >>> f = tempfile.NamedTemporaryFile(delete=False); _ = f.write(b"x" * 10_000_000 + b"hf_" + b"a" * 34); f.close()
    >>> find_token_in_file(f.name)
    'hf_aaaa...'
    """
    from hfrl.utils.secrets import find_token

    return next((found for data in _blocks(path, _OVERLAP) if (found := find_token(data))), None)


def refuse_token_in_file(path: str | os.PathLike[str], what: str) -> None:
    """A one-line ``SecretInFileError`` when the file ``path`` (``what`` in the message) holds a string
    shaped like a Hub token anywhere (:func:`find_token_in_file`)."""
    from hfrl.utils.secrets import token_refusal

    found = find_token_in_file(path)
    if found:
        raise token_refusal(found, what)


def file_contains(path: str | os.PathLike[str], needle: bytes) -> bool:
    """Whether the file ``path`` holds ``needle`` anywhere (read whole, in blocks)."""
    return bool(needle) and any(needle in data for data in _blocks(path, len(needle) - 1))


__all__ = [
    "FolderLinkError",
    "check_folder",
    "file_contains",
    "find_token_in_file",
    "folder_problem",
    "inside",
    "refuse_token_in_file",
    "regular_file",
]
