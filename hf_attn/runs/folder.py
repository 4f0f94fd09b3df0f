"""One analysis per output folder.

``hf-attn analyze`` (and :func:`hf_attn.runs.run_battery`) claim the output folder before
anything is computed: ``OUT/.hf_attn-analysis.json`` records the battery, the model (its weights'
checksum) and the settings that change results. A rerun with the same record resumes or repeats the
analysis; any other analysis (another battery, other settings, another model) is refused with the
differing keys, unless ``overwrite`` is given, which removes the folder's whole content first, so
that a folder never mixes two analyses (e.g. one battery's ``results.json`` beside another's
``instances.jsonl`` and figures).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil

from hf_attn.core.arguments import bounded_text
from hf_attn.core.io import LOCK_NAME, file_sha256, read_json, write_json_atomic

RECORD_NAME = ".hf_attn-analysis.json"
# Settings that change how an analysis runs (speed, output, whether missing helper models may be
# trained or must already exist), never its results.
NOT_COMPARED = ("progress", "num_threads", "use_cache", "train_missing")
MODEL_FILES = ("model.safetensors", "pytorch_model.bin", "config.json")


class AnalysisFolderMismatch(ValueError):
    """The output folder holds another analysis (the message names what differs)."""


def _model_identity(model_dir: str) -> dict:
    """The model an analysis is of: its weights' checksum (a folder), or its name (a Hub id)."""
    if not os.path.isdir(model_dir):
        return {"name": model_dir}
    for name in ("model.safetensors", "config.json"):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            return {"name": os.path.basename(os.path.abspath(model_dir)), name: file_sha256(path)}
    return {"name": os.path.basename(os.path.abspath(model_dir))}


def _comparable(value, output_dir: str):
    """Settings as recorded: JSON values, a local path relative to the output folder (never as typed)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _comparable(v, output_dir) for k, v in value.items() if k not in NOT_COMPARED}
    if isinstance(value, (list, tuple)):
        return [_comparable(v, output_dir) for v in value]
    if isinstance(value, str) and os.sep in value and os.path.exists(value):
        return os.path.relpath(os.path.abspath(value), os.path.abspath(output_dir)).replace(os.sep, "/")
    if isinstance(value, float) and value != value:
        return None
    return value


def analysis_record(battery: str, model_dir: str, settings, output_dir: str) -> dict:
    return json.loads(json.dumps({"battery": battery, "model": _model_identity(model_dir),
                                  "settings": _comparable(settings, output_dir)}, default=str))


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {bounded_text(repr(a), 60)} → {bounded_text(repr(b), 60)}")
    return out


def _contents(output_dir: str) -> list[str]:
    return sorted(name for name in os.listdir(output_dir) if name != LOCK_NAME) if os.path.isdir(output_dir) else []


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def claim_output_folder(output_dir: str, battery: str, model_dir: str, settings, overwrite: bool = False) -> None:
    """Make ``output_dir`` the folder of this analysis, or refuse (:class:`AnalysisFolderMismatch`).

    Empty or missing: claimed. Holding this same analysis (same battery, model weights and
    settings): kept, so a rerun resumes. Holding anything else: refused with what differs, unless
    ``overwrite``, which empties the folder first. A folder that holds a model, or the model being
    analysed, is never emptied."""
    output_dir = os.fspath(output_dir)
    record = analysis_record(battery, model_dir, settings, output_dir)
    record_path = os.path.join(output_dir, RECORD_NAME)
    contents = _contents(output_dir)
    if contents:
        try:
            stored = read_json(record_path) if RECORD_NAME in contents else None
        except ValueError:
            stored = None
        if isinstance(stored, dict) and stored == record:
            return  # the same analysis: resume / repeat it
        if isinstance(stored, dict) and stored.get("battery") != battery:
            what = f"a {stored.get('battery')} analysis"
            differs = f"battery: {stored.get('battery')!r} → {battery!r}"
        elif isinstance(stored, dict):
            what = f"a {battery} analysis with other settings"
            differs = "; ".join(_differences(stored, record)[:5])
        elif "results.json" in contents:
            what, differs = "an analysis of unknown settings", "no record of its settings"
        else:
            what, differs = "other files", ", ".join(contents[:5]) + (f", … ({len(contents)} in all)"
                                                                       if len(contents) > 5 else "")
        is_model = any(name in contents for name in MODEL_FILES)
        if is_model or (os.path.exists(model_dir) and _inside(model_dir, output_dir)):
            raise AnalysisFolderMismatch(f"--output-dir {output_dir} holds a model (or the model analysed); "
                                         "choose another --output-dir for the analysis")
        if not overwrite:
            raise AnalysisFolderMismatch(f"--output-dir {output_dir} holds {what} ({differs}); use --overwrite "
                                         "to replace it, or choose another --output-dir")
        for name in contents:  # the whole earlier analysis, never a part of it
            path = os.path.join(output_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    os.makedirs(output_dir, exist_ok=True)
    write_json_atomic(record_path, record)


@contextlib.contextmanager
def claimed_output_folder(output_dir: str, battery: str, model_dir: str, settings, overwrite: bool = False):
    """:func:`claim_output_folder` for a ``with`` block; if the block fails before writing anything
    but the record, the record goes again (a command that failed at once leaves no folder behind)."""
    claim_output_folder(output_dir, battery, model_dir, settings, overwrite)
    try:
        yield
    except BaseException:
        if _contents(output_dir) == [RECORD_NAME]:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(output_dir, RECORD_NAME))
        raise


__all__ = ["claim_output_folder", "claimed_output_folder", "analysis_record", "AnalysisFolderMismatch", "RECORD_NAME",
           "missing_model_folder"]


def missing_model_folder(name: str) -> str | None:
    """The one-line error for a model or run folder argument that names no folder, with the closest
    sibling folder (``no model folder runs/typo; did you mean runs/typ0?``), or None when ``name``
    exists or is no local path. A name is a local path when it starts with ``./``, ``../``, ``/``
    or ``~``, has more than one ``/``, or its first part is a folder here (``runs/…`` beside a
    ``runs`` folder); anything else (``owner/name``, an alias such as ``minilm-l6``) may be a Hub id
    and is left to the loader. Asked before anything is logged or created."""
    import difflib

    if not isinstance(name, str) or not name or os.path.exists(os.path.expanduser(name)):
        return None
    path, slashed = os.path.expanduser(name), name.replace("\\", "/")
    local = (slashed.startswith(("./", "../", "/", "~")) or os.path.isabs(path) or slashed.strip("/").count("/") > 1
             or ("/" in slashed and os.path.isdir(slashed.split("/")[0])))
    if not local:
        return None
    stripped = name.rstrip("/\\") or name
    parent, base = os.path.split(stripped)
    where = os.path.expanduser(parent) if parent else "."
    if not os.path.isdir(where):
        return f"no model folder {name} (and no folder {parent})"
    try:
        siblings = sorted(entry.name for entry in os.scandir(where)
                          if entry.is_dir() and not entry.name.startswith("."))
    except OSError:
        siblings = []
    close = difflib.get_close_matches(base, siblings, n=1)
    if not close:
        return f"no model folder {name}"
    return f"no model folder {name}; did you mean {os.path.join(parent, close[0]) if parent else close[0]}?"
