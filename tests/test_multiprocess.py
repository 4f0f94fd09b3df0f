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


FAITH_FLAGS = ["--battery", "faithfulness", "--faith-max-instances", "24", "--faith-shard-sentences", "5",
               "--faith-methods", "attention,gradient_x_input,integrated_gradients,leave_one_out,random",
               "--faith-ig-steps", "4", "--faith-ig-target", "0", "--faith-soft-draws", "2",
               "--faith-soft-max-draws", "4", "--faith-naopc-beam", "2", "--faith-rationales", "sst_rationales",
               "--quiet"]


def _timings_out(record: dict) -> dict:
    """A faithfulness results.json without what a clock or the launch decides."""
    record = json.loads(json.dumps(record))
    for key in ("cost", "processes", "sharding"):
        record.pop(key)
    record["settings"].pop("naopc_seconds")
    for key in ("soft", "naopc"):
        record["metric_details"][key].pop("seconds")
    return record


def test_two_process_faithfulness_table_matches_one_process(trained, tmp_path):
    """The table's shards split between two processes (5 shards: 3 + 2), gathered and written once:
    every value the same as one process computing the same shards (max |Δ| = 0)."""
    model = trained[0]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    _single("analyze", model, *FAITH_FLAGS, "--output-dir", one)
    _launch("analyze", model, *FAITH_FLAGS, "--output-dir", two)
    r1, r2 = _read(os.path.join(one, "results.json")), _read(os.path.join(two, "results.json"))
    assert r1["processes"] == 1 and r2["processes"] == 2
    assert r2["sharding"]["shards"] == 5 and sorted(sum(r2["sharding"]["shards_by_process"].values(), [])) == \
        [0, 1, 2, 3, 4] and len(r2["sharding"]["shards_by_process"]) == 2
    assert _timings_out(r1) == _timings_out(r2)
    assert "auprc" in r1["table"]["attention"]
    with np.load(os.path.join(one, "attributions.npz")) as a1, np.load(os.path.join(two, "attributions.npz")) as a2:
        assert a1.files == a2.files and all(np.array_equal(a1[k], a2[k], equal_nan=True) for k in a1.files)
    assert not os.path.exists(os.path.join(two, "cache"))


ATTRIBUTIONS_SCRIPT = """
import json, os, sys
sys.path.insert(0, {tests!r})
from architectures import TEXTS, tiny_classifier
from hf_attn import Explainer
from hf_attn.core.sharding import is_main_process

model, tokenizer = tiny_classifier("bert")
explainer = Explainer(model, tokenizer, device="cpu")
out = explainer.attributions(TEXTS * 3, methods=["attention", "rollout", "gradient_x_input", "integrated_gradients",
                                                   "leave_one_out"], ig_steps=4, ig_target=None)
if is_main_process():
    with open(sys.argv[1], "w") as f:
        json.dump({{"values": out.values, "undefined": {{m: {{str(k): v for k, v in d.items()}}
                   for m, d in out.undefined.items()}}, "methods": out.methods, "predicted": out.predicted}}, f)
"""


def test_two_process_attributions_match_one_process(tmp_path):
    """``Explainer.attributions`` under ``accelerate launch``: the length groups split between two
    processes, every text's scores those of one process (max |Δ| = 0)."""
    script = tmp_path / "attributions.py"
    script.write_text(ATTRIBUTIONS_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    done = subprocess.run([sys.executable, str(script), str(one)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    done = subprocess.run(["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(two)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert _read(one) == _read(two)
