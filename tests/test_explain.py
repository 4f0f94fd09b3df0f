"""hf_attn.app.space (the explorer's logic) against slow, explicit per-token computations."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_attn import AttnClassifierForSequenceClassification
from hf_attn.app.space import ExplainError, default_model, explain_sentence, find_local_model
from hf_attn.explanation import TIE_TOLERANCE, token_groups, typed_spans
from hf_attn.explanation.render import heatmap_html, permutation_figure, summary_markdown
from hf_attn.core.measures import jsd, kendall_tau, merge_near_ties, tvd

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
    lines = page.count('<table class="hfa-heatmap"')  # a long sentence wraps: each line has every row
    assert lines >= 1 and page.count('class="hfa-line"') == lines
    for row in ("attention", "gradient", "loo", "adversary_attention", "token_probability", "ig"):
        assert page.count(f'data-row="{row}"') == lines  # the Space computes integrated gradients too
    assert page.count('class="hfa-cell"') == 6 * len(explanation.tokens)
    assert "&lt;" not in page or "<" in TEXT
    n = len(explanation.tokens)
    escaped = heatmap_html(type(explanation)(**{**explanation.__dict__, "tokens": ["<b>"] * n, "typed": ["<b>"] * n}))
    assert "<b></th>" not in escaped and "&lt;b&gt;</th>" in escaped
    summary = summary_markdown(explanation)
    assert "Prediction:" in summary and "Kendall τ" in summary and "Seconds" not in summary
    assert "vs α: τ = " in page and "p̂_t: 0 <span" in page and "Seconds" not in page
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


def test_raw_values_have_a_scale_each(explanation):
    """By default the gradient and the LOO-TVD are shown raw, each on its own scale (0 to its largest,
    in the legend), the value shown in ``data-value``; α and the adversarial α share one."""
    import re

    e = explanation
    page = heatmap_html(e)
    assert 'data-units="raw"' in page and f"gradient g (raw): 0 <span" in page
    assert f"</span> {e.gradient.max():.3g}</span>" in page and f"</span> {e.loo.max():.3g}</span>" in page
    assert f"α and adversarial α: 0 <span" in page and f"</span> {e.attention.max():.3f}" in page
    for row, values in (("gradient", e.gradient), ("loo", e.loo)):
        content = "".join(re.findall(rf'<tr data-row="{row}">(.*?)</tr>', page))  # every line of the row
        shown = [float(v) for v in re.findall(r'data-value="([-0-9.e+]+)"', content)]
        np.testing.assert_allclose(shown, values, rtol=1e-6)
        top = int(np.argmax(values))  # the row's largest value at full colour
        assert re.findall(r'background:rgb\((\d+),', content)[top] == "31"


def test_one_colour_scale_per_row_kind(explanation):
    """As shares (``shares=True``): α, the normalised gradient and leave-one-out (each sums to 1) and
    the adversarial α share one scale, from 0 to the largest of the first three; p̂_t has its own, 0
    to 1. A cell's colour is a function of its value and its row kind only."""
    import re

    e = explanation
    assert e.gradient_share.sum() == pytest.approx(1.0) and e.loo_share.sum() == pytest.approx(1.0)
    page = heatmap_html(e, shares=True)
    top = max(e.attention.max(), e.gradient_share.max(), e.loo_share.max())
    assert "adversarial α: 0 <span" in page and f"</span> {top:.3f}" in page
    cells: dict[str, list[tuple[float, int]]] = {"weight": [], "probability": []}
    for row, content in re.findall(r'<tr data-row="(\w+)">(.*?)</tr>', page):
        if row == "ig":  # signed, on its own scale
            continue
        kind = "probability" if row == "token_probability" else "weight"
        for red, value in re.findall(r'background:rgb\((\d+),\d+,\d+\);[^"]*" title="[^"]*: ([-0-9.e+]+)', content):
            cells[kind].append((float(value), int(red)))
    assert len(cells["weight"]) == 4 * len(e.tokens) and len(cells["probability"]) == len(e.tokens)
    for kind, pairs in cells.items():  # across the rows of one kind, a larger value is never paler
        pairs.sort()
        assert all(later <= earlier + 1 for (_, earlier), (_, later) in zip(pairs, pairs[1:])), kind
    assert {red for value, red in cells["weight"] if value >= top * (1 - 1e-3)} == {31}  # full colour at the top
    assert {red for value, red in cells["probability"] if value == 0} <= {255}


def test_kendall_tau_of_the_sentence(explanation):
    """J&W Table 2's per-instance statistic, as the battery computes it: measures.kendall_tau after
    tying values within the battery's tolerance; equal to scipy's τ-b of the merged values."""
    from scipy.stats import kendalltau

    from hf_attn.batteries.jw.common import JWSettings

    e = explanation
    assert TIE_TOLERANCE == JWSettings().tie_tolerance == e.tie_tolerance
    for name, (x, y) in {"attention_gradient": (e.attention, e.gradient), "attention_loo": (e.attention, e.loo),
                         "gradient_loo": (e.gradient, e.loo)}.items():
        ours = kendall_tau(x[None], y[None], tie_tolerance=TIE_TOLERANCE)
        assert e.kendall[name]["tau"] == pytest.approx(float(ours.tau[0]))
        assert e.kendall[name]["pvalue"] == pytest.approx(float(ours.pvalue[0]))
        scipy = kendalltau(merge_near_ties(x, tolerance=TIE_TOLERANCE), merge_near_ties(y, tolerance=TIE_TOLERANCE))
        assert e.kendall[name]["tau"] == pytest.approx(scipy.statistic) and -1 <= e.kendall[name]["tau"] <= 1
    # normalising does not change a ranking
    share = kendall_tau(e.attention[None], e.gradient_share[None], tie_tolerance=TIE_TOLERANCE)
    assert float(share.tau[0]) == pytest.approx(e.kendall["attention_gradient"]["tau"])
    assert f"{e.kendall['attention_loo']['tau']:.2f}" in summary_markdown(e)


def test_kendall_tau_undefined_for_one_token(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    e = explain_sentence(model, tokenizer, "good", steps=2, num_permutations=2)
    assert all(np.isnan(v["tau"]) for v in e.kendall.values())
    assert json.dumps(e.to_dict(), allow_nan=False)
    assert "τ undefined" in heatmap_html(e) and "| attention vs gradient | – | – |" in summary_markdown(e)


RAW_WORDS = [
    ("I don't like it, it isn't good.", ["I", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]),
    ("It's not a great monster movie, but it's a good one.",
     ["It", "'s", "not", "a", "great", "monster", "movie", ",", "but", "it", "'s", "a", "good", "one", "."]),
    ("I cannot wait for 1999's best -- or \u201cworst\u201d.",
     # “ is PTB's ``, which the tokenizer splits into ` ` (as in the SST it was built from): both show “
     ["I", "cannot", "cannot", "wait", "for", "1999", "'s", "best", "--", "or", "\u201c", "\u201c", "worst", "\u201d",
      "."]),
]


@pytest.mark.parametrize("text, words", RAW_WORDS)
def test_words_as_typed(model_and_tokenizer, text, words):
    """Each token is shown as the text it came from (the tokenizer's offsets, widened where a
    normaliser rule rewrote the text): case kept, "1999" rather than qqq, one typed word for the
    tokens it became (cannot → can + not)."""
    model, tokenizer = model_and_tokenizer
    e = explain_sentence(model, tokenizer, text, steps=2, num_permutations=2)
    assert e.typed == words
    assert len(e.tokens) == len(e.typed) == len(e.spans) == len(e.unknown)
    groups = token_groups(e)
    assert "".join(e.typed[start] for start, _ in groups) == "".join(text.split())  # every character, once
    assert all(text[a:b] == w for (a, b), w in zip(e.spans, e.typed))


def test_unknown_words_are_marked_not_hidden(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    e = explain_sentence(model, tokenizer, "A Zorblaxian movie.", steps=2, num_permutations=2)
    assert e.tokens[1] == "[UNK]" and e.typed[1] == "Zorblaxian" and e.unknown == [False, True, False, False]
    page = heatmap_html(e)
    assert '<span class="hfa-unk">Zorblaxian</span>' in page and "[UNK]</th>" not in page
    assert "not in the vocabulary" in page and "“Zorblaxian”" in summary_markdown(e)


def test_typed_spans_of_added_and_rewritten_tokens():
    """Tokens the tokenizer adds (offsets (0, 0), e.g. J&W's <SOS> <EOS>) have no span; tokens whose
    offsets do not spell them are widened back to the previous token; characters no token covers
    (punctuation a tokenizer drops) stay out."""
    text = "Don't, film!"
    tokens = ["<SOS>", "do", "n't", "film", "<EOS>"]
    offsets = [(0, 0), (0, 2), (4, 5), (7, 11), (0, 0)]  # tokenizers maps "n't" to the last typed character
    spans = typed_spans(text, tokens, offsets, [True, False, False, False, True], [False] * 5)
    assert spans == [None, [0, 2], [2, 5], [7, 11], None]


def test_input_limit_is_the_models(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    saved = model.config.max_tokens
    try:
        model.config.max_tokens = 8
        with pytest.raises(ExplainError, match="too long: 9 tokens, the limit is 8"):
            explain_sentence(model, tokenizer, "good " * 9)
        assert explain_sentence(model, tokenizer, "good " * 8, steps=2, num_permutations=2).max_tokens == 8
        with pytest.raises(ExplainError, match="too long: 5 tokens, the limit is 4"):
            explain_sentence(model, tokenizer, "good " * 5, max_tokens=4)  # a caller may ask for less
        model.config.max_tokens = 4096
        assert explain_sentence(model, tokenizer, "good", steps=2, num_permutations=2).max_tokens == 512
    finally:
        model.config.max_tokens = saved


def test_long_sentences_wrap_in_balanced_lines(explanation):
    """Lines of similar width, at most LINE_WIDTH_PX (estimated), every token exactly once."""
    import re

    from hf_attn.explanation.render import LINE_WIDTH_PX

    n = 60
    long = type(explanation)(**{**explanation.__dict__, **{name: np.resize(getattr(explanation, name), n) for name in (
        "attention", "gradient", "loo", "adversary_attention", "token_probability", "ig")},
        "tokens": ["movie"] * n, "typed": ["movie"] * n, "spans": [[6 * t, 6 * t + 5] for t in range(n)],
        "unknown": [False] * n, "special": [False] * n})
    page = heatmap_html(long)
    per_line = [table.count('class="hfa-tok') for table in page.split('<table class="hfa-heatmap"')[1:]]
    assert sum(per_line) == n and len(per_line) == 5 and max(per_line) - min(per_line) <= 1
    assert max(per_line) * 56 <= LINE_WIDTH_PX
    assert all(len(re.findall(r'<tr data-row="attention">', t)) == 1 for t in page.split('<table')[1:])
