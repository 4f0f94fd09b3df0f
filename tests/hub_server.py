"""A loopback server speaking the subset of the Hugging Face Hub HTTP API that `huggingface_hub` 2.4,
`transformers` 5 and `evaluate` 0.4 use to create repos, upload (regular base64 files and Git LFS
"basic" transfers) and download files. It keeps a real commit history per repo in memory so that
revision info, tree listings and `resolve` behave like the Hub's.

What the clients send (read from huggingface_hub/_commit_api.py, lfs.py, file_download.py, hf_api.py):
- ``POST /api/repos/create`` {name, organization, type, sdk, visibility} -> {url} (409 when it exists)
- ``POST /api/validate-yaml`` {content, repoType} before a README.md is committed
- ``POST /api/{type}s/{repo}/preupload/{rev}`` {files: [{path, sample (base64), size}]}
  -> {files: [{path, uploadMode: regular|lfs, shouldIgnore, oid}]}
- ``POST /{prefix}{repo}.git/info/lfs/objects/batch`` (Git LFS batch API, basic transfer) then
  ``PUT`` of the bytes to the href we hand out. Xet uploads are not spoken: clients must run with
  ``HF_HUB_DISABLE_XET=1`` (hf_xet is installed here and would otherwise be tried first).
- ``POST /api/{type}s/{repo}/commit/{rev}`` NDJSON: header, file (base64), lfsFile (sha256 oid),
  deletedFile, deletedFolder -> {commitUrl, commitOid}
- ``GET /api/{type}s/{repo}[/revision/{rev}]`` repo info with siblings and sha
- ``GET /api/{type}s/{repo}/tree/{rev}[/{path}]?recursive=`` listing
- ``HEAD|GET /{prefix}{repo}/resolve/{rev}/{path}`` with ETag, X-Repo-Commit, Content-Length;
  404s carry ``X-Error-Code`` (RepoNotFound / RevisionNotFound / EntryNotFound) as the Hub does, so
  clients treat missing optional files as missing rather than as network errors.

Run standalone: ``python tests/hub_server.py --port 8765``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

REPO_TYPES = ("model", "dataset", "space")
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub stores binary files and anything >= 10 MB in LFS


def git_blob_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n").encode()


@dataclass
class StoredFile:
    content: bytes
    lfs_sha256: str | None = None  # set for LFS files

    @property
    def oid(self) -> str:  # git blob oid (of the pointer for LFS files), like the Hub's tree API
        if self.lfs_sha256 is None:
            return git_blob_oid(self.content)
        return git_blob_oid(lfs_pointer(self.lfs_sha256, len(self.content)))

    @property
    def etag(self) -> str:  # the Hub's ETag: git oid for regular files, sha256 for LFS files
        return self.lfs_sha256 or self.oid


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, StoredFile]
    date: float


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    sdk: str | None
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        oid = self.branches.get(revision, revision)
        return self.commits.get(oid)


class HubState:
    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status): for debugging tests

    def create_repo(self, repo_type: str, repo_id: str, private: bool, sdk: str | None) -> Repo:
        repo = Repo(repo_type, repo_id, private, sdk)
        initial_files = {".gitattributes": StoredFile(b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n")}
        self.commit(repo, "initial commit", initial_files)
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def stored_blobs(self) -> list[tuple[str, bytes]]:
        """(where, content) of every file of every commit of every repo and of every uploaded LFS
        object, including ones no commit references: what a test scans for leaked content."""
        with self.lock:
            blobs = [(f"{repo_type}s/{repo_id}@{commit.oid[:8]}:{path}", stored.content)
                     for (repo_type, repo_id), repo in self.repos.items()
                     for commit in repo.commits.values() for path, stored in commit.files.items()]
            return blobs + [(f"lfs:{oid}", content) for oid, content in self.lfs_objects.items()]

    @staticmethod
    def commit(repo: Repo, message: str, files: dict[str, StoredFile], branch: str = "main") -> Commit:
        parent = repo.branches.get(branch)
        digest = hashlib.sha1(json.dumps([parent, message, time.time_ns(),
                                          sorted((p, f.oid) for p, f in files.items())]).encode())
        commit = Commit(digest.hexdigest(), parent, message, files, time.time())
        repo.commits[commit.oid] = commit
        repo.branches[branch] = commit.oid
        return commit


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "HubServer"

    # ----------------------------------------------------------------------------- plumbing
    def log_message(self, format, *args):  # noqa: A002 - quiet; requests are recorded in state
        pass

    @property
    def state(self) -> HubState:
        return self.server.state

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str = "application/json", head: bool = False) -> None:
        self.state.requests.append((self.command, self.path, status))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, status: int, payload, headers: dict[str, str] | None = None, head: bool = False) -> None:
        self._send(status, json.dumps(payload).encode(), headers, head=head)

    def _error(self, status: int, message: str, code: str | None = None, head: bool = False) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers, head=head)

    def _repo(self, repo_type: str, repo_id: str, head: bool = False) -> Repo | None:
        repo = self.state.repos.get((repo_type, repo_id))
        if repo is None:
            self._error(404, f"Repository Not Found for url: {self.path}.", "RepoNotFound", head=head)
        return repo

    def _commit_of(self, repo: Repo, revision: str, head: bool = False) -> Commit | None:
        commit = repo.resolve(unquote(revision))
        if commit is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound", head=head)
        return commit

    # ----------------------------------------------------------------------------- routing
    API_REPO = re.compile(r"^/api/(models|datasets|spaces)/([^/]+/[^/]+?)(?:/(revision|tree|preupload|commit)"
                          r"/([^/]+)(?:/(.*))?)?$")
    LFS_BATCH = re.compile(r"^/(?:(datasets|spaces)/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch$")
    RESOLVE = re.compile(r"^/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")

    def do_HEAD(self):
        self._dispatch(head=True)

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def _dispatch(self, head: bool = False) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        try:
            with self.state.lock:
                self._route(path, query, head)
        except Exception as err:  # report server bugs to the client instead of hanging it
            self._error(500, f"loopback hub server error: {type(err).__name__}: {err}")

    def _route(self, path: str, query: dict, head: bool) -> None:
        method = self.command
        if method == "GET" and path == "/api/whoami-v2":
            return self._json(200, {"type": "user", "name": self.server.user, "fullname": "Test User",
                                    "orgs": [], "auth": {"type": "access_token",
                                                         "accessToken": {"role": "write"}}})
        if method == "POST" and path == "/api/repos/create":
            return self._create_repo(json.loads(self._body() or b"{}"))
        if method == "POST" and path == "/api/validate-yaml":
            self._body()
            return self._json(200, {"errors": [], "warnings": []})
        if method == "PUT" and path.startswith("/_lfs/"):
            return self._lfs_put(path.removeprefix("/_lfs/"))
        if match := self.API_REPO.match(path):
            kind, repo_id, action, revision, rest = match.groups()
            repo_type = kind[:-1]
            if action is None and method == "GET":
                return self._repo_info(repo_type, repo_id, "main")
            if action == "revision" and method == "GET":
                return self._repo_info(repo_type, repo_id, revision)
            if action == "tree" and method == "GET":
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                return self._tree(repo_type, repo_id, revision, rest or "", recursive)
            if action == "preupload" and method == "POST":
                return self._preupload(repo_type, repo_id, revision, json.loads(self._body()))
            if action == "commit" and method == "POST":
                return self._commit(repo_type, repo_id, revision, self._body())
        if (match := self.LFS_BATCH.match(path)) and method == "POST":
            kind, repo_id = match.groups()
            return self._lfs_batch(json.loads(self._body()))
        if (match := self.RESOLVE.match(path)) and method in ("GET", "HEAD"):
            kind, repo_id, revision, file_path = match.groups()
            repo_type = kind[:-1] if kind else "model"
            return self._resolve(repo_type, repo_id, revision, unquote(file_path), head)
        if method in ("POST", "PUT"):
            self._body()
        self._error(404, f"loopback hub server: no route for {method} {path}")

    # ----------------------------------------------------------------------------- endpoints
    def _create_repo(self, payload: dict) -> None:
        repo_type = payload.get("type") or "model"
        namespace = payload.get("organization") or self.server.user
        repo_id = f"{namespace}/{payload['name']}"
        url = f"{self.endpoint}/{URL_PREFIX[repo_type]}{repo_id}"
        if repo_type == "space" and not payload.get("sdk"):
            return self._error(400, "A Space needs an sdk")
        if (repo_type, repo_id) in self.state.repos:
            return self._json(409, {"error": "You already created this repo", "url": url})
        private = payload.get("private") or payload.get("visibility") == "private"
        self.state.create_repo(repo_type, repo_id, bool(private), payload.get("sdk"))
        self._json(200, {"url": url, "name": repo_id})

    def _repo_info(self, repo_type: str, repo_id: str, revision: str) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        info = {"id": repo_id, "_id": repo_id, "sha": commit.oid, "private": repo.private,
                "lastModified": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(commit.date)),
                "tags": [], "downloads": 0, "likes": 0,
                "siblings": [{"rfilename": p} for p in sorted(commit.files)]}
        if repo_type == "space":
            info["sdk"] = repo.sdk
        self._json(200, info)

    def _tree(self, repo_type: str, repo_id: str, revision: str, prefix: str, recursive: bool) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        prefix = unquote(prefix).strip("/")
        base = f"{prefix}/" if prefix else ""
        entries, seen_dirs = [], set()
        for file_path in sorted(commit.files):
            if not file_path.startswith(base):
                continue
            relative = file_path[len(base):]
            parts = relative.split("/")
            for depth in range(1, len(parts)):  # directories on the way
                if not recursive and depth > 1:
                    break
                directory = base + "/".join(parts[:depth])
                if directory not in seen_dirs:
                    seen_dirs.add(directory)
                    entries.append({"type": "directory", "oid": hashlib.sha1(directory.encode()).hexdigest(),
                                    "size": 0, "path": directory})
            if not recursive and len(parts) > 1:
                continue
            stored = commit.files[file_path]
            entry = {"type": "file", "oid": stored.oid, "size": len(stored.content), "path": file_path}
            if stored.lfs_sha256:
                entry["lfs"] = {"oid": stored.lfs_sha256, "size": len(stored.content),
                                "pointerSize": len(lfs_pointer(stored.lfs_sha256, len(stored.content)))}
            entries.append(entry)
        if prefix and not entries:
            return self._error(404, f"{prefix} does not exist on {revision}", "EntryNotFound")
        self._json(200, entries)

    def _preupload(self, repo_type: str, repo_id: str, revision: str, payload: dict) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        files = []
        for item in payload["files"]:
            sample = base64.b64decode(item["sample"])
            binary = b"\0" in sample
            existing = commit.files.get(item["path"])
            files.append({"path": item["path"], "shouldIgnore": False,
                          "uploadMode": "lfs" if binary or item["size"] >= LFS_THRESHOLD else "regular",
                          "oid": existing.oid if existing else None})
        self._json(200, {"files": files, "commitOid": commit.oid})

    def _lfs_batch(self, payload: dict) -> None:
        objects = []
        for obj in payload["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.state.lfs_objects:
                entry["actions"] = {"upload": {"href": f"{self.endpoint}/_lfs/{obj['oid']}", "header": {}}}
            objects.append(entry)
        self._json(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _lfs_put(self, oid: str) -> None:
        content = self._body()
        if hashlib.sha256(content).hexdigest() != oid:
            return self._error(400, "LFS object does not match its sha256")
        self.state.lfs_objects[oid] = content
        self._send(200, b"")

    def _commit(self, repo_type: str, repo_id: str, revision: str, body: bytes) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        branch = unquote(revision)
        if branch not in repo.branches:
            return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        head = repo.commits[repo.branches[branch]]
        files = dict(head.files)
        message = ""
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                message = value.get("summary", "")
                parent = value.get("parentCommit")
                if parent is not None and parent != head.oid:
                    return self._error(412, "parentCommit is not the head of the branch")
            elif key == "file":
                if value.get("encoding") != "base64":
                    return self._error(400, f"unsupported encoding {value.get('encoding')}")
                files[value["path"]] = StoredFile(base64.b64decode(value["content"]))
            elif key == "lfsFile":
                content = self.state.lfs_objects.get(value["oid"])
                if content is None or len(content) != value["size"]:
                    return self._error(422, f"LFS object {value['oid']} was not uploaded")
                files[value["path"]] = StoredFile(content, lfs_sha256=value["oid"])
            elif key == "deletedFile":
                if files.pop(value["path"], None) is None:
                    return self._error(404, f"{value['path']} does not exist", "EntryNotFound")
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                files = {p: f for p, f in files.items() if not p.startswith(folder)}
            else:
                return self._error(400, f"loopback hub server: unsupported commit operation {key}")
        commit = self.state.commit(repo, message, files, branch)
        url = f"{self.endpoint}/{URL_PREFIX[repo_type]}{repo_id}/commit/{commit.oid}"
        self._json(200, {"success": True, "commitOid": commit.oid, "commitUrl": url, "pullRequestUrl": None})

    def _resolve(self, repo_type: str, repo_id: str, revision: str, file_path: str, head: bool) -> None:
        if (repo := self._repo(repo_type, repo_id, head)) is None:
            return
        if (commit := self._commit_of(repo, revision, head)) is None:
            return
        stored = commit.files.get(file_path)
        if stored is None:
            return self._error(404, f"Entry not found: {file_path}", "EntryNotFound", head=head)
        content = stored.content
        headers = {"ETag": f'"{stored.etag}"', "X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes"}
        status = 200
        range_header = self.headers.get("Range")
        if range_header and (match := re.match(r"bytes=(\d+)-(\d*)$", range_header)) and not head:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(content) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            content, status = content[start:end + 1], 206
        self._send(status, content, headers, content_type="application/octet-stream", head=head)


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, user: str = "tester"):
        super().__init__((host, port), HubHandler)
        self.state = HubState()
        self.user = user
        self.endpoint = f"http://{host}:{self.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> "HubServer":
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = HubServer(args.host, args.port)
    print(server.endpoint, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
