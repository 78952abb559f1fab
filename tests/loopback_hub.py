"""A dataset server on 127.0.0.1 for the download tests: the Hugging Face Hub's HTTP answers that
``huggingface_hub`` (and so Minari's ``hf://`` remote) relies on, plus plain files for the CIFAR
fetch, with faults to switch on.

The Hub part answers what the clients ask (read from ``huggingface_hub`` 2.4 and
``minari.storage.remotes.huggingface``):

- ``GET /api/datasets?author=A&search=S``: the dataset repositories of ``A`` whose name holds ``S``
  (Minari lists a namespace with it);
- ``GET /api/datasets/A/R[/revision/REV]``: the repository's commit (``sha``) and files;
- ``GET /api/datasets/A/R/tree/REV[/PATH]?recursive=...``: the files under ``PATH``, each with its
  size and git blob id, and for LFS files (``.hdf5``) the SHA-256 and size of the content;
- ``HEAD`` and ``GET /datasets/A/R/resolve/REV/PATH``: the file, with ``X-Repo-Commit``, an
  ``ETag`` (the git blob id, or for LFS files ``X-Linked-Etag`` with the SHA-256 and
  ``X-Linked-Size``), and byte ranges (``Range`` -> 206), which the client uses to resume.

An unknown repository, revision or file answers 404 with the Hub's ``X-Error-Code``. The server
speaks HTTP/1.0, one request per connection, so once it is stopped no client can reach it over a
connection kept open. It stops itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: Files the Hub stores in LFS (the rest are plain git blobs).
LFS_SUFFIXES = (".hdf5", ".tar.gz", ".zip")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def minari_namespace_files(root: Path, group: str) -> dict[str, bytes]:
    """The files of the repository that holds Minari namespace ``group`` (e.g. ``mujoco``), built
    from a Minari root written by ``minari``: every file under ``root/group``, and the namespace's
    ``namespace_metadata.json`` listing its datasets and sub-namespaces (what ``minari upload``
    records there)."""
    base = root / group
    files = {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}
    datasets = sorted(
        f"{group}/{rel[: -len('/data/metadata.json')]}"
        for rel in files
        if rel.endswith("/data/metadata.json")
    )
    namespaces = sorted(
        f"{group}/{rel[: -len('/namespace_metadata.json')]}"
        for rel in files
        if rel.endswith("/namespace_metadata.json")
    )
    meta = json.loads(files.get("namespace_metadata.json", b"{}"))
    files["namespace_metadata.json"] = json.dumps(
        {**meta, "datasets": datasets, "namespaces": namespaces}
    ).encode()
    return files


class LoopbackHub:
    """The server. ``repos``: ``{"owner/name": {path: bytes}}`` (dataset repositories);
    ``static``: ``{url path: bytes}`` served as plain files.

    Faults, settable while it runs:
        ``altered``: ``{path: "truncate" | "flip" | "cut"}``; the file is served cut to half its
            length (with a matching ``Content-Length``), with one byte changed, or announced whole
            and its connection closed halfway, while the listings and ``HEAD`` keep announcing the
            true size and checksums.
        ``stop_after``: once this many LFS files have been sent, the server stops when the next
            one is asked for, leaving that request unanswered.
        ``stall``: a path whose ``GET`` sends half of the file, then one byte every 0.5 s while
            ``stall`` names it and the server runs, then drops the connection (``stalled`` is set
            when it starts to hold it).
        ``refuse``: paths whose ``GET`` answers 503.

    ``requests`` records ``(method, path, Range header)`` of every request.
    """

    def __init__(
        self,
        repos: Mapping[str, Mapping[str, bytes]] | None = None,
        static: Mapping[str, bytes] | None = None,
        lifetime: float = 300.0,
    ):
        self.repos = {k: dict(v) for k, v in (repos or {}).items()}
        self.static = dict(static or {})
        self.sha = {
            repo: hashlib.sha1(
                json.dumps(sorted((p, git_blob_id(d)) for p, d in files.items())).encode()
            ).hexdigest()
            for repo, files in self.repos.items()
        }
        self.altered: dict[str, str] = {}
        self.stop_after: int | None = None
        self.stall: str | None = None
        self.refuse: set[str] = set()
        self.stalled = threading.Event()
        self.requests: list[tuple[str, str, str | None]] = []
        self.lfs_sent = 0
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    def start(self) -> LoopbackHub:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent; callable from a request's thread)."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def running(self) -> bool:
        return not self._stopped.is_set()

    def __enter__(self) -> LoopbackHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def served(self, method: str, pattern: str) -> list[tuple[str, str, str | None]]:
        """The recorded requests of ``method`` whose path matches ``pattern`` (a regex)."""
        return [r for r in list(self.requests) if r[0] == method and re.search(pattern, r[1])]


def _handler(hub: LoopbackHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _json(self, payload, status: int = 200, headers: Mapping[str, str] = ()) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in dict(headers).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

        def _not_found(self, code: str, message: str, repo: str | None = None) -> None:
            headers = {"X-Error-Code": code, "X-Error-Message": message}
            if repo in hub.sha:
                headers["X-Repo-Commit"] = hub.sha[repo]
            self._json({"error": message}, 404, headers)

        def _answer(self, body: bool) -> None:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            query = urllib.parse.parse_qs(url.query)
            hub.requests.append((self.command, urllib.parse.unquote(path), self.headers["Range"]))
            if path in hub.static:
                return self._file(path, hub.static[path], body, repo=None)
            if path == "/api/datasets":
                author = query.get("author", [""])[0]
                search = query.get("search", [])
                found = [
                    {
                        "id": repo,
                        "author": repo.split("/")[0],
                        "sha": hub.sha[repo],
                        "private": False,
                    }
                    for repo in hub.repos
                    if repo.split("/")[0] == author and all(s in repo.split("/")[1] for s in search)
                ]
                return self._json(found)
            match = re.fullmatch(
                r"/api/datasets/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(/.*)?)?", path
            )
            if match:
                return self._api(*match.groups(), query)
            match = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if match:
                repo, revision, name = (urllib.parse.unquote(g) for g in match.groups())
                if repo not in hub.repos:
                    return self._not_found("RepoNotFound", f"Repository {repo} not found")
                if revision not in ("main", hub.sha[repo]):
                    return self._not_found(
                        "RevisionNotFound", f"Revision {revision} not found", repo
                    )
                if name not in hub.repos[repo]:
                    return self._not_found("EntryNotFound", f"{name} not found", repo)
                return self._file(name, hub.repos[repo][name], body, repo=repo)
            self._json({"error": f"no route {path}"}, 404)

        def _api(self, repo, kind, revision, sub, query) -> None:
            if repo not in hub.repos:
                return self._not_found("RepoNotFound", f"Repository {repo} not found")
            revision = urllib.parse.unquote(revision or "main")
            if revision not in ("main", hub.sha[repo]):
                return self._not_found("RevisionNotFound", f"Revision {revision} not found", repo)
            files = hub.repos[repo]
            if kind != "tree":
                siblings = [{"rfilename": name} for name in sorted(files)]
                return self._json(
                    {"id": repo, "sha": hub.sha[repo], "private": False, "siblings": siblings}
                )
            prefix = urllib.parse.unquote(sub or "").strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries, folders = [], set()
            for name in sorted(files):
                if prefix and not name.startswith(prefix + "/"):
                    continue
                rest = name[len(prefix) + 1 :] if prefix else name
                if not recursive and "/" in rest:
                    folders.add(f"{prefix}/{rest.split('/')[0]}" if prefix else rest.split("/")[0])
                    continue
                data = files[name]
                entry = {"type": "file", "path": name, "size": len(data), "oid": git_blob_id(data)}
                if name.endswith(LFS_SUFFIXES):
                    sha = hashlib.sha256(data).hexdigest()
                    entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 134}
                entries.append(entry)
            if prefix and not entries and not folders:
                return self._not_found("EntryNotFound", f"{prefix} not found", repo)
            entries += [
                {"type": "directory", "path": f, "oid": git_blob_id(f.encode())}
                for f in sorted(folders)
            ]
            self._json(entries)

        def _file(self, name: str, data: bytes, body: bool, repo: str | None) -> None:
            lfs = name.endswith(LFS_SUFFIXES)
            headers = {"Accept-Ranges": "bytes"}
            if repo is not None:
                headers["X-Repo-Commit"] = hub.sha[repo]
                if lfs:
                    headers["X-Linked-Etag"] = f'"{hashlib.sha256(data).hexdigest()}"'
                    headers["X-Linked-Size"] = str(len(data))
                headers["ETag"] = f'"{git_blob_id(data)}"'
            if body and name in hub.refuse:
                return self._json({"error": "unavailable"}, 503)
            if body and lfs and hub.stop_after is not None and hub.lfs_sent >= hub.stop_after:
                hub.stop()  # this request's thread is not the server's: stopping here is safe
                return
            sent = data
            if body:  # faults touch the content only, never what HEAD and the listings announce
                fault = hub.altered.get(name)
                if fault == "truncate":
                    sent = data[: len(data) // 2]
                elif fault == "flip":
                    middle = len(data) // 2
                    sent = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
            status, start = 200, 0
            match = re.fullmatch(r"bytes=(\d+)-", self.headers["Range"] or "")
            if match and int(match.group(1)) < len(sent):
                status, start = 206, int(match.group(1))
                headers["Content-Range"] = f"bytes {start}-{len(sent) - 1}/{len(sent)}"
            part = sent[start:]
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(part)))
            if body and hub.altered.get(name) == "cut":
                part = part[: len(part) // 2]
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if not body:
                return
            if hub.stall == name:
                self.wfile.write(part[: len(part) // 2])
                self.wfile.flush()
                hub.stalled.set()
                rest = iter(part[len(part) // 2 :])
                while hub.running and hub.stall == name:  # a byte now and then: no read timeout
                    self.wfile.write(bytes([next(rest, 0)]))
                    self.wfile.flush()
                    time.sleep(0.5)
                return
            self.wfile.write(part)
            if lfs:
                hub.lfs_sent += 1

    return Handler
