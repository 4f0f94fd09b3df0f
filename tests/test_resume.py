"""Interruption and determinism: a real ``SIGKILL`` of ``hf-attn train`` and of
``hf-attn analyze`` mid-run, then the same command again → it resumes (Trainer checkpoints /
per-shard analysis caches) and ends with bit-identical results to an uninterrupted run; the same
seed twice → bit-identical metrics and analysis results on CPU.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file

TRAIN_FLAGS = ["--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8", "--epochs", "6",
               "--batch-size", "16", "--quiet"]
JW_FLAGS = ["--battery", "jw", "--jw-max-instances", "40", "--jw-token-budget", "120", "--jw-steps", "40",
            "--jw-permutations", "20", "--quiet"]
TIMEOUT = 600

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "hf_attn.cli", *args]


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def _kill_when(command: list[str], ready, what: str) -> None:
    """Start ``command``, SIGKILL it as soon as ``ready()`` holds; fail if it finished first."""
    process = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + TIMEOUT
    try:
        while not ready():
            if process.poll() is not None:
                raise AssertionError(f"{what} ended (code {process.returncode}) before it could be killed: "
                                     f"{process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: nothing to resume from after {TIMEOUT} s")
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL


def _run(command: list[str]) -> None:
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]


def _completed_checkpoint(run_dir: str) -> bool:
    return bool(glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint-*", "trainer_state.json")))


def _metrics(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    return {k: v for k, v in metrics.items() if k.startswith(("test_", "dev_")) or k == "best_checkpoint"}


@pytest.fixture(scope="module")
def trained_twice(tmp_path_factory, data_folder):
    """One uninterrupted ``hf-attn train`` and one killed after its first checkpoint and rerun."""
    root = tmp_path_factory.mktemp("resume")
    reference, resumed = str(root / "reference"), str(root / "resumed")
    _run(_cli("train", "--dataset", data_folder, *TRAIN_FLAGS, "--output-dir", reference))
    command = _cli("train", "--dataset", data_folder, *TRAIN_FLAGS, "--output-dir", resumed)
    _kill_when(command, lambda: _completed_checkpoint(resumed), "hf-attn train")
    assert not os.path.exists(os.path.join(resumed, "metrics.json"))
    _run(command)
    return reference, resumed


@pytest.mark.slow
def test_killed_training_resumes_to_bit_identical_results(trained_twice):
    reference, resumed = trained_twice
    with open(os.path.join(resumed, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["resumed_from"].startswith("checkpoint-")  # really resumed
    assert _metrics(resumed) == _metrics(reference)
    a = load_file(os.path.join(reference, "model.safetensors"))
    b = load_file(os.path.join(resumed, "model.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    with open(os.path.join(resumed, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    assert {"torch", "transformers", "hf_attn"} <= run["versions"].keys() and run["settings"]["seed"] == 0
    assert not os.path.exists(os.path.join(resumed, "checkpoints"))  # finished: cleaned up


def test_interrupted_checkpoint_save_is_skipped(tmp_path):
    from hf_attn.training.engine import last_complete_checkpoint

    for step, complete in ((10, True), (20, True), (30, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    assert last_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-20")
    assert not (tmp_path / "checkpoint-30").exists()
    assert last_complete_checkpoint(str(tmp_path / "absent")) is None


def _results(out: str) -> tuple[dict, list]:
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    results["summary"].pop("seconds")
    with open(os.path.join(out, "instances.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return results, rows


@pytest.mark.slow
def test_killed_analysis_resumes_to_bit_identical_results(trained_twice, tmp_path):
    model = trained_twice[0]
    reference, resumed = str(tmp_path / "reference"), str(tmp_path / "resumed")
    _run(_cli("analyze", model, *JW_FLAGS, "--output-dir", reference))
    command = _cli("analyze", model, *JW_FLAGS, "--output-dir", resumed)
    _kill_when(command, lambda: len(glob.glob(os.path.join(resumed, "cache", "shard-*"))) >= 2,
               "hf-attn analyze")
    assert not os.path.exists(os.path.join(resumed, "results.json"))
    cached = set(glob.glob(os.path.join(resumed, "cache", "shard-*")))
    _run(command)
    assert cached and not os.path.exists(os.path.join(resumed, "cache"))  # used, then removed
    (ref_results, ref_rows), (res_results, res_rows) = _results(reference), _results(resumed)
    ref_results.pop("model_dir"), res_results.pop("model_dir")
    assert res_results == ref_results and res_rows == ref_rows
    assert {"torch", "transformers", "hf_attn"} <= res_results["versions"].keys()
    assert res_results["parameters"]["seed"] == 0 and res_results["parameters"]["steps"] == 40


@pytest.mark.slow
def test_same_seed_gives_bit_identical_training_and_analysis(trained_twice, small_sst, tmp_path):
    """Determinism: two trainings with the same seed are bit-identical (the resume test above
    compares the weights of two CLI runs); here the battery runs twice on freshly loaded models and
    gives the same arrays bit for bit."""
    from transformers import PreTrainedTokenizerFast

    from hf_attn.batteries.jw.battery import JWSettings, run_jw_battery
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    reference = trained_twice[0]
    settings = JWSettings(steps=30, num_permutations=10, token_budget=150, seed=3)
    texts = list(small_sst.splits["test"]["text"])[:25]
    runs = []
    for _ in range(2):
        model = AttnClassifierForSequenceClassification.from_pretrained(reference).eval()
        tokenizer = PreTrainedTokenizerFast.from_pretrained(reference)
        runs.append(run_jw_battery(settings.adapter(model, tokenizer), texts, settings=settings, progress=False))
    (a, sa), (b, sb) = runs
    for name in ("probabilities", "permutation_tvd", "adversary_tvd", "adversary_jsd", "eps_max_jsd"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("attention", "gradient", "loo", "adversary_attention"):
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(getattr(a, name), getattr(b, name)))
    sa.pop("seconds"), sb.pop("seconds")
    assert json.dumps(sa, default=str) == json.dumps(sb, default=str)
