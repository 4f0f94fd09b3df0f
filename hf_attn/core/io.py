"""Writing results safely: atomic files and one writer per output folder.

- :func:`atomic_write` (and ``write_json_atomic`` / ``write_text_atomic`` / ``write_jsonl_atomic`` /
  ``save_figure_atomic`` on top of it) writes to a uniquely named temporary file in the target's
  folder and renames it over the target: a reader sees the old file or the new one, never half of
  one; two writers never share a temporary name; the temporary file is removed on any failure
  (disk full, interrupt). The final file gets the mode an ordinary ``open`` would give (the umask
  is respected, unlike ``mkstemp``'s 0600).
- :func:`exclusive_output_folder` takes an exclusive ``flock`` on ``FOLDER/.hf_attn.lock`` for as
  long as a command writes there. A second writer (another process) fails at once with
  :class:`OutputFolderBusy` naming the folder and the process holding it. The kernel releases the
  lock when its process dies, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator

import numpy as np

LOCK_NAME = ".hf_attn.lock"


def umask_mode() -> int:
    """The mode ``open(path, "w")`` would create a file with (0o666 less the umask)."""
    with _umask_guard:
        mask = os.umask(0)
        os.umask(mask)
    return 0o666 & ~mask


_umask_guard = threading.Lock()  # os.umask is read by setting it: serialise the two calls


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator:
    """Open a unique temporary file beside ``path`` for writing; on success rename it to ``path``,
    on any exception remove it and re-raise. ``mode`` is ``"w"`` (text) or ``"wb"``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".tmp-{os.path.basename(path)}-")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def json_safe(value):
    """``value`` with numpy scalars/arrays as Python values and non-finite floats as ``None``:
    strict JSON (``NaN`` is not JSON; readers in other languages reject it)."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def print_json(payload) -> None:
    """Print ``payload`` as strict, indented JSON: a NaN/inf metric (e.g. ROC-AUC of a one-class
    test split) is ``null``, never a bare ``NaN`` that JSON readers reject."""
    print(json.dumps(json_safe(payload), indent=2, allow_nan=False))


def read_json(path: str | os.PathLike):
    """The content of JSON file ``path``; a file that is not JSON is a ``ValueError`` naming the file
    (``json.load`` alone says "Expecting value: line 1 column 1" without saying where)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text, so not a JSON file ({err.reason} at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err.msg}: line {err.lineno} column {err.colno})") from None


def write_json_atomic(path: str | os.PathLike, payload, compact: bool = False) -> None:
    """Strict JSON (NaN/inf → null), indented (``compact``: one line, no spaces), written atomically."""
    text = json.dumps(json_safe(payload), allow_nan=False,
                      **({"separators": (",", ":")} if compact else {"indent": 2}))
    with atomic_write(path) as f:
        f.write(text + "\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_write(path) as f:
        f.write(text)


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """One strict-JSON object per line, written atomically."""
    with atomic_write(path) as f:
        for row in rows:
            f.write(_strict_json_line(row))


def _strict_json_line(row) -> str:
    """``json.dumps(json_safe(row))`` + newline. Rows of plain Python values with finite floats
    (the usual case) go straight to the C encoder, which gives the same text; only rows it
    refuses (numpy values: TypeError; NaN/inf: ValueError) take the slower :func:`json_safe` walk."""
    try:
        return json.dumps(row, allow_nan=False) + "\n"
    except (TypeError, ValueError):
        return json.dumps(json_safe(row), allow_nan=False) + "\n"


def save_figure_atomic(figure, path: str | os.PathLike, **savefig_kwargs) -> str:
    """``figure.savefig`` through :func:`atomic_write`; the format comes from ``path``'s suffix."""
    path = os.fspath(path)
    fmt = savefig_kwargs.pop("format", None) or os.path.splitext(path)[1].lstrip(".") or "png"
    with atomic_write(path, "wb") as f:
        figure.savefig(f, format=fmt, **savefig_kwargs)
    return path


# --------------------------------------------------------------------------------------- locking
class OutputFolderBusy(OSError):
    """Another process is writing into the same output folder."""


# Folders this process holds, with a depth count: a command that locks a folder may call library
# code that locks it again (e.g. ``reproduce`` → ``train``); only other processes are refused.
_held: dict[str, list] = {}
_held_guard = threading.Lock()


def _describe_holder(lock_path: str) -> str:
    try:
        with open(lock_path, encoding="utf-8") as f:
            info = json.load(f)
        return (f"process {info.get('pid')} on {info.get('host')} ({info.get('command')}, "
                f"since {info.get('started')})")
    except (OSError, ValueError):
        return "another process"


@contextlib.contextmanager
def exclusive_output_folder(folder: str | os.PathLike, command: str | None = None) -> Iterator[str]:
    """Hold the exclusive writer lock of ``folder`` (created if missing) for the ``with`` block.

    Raises :class:`OutputFolderBusy` at once if another process holds it."""
    folder = os.path.abspath(os.fspath(folder))
    created = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    key = os.path.realpath(folder)
    with _held_guard:
        if key in _held:
            _held[key][1] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield folder
        finally:
            with _held_guard:
                _held[key][1] -= 1
        return
    lock_path = os.path.join(folder, LOCK_NAME)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputFolderBusy(f"output folder {folder} is in use by {_describe_holder(lock_path)}; "
                               "wait for it to finish or choose another output folder") from None
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "command": command or " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
                "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        with _held_guard:
            _held[key] = [fd, 1]
        yield folder
    except BaseException:
        if created and os.listdir(folder) == [LOCK_NAME]:  # a command that failed at once leaves no folder
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
                os.rmdir(folder)
        raise
    finally:
        with _held_guard:
            _held.pop(key, None)
        os.close(fd)  # releases the flock


__all__ = ["atomic_write", "json_safe", "print_json", "read_json", "write_json_atomic", "write_text_atomic", "write_jsonl_atomic",
           "save_figure_atomic", "exclusive_output_folder", "OutputFolderBusy", "LOCK_NAME"]
