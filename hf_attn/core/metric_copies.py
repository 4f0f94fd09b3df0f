"""The copies of ``hf_attn/core/numpy_measures.py`` that the ``evaluate`` modules ship.

``evaluate.load`` downloads a module script and the files it imports relatively, nothing else, so
every folder ``hf_attn/metrics/<name>/`` holds its own ``_hf_attn_measures.py``: a regular file (no
symlink, so checkouts without symlink support and the Hub get the same bytes), generated from the
library's single source with a header that says so. ``python scripts/generate_metric_copies.py``
writes them; ``--check`` lists stale ones and fails (the pattern of transformers'
``utils/check_copies.py``). This module reads files only: it imports nothing from ``hf_attn.metrics``.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("numpy_measures.py")
METRICS_DIR = Path(__file__).resolve().parents[1] / "metrics"
COPY_NAME = "_hf_attn_measures.py"
HEADER = ("# Generated from hf_attn/core/numpy_measures.py by scripts/generate_metric_copies.py: do not edit.\n"
          "# Edit the source and run `python scripts/generate_metric_copies.py` to update every copy.\n")


def copy_text(source: Path = SOURCE) -> str:
    """The exact text every module folder's ``_hf_attn_measures.py`` must hold."""
    return HEADER + Path(source).read_text(encoding="utf-8")


def module_folders(metrics_dir: Path = METRICS_DIR) -> list[Path]:
    """Every ``evaluate`` module folder whose script imports the shared measures: a sub-folder holding
    ``<folder name>.py`` that imports ``_hf_attn_measures`` (a module whose script holds all of its
    own code needs no copy)."""
    metrics_dir = Path(metrics_dir)
    return sorted(p for p in metrics_dir.iterdir() if p.is_dir() and (p / f"{p.name}.py").is_file()
                  and "_hf_attn_measures" in (p / f"{p.name}.py").read_text(encoding="utf-8"))


def stale_copies(metrics_dir: Path = METRICS_DIR, source: Path = SOURCE) -> list[Path]:
    """The copies that are missing, symlinks or differ from :func:`copy_text`."""
    expected = copy_text(source)
    stale = []
    for folder in module_folders(metrics_dir):
        target = folder / COPY_NAME
        if (target.is_symlink() or not target.is_file()
                or target.read_text(encoding="utf-8") != expected):
            stale.append(target)
    return stale


def write_copies(metrics_dir: Path = METRICS_DIR, source: Path = SOURCE) -> list[Path]:
    """(Re)write every stale copy as a regular file; returns the files written."""
    expected = copy_text(source)
    written = stale_copies(metrics_dir, source)
    for target in written:
        if target.is_symlink() or target.exists():
            target.unlink()
        target.write_text(expected, encoding="utf-8")
    return written
