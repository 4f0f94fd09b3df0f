"""What a newcomer meets first, each with its check: a local folder always wins over a Hub id; an
argument error answers before any heavy import; analyses land in ``RUN/<battery>`` by default;
``--quiet`` is quiet; ``hf-attn --help`` reads as a guide; the bundled data sets have a public loader;
the library installs without the Space's dependencies (gradio is the ``space`` extra)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}


def _run_python(code: str, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env or OFFLINE, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ local folders before Hub ids
def test_the_spaces_model_folder_needs_no_dot_slash(trained_model_dir, tmp_path, monkeypatch):
    """``HF_ATTN_MODEL=runs/sst-lstm`` (the README's command) serves the folder ``runs/sst-lstm``:
    spelled like a Hub id, but an existing folder wins, and the Hub is never asked."""
    import hf_attn.explorer as explorer
    from hf_attn.explorer import ModelCache, load_model, model_policy, names_hub_repo

    shutil.copytree(trained_model_dir, tmp_path / "runs" / "sst-lstm")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_ATTN_MODEL", "runs/sst-lstm")
    monkeypatch.delenv("HF_ATTN_MODELS", raising=False)
    monkeypatch.delenv("HF_ATTN_ALLOW_ANY_MODEL", raising=False)

    def no_hub(repo_id):
        raise AssertionError(f"the Hub was asked for {repo_id!r}")

    monkeypatch.setattr(explorer, "_download_hub_model", no_hub)
    assert not names_hub_repo("runs/sst-lstm")  # spelled like a Hub id, but a folder here
    assert names_hub_repo("runs/no-such-model")  # no such folder: a Hub id
    policy = model_policy()
    model, tokenizer = ModelCache(policy).get("runs/sst-lstm")
    assert model.config.model_type == "hf_attn"
    model, _ = load_model("runs/sst-lstm")  # a script's trusted name, no policy
    assert model.config.model_type == "hf_attn"


def test_the_space_app_starts_on_a_folder_named_like_a_hub_id(trained_model_dir, tmp_path):
    """The app's own start-up, as ``HF_ATTN_MODEL=runs/sst-lstm python -m hf_attn.spaces_app.app``
    runs it, offline: it serves ``local:sst-lstm`` (no Hub retries)."""
    shutil.copytree(trained_model_dir, tmp_path / "runs" / "sst-lstm")
    code = ("import runpy; app = runpy.run_path(%r);"
            "policy, cache, because = app['startup']();"
            "print(list(app['display_names'](policy.models)), because)") % str(REPO_ROOT / "spaces_app" / "app.py")
    env = {**OFFLINE, "HF_ATTN_MODEL": "runs/sst-lstm", "HF_ATTN_MODELS": "", "HF_HUB_ETAG_TIMEOUT": "1"}
    result = _run_python(code, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "['local:sst-lstm'] set by the HF_ATTN_MODEL variable" in result.stdout


# ------------------------------------------------------------------ the library without gradio
def test_gradio_is_the_space_extra():
    from hf_attn.hub.push import GRADIO_PIN

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("gradio") for dep in project["dependencies"])
    assert project["optional-dependencies"]["space"] == [f"gradio=={GRADIO_PIN}"]


def test_the_library_imports_without_gradio():
    """With gradio unimportable the library, the explainer, the Space's helpers and the command line
    load; publishing a metric works (its sdk_version is the space extra's pin)."""
    code = ("import sys; sys.modules['gradio'] = None\n"
            "import hf_attn, hf_attn.explainer, hf_attn.explorer, hf_attn.cli, hf_attn.hub.push as push\n"
            "assert push._gradio_version()\n"
            "print('ok')")
    result = _run_python(code)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_push_space_without_gradio_names_the_extra(monkeypatch, capsys, tmp_path):
    from hf_attn.cli import main

    monkeypatch.setitem(sys.modules, "gradio", None)  # `import gradio` fails, as when it is not installed
    assert main(["push-space", "--model", "me/model", "--repo-id", "me/space", "--to-dir", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "hf_attn[space]"' in err[0], err
    assert not (tmp_path / "s").exists()


def test_the_space_app_without_gradio_names_the_extra():
    code = ("import sys, runpy; sys.modules['gradio'] = None; runpy.run_path(%r, run_name='__main__')"
            % str(REPO_ROOT / "spaces_app" / "app.py"))
    result = _run_python(code)
    assert result.returncode == 2
    assert result.stderr.strip() == ('the explorer Space needs gradio, which is not installed: '
                                     'pip install "hf_attn[space]"')
