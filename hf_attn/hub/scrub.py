"""Local paths scrubbed from the text and JSON files of a folder before it is published: a path
inside the run folder becomes relative to it, any other local path ``<local path>``."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path, PurePosixPath

from hf_attn.hub.files import HubError

LOCAL_PATH = "<local path>"
_SEGMENT = r"[\w.@%+=~-]+"
_SPACED_SEGMENT = rf"{_SEGMENT}(?: {_SEGMENT})*"  # "my data": a folder name with spaces, inside a path
_WINDOWS_PART = r"[^\\\s\"'<>|]+"
_OTHER_PATH = (r"file://[^\s\"'<>()\[\]]*"  # file:///a/b (a URI naming a local file)
               r"|(?<![\w.@/\\-])[\w.-]+@[\w.-]+:(?!//)[^\s\"'<>]*"  # user@host:/a/b (scp / rsync)
               rf"|(?<![\w\\])\\\\{_WINDOWS_PART}(?:\\{_WINDOWS_PART}(?: {_WINDOWS_PART})*)*"  # \\server\share\a
               rf"|(?<![\w.~/\\-])\.\.(?:[/\\]{_SEGMENT})+")  # ../a/b (relative to somewhere on this machine)
_LAST_SEGMENT = rf"(?:{_SPACED_SEGMENT}\.[A-Za-z0-9]{{1,8}}(?![\w.-])|{_SEGMENT})"  # "my file.csv" or "x"
_GENERIC_PATH = (rf"(?<![\w.~:/\\-])/{_SPACED_SEGMENT}(?:/{_SPACED_SEGMENT})*/{_LAST_SEGMENT}"  # /a/b..., /a b/c d.csv
                 rf"|(?<![\w.~/-])~(?:/{_SPACED_SEGMENT})*(?:/{_LAST_SEGMENT})"  # ~/a...
                 rf"|(?<![\w])[A-Za-z]:\\(?:{_WINDOWS_PART}(?: {_WINDOWS_PART})*\\)*[^\s\"'<>|\\]*")  # C:\a...


class _PathScrubber:
    """Replaces local absolute paths in text and JSON: a path inside the run folder becomes its path
    relative to the run folder ("." for the folder itself), any other absolute path ``<local path>``.
    Known local folders (the run and analysis folders, home, the temp and current folders) are matched
    literally, so their paths are caught even with spaces; other absolute paths by their shape."""

    def __init__(self, run_dir: Path, extra_roots=()):
        self.run_roots = sorted({os.path.abspath(run_dir), str(Path(run_dir).resolve())}, key=len, reverse=True)
        known = set(self.run_roots)
        for folder in (*extra_roots, Path.home(), tempfile.gettempdir(), os.getcwd()):
            known.update({os.path.abspath(folder), str(Path(folder).resolve())})
        known = sorted((k.rstrip("/\\") for k in known if len(k.strip("/\\")) >= 2), key=len, reverse=True)
        literal = "|".join(re.escape(k) for k in known)
        self.pattern = re.compile(
            (rf"(?<![\w.~-])(?:{literal})(?![\w.-])(?:/{_SEGMENT})*|" if literal else "")
            + _OTHER_PATH + "|" + _GENERIC_PATH)

    def _map(self, path: str) -> str:
        if path.startswith("file://"):  # file:///a/b and file://localhost/a/b: the path they name
            path = re.sub(r"^file://(?:localhost)?", "", path) or "/"
            if not path.startswith("/"):
                return LOCAL_PATH
        for root in self.run_roots:
            if path == root:
                return "."
            if path.startswith(root + os.sep):
                return PurePosixPath(*Path(path[len(root) + 1:]).parts).as_posix() or "."
        return LOCAL_PATH

    def _replace(self, match: re.Match) -> str:
        path = match.group(0)
        stripped = path.rstrip(".")  # "... in /a/b." ends a sentence
        return self._map(stripped.rstrip("/\\") or stripped) + path[len(stripped):]

    def text(self, text: str) -> str:
        return self.pattern.sub(self._replace, text)

    def value(self, value):
        if isinstance(value, str):
            if "\n" not in value and (os.path.isabs(value) or value.startswith("~/")
                                       or re.match(r"[A-Za-z]:\\", value)):
                return self._map(os.path.normpath(os.path.expanduser(value)) if value.startswith("~/")
                                 else value.rstrip("/\\") or value)
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def file(self, path: Path) -> None:
        """Scrub one file of the built folder in place (JSON structurally, other text as text)."""
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise HubError(f"{path.name} is not UTF-8 text, so it cannot be checked for local paths: "
                           "convert it or remove it") from err
        if path.suffix == ".json":
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = None
            if payload is not None:
                scrubbed = self.value(payload)
                if scrubbed != payload:
                    path.write_text(json.dumps(scrubbed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                return
        scrubbed = self.text(raw)
        if scrubbed != raw:
            path.write_text(scrubbed, encoding="utf-8")


# Text files of a built model folder that are scrubbed of local paths. tokenizer.json (the vocabulary,
# derived from the training texts only) and the modelling code are left byte-identical.
SCRUBBED_FILES = ("*.json", "*.md", "*.csv", "*.svg", "*.txt")
UNSCRUBBED_FILES = ("tokenizer.json", "model.safetensors.index.json")
