"""Several processes with ``accelerate launch`` on CPU: training (DDP, gloo) and the J&W
battery (shards split with ``Accelerator.split_between_processes``, gathered on every process,
written by the main one) give the results of one process.

On a CPU-only machine ``accelerate launch --multi_gpu --num_processes 2`` starts the processes
(torchrun); hf_attn then asks for ``Accelerator(cpu=True)`` / ``TrainingArguments(use_cpu=True)``,
which gives the MULTI_CPU (gloo) backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = [pytest.mark.skipif(shutil.which("accelerate") is None, reason="accelerate CLI not installed"),
              pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]

# 600 training sentences = 25 batches of 24, each split 12 + 12 between the two processes
TRAIN_FLAGS = ["--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8", "--epochs", "2",
               "--batch-size", "24", "--quiet"]
JW_FLAGS = ["--battery", "jw", "--jw-max-instances", "40", "--jw-token-budget", "120", "--jw-steps", "30",
            "--jw-permutations", "10", "--quiet"]


def _launch(*args, processes: int = 2) -> None:
    command = ["accelerate", "launch", "--multi_gpu", "--num_processes", str(processes), "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "hf_attn.cli", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


def _single(*args) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "hf_attn.cli", *args], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_folder):
    root = tmp_path_factory.mktemp("mp")
    one, two = str(root / "one"), str(root / "two")
    _single("train", "--dataset", data_folder, *TRAIN_FLAGS, "--output-dir", one)
    _launch("train", "--dataset", data_folder, *TRAIN_FLAGS, "--output-dir", two)
    return one, two


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_two_process_training_matches_one_process(trained):
    """Same data order and effective batch (each batch of 24 is split 12 + 12, gradients averaged):
    the same model up to floating-point summation order."""
    one, two = trained
    m1, m2 = _read(os.path.join(one, "metrics.json")), _read(os.path.join(two, "metrics.json"))
    assert _read(os.path.join(two, "run.json"))["processes"] == 2
    for key in ("test_accuracy", "dev_accuracy"):
        assert abs(m1[key] - m2[key]) <= 0.02, (key, m1[key], m2[key])
    for key in ("test_roc_auc", "dev_roc_auc"):
        assert abs(m1[key] - m2[key]) <= 0.01, (key, m1[key], m2[key])
    from safetensors.numpy import load_file

    w1, w2 = load_file(os.path.join(one, "model.safetensors")), load_file(os.path.join(two, "model.safetensors"))
    worst = max(float(np.max(np.abs(w1[k] - w2[k]))) for k in w1)
    assert worst < 1e-4, worst  # measured: 2.4e-7 (float summation order)


def test_two_process_analysis_matches_one_process(trained, tmp_path):
    model = trained[0]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    _single("analyze", model, *JW_FLAGS, "--output-dir", one)
    _launch("analyze", model, *JW_FLAGS, "--output-dir", two)
    r1, r2 = _read(os.path.join(one, "results.json")), _read(os.path.join(two, "results.json"))
    for r in (r1, r2):
        r["summary"].pop("seconds")
    assert r2.get("processes") == 2 and r1.get("processes", 1) == 1
    r1.pop("processes", None), r2.pop("processes", None)
    assert r1 == r2
    with open(os.path.join(one, "instances.jsonl"), encoding="utf-8") as f1, \
            open(os.path.join(two, "instances.jsonl"), encoding="utf-8") as f2:
        assert f1.read() == f2.read()
