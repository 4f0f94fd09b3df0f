"""Training through transformers.Trainer: outputs on disk, reloading, resuming, metrics."""

import json
import os
from dataclasses import asdict

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hf_attn.cli import main as cli_main
from hf_attn.training.engine import RunSettingsMismatch, TrainSettings, class_weights_for, classification_metrics, train


def test_run_folder_has_model_tokenizer_and_metrics(trained_model_dir):
    metrics = json.load(open(os.path.join(trained_model_dir, "metrics.json")))
    for key in ("test_accuracy", "test_f1", "test_macro_f1", "test_roc_auc", "dev_roc_auc",
                "train_seconds", "train_tokens_per_second"):
        assert key in metrics and metrics[key] is not None
    run = json.load(open(os.path.join(trained_model_dir, "run.json")))
    assert run["settings"]["seed"] == 0 and run["versions"]["torch"] == torch.__version__
    assert run["model"]["pretrained_coverage"] > 0.9  # GloVe covers SST's words
    assert not os.path.exists(os.path.join(trained_model_dir, "checkpoints"))


def test_reloaded_model_reproduces_the_recorded_test_metrics(trained_model_dir, small_sst):
    model = AutoModelForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_model_dir)
    test = small_sst.splits["test"]
    enc = tokenizer(list(test["text"]), padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1).numpy()
    measured = classification_metrics(probs, np.asarray(test["label"]))
    recorded = json.load(open(os.path.join(trained_model_dir, "metrics.json")))
    assert measured["accuracy"] == pytest.approx(recorded["test_accuracy"], abs=1e-9)
    assert measured["roc_auc"] == pytest.approx(recorded["test_roc_auc"], abs=1e-6)
    assert recorded["test_roc_auc"] > 0.6  # 2 epochs on 600 sentences already learn something


def test_finished_run_is_returned_not_retrained(trained_model_dir, small_sst):
    before = os.path.getmtime(os.path.join(trained_model_dir, "model.safetensors"))
    again = train(TrainSettings(epochs=2, seed=0), trained_model_dir, task=small_sst, progress=False)
    assert again == json.load(open(os.path.join(trained_model_dir, "metrics.json")))
    assert os.path.getmtime(os.path.join(trained_model_dir, "model.safetensors")) == before


def test_resume_from_checkpoint_gives_the_uninterrupted_result(tmp_path, small_sst):
    settings = TrainSettings(epochs=2, seed=1, encoder="average")
    straight = train(settings, str(tmp_path / "straight"), task=small_sst, progress=False)
    # stop after epoch 1 (keeping the Trainer checkpoint), then rerun the 2-epoch job in the same folder
    first = train(TrainSettings(epochs=1, seed=1, encoder="average"), str(tmp_path / "resumed"),
                  task=small_sst, progress=False, keep_checkpoints=True)
    assert first["resumed_from"] is None
    # What a 2-epoch run killed after its first epoch leaves: its checkpoint (the constant schedule
    # makes epoch 1 of both runs the same) and its request; a rerun with other settings is refused.
    os.remove(tmp_path / "resumed" / "metrics.json")
    os.remove(tmp_path / "resumed" / "run.json")
    request = tmp_path / "resumed" / "checkpoints" / "train_request.json"
    with pytest.raises(RunSettingsMismatch, match="epochs: 1 → 2"):
        train(settings, str(tmp_path / "resumed"), task=small_sst, progress=False)
    request.write_text(json.dumps({"settings": asdict(settings), "task": small_sst.name}))
    resumed = train(settings, str(tmp_path / "resumed"), task=small_sst, progress=False)
    assert resumed["resumed_from"] == "checkpoint-19"
    for key in ("test_accuracy", "test_roc_auc", "dev_roc_auc"):
        assert resumed[key] == straight[key]


def test_class_weights_and_metrics_by_hand():
    assert class_weights_for(np.array([0, 0, 0, 1]), 2) == [1.0, 3.0]
    np.testing.assert_allclose(class_weights_for(np.array([0, 1, 1, 2, 2, 2]), 3), [2.0, 1.0, 2 / 3])
    with pytest.raises(ValueError, match="no training examples"):
        class_weights_for(np.array([0, 0]), 2)
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.3, 0.7], [0.6, 0.4]])
    m = classification_metrics(probs, np.array([0, 1, 0, 1]))
    assert m["accuracy"] == 0.5
    assert m["f1"] == pytest.approx(0.5)  # positive class: tp 1, fp 1, fn 1
    assert m["roc_auc"] == pytest.approx(0.5)  # pairs (pos, neg): (.6>.1) (.6<.7) (.4>.1) (.4<.7)


def test_cli_rejects_out_of_range_arguments(capsys):
    with pytest.raises(SystemExit):
        cli_main(["train", "--epochs", "0", "--output-dir", "x"])
    assert "must be >= 1" in capsys.readouterr().err
    code = cli_main(["train", "--dataset", "nowhere.csv", "--output-dir", "x"])
    assert code == 2
    assert "unknown dataset" in capsys.readouterr().err


def test_recorded_dev_metrics_are_those_of_the_saved_model(trained_model_dir, small_sst):
    """metrics.json's dev_* are taken from the Trainer's evaluation of the kept checkpoint (not
    recomputed): they must be the saved model's own dev metrics."""
    model = AutoModelForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_model_dir)
    dev = small_sst.splits["validation"]
    enc = tokenizer(list(dev["text"]), padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1).numpy()
    measured = classification_metrics(probs, np.asarray(dev["label"]))
    recorded = json.load(open(os.path.join(trained_model_dir, "metrics.json")))
    for key in ("accuracy", "f1", "macro_f1"):
        assert measured[key] == pytest.approx(recorded[f"dev_{key}"], abs=1e-9), key
    assert measured["roc_auc"] == pytest.approx(recorded["dev_roc_auc"], abs=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_sparse_embedding_updates_leave_unseen_rows_alone(tmp_path, small_sst, sparse):
    """--sparse-embedding-updates: a row no training batch holds ([MASK]) keeps its initial vector;
    the papers' dense Adam + L2 moves every row. Either way the run is recorded and reloads."""
    from hf_attn.training.engine import build_model

    settings = TrainSettings(epochs=1, seed=2, encoder="average", sparse_embedding_updates=sparse)
    out = tmp_path / "run"
    metrics = train(settings, str(out), task=small_sst, progress=False)
    assert metrics["test_accuracy"] > 0
    run = json.load(open(out / "run.json"))
    assert run["settings"]["sparse_embedding_updates"] is sparse
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    initial, _ = build_model(settings, tokenizer, small_sst)
    trained = AutoModelForSequenceClassification.from_pretrained(str(out))
    mask_id, word_id = tokenizer.mask_token_id, tokenizer.convert_tokens_to_ids("film")
    unseen_moved = not torch.equal(trained.embedding.weight[mask_id], initial.embedding.weight[mask_id])
    assert unseen_moved is not sparse
    assert not torch.equal(trained.embedding.weight[word_id], initial.embedding.weight[word_id])


def test_bf16_trains_under_bfloat16_autocast_and_saves_float32(tmp_path, small_sst):
    """--bf16 (not the papers' float32 arithmetic): the Trainer runs forward and backward under
    bfloat16 autocast, so the same seed ends with other weights than the float32 run; weights,
    checkpoints and run.json stay float32 and record the option."""
    runs = {}
    for bf16 in (False, True):
        settings = TrainSettings(epochs=1, seed=3, encoder="lstm", bf16=bf16)
        out = tmp_path / f"run-{bf16}"
        metrics = train(settings, str(out), task=small_sst, progress=False)
        assert 0 <= metrics["test_accuracy"] <= 1
        assert json.load(open(out / "run.json"))["settings"]["bf16"] is bf16
        runs[bf16] = AutoModelForSequenceClassification.from_pretrained(str(out))
    for (name, a), b in zip(runs[True].named_parameters(), runs[False].parameters()):
        assert a.dtype == torch.float32, name
    lstm = "encoder.forward_layers.0.weight_hh_l0"
    assert not torch.equal(dict(runs[True].named_parameters())[lstm], dict(runs[False].named_parameters())[lstm])


def test_cli_takes_sparse_embedding_updates():
    from hf_attn.cli import build_parser

    parser = build_parser("train")
    assert build_parser("train").parse_args(["train", "--output-dir", "x"]).sparse_embedding_updates is False
    assert parser.parse_args(["train", "--output-dir", "x", "--sparse-embedding-updates"]).sparse_embedding_updates
    assert parser.parse_args(["train", "--output-dir", "x", "--bf16"]).bf16
    assert parser.parse_args(["train", "--output-dir", "x"]).bf16 is False
