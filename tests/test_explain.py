"""hf_attn.explain (the explorer's logic) against slow, explicit per-token computations."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_attn import AttnClassifierForSequenceClassification
from hf_attn.explain import (ExplainError, default_model, explain_sentence, find_local_model, heatmap_html,
                             permutation_figure, summary_markdown)
from hf_attn.measures import jsd, tvd

TEXT = "a gorgeous , witty , seductive movie that never quite works ."


@pytest.fixture(scope="module")
def model_and_tokenizer(trained_model_dir):
    from transformers import AutoTokenizer

    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    return model, AutoTokenizer.from_pretrained(trained_model_dir)


@pytest.fixture(scope="module")
def explanation(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    return explain_sentence(model, tokenizer, TEXT, steps=100)


def test_prediction_attention_and_per_token_probability(model_and_tokenizer, explanation):
    model, tokenizer = model_and_tokenizer
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    length = ids.shape[1]
    assert explanation.tokens == tokenizer.convert_ids_to_tokens(ids[0].tolist())
    assert len(explanation.tokens) == len(TEXT.split())
    with torch.no_grad():
        out = model(input_ids=ids)
        # T&Š p̂_t the slow way: a full forward with all attention forced onto token t
        one_hot = torch.eye(length)
        slow = [model(input_ids=ids, attention_weights=one_hot[t:t + 1]).logits.softmax(-1)[0] for t in range(length)]
    np.testing.assert_allclose(explanation.probabilities, out.logits.softmax(-1)[0].double(), atol=1e-6)
    np.testing.assert_allclose(explanation.attention, out.attentions[0].double(), atol=1e-7)
    assert explanation.predicted == int(out.logits.argmax())
    expected = torch.stack(slow)[:, explanation.predicted].double().numpy()
    np.testing.assert_allclose(explanation.token_probability, expected, atol=1e-6)


def test_leave_one_out_by_explicit_deletion(model_and_tokenizer, explanation):
    model, tokenizer = model_and_tokenizer
    ids = tokenizer(TEXT)["input_ids"]
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids])).logits.softmax(-1)
        for t in range(len(ids)):
            shorter = torch.tensor([ids[:t] + ids[t + 1:]])
            expected = tvd(model(input_ids=shorter).logits.softmax(-1), full)
            assert explanation.loo[t] == pytest.approx(float(expected), abs=1e-6)


def test_gradient_by_finite_differences(model_and_tokenizer, explanation):
    """g_t = |∂ŷ/∂e_t · e_t| with α detached: the directional derivative along e_t, with α held at
    its value (attention_weights override) — central differences in float64."""
    model, tokenizer = model_and_tokenizer
    model64 = AttnClassifierForSequenceClassification.from_pretrained(
        Path(model.name_or_path), torch_dtype=torch.float64).eval()
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    with torch.no_grad():
        embeddings = model64.get_input_embeddings()(ids)
        alpha = model64(input_ids=ids).attentions
        predicted = explanation.predicted
        h = 1e-6
        for t in (0, 3, len(explanation.tokens) - 1):
            step = torch.zeros_like(embeddings)
            step[0, t] = embeddings[0, t] * h
            up = model64(inputs_embeds=embeddings + step, attention_weights=alpha).logits.softmax(-1)[0, predicted]
            down = model64(inputs_embeds=embeddings - step, attention_weights=alpha).logits.softmax(-1)[0, predicted]
            assert explanation.gradient[t] == pytest.approx(abs(float(up - down) / (2 * h)), rel=1e-3, abs=1e-7)


def test_adversary_and_permutations(model_and_tokenizer, explanation):
    e = explanation
    assert e.adversary_attention.sum() == pytest.approx(1.0, abs=1e-5)
    assert len(e.adversaries_tvd) == 5 and len(e.permutation_tvd) == 100
    if e.adversary_feasible:  # the shown adversary is the largest-JSD one within ε
        assert e.adversary_tvd <= e.eps + 1e-9
        feasible = e.adversaries_tvd <= e.eps
        assert e.adversary_jsd == pytest.approx(e.adversaries_jsd[feasible].max())
        assert e.eps_max_jsd == pytest.approx(e.adversary_jsd)
    # its Δŷ and JSD, recomputed with the attention override
    model, tokenizer = model_and_tokenizer
    ids = torch.tensor([tokenizer(TEXT)["input_ids"]])
    adversary = torch.tensor(e.adversary_attention, dtype=torch.float32)[None]
    with torch.no_grad():
        adv_probs = model(input_ids=ids, attention_weights=adversary).logits.softmax(-1)
    assert float(tvd(adv_probs, torch.tensor(e.probabilities, dtype=torch.float32)[None])) == pytest.approx(
        e.adversary_tvd, abs=1e-5)
    assert float(jsd(adversary, torch.tensor(e.attention, dtype=torch.float32)[None])) == pytest.approx(
        e.adversary_jsd, abs=1e-5)
    assert np.all((e.permutation_tvd >= 0) & (e.permutation_tvd <= 1))
    again = explain_sentence(model, tokenizer, TEXT, steps=100)  # seeded: identical
    np.testing.assert_array_equal(again.permutation_tvd, e.permutation_tvd)
    np.testing.assert_array_equal(again.adversary_attention, e.adversary_attention)


def test_rendering(explanation):
    page = heatmap_html(explanation)
    for row in ("attention", "gradient", "loo", "adversary_attention", "token_probability"):
        assert page.count(f'data-row="{row}"') == 1
    assert page.count('class="hfa-cell"') == 5 * len(explanation.tokens)
    assert "&lt;" not in page or "<" in TEXT
    escaped = heatmap_html(type(explanation)(**{**explanation.__dict__, "tokens": ["<b>"] * len(explanation.tokens)}))
    assert "<th class=\"hfa-tok\"><b></th>" not in escaped and "&lt;b&gt;" in escaped
    assert "Prediction:" in summary_markdown(explanation)
    figure = permutation_figure(explanation)
    assert sum(p.get_height() for p in figure.axes[0].patches) == len(explanation.permutation_tvd)
    payload = explanation.to_dict()
    json.dumps(payload, allow_nan=False)
    assert payload["tokens"] == explanation.tokens


def test_bad_input(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(ExplainError, match="empty"):
        explain_sentence(model, tokenizer, "   \n")
    with pytest.raises(ExplainError, match="too long: 30 tokens, the limit is 20"):
        explain_sentence(model, tokenizer, "good " * 30, max_tokens=20)


def test_default_model_choice(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_ATTN_MODEL", raising=False)
    monkeypatch.delenv("HF_ATTN_MODELS", raising=False)
    root = tmp_path / "runs"
    for name, accuracy, encoder in (("a", 0.90, "lstm"), ("b", 0.99, "lstm"), ("c", 0.999, "cnn")):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model_type": "hf_attn", "encoder": encoder,
                                                        "attention": "additive", "variant": "base"}))
        (folder / "run.json").write_text(json.dumps({"task": "sst"}))
        (folder / "metrics.json").write_text(json.dumps({"test_accuracy": accuracy}))
        (folder / "model.safetensors").write_bytes(b"")
    monkeypatch.setenv("HF_ATTN_MODEL_DIRS", str(root))
    assert find_local_model() == str((root / "b").resolve())  # BiLSTM+additive preferred, then accuracy
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "space_config.json").write_text(json.dumps({"models": ["user/first", "user/second"]}))
    assert default_model(app_dir) == "user/first"  # no default_model: the first allowed one
    (app_dir / "space_config.json").write_text(json.dumps({"default_model": "user/model",
                                                           "models": ["user/first"]}))
    assert default_model(app_dir) == "user/model"
    monkeypatch.setenv("HF_ATTN_MODELS", f"list/one{os.pathsep}list/two")
    assert default_model(app_dir) == "list/one"
    monkeypatch.setenv("HF_ATTN_MODEL", "other/model")
    assert default_model(app_dir) == "other/model"
