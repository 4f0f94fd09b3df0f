"""What an installed hf_attn needs ships inside the wheel: the card templates (top-level hub_cards/),
the Space's files (top-level spaces_app/), both mapped into the package by setup.py, and the evaluate
modules (package data); ``push-metric`` takes a module name; the cards say truthfully how hf_attn installs.
(The wheel itself is built, installed and made to publish by scripts/wheel_publish_check.py in CI.)"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import pytest

from conftest import needs_space

import hf_attn
import hf_attn.hub.push as hub
from hf_attn.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(hf_attn.__file__).resolve().parent


def _package_data() -> dict[str, list[str]]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["package-data"]


def _shipped_folders() -> dict[str, str]:
    """setup.py's ``SHIPPED_FOLDERS``: package name in the wheel → top-level folder of the checkout."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHIPPED_FOLDERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no SHIPPED_FOLDERS")


def test_card_templates_and_space_files_sit_at_the_top_level():
    """The design's layout: hub_cards/ and spaces_app/ at the repository's top level, mapped into the
    wheel as hf_attn.hub_cards and hf_attn.spaces_app; publishing reads them there."""
    assert _shipped_folders() == {"hf_attn.hub_cards": "hub_cards", "hf_attn.spaces_app": "spaces_app"}
    assert Path(hub.CARDS_DIR).resolve() == (REPO_ROOT / "hub_cards").resolve()
    assert Path(hub.SPACE_APP_DIR).resolve() == (REPO_ROOT / "spaces_app").resolve()
    assert {p.name for p in (REPO_ROOT / "hub_cards").glob("*.md")} == {
        "model_card.md", "transformer_model_card.md", "metric_card.md"}
    assert {"app.py", "requirements.txt", "README.md"} <= {p.name for p in (REPO_ROOT / "spaces_app").iterdir()}


@pytest.mark.parametrize("folder", [hub.CARDS_DIR, hub.SPACE_APP_DIR, hub.METRICS_DIR])
def test_publishing_files_are_package_data(folder):
    """Every file a push reads goes into the wheel: a module of a package the build lists, or a file
    matched by pyproject's package-data for its package (templates, the Space's files, every file of
    every evaluate module)."""
    folder = Path(folder).resolve()
    mapped = {(REPO_ROOT / top).resolve(): package for package, top in _shipped_folders().items()}
    if folder in mapped:
        package, base = mapped[folder], folder
    else:
        assert folder.is_relative_to(PACKAGE), folder
        package, base = "hf_attn", PACKAGE
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files
    globs = _package_data()[package]
    for path in files:
        rel = path.relative_to(base).as_posix()
        if path.suffix == ".py" and (folder in mapped or (path.parent / "__init__.py").is_file()):
            continue  # a module of a listed package: shipped as code
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not package data of {package} ({globs})"


@pytest.mark.slow
def test_the_wheel_carries_the_top_level_folders(tmp_path):
    """A wheel built from the project's files holds hub_cards/ and spaces_app/ inside the package."""
    import shutil
    import subprocess
    import sys
    import zipfile

    import importlib.util

    spec = importlib.util.spec_from_file_location("wheel_publish_check", REPO_ROOT / "scripts" / "wheel_publish_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT, source, ignore=check._skipped_in_copy)  # as CI's wheel check copies it
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    names = set(zipfile.ZipFile(next((tmp_path / "dist").glob("hf_attn-*.whl"))).namelist())
    for package, top in _shipped_folders().items():
        expected = {f"{package.replace('.', '/')}/{p.name}" for p in (REPO_ROOT / top).iterdir() if p.is_file()}
        assert expected <= names, sorted(expected - names)
    assert "hf_attn/cli_help.json" in names and "hf_attn/data/sst/test.txt.gz" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


def test_cards_say_how_hf_attn_installs():
    """hf_attn is on no package index: no card tells users to `pip install hf_attn`."""
    for card in Path(hub.CARDS_DIR).glob("*.md"):
        text = card.read_text()
        assert "pip install hf_attn" not in text, card.name
    assert "not on PyPI" in (Path(hub.CARDS_DIR) / "model_card.md").read_text()


def test_model_card_does_not_claim_regularisers_make_attention_faithful():
    """Our own reproduction grades T&Š's fragility/adversary claims "not reproduced"."""
    text = (Path(hub.CARDS_DIR) / "model_card.md").read_text()
    assert "show regularisers (tying, MLM) that make attention more" not in " ".join(text.split())
    assert "did not confirm" in text


def test_push_metric_takes_a_module_name(tmp_path, capsys):
    assert main(["push-metric", "jw_correlation", "--repo-id", "me/jw_correlation", "--to-dir",
                 str(tmp_path / "out")]) == 0
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"jw_correlation.py", "_hf_attn_measures.py",
                                                             "app.py", "README.md", "requirements.txt"}
    assert main(["push-metric", "no_such_module", "--repo-id", "me/x", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "neither a folder nor one of hf_attn's evaluate modules" in err[0]
    assert "jw_correlation" in err[0]


@needs_space
def test_space_vendors_the_package_without_the_app_folder(tmp_path):
    out = hub.build_space_folder(tmp_path / "space", models=["me/model"])
    assert (out / "app.py").is_file() and (out / "hf_attn" / "app" / "space.py").is_file()
    assert not (out / "hf_attn" / "spaces_app").exists() and not (out / "hf_attn" / "hub_cards").exists()
    assert not any(p.suffix == ".md" and p.parent.name in ("hub_cards", "templates") for p in out.rglob("*"))


def test_wheel_check_copies_every_package_folder_and_leaves_out_the_run_outputs(tmp_path):
    """The wheel check builds from a clean copy of the checkout: the top-level output folders
    (runs/, out/) stay behind, but a package folder of the same name (hf_attn/runs) is code and is copied."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wheel_publish_check", REPO_ROOT / "scripts" / "wheel_publish_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    top = check.REPO_ROOT
    assert check._skipped_in_copy(str(top), ["runs", "out", "hf_attn", "build"]) == {"runs", "out", "build"}
    assert check._skipped_in_copy(str(top / "hf_attn"), ["runs", "core", "__pycache__"]) == {"__pycache__"}
    package = {p.name for p in (top / "hf_attn").iterdir() if (p / "__init__.py").is_file()}
    assert "runs" in package
