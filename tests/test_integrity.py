"""Data integrity under real use: one writer per output folder,
atomic writes with unique temporary names, resume only with the same settings, a kill during a
checkpoint save never blocks resuming, strict JSON, one-line CLI errors, no pickles in caches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from hf_attn.core.io import (LOCK_NAME, OutputFolderBusy, atomic_write, exclusive_output_folder,
                           write_json_atomic, write_jsonl_atomic)
from hf_attn.training.engine import RunSettingsMismatch, TrainSettings, last_complete_checkpoint, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SMALL = dict(embeddings="random", embedding_dim=16, hidden_size=8, epochs=1, batch_size=32)


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


# ----------------------------------------------------------------------------------------------
# atomic writes


def test_atomic_write_failure_leaves_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    write_json_atomic(path, {"seed": 0})

    class DiskFull(OSError):
        pass

    with pytest.raises(DiskFull):
        with atomic_write(path) as f:
            f.write("x" * 454_000)  # a partial file, as when the disk filled up
            raise DiskFull("No space left on device")
    assert json.loads(path.read_text()) == {"seed": 0}
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_temporary_names_are_unique_and_not_derived_from_the_target(tmp_path):
    path = tmp_path / "results.json"
    with atomic_write(path) as first, atomic_write(path) as second:  # two writers at once
        temporaries = os.listdir(tmp_path)
        assert len(set(temporaries)) == 2 and not any(t.endswith((".tmp", ".tmp.png")) for t in temporaries)
        first.write('{"writer": 1}')
        second.write('{"writer": 2}')
    assert json.loads(path.read_text()) == {"writer": 1}  # the last rename wins, whole
    assert os.listdir(tmp_path) == ["results.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_results_files_respect_the_umask(tmp_path, umask, mode):
    from hf_attn.core.sharding import save_shard_atomic

    old = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "results.json", {"a": 1})
        write_jsonl_atomic(tmp_path / "instances.jsonl", [{"a": 1}])
        save_shard_atomic(str(tmp_path / "shard.npz"), {"x": np.arange(3)})
    finally:
        os.umask(old)
    for name in ("results.json", "instances.jsonl", "shard.npz"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def test_json_is_strict_nan_becomes_null(tmp_path):
    write_json_atomic(tmp_path / "m.json", {"roc_auc": float("nan"), "x": np.float32(np.inf),
                                            "ok": np.float64(0.5), "n": np.int64(3), "a": np.array([1.0, np.nan])})
    text = (tmp_path / "m.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"roc_auc": None, "x": None, "ok": 0.5, "n": 3, "a": [1.0, None]}


# ----------------------------------------------------------------------------------------------
# one writer per output folder

HOLDER = """
import sys, time
from hf_attn.core.io import exclusive_output_folder
with exclusive_output_folder(sys.argv[1], command="holder"):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def held_folder(tmp_path):
    """An output folder locked by another process (killed afterwards)."""
    folder = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], env=_env(), stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "locked"
    yield str(folder), process
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdout.close()


def test_second_writer_in_process_api_fails_at_once(held_folder):
    folder, holder = held_folder
    started = time.monotonic()
    with pytest.raises(OutputFolderBusy, match=f"{folder} is in use by process {holder.pid} .*holder"):
        with exclusive_output_folder(folder):
            pass
    assert time.monotonic() - started < 1
    with pytest.raises(OutputFolderBusy, match=str(holder.pid)):
        train(TrainSettings(**SMALL), folder, progress=False)


@pytest.mark.parametrize("command", [pytest.param("train", marks=pytest.mark.slow), "analyze",
                                     pytest.param("eraser", marks=pytest.mark.slow),
                                     pytest.param("reproduce", marks=pytest.mark.slow)])
def test_second_writer_cli_exits_2_naming_folder_and_holder(held_folder, trained_model_dir, data_folder, command):
    folder, holder = held_folder
    argv = {"train": ["train", "--dataset", data_folder, "--output-dir", folder, "--quiet"],
            "analyze": ["analyze", trained_model_dir, "--battery", "jw", "--output-dir", folder, "--quiet"],
            "eraser": ["eraser", trained_model_dir, "--output-dir", folder, "--quiet"],
            "reproduce": ["reproduce", "--datasets", "sst", "--quick", "--output-dir", folder, "--quiet"]}[command]
    done = subprocess.run([sys.executable, "-m", "hf_attn.cli", *argv], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"hf-attn {command}: error: output folder {folder} is in use by process "
                              f"{holder.pid}"), message
    assert sorted(os.listdir(folder)) == [LOCK_NAME]  # the loser wrote nothing


def test_a_command_that_fails_at_once_leaves_no_folder(tmp_path):
    from hf_attn.cli import main

    out = tmp_path / "never"
    assert main(["train", "--dataset", str(tmp_path / "nowhere.csv"), "--output-dir", str(out), "--quiet"]) == 2
    assert not out.exists()


def test_lock_is_released_when_the_holder_is_killed(held_folder):
    folder, holder = held_folder
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with exclusive_output_folder(folder):  # no stale lock after a kill
        with exclusive_output_folder(folder):  # re-entrant within one process (reproduce → train)
            pass


# ----------------------------------------------------------------------------------------------
# resume only what was asked for


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, small_sst):
    out = str(tmp_path_factory.mktemp("settings") / "run")
    settings = TrainSettings(**SMALL)
    metrics = train(settings, out, task=small_sst, progress=False)
    return out, settings, metrics


def test_same_settings_return_the_finished_run(finished_run, small_sst):
    out, settings, metrics = finished_run
    assert train(replace(settings), out, task=small_sst, progress=False) == metrics


def test_changed_settings_are_refused_with_the_differing_keys(finished_run, small_sst, tmp_path):
    out, settings, metrics = finished_run
    before = {name: os.path.getmtime(os.path.join(out, name)) for name in ("metrics.json", "model.safetensors")}
    with pytest.raises(RunSettingsMismatch, match=r"learning_rate: 0\.001 → 0\.01, seed: 0 → 3.*--overwrite"):
        train(replace(settings, learning_rate=0.01, seed=3), out, task=small_sst, progress=False)
    other_task = replace(small_sst, name="sst-other")
    with pytest.raises(RunSettingsMismatch, match="task: 'sst-small' → 'sst-other'"):
        train(settings, out, task=other_task, progress=False)
    assert before == {name: os.path.getmtime(os.path.join(out, name)) for name in before}  # untouched
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy)
    fresh = train(replace(settings, learning_rate=0.01), copy, task=small_sst, progress=False, overwrite=True)
    stored = json.load(open(os.path.join(copy, "run.json")))["settings"]
    assert stored["learning_rate"] == 0.01 and fresh["resumed_from"] is None


def test_unfinished_run_with_other_settings_is_refused(finished_run, small_sst, tmp_path):
    out, settings, _ = finished_run
    folder = tmp_path / "unfinished"
    (folder / "checkpoints" / "checkpoint-7").mkdir(parents=True)
    (folder / "checkpoints" / "checkpoint-7" / "trainer_state.json").write_text("{}")
    write_json_atomic(folder / "checkpoints" / "train_request.json",
                      {"settings": {**json.load(open(os.path.join(out, "run.json")))["settings"],
                                    "dataset": "imdb"}, "task": "sst-small"})
    with pytest.raises(RunSettingsMismatch, match="an unfinished run with other settings .*dataset: 'imdb' → 'sst'"):
        train(settings, str(folder), task=small_sst, progress=False)
    (folder / "checkpoints" / "train_request.json").unlink()  # a run of unknown settings: refused too
    with pytest.raises(RunSettingsMismatch, match="unknown settings"):
        train(settings, str(folder), task=small_sst, progress=False)


@pytest.mark.slow
def test_cli_refuses_changed_learning_rate(finished_run, data_folder, tmp_path):
    out = str(tmp_path / "cli")
    common = ["--dataset", data_folder, "--embeddings", "random", "--embedding-dim", "16", "--hidden-size", "8",
              "--epochs", "1", "--quiet", "--output-dir", out]
    first = subprocess.run([sys.executable, "-m", "hf_attn.cli", "train", *common], env=_env(),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run([sys.executable, "-m", "hf_attn.cli", "train", *common, "--learning-rate", "0.01"],
                            env=_env(), capture_output=True, text=True, timeout=600)
    assert second.returncode == 2
    message = second.stderr.strip().splitlines()[-1]
    assert message == (f"hf-attn train: error: {out} holds a finished run with other settings (learning_rate: "
                       "0.001 → 0.01); use --overwrite to replace it, or choose another --output-dir")


# ----------------------------------------------------------------------------------------------
# a kill while the Trainer writes its state


@pytest.mark.parametrize("content", ["", '{"global_step": 4', "\x00\x00"])
def test_empty_or_partial_trainer_state_is_discarded(tmp_path, content):
    for step, state in ((2, '{"global_step": 2}'), (4, content)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert last_complete_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-2")
    assert not (tmp_path / "checkpoint-4").exists()


def test_training_resumes_past_a_zero_byte_trainer_state(small_sst, tmp_path):
    out = tmp_path / "run"
    settings = TrainSettings(**{**SMALL, "epochs": 2})
    reference = train(settings, str(tmp_path / "reference"), task=small_sst, progress=False)
    train(replace(settings), str(out), task=small_sst, progress=False, keep_checkpoints=True)
    # Simulate a SIGKILL during the second epoch's save: the last checkpoint's state file is empty.
    last = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[-1]
    (last / "trainer_state.json").write_text("")
    for name in ("metrics.json", "run.json"):
        (out / name).unlink()
    metrics = train(replace(settings), str(out), task=small_sst, progress=False)  # was: JSONDecodeError forever
    assert metrics["resumed_from"] != last.name  # from an earlier complete checkpoint, or from scratch
    assert metrics["test_accuracy"] == pytest.approx(reference["test_accuracy"], abs=1e-9)
    assert not last.exists() or (last / "trainer_state.json").read_text()


# ----------------------------------------------------------------------------------------------
# silent wrong results


def test_single_class_dev_split_warns_and_selects_by_accuracy(small_sst, tmp_path, caplog):
    splits = dict(small_sst.splits)
    dev = small_sst.splits["validation"]
    splits["validation"] = dev.select([i for i, y in enumerate(dev["label"]) if y == 1])
    task = replace(small_sst, splits=type(small_sst.splits)(splits), name="sst-one-class-dev")
    out = tmp_path / "run"
    with caplog.at_level("WARNING"):
        metrics = train(TrainSettings(**SMALL), str(out), task=task, progress=False)
    assert "ROC-AUC is undefined" in caplog.text
    run = json.loads((out / "run.json").read_text())
    assert run["model_selection"] == "accuracy" and "only class(es) ['positive']" in run["model_selection_note"]
    text = (out / "metrics.json").read_text()
    assert "NaN" not in text and json.loads(text)["dev_roc_auc"] is None and metrics["best_checkpoint"]


# ----------------------------------------------------------------------------------------------
# tracebacks → one line, exit 2


def _analyze(model_dir, tmp_path, capsys) -> str:
    from hf_attn.cli import main

    code = main(["analyze", str(model_dir), "--battery", "jw", "--output-dir", str(tmp_path / "out"), "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines, lines
    return lines[-1]


def test_config_weights_mismatch_is_one_line(trained_model_dir, tmp_path, capsys):
    broken = tmp_path / "mismatch"
    shutil.copytree(trained_model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["hidden_size"] = config["hidden_size"] * 2
    (broken / "config.json").write_text(json.dumps(config))
    message = _analyze(broken, tmp_path, capsys)
    assert message.startswith(f"hf-attn analyze: error: {broken}: config.json and model.safetensors disagree "
                              "(size mismatch for"), message


def test_pickled_weights_are_refused_in_one_line(trained_model_dir, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    pickled = tmp_path / "pickled"
    shutil.copytree(trained_model_dir, pickled)
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    message = _analyze(pickled, tmp_path, capsys)
    assert "has only pickled weights (pytorch_model.bin), which are not loaded" in message


def test_missing_tokenizer_names_the_file(trained_model_dir, tmp_path, capsys):
    folder = tmp_path / "no-tokenizer"
    shutil.copytree(trained_model_dir, folder)
    (folder / "tokenizer.json").unlink()
    message = _analyze(folder, tmp_path, capsys)
    assert f"{folder} has no tokenizer.json" in message and "sentencepiece" not in message


def test_a_real_bug_keeps_its_traceback(monkeypatch, trained_model_dir, tmp_path):
    from hf_attn import cli
    from hf_attn.runs import jw

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(jw, "run_jw_battery", broken)
    with pytest.raises(ZeroDivisionError):
        cli.main(["analyze", trained_model_dir, "--battery", "jw", "--output-dir", str(tmp_path / "o"), "--quiet"])
