"""Task data that is not on the Hub: files in a local folder laid out as their publisher ships them.

The folder is the task's ``data_dir`` argument, else ``$HFRL_DATA_DIR/<folder name>`` (the same
variable the Hub-backed tasks read their mirrors from); a missing file fails with one line that says
where to download the data and where to put it.

    from hfrl.tasks.local_data import local_files
    local_files("reddit_pos", "reddit_comment_scores", ["comments_positive.csv"], get="https://...")
"""

from __future__ import annotations

import os

from hfrl.tasks.data import DATA_DIR_ENV, local_data_dir


def local_files(
    task: str, folder: str, files: list[str], data_dir: str | os.PathLike[str] | None = None, get: str = ""
) -> dict[str, str]:
    """``{file name: path}`` of ``files`` in the task's local folder (see the module docstring)."""
    root = local_data_dir(folder, data_dir)
    where = f"get it from {get} and " if get else ""
    if root is None:
        raise FileNotFoundError(
            f"task {task!r} reads local files ({', '.join(files)}) that are not on the Hub: {where}"
            f"put them in $HFRL_DATA_DIR/{folder}/ or pass --task-arg data_dir=FOLDER"
        )
    paths = {name: os.path.join(root, name) for name in files}
    missing = [name for name, path in paths.items() if not os.path.isfile(path)]
    if missing:
        source = "data_dir" if data_dir is not None else f"${DATA_DIR_ENV}/{folder}"
        raise FileNotFoundError(
            f"task {task!r}: no {missing[0]} in {root} ({source}); {where}put {', '.join(files)} there"
        )
    return paths


__all__ = ["local_files"]
