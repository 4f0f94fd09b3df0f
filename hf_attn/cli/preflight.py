"""The command line's quick checks: a wrong model folder, a missing data file, an empty CSV or one
without the named columns are answered in one line (exit code 2) before torch, transformers or a
subcommand's module is imported, from the arguments as the quick parser reads them.

Only what is certainly an error is refused here, in the words of the loaders that would refuse it
later (:mod:`hf_attn.data.tasks`, :func:`hf_attn.batteries.data.load_analysis_data`); anything
uncertain (a Hub id, a bundled dataset, a file that does not decode, a JSON array) is left to them.
This module imports only the standard library and :mod:`hf_attn.core.arguments`."""

from __future__ import annotations

import csv
import json
import os

from hf_attn.core.arguments import bounded_list

# hf_attn.data.tasks' names (a test checks they are the same; importing them would import numpy and datasets)
BUILTIN_DATASETS = ("sst", "sst5", "agnews", "imdb", "snli", "babi1", "babi2", "babi3", "babi1-10k",
                    "babi2-10k", "babi3-10k", "cnn-qa")
PAIR_COLUMNS = ("premise", "hypothesis")
FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".tsv", ".txt", ".parquet", ".arrow", ".xlsx", ".xls", ".gz", ".zip",
                 ".bz2", ".xz", ".zst")
SPLIT_FILES = (("train", ("train",)), ("validation", ("validation", "dev")), ("test", ("test",)))
# the commands whose model folder argument must hold a config.json (a saved model)
MODEL_COMMANDS = {"analyze": "model_dir", "eraser": "model_dir", "explain": "model"}
# the commands that read --dataset, and whether a single data file is analysed whole (not split)
DATA_COMMANDS = {"train": False, "analyze": True, "eraser": True}
FOLDER_ARGUMENTS = ("model_dir", "model", "run_dir", "base_dir", "grid_dir")


def argument_problem(command: str, args) -> str | None:
    """The one-line error of the first folder or data argument of ``args`` (a parsed ``hf-attn
    COMMAND`` namespace; absent attributes are not checked) that is certainly wrong, or None."""
    from hf_attn.runs.folder import missing_model_folder

    for dest in FOLDER_ARGUMENTS:
        missing = missing_model_folder(getattr(args, dest, None))
        if missing:
            return missing
    dest = MODEL_COMMANDS.get(command)
    problem = not_a_model_folder(getattr(args, dest, None)) if dest else None
    if problem is None and command in DATA_COMMANDS:
        dataset = getattr(args, "dataset", None)
        if isinstance(dataset, str):
            problem = data_problem(dataset, getattr(args, "text_column", None) or "text",
                                   getattr(args, "label_column", None) or "label", whole_file=DATA_COMMANDS[command])
    return problem


def not_a_model_folder(name) -> str | None:
    """An existing local path that cannot be a saved model: a file, or a folder without config.json."""
    if not isinstance(name, str) or not name:
        return None
    path = os.path.expanduser(name)
    if os.path.isfile(path):
        return f"{name} is a file, not a model folder (a folder written by `hf-attn train` or save_pretrained)"
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        return (f"{name} has no config.json: not a model folder (a folder written by `hf-attn train` or "
                f"save_pretrained)")
    return None


def looks_like_a_path(name: str) -> bool:
    """A name that can only be a local path (``./x``, ``/x``, ``~/x``, ``a/b/c``, a backslash, a data
    file's suffix): :func:`hf_attn.data.tasks.load_task` never looks such a name up on the Hub. (The
    loader also counts names that are no valid Hub id; those are left to it.)"""
    if name.startswith(("./", "../", "/", "~", ".\\", "..\\")) or name in (".", "..") or os.path.isabs(name):
        return True
    if "\\" in name or (os.sep != "/" and os.sep in name) or name.count("/") > 1:
        return True
    return name.lower().endswith(FILE_SUFFIXES)


def data_problem(dataset: str, text_column: str, label_column: str, whole_file: bool) -> str | None:
    """What :func:`hf_attn.data.tasks.load_task` (``whole_file=False``) or the analyses' loader of a
    single file read whole (``whole_file=True``) would refuse about ``dataset`` before reading its rows:
    no such path, a folder without a split file, an empty file, a file without rows, missing columns."""
    if dataset in BUILTIN_DATASETS:
        return None
    if os.path.isdir(dataset):
        for split, stems in SPLIT_FILES:
            found = [os.path.join(dataset, f"{stem}{suffix}") for stem in stems for suffix in (".csv", ".jsonl", ".json")
                     if os.path.exists(os.path.join(dataset, f"{stem}{suffix}"))]
            if not found:
                return f"{dataset}: no {split} file ({'/'.join(stems)}.csv or .jsonl)"
            problem = _file_problem(found[0], text_column, label_column, pairs=True, split=split)
            if problem:
                return problem
        return None
    if os.path.isfile(dataset):
        single = whole_file and dataset.lower().endswith((".csv", ".jsonl", ".json"))
        return _file_problem(dataset, text_column, label_column, pairs=not single)
    if os.path.exists(dataset) or not looks_like_a_path(dataset):
        return None
    return (f"unknown dataset {dataset!r}: no such file or folder {os.path.abspath(os.path.expanduser(dataset))} "
            f"(it looks like a path, so it was not looked up as a Hugging Face Hub dataset id; "
            f"bundled datasets: {', '.join(BUILTIN_DATASETS)})")


def _file_problem(path: str, text_column: str, label_column: str, pairs: bool, split: str | None = None):
    """An empty file, a file without rows or without the columns (``.csv`` and ``.jsonl`` only)."""
    if path.endswith(".csv"):
        header = _csv_header(path)
    elif path.endswith(".jsonl"):
        header = _jsonl_columns(path)
    else:
        return None
    if header is None:  # unreadable here: the loader names the reason
        return None
    columns, rows = header
    if columns is None:
        return f"{path}: could not parse: the file is empty (no header line)"
    if not columns and not rows:  # a JSONL file without records
        return f"{path}: no rows (the file is empty)"
    required = [*PAIR_COLUMNS, label_column] if pairs and text_column not in columns and all(
        c in columns for c in PAIR_COLUMNS) else [text_column, label_column]
    missing = [c for c in required if c not in set(columns)]
    where = path + (f" [{split}]" if split else "")
    if missing:
        return f"{where}: missing column(s) [{bounded_list(missing)}]; found [{bounded_list(columns)}]"
    if not rows:
        return f"{where}: no rows (only the header line)" if path.endswith(".csv") else f"{where}: no rows"
    return None


def _csv_header(path: str):
    """``(columns or None when the file has no header, whether a data row follows)``, as the CSV loader
    reads them (blank lines skipped, an unnamed column is ``Unnamed: i``); None when the file cannot be
    read or parsed here."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            records = (record for record in csv.reader(f) if record)
            columns = next(records, None)
            has_row = next(records, None) is not None
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if columns is None:
        return None, False
    return [c if c else f"Unnamed: {i}" for i, c in enumerate(columns)], has_row


def _jsonl_columns(path: str):
    """``(every key of the file's records, whether it has any)``; None when a line is no JSON object."""
    columns: dict[str, None] = {}
    count = 0
    try:
        with open(path, encoding="utf-8-sig") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        return None
                    columns.update(dict.fromkeys(record))
                    count += 1
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return list(columns), count > 0
