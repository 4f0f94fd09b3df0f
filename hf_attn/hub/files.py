"""What a push may upload: the shipped folders (card templates, the Space's files, the evaluate
modules), the allow-lists of files per kind of repo, and the checked copy of allowed files (a
symlink resolving outside its folder is refused) into the folder that is uploaded."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from importlib import resources
from pathlib import Path

PACKAGE_DIR = Path(os.fspath(resources.files("hf_attn")))


def _shipped_folder(name: str) -> Path:
    """``hf_attn/NAME/`` of an installed wheel (setup.py maps the checkout's top-level ``NAME/`` into
    the package), else the checkout's own top-level ``NAME/`` (a source tree, an editable install)."""
    installed = PACKAGE_DIR / name
    return installed if installed.is_dir() else PACKAGE_DIR.parent / name


# Everything a push needs ships inside the wheel, so an installed hf_attn publishes exactly as a
# checkout does: the card templates (hub_cards/), the Space's files (spaces_app/: app.py,
# requirements.txt, the README.md card template) and the evaluate modules (hf_attn/metrics/).
CARDS_DIR = _shipped_folder("hub_cards")
SPACE_APP_DIR = _shipped_folder("spaces_app")

# Folders of an installed package that a Space's vendored copy leaves out: the Space's own files (they
# sit beside the copy) and the card templates.
VENDOR_SKIP = ("spaces_app", "hub_cards")

# The only top-level files of a run folder that are uploaded (an allow-list: notes, keys, dotfiles, Trainer
# state such as the pickled training_args.bin, and anything else stay local): what save_pretrained writes
# for the model (weights, possibly sharded, config, the modelling files for trust_remote_code), the
# tokenizer files, and the run's metrics.json / run.json. README.md is generated, never copied.
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "generation_config.json", "modeling_hf_attn.py", "configuration_hf_attn.py",
               "modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "metrics.json",
               "run.json")

# Pickled weights: loading them can run arbitrary code, so a folder holding them is refused.
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*.bin")
EXCLUDED_DIRS = ("checkpoint-*", "runs", "__pycache__", ".*")
ANALYSIS_FILES = ("results.json", "*.png", "*.svg", "*.md", "*.csv")

# Files of an evaluate module folder / of the Space app folder that are uploaded (README.md is rewritten).
METRIC_FILES = ("*.py", "requirements.txt")
SPACE_FILES = ("*.py", "requirements.txt", "packages.txt", "*.css")

# What the vendored copy of hf_attn carries: its source and its package data (pyproject.toml).
VENDOR_DATA = {"data": ("*.gz", "*.txt", "*.csv", "*.tsv", "*.json", "*.jsonl"), "metrics": ("README.md",)}


class HubError(ValueError):
    """A folder cannot be published as asked (clear message for the CLI)."""


def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _is_relative_to(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _checked_source(path: Path, root: Path, must_exist: bool = True) -> Path:
    """The real file behind ``path``; HubError if it is a symlink resolving outside ``root`` (a
    resolved folder): following it would publish a file from elsewhere on this machine."""
    real = path.resolve()
    if not _is_relative_to(real, root):
        raise HubError(f"{path} is a symlink to {real}, outside {root}: refusing to publish it "
                       "(copy the file into the folder if it really belongs to the upload)")
    if must_exist and not real.exists():
        raise HubError(f"{path} is a broken symlink (to {real})")
    return real


def _allowed_files(folder: Path, patterns, root: Path) -> list[tuple[Path, Path]]:
    """(entry, real file) for the top-level files of ``folder`` matching ``patterns``. Every symlinked
    file in the folder, allowed or not, must stay inside ``root``."""
    chosen = []
    for item in sorted(folder.iterdir()):
        allowed = _matches(item.name, patterns)
        if item.is_symlink() and not item.is_dir():
            real = _checked_source(item, root, must_exist=allowed)
        elif item.is_file():
            real = item
        else:
            continue
        if allowed:
            chosen.append((item, real))
    return chosen


def _remove_partial(out_dir: Path, created: bool) -> None:
    """Undo a failed build: the folder if this build created it, else everything put into it."""
    if created:
        shutil.rmtree(out_dir, ignore_errors=True)
    else:
        for child in out_dir.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def _vendor_package(out_dir: Path, package_dir: Path | None = None) -> None:
    """Copy the hf_attn package next to app.py: a Space installs only ``requirements.txt`` and hf_attn
    is not on PyPI, so the Space carries its own copy. Only what an installed hf_attn holds is copied
    (``*.py`` and the package data of ``VENDOR_DATA``), never ``__pycache__``, dotfiles or stray files;
    a symlink resolving outside the package is refused."""
    package_dir = Path(package_dir or PACKAGE_DIR)
    root = package_dir.resolve()
    for folder, dirs, files in os.walk(package_dir):
        folder = Path(folder)
        rel = folder.relative_to(package_dir)
        for name in list(dirs):
            if (folder / name).is_symlink():
                _checked_source(folder / name, root)
        dirs[:] = sorted(d for d in dirs if not _matches(d, ("__pycache__", ".*", "*.egg-info"))
                         and not (not rel.parts and d in VENDOR_SKIP))
        data_patterns = VENDOR_DATA.get(rel.parts[0], ()) if rel.parts else ()
        for name in sorted(files):
            if name.startswith("."):
                continue
            source, allowed = folder / name, _matches(name, ("*.py", *data_patterns))
            if source.is_symlink():
                source = _checked_source(source, root, must_exist=allowed)
            if allowed:
                target = out_dir / "hf_attn" / rel / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
