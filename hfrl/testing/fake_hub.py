"""A fake of the Hub's file API for tests: repositories at given commits whose files are local
folders, served behind huggingface_hub's own HTTP client (an httpx ``MockTransport`` installed with
``set_client_factory``), so ``hf://`` globs, ``HfFileSystem``, ``HfApi`` and ``datasets``' Parquet
loading run their real code against it. Anything not served (another repository, another revision,
a file that is not there) is a 404, as on the Hub.

    with serve_repos({("dataset", "GEM/gem", SHA): Path("tasks/fixtures/common_gen")}) as hub:
        load_dataset("parquet", data_files={"train": f"hf://datasets/GEM/gem@{SHA}/common_gen/train/*.parquet"})
    hub.requests  # every request the libraries sent
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

PLURAL = {"dataset": "datasets", "model": "models"}


class FakeHubFiles:
    """The read endpoints: repository info at a revision, tree listings, paths-info, and
    ``resolve`` downloads, for ``repos``: ``{(repo_type, repo_id, revision): folder}``."""

    def __init__(self, repos: dict[tuple[str, str, str], Path]):
        self.repos = {
            key: {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}
            for key, folder in repos.items()
        }
        self.requests: list[Any] = []

    def _files(self, kind: str, repo: str, revision: str) -> dict[str, bytes] | None:
        for (repo_type, repo_id, rev), files in self.repos.items():
            if PLURAL[repo_type] == kind and repo_id == repo and rev == unquote(revision):
                return files
        return None

    @staticmethod
    def _entry(files: dict[str, bytes], path: str) -> dict[str, Any]:
        if path in files:
            blob = files[path]
            return {"type": "file", "path": path, "size": len(blob), "oid": hashlib.sha1(blob).hexdigest()}
        return {"type": "directory", "path": path, "oid": "0" * 40, "size": 0}

    def __call__(self, request: Any) -> Any:
        httpx = _client_module()
        self.requests.append(request)
        path = unquote(request.url.path)
        match = re.fullmatch(r"/api/(datasets|models)/([^/]+/[^/]+)/(revision|tree|paths-info)/([^/]+)/?(.*)", path)
        if match:
            kind, repo, what, revision, rest = match.groups()
            files = self._files(kind, repo, revision)
            if files is None:
                return httpx.Response(404, json={"error": f"{repo}@{revision}: no such repository or revision"})
            if what == "revision":
                sha = unquote(revision)
                siblings = [{"rfilename": f, "size": len(b)} for f, b in files.items()]
                return httpx.Response(200, json={"id": repo, "sha": sha, "siblings": siblings})
            if what == "tree":
                return httpx.Response(200, json=self._tree(files, rest.strip("/"), request.url.params.get("recursive")))
            return httpx.Response(200, json=[self._entry(files, p) for p in self._paths(request) if p in files])
        match = re.fullmatch(r"/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if match:
            kind = "datasets" if match.group(1) else "models"
            files = self._files(kind, match.group(2), match.group(3))
            if files is not None and match.group(4) in files:
                blob = files[match.group(4)]
                headers = {
                    "x-repo-commit": unquote(match.group(3)),
                    "etag": f'"{hashlib.sha1(blob).hexdigest()}"',
                    "content-length": str(len(blob)),
                }
                return httpx.Response(200, headers=headers, content=blob if request.method == "GET" else b"")
        return httpx.Response(404, json={"error": f"not on the fake Hub: {request.method} {path}"})

    def _tree(self, files: dict[str, bytes], prefix: str, recursive: str | None) -> list[dict[str, Any]]:
        out: set[str] = set()
        for name in files:
            if prefix and not name.startswith(prefix + "/"):
                continue
            parts = (name[len(prefix) + 1 :] if prefix else name).split("/")
            depth = range(1, len(parts) + 1) if recursive in ("true", "True", "1") else range(1, 2)
            out.update("/".join(([prefix] if prefix else []) + parts[:i]) for i in depth)
        return [self._entry(files, p) for p in sorted(out)]

    @staticmethod
    def _paths(request: Any) -> list[str]:
        import json
        from urllib.parse import parse_qs

        body = request.read().decode()
        try:
            return list(json.loads(body).get("paths", []))
        except ValueError:
            return parse_qs(body).get("paths", [])


def _client_module() -> Any:
    """huggingface_hub's HTTP client module: httpx2 in newer versions, httpx before (hence ``Any``)."""
    from huggingface_hub.utils import _http

    http: Any = _http
    return getattr(http, "httpx2", None) or http.httpx


@contextlib.contextmanager
def serve_repos(repos: dict[tuple[str, str, str], Path]) -> Iterator[FakeHubFiles]:
    """Serve ``repos`` (see :class:`FakeHubFiles`) in online mode for the duration of the block."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    httpx = _client_module()
    fake = FakeHubFiles(repos)
    offline = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    try:
        import datasets.config as datasets_config
    except ImportError:  # pragma: no cover - datasets is a dependency
        datasets_config = None
    datasets_offline = getattr(datasets_config, "HF_HUB_OFFLINE", None)
    if datasets_config is not None:
        datasets_config.HF_HUB_OFFLINE = False
    _http.set_client_factory(lambda: httpx.Client(transport=httpx.MockTransport(fake)))
    try:
        yield fake
    finally:
        _http.set_client_factory(_http.default_client_factory)
        constants.HF_HUB_OFFLINE = offline
        if datasets_config is not None:
            datasets_config.HF_HUB_OFFLINE = datasets_offline


__all__ = ["FakeHubFiles", "serve_repos"]
