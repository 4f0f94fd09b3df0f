"""W&P's battery on transformers classifiers (hf_attn.batteries.wp.transformer), on a tiny random
BertConfig with a WordPiece tokenizer built here (no download, no fine-tuned seeds)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score

from hf_attn.adapters import adapter_for
from hf_attn.batteries.wp import transformer as wpt
from hf_attn.batteries.wp.battery import WPSettings
from hf_attn.runs.wp import run_wp
from hf_attn.core.measures import tvd
from hf_attn.adapters import transformer_attention as ta
import test_transformer
from test_transformer import bert_tokenizer

TEXTS = ["the good movies", "not very fun acting but a great story", "dull", "a boring film and a dull plot",
         "very good acting", "bad plot", "great fun", "the dull story and a bad film", "good", "not good"]
LABELS = [1, 1, 0, 0, 1, 0, 1, 0, 1, 0]


@pytest.fixture(scope="module")
def tokenizer():
    return bert_tokenizer()


def tiny_model(tokenizer, layers=2, seed=0):
    return test_transformer.tiny_model(tokenizer, layers, seed, id2label={0: "negative", 1: "positive"},
                                       label2id={"negative": 0, "positive": 1})


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_model(tokenizer)


def adapt(model, tokenizer, layer=-1):
    return adapter_for(model, tokenizer, layer=layer, device="cpu")


def pad_rows(sequences, pad_id=0):
    """Id lists → right-padded (B, T) ids and mask."""
    width = max(len(x) for x in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, x in enumerate(sequences):
        ids[i, :len(x)] = torch.as_tensor(x)
        mask[i, :len(x)] = 1
    return ids, mask


@pytest.fixture(scope="module")
def batch(tokenizer):
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


@torch.no_grad()
def hand_forward(model, ids, mask, cls_rows: dict[int, torch.Tensor]):
    """BERT written out layer by layer (eager softmax attention), with the [CLS] query row of the
    layers in ``cls_rows`` set to the given (B, T) weights for every head: the reference."""
    bert = model.bert
    x = bert.embeddings(input_ids=ids)
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for index, layer in enumerate(bert.encoder.layer):
        sa = layer.attention.self
        b, t, _ = x.shape

        def heads(linear):
            return linear(x).view(b, t, sa.num_attention_heads, sa.attention_head_size).transpose(1, 2)

        q, k, v = heads(sa.query), heads(sa.key), heads(sa.value)
        probs = (q @ k.transpose(-1, -2) * sa.attention_head_size ** -0.5 + additive).softmax(-1)
        if index in cls_rows:
            probs = probs.clone()
            probs[:, :, 0, :] = cls_rows[index].unsqueeze(1)
        context = (probs @ v).transpose(1, 2).reshape(b, t, -1)
        hidden = layer.attention.output(context, x)
        x = layer.output(layer.intermediate(hidden), hidden)
    return model.classifier(bert.pooler(x))


def test_uniform_rows(batch, tokenizer, model):
    ids, mask = batch
    rows = wpt.uniform_cls_rows(mask)
    torch.testing.assert_close(rows.sum(-1), torch.ones(len(ids)))
    for b in range(len(ids)):
        n = int(mask[b].sum())
        torch.testing.assert_close(rows[b, :n], torch.full((n,), 1.0 / n))
        assert (rows[b, n:] == 0).all()
    adapter = adapt(model, tokenizer)
    encoded = adapter.encode(TEXTS)
    content = encoded.content
    own = adapter.forward(encoded).head_rows
    kept = wpt.uniform_cls_rows(mask, content, own)  # specials keep their mass, content uniform
    torch.testing.assert_close(kept.sum(-1), torch.ones(len(ids), 2))
    special = (mask.bool() & ~content).unsqueeze(1).expand_as(own)
    torch.testing.assert_close(kept[special], own[special])
    for b in range(len(ids)):
        values = kept[b][:, content[b]]
        torch.testing.assert_close(values, values[:, :1].expand_as(values))


def test_uniform_override_matches_hand_forward(model, batch, tokenizer):
    """W&P §3.2 intervention: the override really puts uniform [CLS] weights in (every head) — equal
    to the hand-written BERT fed uniform rows, on the last layer (cheap path), a lower layer (full
    forward) and every layer at once; and the unmodified forward equals the eager model."""
    ids, mask = batch
    model.set_attn_implementation("eager")
    try:
        eager = model(input_ids=ids, attention_mask=mask).logits
    finally:
        ta.register_override_attention()
        model.set_attn_implementation(ta.ATTN_IMPLEMENTATION)
    torch.testing.assert_close(hand_forward(model, ids, mask, {}), eager, atol=1e-5, rtol=0)
    uniform = wpt.uniform_cls_rows(mask)
    for layer in (-1, 0):
        adapter = adapt(model, tokenizer, layer)
        out = wpt.forward_batch(adapter, adapter.encode(TEXTS))
        want = hand_forward(model, ids, mask, {layer % 2: uniform}).softmax(-1)
        torch.testing.assert_close(out["uniform"], want, atol=1e-5, rtol=0)
        assert (want - eager.softmax(-1)).abs().max() > 1e-3  # the intervention changes something
        torch.testing.assert_close(out["probabilities"], eager.softmax(-1), atol=1e-5, rtol=0)
        torch.testing.assert_close(out["uniform_every_layer"],
                                   hand_forward(model, ids, mask, {0: uniform, 1: uniform}).softmax(-1),
                                   atol=1e-5, rtol=0)
    # and the attention the model then uses is uniform on the [CLS] row of every layer and head
    from hf_attn.adapters.interface import Intervention

    adapter = adapt(model, tokenizer)
    encoded = adapter.encode(TEXTS)
    record = []
    with torch.no_grad():
        adapter._model_call(encoded.input_ids, encoded.attention_mask, None,
                            Intervention(query=encoded.query, weights=uniform, every_layer=True, record=record))
    assert len(record) == 2
    for _, _, probs, _ in record:
        torch.testing.assert_close(probs[:, :, 0, :], uniform.unsqueeze(1).expand(-1, 2, -1))


def test_uniform_section_f1_against_sklearn(model, tokenizer):
    sequences = wpt.encode_texts(tokenizer, TEXTS, 32)
    outputs = wpt.split_forward(adapt(model, tokenizer), sequences, batch_size=3)  # several length-sorted batches
    section = wpt.uniform_section(outputs, LABELS)
    for name, probs in (("base", outputs["probabilities"]), ("uniform", outputs["uniform"])):
        predictions = probs.argmax(-1)
        got = section["base"] if name == "base" else section["uniform"]
        assert got["f1"] == pytest.approx(f1_score(LABELS, predictions, pos_label=1, zero_division=0))
        assert got["accuracy"] == pytest.approx(accuracy_score(LABELS, predictions))
    assert section["f1_gap"] == pytest.approx(section["base"]["f1"] - section["uniform"]["f1"])
    distance = tvd(torch.from_numpy(outputs["uniform"]), torch.from_numpy(outputs["probabilities"])).numpy()
    assert section["mean_tvd"] == pytest.approx(distance.mean())
    # input order is kept across the length-sorted batches
    one = wpt.split_forward(adapt(model, tokenizer), sequences[1:2], batch_size=1)
    np.testing.assert_allclose(one["uniform"][0], outputs["uniform"][1], atol=1e-6)


def test_seed_variance(model, tokenizer):
    """W&P §3.3: a model with itself as "seed" has JSD 0 and TVD 0; another seed does not."""
    sequences = wpt.encode_texts(tokenizer, TEXTS, 32)
    base = wpt.split_forward(adapt(model, tokenizer), sequences)
    other = wpt.split_forward(adapt(tiny_model(tokenizer, seed=1), tokenizer), sequences, uniform=False)
    same = wpt.seed_variance_section(base, [base], LABELS, ["self"])
    assert same["summary"]["mean_max_jsd"] == pytest.approx(0, abs=1e-9)
    assert same["summary"]["mean_max_tvd"] == pytest.approx(0, abs=1e-9)
    both = wpt.seed_variance_section(base, [base, other], LABELS, ["self", "seed1"], label_names=["n", "p"])
    assert both["summary"]["mean_max_jsd"] > 0.01
    assert both["per_seed"][0]["mean_jsd"] == pytest.approx(0, abs=1e-9)
    assert both["summary"]["mean_median_jsd"] == pytest.approx(both["summary"]["mean_max_jsd"] / 2)  # median of 2
    assert sum(r["count"] for r in both["by_class_and_max_attention"]) == len(TEXTS)


def _folder(model, tokenizer, path, data=None):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if data is not None:  # a run.json naming the data, as hf-attn train --base-model writes it
        (path / "run.json").write_text(json.dumps({"kind": "transformer", "dataset": str(data),
                                                   "settings": {"max_length": 32, "base_model": "tiny"}}))
    return path


def _task():
    from datasets import Dataset, DatasetDict

    from hf_attn.data.tasks import TaskData

    rows = {"text": TEXTS * 3, "label": LABELS * 3}
    return TaskData(DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")}),
                    ["negative", "positive"], "toy")


def test_guided_mlp_uniform_guide(model, tokenizer, tmp_path):
    """W&P §3.4: the UNIFORM guide is 1/n over the content pieces; an MLP fed it through the guide
    column (attention_weights) computes the same as the same weights with frozen uniform attention,
    and training the battery's UNIFORM MLP equals training with hand-made 1/n columns; its test F1 is
    sklearn's on its predictions."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import build_model

    task = _task()
    sequences = wpt.encode_texts(tokenizer, task.splits["train"]["text"], 32)
    ids, guides = wpt.content_columns(wpt.split_forward(adapt(model, tokenizer), sequences, uniform=False), sequences)
    assert ids[0] == [5, 7, 9, 17]  # "the good movie ##s" without [CLS]/[SEP]
    for g in guides:
        assert g.sum() == pytest.approx(1.0) and (g > 0).all()
    uniform = wpt.uniform_columns(ids)
    for i, g in zip(ids, uniform):
        np.testing.assert_allclose(g, np.full(len(i), 1.0 / len(i)))
    embeddings = model.get_input_embeddings().weight.detach()
    settings = wpt.mlp_train_settings("toy", 16, 32, epochs=2)
    assert (settings.encoder, settings.average_activation, settings.attention) == ("average", "tanh", "additive")

    # model level: the guide override with 1/n == the model's own frozen-uniform attention (W&P §3.2 path)
    mlp, _ = build_model(settings, tokenizer, task)
    frozen, _ = build_model(replace(settings, attention="uniform"), tokenizer, task)
    frozen.load_state_dict(mlp.state_dict(), strict=False)
    x, m = pad_rows(ids[:4], 0)
    weights = torch.zeros(x.shape)
    for r, g in enumerate(uniform[:4]):
        weights[r, :len(g)] = torch.as_tensor(g)
    torch.testing.assert_close(mlp(input_ids=x, attention_mask=m, attention_weights=weights).logits,
                               frozen(input_ids=x, attention_mask=m).logits)

    # training level: battery path (guide "uniform") == hand-made columns, deterministic
    model_dir = _folder(model, tokenizer, tmp_path / "tiny")
    wp_settings = wpt.TransformerWPSettings(mlp_guides=("uniform",), mlp_epochs=2, progress=False)
    section = wpt.diagnostic_mlp_section(adapt(model, tokenizer), task, wp_settings, str(tmp_path / "runs"), 32,
                                         str(model_dir))
    all_ids = {s: ids for s in ("train", "validation", "test")}  # the three toy splits are identical
    hand = wpt.train_transformer_guided_mlp(
        str(tmp_path / "hand"), task, tokenizer, embeddings, all_ids,
        {s: [np.full(len(i), 1.0 / len(i)) for i in ids] for s in all_ids}, settings)
    assert section["guides"]["uniform"]["test_f1"] == hand["test_f1"]
    assert section["guides"]["uniform"]["dev_roc_auc"] == hand["dev_roc_auc"]
    trained, _ = load_model_folder(str(tmp_path / "runs" / "mlp-guide-uniform"), expected_type=None)
    other, _ = load_model_folder(str(tmp_path / "hand"), expected_type=None)
    for (name, a), (_, b) in zip(trained.state_dict().items(), other.state_dict().items()):
        torch.testing.assert_close(a, b, msg=name)
    assert not torch.equal(trained.embedding.weight, embeddings)  # the embeddings were trained (W&P)
    x, m = pad_rows(ids, 0)
    w = torch.zeros(x.shape)
    for r, g in enumerate(uniform):
        w[r, :len(g)] = torch.as_tensor(g)
    with torch.no_grad():
        predictions = trained(input_ids=x, attention_mask=m, attention_weights=w).logits.argmax(-1).numpy()
    assert hand["test_f1"] == pytest.approx(f1_score(task.splits["test"]["label"], predictions, zero_division=0))


def test_bad_settings_and_inputs(model, tokenizer, tmp_path):
    with pytest.raises(ValueError, match="mlp_guides"):
        wpt.TransformerWPSettings(mlp_guides=("base",)).validate()
    with pytest.raises(ValueError, match="seed_statistic"):
        wpt.TransformerWPSettings(seed_statistic="mean").validate()
    with pytest.raises(ValueError, match="seed_model_dirs"):
        wpt.TransformerWPSettings(seed_model_dirs="a/b").validate()
    with pytest.raises(ValueError, match="no word pieces"):
        seqs = [[2, 3]]
        wpt.content_columns(wpt.split_forward(adapt(model, tokenizer), seqs, uniform=False), seqs)
    folder = _folder(model, tokenizer, tmp_path / "tiny")
    with pytest.raises(ValueError, match="layer 5 out of range"):
        run_wp(str(folder), str(tmp_path / "o"), WPSettings(transformer_layer=5), texts=TEXTS, labels=LABELS)


def test_cli_analyze_wp_on_a_bert_folder(model, tokenizer, tmp_path, capsys):
    """`hf-attn analyze DIR --battery wp` on a BERT-family folder runs this battery: results.json with
    the BiLSTM battery's sections (seed variance "not run" without seed models), relative paths only,
    figures; then with a seed folder in the runs folder (the base itself: JSD 0)."""
    from hf_attn.cli import main

    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n"
                                                     for t, y in zip(TEXTS, LABELS)))
    folder = _folder(model, tokenizer, tmp_path / "tiny", data)
    out = tmp_path / "out"
    assert main(["analyze", str(folder), "--battery", "wp", "--output-dir", str(out), "--wp-epochs", "1",
                 "--quiet", "--threads", "1"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert str(tmp_path) not in (out / "results.json").read_text()
    assert results["model_dir"] == "../tiny" and results["num_instances"] == len(TEXTS)
    assert results["seed_variance"] == {**results["seed_variance"], "run": False, "status": wpt.SEED_STATUS_NOT_RUN}
    assert set(results["uniform_baseline"]["variants"]) == {"uniform", "uniform_content", "uniform_every_layer"}
    assert set(results["diagnostic_mlp"]["guides"]) == set(wpt.MLP_GUIDES)
    for name in results["figures"].values():
        assert (out / name).stat().st_size > 0
    assert capsys.readouterr().out == ""  # --quiet: the summary is in results.json only
    # a seed-S folder in the runs folder is found; the MLPs are reused, not retrained
    _folder(model, tokenizer, out / "models" / "seed-1")
    assert main(["analyze", str(folder), "--battery", "wp", "--output-dir", str(out), "--wp-epochs", "1",
                 "--quiet", "--threads", "1", "--wp-no-train"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["seed_variance"]["run"] and again["seed_variance"]["seeds"] == ["models/seed-1"]
    assert again["seed_variance"]["summary"]["mean_max_jsd"] == pytest.approx(0, abs=1e-9)
    assert again["diagnostic_mlp"]["guides"] == results["diagnostic_mlp"]["guides"]
    assert (out / "seed_variance.png").stat().st_size > 0


def test_analyze_flags_reach_the_transformer_wp_settings():
    """``hf-attn analyze DIR --battery wp`` flags for BERT-family models become the typed
    :class:`TransformerWPSettings` fields (no fallbacks): layer, head, every-layer switch, seed
    folders, instance limit and dataset."""
    from hf_attn.runs.wp import settings_from_args
    from hf_attn.batteries.wp.transformer import settings_from_wp
    from hf_attn.cli import build_parser

    argv = ["analyze", "m", "--battery", "wp", "--output-dir", "o", "--wp-layer", "2", "--wp-heads", "3",
            "--wp-no-uniform-every-layer", "--wp-seed-model-dirs", "s1", "s2", "--wp-max-instances", "7",
            "--dataset", "reviews.csv", "--text-column", "review", "--label-column", "stars"]
    args = build_parser("analyze", argv).parse_args(argv)
    settings = settings_from_wp(settings_from_args(args))
    assert (settings.layer, settings.heads, settings.uniform_every_layer) == (2, 3, False)
    assert settings.seed_model_dirs == ("s1", "s2") and settings.max_instances == 7
    assert (settings.dataset, settings.text_column, settings.label_column) == ("reviews.csv", "review", "stars")
    argv = ["analyze", "m", "--battery", "wp", "--output-dir", "o"]
    defaults = settings_from_wp(settings_from_args(build_parser("analyze", argv).parse_args(argv)))
    assert (defaults.layer, defaults.heads, defaults.uniform_every_layer, defaults.seed_model_dirs) == (-1, "mean", True, ())
    argv = ["analyze", "m", "--battery", "wp", "--output-dir", "o", "--wp-heads", "all"]
    with pytest.raises(ValueError, match="--wp-heads"):
        settings_from_args(build_parser("analyze", argv).parse_args(argv))
