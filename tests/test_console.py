"""What a user sees on the console: ``hf-attn --version``; ``--help`` of every command without
importing torch (the parsers stored in hf_attn/cli_help.json, equal to the real ones); a readable
summary table after ``train`` and each battery instead of raw dicts or JSON; ``--quiet`` (no bars,
not even "Loading weights"), ``--verbose``; library INFO lines (httpx) kept off the console; and
the full log in the output folder's ``hf-attn.log``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_attn import cli

ROOT = Path(__file__).resolve().parents[1]


def _hf_attn(*args, cwd=ROOT, env_extra=None, timeout=600):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "hf_attn.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def test_version():
    from hf_attn import __version__

    done = _hf_attn("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"hf-attn {__version__}"


def test_help_cache_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_cli_help.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("columns", ["60", "100", "400"])
def test_cached_help_is_the_real_parsers_help(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    specs = json.loads((ROOT / "hf_attn" / cli.HELP_CACHE).read_text())
    assert {"analyze", "train", "train-grid", "ts-report", "train-seeds", "eraser", "reproduce"} <= set(specs)
    for name, spec in specs.items():
        real = cli.command_parser(name, [name, "--help"]).format_help()
        assert cli.parser_from_spec(spec).format_help() == real, name


@pytest.mark.parametrize("command", ["analyze", "train-grid", "eraser", "train"])
def test_command_help_imports_no_torch(command):
    code = ("import json, sys\nsys.argv = ['hf-attn', %r, '--help']\nfrom hf_attn.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))))"
            % command)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"usage: hf-attn {command}" in done.stdout
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_train_summary_is_a_table():
    metrics = {"test_accuracy": 0.8137, "test_f1": 0.8, "test_macro_f1": 0.81, "test_roc_auc": 0.899,
               "dev_accuracy": 0.79, "dev_f1": 0.78, "dev_macro_f1": 0.785, "dev_roc_auc": 0.88,
               "train_seconds": 31.24, "train_tokens_per_second": 35012.3, "best_checkpoint": "checkpoint-432"}
    text = cli.format_train_summary(metrics, "runs/sst")
    lines = text.splitlines()
    assert lines[0].split() == ["test", "dev"]
    assert lines[1].split() == ["accuracy", "0.814", "0.790"] and lines[4].split() == ["ROC-AUC", "0.899", "0.880"]
    assert "trained in 31.2 s (35,012 tokens/s)" in lines[-1] and "checkpoint-432" in lines[-1]
    assert "{" not in text and "'" not in text
    nested = cli.format_train_summary({"test": {"accuracy": 0.9, "f1": 0.91}, "seconds": 12.0}, "out")
    assert nested.splitlines()[1].split() == ["accuracy", "0.900", "–"]


def test_wp_and_ts_summaries_are_labelled():
    from hf_attn.batteries.ts.battery import format_ts_summary
    from hf_attn.batteries.wp.battery import format_wp_summary

    wp = format_wp_summary({"num_instances": 1821, "split": "test", "base": {"f1": 0.81},
                            "uniform_baseline": {"base": {"f1": 0.81}, "uniform": {"f1": 0.79}, "f1_gap": 0.02},
                            "seed_variance": {"summary": {"mean_max_jsd": 0.1, "mean_max_tvd": 0.05, "f1_mean": 0.8,
                                                          "f1_std": 0.01}},
                            "consistent_adversary": {"rows": [{"lambda": 0.001, "f1": 0.8, "mean_jsd": 0.4,
                                                               "mean_tvd": 0.02}]},
                            "diagnostic_mlp": {"guides": {"uniform": {"test_f1": 0.8, "published_sst_f1": 0.812}},
                                               "ordering": {"holds": False}},
                            "timing": {"wall_seconds": 12.5}})
    assert "uniform attention (§3.2)" in wp and "gap 0.020" in wp
    assert "consistent adversary λ = 0.001" in wp and "diagnostic MLP, uniform guide" in wp
    assert "(W&P SST 0.812)" in wp and "does not hold" in wp and "{" not in wp
    ts = format_ts_summary({"instances": 60, "split": "test", "seconds": 1.2,
                            "model": {"encoder": "lstm", "attention": "additive", "variant": "tying"},
                            "fragility": {"f1_trained": 80.0, "f1_uniform": 70.5, "delta_uniform": -9.5,
                                          "f1_permuted": 60.0, "delta_permuted": -20.0, "permutation_draws": 10},
                            "token_probability": {"token_probability": 0.61, "correct_instances": 50},
                            "mutual_information": {"MF": {"mi": 1.2, "types": 1000, "n_clusters": 1000}},
                            "jw_adversary": {"status": "ok", "mean_eps_max_jsd": 0.3, "mean_tvd": 0.004,
                                             "fraction_feasible": 0.9, "instances": 500}})
    assert "variant tying" in ts and "uniform α 70.5 (Δ -9.5)" in ts and "MF 1.200" in ts
    assert "mean ε-max JSD 0.300" in ts and "{" not in ts


def _console_args(tmp_path, **flags):
    return argparse.Namespace(quiet=flags.get("quiet", False), verbose=flags.get("verbose", False),
                              output_dir=str(tmp_path / "out"))


@pytest.mark.parametrize("verbose", [False, True])
def test_library_info_lines_stay_off_the_console_but_reach_the_log_file(tmp_path, capsys, verbose):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        handler = cli.console_logging(_console_args(tmp_path, verbose=verbose))
        logging.getLogger("httpx").info("HTTP Request: POST http://hub/api/repos/create")
        logging.getLogger("hf_attn.training.engine").info("step 1/2: loss 0.5", extra={"console": False})
        logging.getLogger("hf_attn.hub").info("uploaded")
        assert not (tmp_path / "out").exists()  # nothing written into a folder the command has not made
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "results.json").write_text("{}")
        logging.getLogger("hf_attn.hub").warning("done")
        handler.close()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert ("HTTP Request" in err) == verbose and "uploaded" in err and "done" in err
    assert ("loss 0.5" in err) == verbose
    log = (tmp_path / "out" / cli.LOG_FILE).read_text()
    for line in ("HTTP Request", "step 1/2: loss 0.5", "uploaded", "done"):
        assert line in log


def test_a_command_that_fails_at_once_leaves_no_folder(tmp_path):
    assert cli.main(["analyze", str(tmp_path / "missing"), "--battery", "jw", "--output-dir",
                     str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_train_prints_a_table_quiet_hides_every_bar_and_logs_go_to_the_run_folder(data_folder, tmp_path):
    common = ["--dataset", data_folder, "--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8",
              "--epochs", "1", "--threads", "1"]
    done = _hf_attn("train", *common, "--output-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-7].split() == ["test", "dev"] and "trained in" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("split of ")  # the split (given: a folder of files) and classes
    assert "{'loss'" not in done.stdout + done.stderr and "'eval_loss'" not in done.stdout + done.stderr
    assert "Loading weights" not in done.stderr and "Writing model shards" not in done.stderr
    assert "step " in (tmp_path / "run" / "hf-attn.log").read_text()
    quiet = _hf_attn("analyze", str(tmp_path / "run"), "--battery", "jw", "--jw-max-instances", "10",
                     "--jw-steps", "5", "--threads", "1", "--quiet", "--output-dir", str(tmp_path / "jw"))
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stdout == "" and "it/s" not in quiet.stderr and "Loading weights" not in quiet.stderr
    assert (tmp_path / "jw" / "hf-attn.log").is_file()
    results = json.loads((tmp_path / "jw" / "results.json").read_text())
    assert results["parameters"]["num_threads"] == 1  # --threads 1 is recorded, not null
