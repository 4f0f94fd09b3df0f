"""A loopback server speaking the subset of the Hugging Face Hub HTTP API that `huggingface_hub` 2.4,
`transformers` 5 and `evaluate` 0.4 use to create repos, upload (regular base64 files and Git LFS
"basic" transfers) and download files, with the Hub's rules. It keeps a real commit history per repo
in memory so that revision info, tree listings and `resolve` behave like the Hub's.

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
- ``POST /api/{type}s/{repo}/branch/{branch}`` {startingPoint}, ``POST /api/{type}s/{repo}/tag/{rev}``
  {tag, message}, ``GET /api/{type}s/{repo}/refs``
- ``GET /api/{type}s/{repo}[/revision/{rev}]`` repo info with siblings, sha, cardData (and sdk)
- ``GET /api/{type}s/{repo}/tree/{rev}[/{path}]?recursive=`` listing (LFS files with their pointer)
- ``HEAD|GET /{prefix}{repo}/resolve/{rev}/{path}`` with ETag, X-Repo-Commit, Content-Length;
  404s carry ``X-Error-Code`` (RepoNotFound / RevisionNotFound / EntryNotFound) as the Hub does, so
  clients treat missing optional files as missing rather than as network errors.

The Hub's rules that are enforced (each has a test in tests/test_hub.py):
- LFS: the preupload answer is ``lfs`` for a file that matches an LFS pattern of the repo's
  ``.gitattributes`` (the Hub's default list: *.safetensors, *.bin, *.gz, ...), is 10 MB or larger,
  or is binary (a NUL byte or invalid UTF-8 in its 512-byte sample: PNG, gzip); a commit carrying
  such a file as a regular base64 ``file`` is rejected (400), as the Hub rejects binary and large
  files pushed outside LFS. ``lfsFile`` operations must name an uploaded object of that size. The
  tree records LFS files as pointers (``lfs: {oid, size, pointerSize}``; the git oid is the
  pointer's), and ``resolve`` of an LFS file redirects (302, ``X-Linked-Etag`` / ``X-Linked-Size``)
  to a "CDN" on another host name (``localhost`` instead of ``127.0.0.1``), as the Hub does.
- Revisions: files, repo info, trees and preupload/commit are served by branch name, tag or full
  commit sha; an unknown revision is a 404 with ``X-Error-Code: RevisionNotFound`` (what
  huggingface_hub turns into ``RevisionNotFoundError`` and what ``evaluate``'s ``v0.4.x`` tag lookup
  meets before it falls back to ``main``).
- README.md metadata is validated with huggingface_hub's own parsing (``ModelCard`` /
  ``DatasetCard`` / ``SpaceCard`` with ``ignore_metadata_errors=False``: YAML syntax, a mapping,
  ``model-index`` through ``repocard_data.model_index_to_eval_results``) plus the Hub's schema rules
  that huggingface_hub does not check (every model-index result has task.type, dataset.type and
  .name and a non-empty metrics list with numeric values; list fields hold strings); the
  validate-yaml endpoint answers 400 with the errors and a commit with such a README is rejected.
- Spaces: created with an sdk (gradio, streamlit, docker, static) and an initial README.md whose
  metadata names it; every README.md committed to a Space must keep ``sdk:`` (a known one) and,
  for gradio/streamlit, ``app_file:``; colorFrom/colorTo must be Hub colours; short_description at
  most 60 characters. Repo info reports the README's sdk.

Run standalone: ``python tests/hub_server.py --port 8765``.
"""

from __future__ import annotations

import argparse
import base64
import codecs
import fnmatch
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
SAMPLE_SIZE = 512  # bytes of each file huggingface_hub sends to preupload
# The .gitattributes the Hub writes into every new repo (its LFS patterns).
HUB_GITATTRIBUTES = "".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n" for pattern in (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*", "*.tar",
    "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*")).encode()
SPACE_SDKS = ("gradio", "streamlit", "docker", "static")
SPACE_COLORS = ("red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray")
SHA1 = re.compile(r"^[0-9a-f]{40}$")


def git_blob_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n").encode()


# ----------------------------------------------------------------------------- the Hub's rules
def lfs_patterns(gitattributes: bytes | None) -> list[str]:
    """The patterns of a .gitattributes file that have ``filter=lfs``."""
    patterns = []
    for line in (gitattributes or b"").decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) > 1 and not parts[0].startswith("#") and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def matches_gitattributes(path: str, pattern: str) -> bool:
    """git's attribute matching: a pattern without "/" matches the file name at any depth, one with
    "/" the whole path ("**" crossing folders)."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    regex = re.escape(pattern.lstrip("/")).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
    regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    return re.fullmatch(regex, path) is not None


def is_binary(sample: bytes, complete: bool = False) -> bool:
    """Binary as git / the Hub see it: a NUL byte, or bytes that are not UTF-8 (a multi-byte
    character cut at the end of a sample that is not the ``complete`` file does not count)."""
    if b"\0" in sample:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=complete)
    except UnicodeDecodeError:
        return True
    return False


def lfs_reason(path: str, size: int, sample: bytes, gitattributes: bytes | None) -> str | None:
    """Why the Hub stores this file in LFS (None: a regular git blob). Empty files are always regular."""
    if size == 0:
        return None
    if any(matches_gitattributes(path, p) for p in lfs_patterns(gitattributes)):
        return "it matches an LFS pattern of .gitattributes"
    if size >= LFS_THRESHOLD:
        return "it is larger than 10 MiB"
    if is_binary(sample[:SAMPLE_SIZE], complete=size <= len(sample[:SAMPLE_SIZE])):
        return "it is a binary file"
    return None


def card_metadata(content: str) -> dict | None:
    """The YAML metadata block of a README.md as huggingface_hub reads it (None: no block)."""
    import yaml
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(content)
    if not match:
        return None
    data = yaml.safe_load(match.group(2))
    return data if isinstance(data, dict) else ({} if data is None else data)


def _is_str_list(value) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def card_errors(content: str, repo_type: str) -> list[str]:
    """The Hub's verdict on a README.md: [] when its metadata is valid for ``repo_type``."""
    from huggingface_hub import DatasetCard, ModelCard, SpaceCard

    card_class = {"model": ModelCard, "dataset": DatasetCard, "space": SpaceCard}[repo_type]
    try:  # huggingface_hub's own parsing: YAML syntax, a mapping, model-index -> EvalResult
        card_class(content, ignore_metadata_errors=False)
        meta = card_metadata(content)
    except Exception as err:
        return [f"{type(err).__name__}: {' '.join(str(err).split())}"]
    errors = []
    if meta is None:
        meta = {}
    for key in ("tags", "datasets", "metrics", "language", "models", "base_model"):
        if key in meta and meta[key] is not None and not _is_str_list(meta[key]):
            errors.append(f'"{key}" must be a string or a list of strings')
    for key in ("license", "pipeline_tag", "library_name", "title", "sdk", "app_file"):
        if key in meta and not isinstance(meta[key], str):
            errors.append(f'"{key}" must be a string')
    if "model-index" in meta:
        index = meta["model-index"]
        if repo_type != "model":
            errors.append('"model-index" is only allowed in model cards')
        elif not isinstance(index, list) or not index:
            errors.append('"model-index" must be a non-empty list')
        else:
            for i, model in enumerate(index):
                where = f"model-index[{i}]"
                if not isinstance(model, dict) or not isinstance(model.get("name"), str):
                    errors.append(f'"{where}.name" is required')
                    continue
                results = model.get("results")
                if not isinstance(results, list) or not results:
                    errors.append(f'"{where}.results" must be a non-empty list')
                    continue
                for j, result in enumerate(results):
                    at = f"{where}.results[{j}]"
                    task, dataset = result.get("task") or {}, result.get("dataset") or {}
                    if not isinstance(task.get("type"), str):
                        errors.append(f'"{at}.task.type" is required')
                    for field_name in ("type", "name"):
                        if not isinstance(dataset.get(field_name), str):
                            errors.append(f'"{at}.dataset.{field_name}" is required')
                    metrics = result.get("metrics")
                    if not isinstance(metrics, list) or not metrics:
                        errors.append(f'"{at}.metrics" must be a non-empty list')
                        continue
                    for k, metric in enumerate(metrics):
                        value = metric.get("value") if isinstance(metric, dict) else None
                        if not isinstance(metric, dict) or not isinstance(metric.get("type"), str):
                            errors.append(f'"{at}.metrics[{k}].type" is required')
                        elif isinstance(value, bool) or not isinstance(value, (int, float, str)):
                            errors.append(f'"{at}.metrics[{k}].value" must be a number or a string')
    if repo_type == "space":
        sdk = meta.get("sdk")
        if sdk not in SPACE_SDKS:
            errors.append(f'"sdk" must be one of {", ".join(SPACE_SDKS)} (got {sdk!r}): a Space needs its sdk')
        elif sdk in ("gradio", "streamlit") and not meta.get("app_file"):
            errors.append(f'"app_file" is required for a {sdk} Space')
        for key in ("colorFrom", "colorTo"):
            if key in meta and meta[key] not in SPACE_COLORS:
                errors.append(f'"{key}" must be one of {", ".join(SPACE_COLORS)}')
        if len(str(meta.get("short_description") or "")) > 60:
            errors.append('"short_description" must be at most 60 characters')
    return errors


def initial_space_readme(name: str, sdk: str) -> bytes:
    """What the Hub writes into a new Space: its metadata, naming the sdk."""
    lines = [f"title: {name}", "emoji: 🚀", "colorFrom: blue", "colorTo: red", f"sdk: {sdk}"]
    if sdk in ("gradio", "streamlit"):
        lines.append("app_file: app.py")
    lines.append("pinned: false")
    return ("---\n" + "\n".join(lines) + "\n---\n\nCheck out the configuration reference at "
            "https://huggingface.co/docs/hub/spaces-config-reference\n").encode()


@dataclass
class StoredFile:
    content: bytes
    lfs_sha256: str | None = None  # set for LFS files

    @property
    def git_blob(self) -> bytes:  # what git stores: the content, or the LFS pointer
        if self.lfs_sha256 is None:
            return self.content
        return lfs_pointer(self.lfs_sha256, len(self.content))

    @property
    def oid(self) -> str:  # git blob oid (of the pointer for LFS files), like the Hub's tree API
        return git_blob_oid(self.git_blob)

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
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """A branch, a tag or a full commit sha (an abbreviated sha is not a revision on the Hub)."""
        revision = unquote(revision)
        oid = self.branches.get(revision) or self.tags.get(revision)
        if oid is None and SHA1.match(revision):
            oid = revision
        return self.commits.get(oid) if oid else None


class HubState:
    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.lock = threading.RLock()
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status): for debugging tests

    def create_repo(self, repo_type: str, repo_id: str, private: bool, sdk: str | None) -> Repo:
        repo = Repo(repo_type, repo_id, private, sdk)
        initial_files = {".gitattributes": StoredFile(HUB_GITATTRIBUTES)}
        if repo_type == "space":
            initial_files["README.md"] = StoredFile(initial_space_readme(repo_id.split("/")[-1], sdk or "gradio"))
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

    def commit(self, repo: Repo, message: str, files: dict[str, StoredFile], branch: str = "main") -> Commit:
        """Record a commit. Files given directly (tests seeding a repo without HTTP) that the Hub would
        keep in LFS are moved to the LFS store, so the repo looks as if pushed by a client; the HTTP
        commit endpoint instead rejects such files (see ``_commit``)."""
        gitattributes = files[".gitattributes"].content if ".gitattributes" in files else None
        stored_files = {}
        for path, stored in files.items():
            if stored.lfs_sha256 is None and lfs_reason(path, len(stored.content), stored.content[:SAMPLE_SIZE],
                                                        gitattributes):
                sha256 = hashlib.sha256(stored.content).hexdigest()
                self.lfs_objects.setdefault(sha256, stored.content)
                stored = StoredFile(stored.content, lfs_sha256=sha256)
            stored_files[path] = stored
        parent = repo.branches.get(branch)
        digest = hashlib.sha1(json.dumps([parent, message, time.time_ns(),
                                          sorted((p, f.oid) for p, f in stored_files.items())]).encode())
        commit = Commit(digest.hexdigest(), parent, message, stored_files, time.time())
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

    def _error(self, status: int, message: str, code: str | None = None, head: bool = False,
               extra: dict | None = None) -> None:
        headers = {"X-Error-Message": " ".join(message.split())}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message, **(extra or {})}, headers, head=head)

    def _repo(self, repo_type: str, repo_id: str, head: bool = False) -> Repo | None:
        repo = self.state.repos.get((repo_type, repo_id))
        if repo is None:
            self._error(404, f"Repository Not Found for url: {self.path}.", "RepoNotFound", head=head)
        return repo

    def _commit_of(self, repo: Repo, revision: str, head: bool = False) -> Commit | None:
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, f"Invalid rev id: {unquote(revision)}", "RevisionNotFound", head=head)
        return commit

    # ----------------------------------------------------------------------------- routing
    API_REPO = re.compile(r"^/api/(models|datasets|spaces)/([^/]+/[^/]+?)"
                          r"(?:/(revision|tree|preupload|commit|branch|tag|refs)(?:/([^/]+)(?:/(.*))?)?)?$")
    LFS_BATCH = re.compile(r"^/(?:(datasets|spaces)/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch$")
    RESOLVE = re.compile(r"^/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
    CDN = re.compile(r"^/_cdn/([0-9a-f]{64})$")

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
            return self._validate_yaml(json.loads(self._body() or b"{}"))
        if method == "PUT" and path.startswith("/_lfs/"):
            return self._lfs_put(path.removeprefix("/_lfs/"))
        if (match := self.CDN.match(path)) and method in ("GET", "HEAD"):
            return self._cdn(match.group(1), head)
        if match := self.API_REPO.match(path):
            kind, repo_id, action, revision, rest = match.groups()
            repo_type = kind[:-1]
            if action is None and method == "GET":
                return self._repo_info(repo_type, repo_id, "main")
            if action == "refs" and revision is None and method == "GET":
                return self._refs(repo_type, repo_id)
            if revision is not None:
                if action == "revision" and method == "GET":
                    return self._repo_info(repo_type, repo_id, revision)
                if action == "tree" and method == "GET":
                    recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                    return self._tree(repo_type, repo_id, revision, rest or "", recursive)
                if action == "preupload" and method == "POST":
                    return self._preupload(repo_type, repo_id, revision, json.loads(self._body()))
                if action == "commit" and method == "POST":
                    return self._commit(repo_type, repo_id, revision, self._body())
                if action == "branch" and method == "POST" and not rest:
                    return self._create_branch(repo_type, repo_id, unquote(revision),
                                               json.loads(self._body() or b"{}"))
                if action == "tag" and method == "POST" and not rest:
                    return self._create_tag(repo_type, repo_id, revision, json.loads(self._body() or b"{}"))
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
        if repo_type == "space" and payload.get("sdk") not in SPACE_SDKS:
            return self._error(400, f"Invalid request: a Space needs an sdk, one of {', '.join(SPACE_SDKS)} "
                                    f"(got {payload.get('sdk')!r})")
        if (repo_type, repo_id) in self.state.repos:
            return self._json(409, {"error": "You already created this repo", "url": url})
        private = payload.get("private") or payload.get("visibility") == "private"
        self.state.create_repo(repo_type, repo_id, bool(private), payload.get("sdk"))
        self._json(200, {"url": url, "name": repo_id})

    def _validate_yaml(self, payload: dict) -> None:
        repo_type = payload.get("repoType") or "model"
        if repo_type not in REPO_TYPES:
            return self._error(400, f"unknown repoType {repo_type!r}")
        errors = card_errors(str(payload.get("content") or ""), repo_type)
        body = {"errors": [{"message": e} for e in errors], "warnings": []}
        if errors:
            return self._json(400, body, {"X-Error-Message": "Invalid metadata in README.md"})
        self._json(200, body)

    def _repo_info(self, repo_type: str, repo_id: str, revision: str) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        info = {"id": repo_id, "_id": repo_id, "sha": commit.oid, "private": repo.private,
                "lastModified": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(commit.date)),
                "tags": [], "downloads": 0, "likes": 0,
                "siblings": [{"rfilename": p} for p in sorted(commit.files)]}
        meta = None
        if "README.md" in commit.files:
            try:
                meta = card_metadata(commit.files["README.md"].content.decode("utf-8"))
            except Exception:  # an old invalid card: the Hub shows no cardData
                meta = None
        if isinstance(meta, dict):
            info["cardData"] = meta
        if repo_type == "space":
            info["sdk"] = (meta or {}).get("sdk") or repo.sdk
        self._json(200, info)

    def _refs(self, repo_type: str, repo_id: str) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        self._json(200, {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": o} for n, o in repo.branches.items()],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": o} for n, o in repo.tags.items()],
            "converts": [], "pullRequests": []})

    def _create_branch(self, repo_type: str, repo_id: str, branch: str, payload: dict) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if branch in repo.branches:
            return self._error(409, f"Reference refs/heads/{branch} already exists")
        if branch in repo.tags or SHA1.match(branch) or not re.fullmatch(r"[\w.-]+(?:/[\w.-]+)*", branch):
            return self._error(400, f"Invalid branch name {branch!r}")
        if (start := self._commit_of(repo, payload.get("startingPoint") or "main")) is None:
            return
        repo.branches[branch] = start.oid
        self._json(200, {})

    def _create_tag(self, repo_type: str, repo_id: str, revision: str, payload: dict) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        tag = str(payload.get("tag") or "")
        if tag in repo.tags:
            return self._error(409, f"Tag {tag} already exists")
        if not re.fullmatch(r"[\w.-]+", tag) or tag in repo.branches:
            return self._error(400, f"Invalid tag name {tag!r}")
        repo.tags[tag] = commit.oid
        self._json(200, {})

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
                                "pointerSize": len(stored.git_blob)}
            entries.append(entry)
        if prefix and not entries:
            return self._error(404, f"{prefix} does not exist on {unquote(revision)}", "EntryNotFound")
        self._json(200, entries)

    def _preupload(self, repo_type: str, repo_id: str, revision: str, payload: dict) -> None:
        if (repo := self._repo(repo_type, repo_id)) is None:
            return
        if (commit := self._commit_of(repo, revision)) is None:
            return
        gitattributes = commit.files[".gitattributes"].content if ".gitattributes" in commit.files else None
        files = []
        for item in payload["files"]:
            sample = base64.b64decode(item["sample"])
            existing = commit.files.get(item["path"])
            lfs = lfs_reason(item["path"], int(item["size"]), sample, gitattributes) is not None
            files.append({"path": item["path"], "shouldIgnore": False, "uploadMode": "lfs" if lfs else "regular",
                          # the oid the client compares with its own: sha256 for LFS files, git oid otherwise
                          "oid": existing.etag if existing else None})
        self._json(200, {"files": files, "commitOid": commit.oid})

    def _lfs_batch(self, payload: dict) -> None:
        if payload.get("operation", "upload") != "upload":
            return self._error(400, "only LFS uploads are spoken here (downloads go through resolve)")
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
            if branch in repo.tags or SHA1.match(branch):
                return self._error(400, f"Cannot commit to {branch}: not a branch")
            return self._error(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        head = repo.commits[repo.branches[branch]]
        files = dict(head.files)
        message, regular, touched_readme = "", [], False
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
                regular.append(value["path"])
                touched_readme |= value["path"] == "README.md"
            elif key == "lfsFile":
                if value.get("algo", "sha256") != "sha256":
                    return self._error(400, f"unsupported LFS algorithm {value.get('algo')}")
                content = self.state.lfs_objects.get(value["oid"])
                if content is None or len(content) != value["size"]:
                    return self._error(422, f"Your push was rejected because an LFS pointer pointed to a file "
                                            f"that does not exist: {value['path']} ({value['oid']})")
                files[value["path"]] = StoredFile(content, lfs_sha256=value["oid"])
                touched_readme |= value["path"] == "README.md"
            elif key == "deletedFile":
                if files.pop(value["path"], None) is None:
                    return self._error(404, f"{value['path']} does not exist", "EntryNotFound")
                touched_readme |= value["path"] == "README.md"
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                touched_readme |= "README.md".startswith(folder)
                files = {p: f for p, f in files.items() if not p.startswith(folder)}
            else:
                return self._error(400, f"loopback hub server: unsupported commit operation {key}")
        gitattributes = files[".gitattributes"].content if ".gitattributes" in files else None
        for path in regular:  # what the preupload answer put in LFS may not arrive as a git blob
            content = files[path].content
            if reason := lfs_reason(path, len(content), content[:SAMPLE_SIZE], gitattributes):
                return self._error(400, f"Your push was rejected because {path} must be stored with Git LFS "
                                        f"({reason}); the preupload answer for it is uploadMode: lfs")
        if touched_readme and (repo_type == "space" or "README.md" in files):
            readme = files.get("README.md")
            if readme is None:
                errors = ["a Space needs a README.md whose metadata names its sdk"]
            else:
                try:
                    errors = card_errors(readme.content.decode("utf-8"), repo_type)
                except UnicodeDecodeError:
                    errors = ["README.md is not UTF-8"]
            if errors:
                return self._error(400, "Invalid metadata in README.md.\n" + "\n".join(f"- {e}" for e in errors),
                                   extra={"errors": [{"message": e} for e in errors]})
        commit = self.state.commit(repo, message, files, branch)
        url = f"{self.endpoint}/{URL_PREFIX[repo_type]}{repo_id}/commit/{commit.oid}"
        self._json(200, {"success": True, "commitOid": commit.oid, "commitUrl": url, "pullRequestUrl": None})

    def _serve(self, content: bytes, headers: dict[str, str], head: bool) -> None:
        headers = {**headers, "Accept-Ranges": "bytes"}
        status = 200
        range_header = self.headers.get("Range")
        if range_header and (match := re.match(r"bytes=(\d+)-(\d*)$", range_header)) and not head:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(content) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            content, status = content[start:end + 1], 206
        self._send(status, content, headers, content_type="application/octet-stream", head=head)

    def _resolve(self, repo_type: str, repo_id: str, revision: str, file_path: str, head: bool) -> None:
        if (repo := self._repo(repo_type, repo_id, head)) is None:
            return
        if (commit := self._commit_of(repo, revision, head)) is None:
            return
        stored = commit.files.get(file_path)
        if stored is None:
            return self._error(404, f"Entry not found: {file_path}", "EntryNotFound", head=head)
        if stored.lfs_sha256 is not None and self.server.cdn_endpoint:  # the Hub redirects LFS files to its CDN
            self.state.requests.append((self.command, self.path, 302))
            self.send_response(302)
            for key, value in {"Location": f"{self.server.cdn_endpoint}/_cdn/{stored.lfs_sha256}",
                               "X-Linked-Etag": f'"{stored.lfs_sha256}"', "X-Linked-Size": str(len(stored.content)),
                               "ETag": f'"{stored.oid}"', "X-Repo-Commit": commit.oid,
                               "Content-Type": "text/plain", "Content-Length": "0"}.items():
                self.send_header(key, value)
            self.end_headers()
            return
        self._serve(stored.content, {"ETag": f'"{stored.etag}"', "X-Repo-Commit": commit.oid}, head)

    def _cdn(self, sha256: str, head: bool) -> None:
        content = self.state.lfs_objects.get(sha256)
        if content is None:
            return self._error(404, "NoSuchKey", head=head)
        self._serve(content, {"ETag": f'"{sha256}"'}, head)


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, user: str = "tester", lfs_cdn: bool = True):
        super().__init__((host, port), HubHandler)
        self.state = HubState()
        self.user = user
        self.endpoint = f"http://{host}:{self.server_address[1]}"
        # LFS downloads are redirected to this "CDN": the same server under another host name, so that
        # clients treat it as the Hub's CDN (metadata from X-Linked-* headers, no auth header sent).
        cdn_host = {"127.0.0.1": "localhost", "localhost": "127.0.0.1"}.get(host)
        self.cdn_endpoint = f"http://{cdn_host}:{self.server_address[1]}" if lfs_cdn and cdn_host else None
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
