"""What a newcomer meets first, each with its check: a local folder always wins over a Hub id; an
argument error answers before any heavy import; analyses land in ``RUN/<battery>`` by default;
``--quiet`` is quiet; ``hf-attn --help`` reads as a guide; the bundled data sets have a public loader;
the library installs without the Space's dependencies (gradio is the ``space`` extra)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import needs_space

REPO_ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}


def _run_python(code: str, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env or OFFLINE, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ local folders before Hub ids
def test_the_spaces_model_folder_needs_no_dot_slash(trained_model_dir, tmp_path, monkeypatch):
    """``HF_ATTN_MODEL=runs/sst-lstm`` (the README's command) serves the folder ``runs/sst-lstm``:
    spelled like a Hub id, but an existing folder wins, and the Hub is never asked."""
    import hf_attn.app.models as explorer
    from hf_attn.app.space import ModelCache, load_model, model_policy, names_hub_repo

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


@needs_space
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


def test_every_loader_takes_an_existing_folder_before_a_hub_id(tmp_path, monkeypatch):
    """A transformers classifier saved as ``owner/tiny`` in the working directory: the explainer, the
    command line's model check and the base-model resolver all take the folder, offline, without
    asking the Hub (an id spelled the same is never looked up)."""
    from architectures import tiny_classifier

    from hf_attn import Explainer
    from hf_attn.batteries.data import is_transformer_model_dir
    from hf_attn.models.pretrained import resolve_base_model

    model, tokenizer = tiny_classifier("bert")
    model.save_pretrained(tmp_path / "owner" / "tiny")
    tokenizer.save_pretrained(tmp_path / "owner" / "tiny")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_base_model("owner/tiny") == str(tmp_path / "owner" / "tiny")
    assert is_transformer_model_dir("owner/tiny")
    explanation = Explainer.from_pretrained("owner/tiny").explain("a b c", adversary=False, ig_steps=2)
    assert len(explanation.sentences) == 1


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
            "import hf_attn, hf_attn.explainer, hf_attn.app.space, hf_attn.cli, hf_attn.hub.push as push\n"
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


# ------------------------------------------------------------------ the command line
def _hf_attn(*args, cwd=REPO_ROOT, timeout=600) -> subprocess.CompletedProcess:
    env = {**OFFLINE, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "hf_attn.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


BAD_ARGUMENTS = [
    (["analyze"], "the following arguments are required: model_dir, --battery"),
    (["analyze", "runs/x"], "the following arguments are required: --battery"),
    (["analyze", "runs/x", "--battery", "nope"], "argument --battery: invalid choice: 'nope'"),
    (["analyze", "runs/x", "--battery", "jw", "--jw-permutations", "0"], "argument --jw-permutations: must be >= 1"),
    (["analyze", "runs/x", "--battery", "jw", "--split", "dev"], "argument --split: invalid choice: 'dev'"),
    (["analyze", "runs/x", "--battery", "jw", "--bogus"], "unrecognized arguments: --bogus"),
    (["eraser"], "the following arguments are required: model_dir"),
    (["eraser", "runs/x", "--ig-steps", "-1"], "argument --ig-steps: must be >= 1, got -1"),
    (["train", "--epochs", "0", "--output-dir", "x"], "argument --epochs: must be >= 1, got 0"),
    (["train", "--threads", "many", "--output-dir", "x"], "argument --threads"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS)
def test_argument_errors_come_before_any_heavy_import(argv, message):
    """A wrong or missing argument is one line, exit code 2, and is found before torch or
    transformers are imported (as fast as --help), with the real parser's own words."""
    code = ("import json, sys\nsys.argv = ['hf-attn', *%r]\nfrom hf_attn.cli import main\n"
            "try:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\nelse:\n    code = 0\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))]))"
            % (argv,))
    result = _run_python(code, env={**OFFLINE, "PYTHONPATH": str(REPO_ROOT)})
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [2, []], result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith(f"hf-attn {argv[0]}: error: "), lines


@pytest.mark.parametrize("argv", [argv for argv, _ in BAD_ARGUMENTS])
def test_the_quick_check_refuses_what_the_real_parser_refuses(argv, capsys):
    from hf_attn import cli

    with pytest.raises(SystemExit) as quick:
        cli._cached_help(argv[0], check=True).parse_args(argv[1:])
    quick_err = capsys.readouterr().err
    with pytest.raises(SystemExit) as real:
        cli.command_parser(argv[0], argv).parse_args(argv[1:])
    assert quick.value.code == real.value.code == 2
    assert quick_err == capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["analyze", "runs/x", "--battery", "jw", "--jw-permutations", "5", "--split", "validation", "--threads", "2"],
    ["analyze", "runs/x", "--battery", "faithfulness", "--quiet", "--overwrite", "--seed", "3"],
    ["analyze", "owner/model", "--battery", "wp", "--wp-lambdas", "0.1,1", "--output-dir", "out"],
    ["eraser", "runs/x", "--fractions", "0.1", "0.2", "--measures", "attention", "random", "--ig-baseline", "pad"],
    ["train", "--dataset", "sst", "--encoder", "cnn", "--epochs", "2", "--learning-rate", "1e-3", "--output-dir", "r",
     "--threads", "auto"],
    ["train", "--output-dir", "r"],
])
def test_the_quick_check_accepts_what_the_real_parser_accepts(argv):
    from hf_attn import cli

    cli.command_parser(argv[0], argv).parse_args(argv[1:])
    cli._cached_help(argv[0], check=True).parse_args(argv[1:])


def test_default_output_folders():
    from hf_attn.cli import default_output_dir

    assert default_output_dir(str(REPO_ROOT / "hf_attn"), "jw") == str(REPO_ROOT / "hf_attn" / "jw")
    assert default_output_dir("owner/distilbert-sst2", "jw") == "distilbert-sst2-jw"
    assert default_output_dir("minilm-l6", "eraser") == "minilm-l6-eraser"


def test_analyze_and_eraser_write_into_the_run_folder_by_default(trained_model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    run = tmp_path / "sst-lstm"
    shutil.copytree(trained_model_dir, run)
    assert main(["analyze", str(run), "--battery", "jw", "--jw-max-instances", "4", "--jw-permutations", "3",
                 "--jw-adversaries", "1", "--jw-steps", "2", "--threads", "1", "--quiet"]) == 0
    assert (run / "jw" / "results.json").is_file() and (run / "jw" / "hf-attn.log").is_file()
    assert "the default --output-dir" in (run / "jw" / "hf-attn.log").read_text()
    assert main(["eraser", str(run), "--max-instances", "3", "--measures", "attention", "random",
                 "--threads", "1", "--quiet"]) == 0
    assert (run / "eraser" / "results.json").is_file()


def test_top_level_help_is_for_users():
    result = _hf_attn("--help")
    assert result.returncode == 0
    assert ":data:" not in result.stdout and "``" not in result.stdout and "add_parser" not in result.stdout
    assert "Is attention explanation?" in result.stdout and "hf-attn COMMAND --help" in result.stdout


def test_quiet_training_prints_only_the_summary(data_folder, tmp_path):
    """``--quiet``: no transformers load report (with its terminal colour codes), no raw Trainer log
    dicts and no "mtime may not be reliable" notice (short epochs on CSV data), only the result table."""
    runs = [("train", "--dataset", data_folder, "--embeddings", "random", "--embedding-dim", "8", "--hidden-size", "4",
             "--epochs", "3", "--threads", "1", "--quiet", "--output-dir", str(tmp_path / "lstm"))]
    from hf_attn.models.pretrained import MissingExtraError, resolve_base_model

    try:
        resolve_base_model("minilm-l6")
        runs.append(("train", "--base-model", "minilm-l6", "--dataset", data_folder, "--max-train-examples", "16",
                     "--epochs", "1", "--max-length", "16", "--threads", "1", "--quiet",
                     "--output-dir", str(tmp_path / "minilm")))
    except MissingExtraError:
        pass  # without the bert extra only the BiLSTM run is checked
    for argv in runs:
        result = _hf_attn(*argv)
        assert result.returncode == 0, result.stderr[-3000:]
        out = result.stdout + result.stderr
        for noise in ("\x1b[", "LOAD REPORT", "{'", "mtime", "not sharded", "it/s", "Loading weights"):
            assert noise not in out, (argv, noise, out[-3000:])
        assert result.stdout.splitlines()[0].split() == ["test", "dev"] and "run.json in" in result.stdout
        assert all(line.startswith(("WARNING", "ERROR")) for line in result.stderr.splitlines()), result.stderr


# ------------------------------------------------------------------ the public data set loader
def test_public_dataset_loader():
    import hf_attn

    sst = hf_attn.datasets.load("sst")
    assert sst.label_names == ["negative", "positive"] and sst.split_names == ["train", "validation", "test"]
    texts, labels = sst.texts("test"), sst.labels("test")
    assert len(texts) == len(labels) == 1821 and all(isinstance(t, str) and t for t in texts[:100])
    assert set(labels) == {0, 1} and sst.labels("dev") == sst.labels("validation")
    assert sst["test"]["text"][:5] == texts[:5]
    frame = sst.to_pandas("test")
    assert list(frame.columns) == ["text", "label", "label_name"] and frame["label_name"][0] in sst.label_names
    assert "train 6,920, validation 872, test 1,821" in repr(sst)
    assert "sst" in hf_attn.datasets.names()
    with pytest.raises(KeyError, match="no split 'dev2'; its splits: train, validation, test"):
        sst.texts("dev2")
    with pytest.raises(hf_attn.datasets.DataError, match="single-text task"):
        sst.pairs("test")


def test_public_dataset_loader_reads_a_local_folder(data_folder):
    import hf_attn.datasets

    local = hf_attn.datasets.load(data_folder)
    assert local.texts("train") and len(local.labels("test")) == len(local.texts("test"))
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        hf_attn.datasets.load("./no/such/data.csv")


def test_the_license_file_is_apache_2():
    """README and pyproject say Apache-2.0; LICENSE holds its full text (and the wheel carries it)."""
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}


# ------------------------------------------------------------------ the quick-start notebook
def _quickstart():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_quickstart", REPO_ROOT / "scripts" / "build_quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebook_and_its_page_are_current():
    """examples/quickstart.ipynb and docs/quickstart.md hold the cells of scripts/build_quickstart.py."""
    assert _quickstart().main(["--check"]) == 0


@pytest.mark.slow  # about 30 s on two cores: a kernel, a one-epoch training, the battery
def test_the_quickstart_notebook_runs(tmp_path):
    """The notebook executed top to bottom by a Jupyter kernel (nbclient), training its model from
    scratch in a temporary folder of its own (nothing written where it runs): every cell runs, the
    sentence renders as HTML, the battery summarises."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    build = _quickstart()
    nb = build.execute(build.notebook(), tmp_path)
    outputs = [cell.outputs for cell in nb.cells if cell.cell_type == "code"]
    assert not any(o.get("output_type") == "error" for cell in outputs for o in cell)
    data = [o.get("data", {}) for cell in outputs for o in cell]
    assert any("TextDataset('sst'" in d.get("text/plain", "") for d in data)
    assert any("text/html" in d and d.get("text/plain", "").startswith("Explanation(") for d in data)
    assert any("'tau_gradient'" in d.get("text/plain", "") for d in data)
    assert not any(tmp_path.iterdir())  # the model went to the notebook's own temporary folder


# ------------------------------------------------------------------ the README's two commands
def test_ci_installs_as_the_readme_says():
    """CI's install line is the README's test command's, word for word, and the README's Python quick
    start defines the texts it explains (through the public loader)."""
    import re

    readme = (REPO_ROOT / "README.md").read_text()
    install = re.search(r'^pip install torch==2\.13\.0 -e "\.\[[a-z,]+\]"', readme, re.M).group(0)
    assert "space" in install and "test" in install
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^{re.escape(install.replace('pip install', 'pip install -q'))}$", ci, re.M), install
    python = readme[readme.index("## Python quick start"):]
    python = python[python.index("```python"):python.index("```", python.index("```python") + 3)]
    assert python.index('hf_attn.datasets.load("sst")') < python.index("texts, labels =") < python.index("ex.jw(texts")


def _default_argv(parser) -> list[str]:
    """Every option of ``parser`` given its own default value (as a user would type it), plus the
    positionals a placeholder."""
    import argparse

    argv = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._StoreTrueAction)):
            continue
        if not action.option_strings:
            argv.append("x")
            continue
        default = action.default
        if action.required and default is None:
            default = list(action.choices)[0] if action.choices else "x"
        if default is None or default == argparse.SUPPRESS or (isinstance(default, (list, tuple)) and not default):
            continue
        values = default if isinstance(default, (list, tuple)) and action.nargs not in (None, "?") else [default]
        if isinstance(default, (list, tuple)) and action.nargs in (None, "?"):
            values = [",".join(str(v) for v in default)]
        argv += [action.option_strings[0], *[str(v) for v in values]]
    return argv


@pytest.mark.parametrize("command", ["analyze", "eraser", "train", "train-grid", "ts-report", "train-seeds", "reproduce"])
def test_the_quick_check_agrees_on_every_options_default(command, capsys):
    """Each option set to its default, as typed: whatever the real parser accepts, the quick check
    accepts too (it never refuses a valid command)."""
    from hf_attn import cli

    real = cli.command_parser(command, [command, "--help"])
    argv = _default_argv(real)
    if command == "analyze":
        argv += ["--battery", "jw"]
    try:
        real.parse_args(argv)
    except SystemExit:
        pytest.skip(f"{command}: the defaults as typed are not a valid command line: {capsys.readouterr().err}")
    cli._cached_help(command, check=True).parse_args(argv)
