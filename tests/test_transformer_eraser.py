"""ERASER + integrated gradients on BERT-family classifiers: IG completeness, ERASER's
word-piece removal against an explicit loop, and the CLI (`hf-attn eraser DIR`, `hf-attn analyze DIR
--battery jw --dataset FILE --text-column … --label-column …`) on a tiny random BertConfig with a
WordPiece tokenizer built here (no download)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from hf_attn.batteries.eraser import battery as et
from hf_attn.batteries.eraser import units as eu
from hf_attn.adapters import transformer_attention as ta
from test_transformer import TEXTS, bert_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return bert_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2, initializer_range=0.2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ta.register_override_attention()
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():  # a sharper head: probabilities that move when pieces are removed (a real test)
        model.classifier.weight.mul_(3.0)
        model.get_input_embeddings().weight[0].normal_(0, 0.2)  # [PAD] ≠ 0 (as in BERT): baselines differ
    return model


@pytest.fixture(scope="module")
def adapter(model, tokenizer):
    from hf_attn.adapters import adapter_for

    return adapter_for(model, tokenizer, device="cpu")


@pytest.fixture(scope="module")
def folder(model, tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "tiny"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_units_exclude_added_specials_only(tokenizer):
    ids, mask, units = eu.encode(tokenizer, ["the good movies", "dull xyz"])
    # [CLS] the good movie ##s [SEP] / [CLS] dull [UNK] [SEP] [PAD]: an [UNK] of the text is a unit
    assert units.tolist() == [[False, True, True, True, True, False], [False, True, True, False, False, False]]
    assert eu.special_frame(ids, mask, units) == ([2], [3])


@pytest.mark.parametrize("baseline", ["zero", "pad"])
def test_ig_completeness(model, adapter, tokenizer, baseline):
    """Σ_t IG_t = ŷ_c(x) − ŷ_c(x') (Sundararajan et al. 2017 §3) within the quadrature error, x' the
    text with its pieces' word embeddings at the baseline ([CLS]/[SEP]/positions unchanged)."""
    ids, mask, units = eu.encode(tokenizer, TEXTS)
    ig = et.integrated_gradients_units(adapter, ids, mask, units, steps=50, baseline=baseline,
                                             token_budget=2048)
    difference = ig.target_input - ig.target_baseline
    assert difference.abs().max() > 0.02  # a real test: the baseline moves the output
    assert (ig.completeness_gap.abs() <= 1e-3 * difference.abs().clamp_min(1e-3) + 1e-6).all()
    assert (ig.attributions[~units] == 0).all()
    # f(x') by hand: the content word embeddings replaced by the baseline
    emb = model.get_input_embeddings()
    with torch.no_grad():
        e = emb(ids)
        b = torch.zeros_like(e) if baseline == "zero" else emb.weight[0].expand_as(e)
        p = model(inputs_embeds=torch.where(units[..., None], b, e), attention_mask=mask).logits.softmax(-1)
    torch.testing.assert_close(ig.target_baseline, p.gather(1, ig.target_class[:, None]).squeeze(1).double(),
                               atol=1e-6, rtol=0)
    coarse = et.integrated_gradients_units(adapter, ids, mask, units, steps=1, baseline=baseline)
    assert coarse.completeness_gap.abs().max() > ig.completeness_gap.abs().max()  # converges with steps


def _probability(model, pieces) -> torch.Tensor:
    ids = torch.tensor([[2, *pieces, 3]])
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.softmax(-1)[0].double()


def test_eraser_matches_an_explicit_loop(model, tokenizer):
    """Comprehensiveness / sufficiency on 3 sentences = the definition written out: rank the word
    pieces, delete the top k (or keep only them), re-frame as [CLS] … [SEP]. At 100 % everything is
    removed ([CLS] [SEP]); sufficiency with nothing kept is the same input."""
    texts = TEXTS[:2] + [TEXTS[3]]
    ids, mask, units = eu.encode(tokenizer, texts)
    importance = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    fractions = (0.01, 0.5, 1.0)
    result = eu.framed_eraser_scores(model, ids, mask, units, importance, fractions)
    for i, text in enumerate(texts):
        pieces = tokenizer(text)["input_ids"][1:-1]
        scores = importance[i, 1:1 + len(pieces)].tolist()
        full = _probability(model, pieces)
        c = int(full.argmax())
        ranking = sorted(range(len(pieces)), key=lambda t: -scores[t])
        for j, f in enumerate(fractions):
            top = set(ranking[:min(len(pieces), max(1, math.ceil(f * len(pieces))))])
            removed = _probability(model, [w for t, w in enumerate(pieces) if t not in top])
            kept = _probability(model, [w for t, w in enumerate(pieces) if t in top])
            assert result.comprehensiveness[i, j] == pytest.approx(float(full[c] - removed[c]), abs=1e-5)
            assert result.sufficiency[i, j] == pytest.approx(float(full[c] - kept[c]), abs=1e-5)
        nothing = _probability(model, [])  # sufficiency of the empty rationale (fraction 0)
        assert result.comprehensiveness[i, -1] == pytest.approx(float(full[c] - nothing[c]), abs=1e-5)
        assert result.sufficiency[i, -1] == pytest.approx(0.0, abs=1e-5)
        assert result.predicted_class[i] == c and result.lengths[i] == len(pieces)


def test_table_measures_and_rollout(adapter, tokenizer):
    ids, mask, units = eu.encode(tokenizer, TEXTS)
    table = et.eraser_table(adapter, ids, mask, units, ig_steps=8)
    assert list(table["measures"]) == list(et.MEASURES)
    for row in table["measures"].values():
        assert -1 <= row["comprehensiveness_aopc"] <= 1 and row["num_instances"] == len(TEXTS)
    assert "attention~rollout" in table["kendall_tau"] and "ig_completeness" in table


def test_cli_eraser_on_a_foreign_folder(folder, tmp_path, capsys):
    """`hf-attn eraser DIR` on a BERT-family folder not trained here: needs --dataset; a CSV with its
    own column names; a bad column is one line and exit code 2."""
    from hf_attn.cli import main

    data = tmp_path / "some.csv"
    data.write_text("sentence,y\n" + "".join(f"{t.replace(',', '')},{i % 2}\n" for i, t in enumerate(TEXTS)))
    out = tmp_path / "eraser"
    assert main(["eraser", str(folder), "--output-dir", str(tmp_path / "o0"), "--quiet", "--threads", "1"]) == 2
    assert "--dataset" in capsys.readouterr().err
    code = main(["eraser", str(folder), "--output-dir", str(out), "--dataset", str(data), "--text-column",
                 "sentence", "--label-column", "y", "--ig-steps", "4", "--quiet", "--threads", "1"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    for key in ("analysis", "paper", "model_dir", "dataset", "split", "num_instances", "model", "request",
                "measures", "kendall_tau", "parameters", "seconds", "ig_completeness", "versions", "figure"):
        assert key in results
    assert results["num_instances"] == len(TEXTS) and results["split"] == "all"
    assert set(results["measures"]) == set(et.MEASURES)
    assert (out / "eraser.png").stat().st_size > 0 and (out / "eraser.md").exists()
    capsys.readouterr()
    code = main(["eraser", str(folder), "--output-dir", str(tmp_path / "bad"), "--dataset", str(data),
                 "--text-column", "text", "--label-column", "y", "--quiet", "--threads", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "'text'" in err and "some.csv" in err


def test_cli_analyze_jw_with_columns(folder, tmp_path, capsys):
    from hf_attn.cli import main

    data = tmp_path / "some.csv"
    data.write_text("sentence,y\n" + "".join(f"{t.replace(',', '')},{i % 2}\n" for i, t in enumerate(TEXTS)))
    out = tmp_path / "jw"
    code = main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--text-column", "sentence",
                 "--label-column", "y", "--output-dir", str(out), "--jw-permutations", "4", "--jw-adversaries",
                 "2", "--jw-steps", "3", "--quiet", "--threads", "1"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["summary"]["num_instances"] == len(TEXTS) and results["dataset"] == "some.csv"
    assert "accuracy" in results["summary"]
    capsys.readouterr()
    code = main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--text-column", "sentence",
                 "--label-column", "label", "--output-dir", str(tmp_path / "bad"), "--quiet", "--threads", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "'label'" in err and "some.csv" in err
