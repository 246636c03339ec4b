"""A Hugging Face hub on 127.0.0.1 serving the repositories under a directory (`root/<repo>/`),
so that `python -m nmtbench snapshot` runs its real code path (`snapshot_download`, with
HF_ENDPOINT pointing here). Only what snapshot_download calls: the model info (of a revision),
the file tree, and each file (HEAD for its metadata, then GET), with the headers
huggingface_hub reads (X-Repo-Commit, ETag, X-Linked-Etag/-Size for LFS files)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin")
REVISION = re.compile(r"/api/models/(?P<repo>.+?)(?:/revision/(?P<rev>[^/]+))?$")
TREE = re.compile(r"/api/models/(?P<repo>.+?)/tree/(?P<rev>[^/]+)(?:/.*)?$")
RESOLVE = re.compile(r"/(?P<repo>.+?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class HubServer:
    """The hub in a thread, on `port` (else a free one); `url` is HF_ENDPOINT's value."""

    def __init__(self, root: Path, port: int = 0):
        handler = type("Handler", (_HubHandler,), {"root": Path(root)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _files(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*") if p.is_file())


def _commit(repo: Path) -> str:
    """A repository's revision: a digest of its files' names and contents (40 hex digits)."""
    digest = hashlib.sha1(usedforsecurity=False)
    for path in _files(repo):
        digest.update(str(path.relative_to(repo)).encode() + path.read_bytes())
    return digest.hexdigest()


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class _HubHandler(BaseHTTPRequestHandler):
    root: Path

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def _repo(self, name: str) -> Path | None:
        repo = self.root / unquote(name)
        return repo if repo.is_dir() and self.root in repo.resolve().parents else None

    def _answer(self, body: bool) -> None:
        path = urlsplit(self.path).path
        for pattern, reply in ((REVISION, self._info), (TREE, self._tree),
                               (RESOLVE, self._file)):
            if (match := pattern.match(path)) and (repo := self._repo(match["repo"])):
                return reply(repo, match, body)
        self._send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"},
                   body)

    def _info(self, repo: Path, match: re.Match, body: bool) -> None:
        name = str(repo.relative_to(self.root))
        info = {"id": name, "modelId": name, "sha": _commit(repo), "private": False,
                "siblings": [{"rfilename": str(p.relative_to(repo))} for p in _files(repo)]}
        self._send(200, json.dumps(info).encode(), {}, body)

    def _tree(self, repo: Path, match: re.Match, body: bool) -> None:
        entries = []
        for p in _files(repo):
            data = p.read_bytes()
            entry = {"type": "file", "oid": _blob_id(data), "size": len(data),
                     "path": str(p.relative_to(repo))}
            if p.suffix in LFS_SUFFIXES:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            entries.append(entry)
        self._send(200, json.dumps(entries).encode(), {}, body)

    def _file(self, repo: Path, match: re.Match, body: bool) -> None:
        path = repo / unquote(match["file"])
        if not path.is_file() or repo.resolve() not in path.resolve().parents:
            return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"}, body)
        data = path.read_bytes()
        headers = {"X-Repo-Commit": _commit(repo), "ETag": f'"{_blob_id(data)}"'}
        if path.suffix in LFS_SUFFIXES:
            headers |= {"X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
                        "X-Linked-Size": str(len(data))}
        self._send(200, data, headers, body)

    def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(data)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(data)
