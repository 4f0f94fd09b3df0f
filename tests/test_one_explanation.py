"""One explanation object, rendered three ways: for the same sentence, the notebook's HTML
(``Explanation._repr_html_``), the printed summary of ``hf-attn explain`` and the Space's outputs (its
heatmap, summary and JSON, through the app's own handler) show the same numbers — on the papers'
BiLSTM and on a BERT-family classifier whose words span several word pieces."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from architectures import tiny_classifier

TEXT = "the acting is good but the plot is dull"
STEPS, EPS, SEED = 20, 0.05, 3
CLASS_NAMES = ("negative", "neutral", "positive")


@pytest.fixture(scope="module", params=["lstm", "bert"])
def model_dir(request, trained_model_dir, tmp_path_factory):
    if request.param == "lstm":
        return trained_model_dir
    model, tokenizer = tiny_classifier("bert")
    model.config.id2label = dict(enumerate(CLASS_NAMES))  # class names, as hf-attn train stores them
    model.config.label2id = {name: i for i, name in enumerate(CLASS_NAMES)}
    folder = tmp_path_factory.mktemp("bert") / "tiny-bert"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _cells(page: str) -> dict[str, list[float]]:
    """``data-value`` of every token-heatmap cell, per row, in the order shown."""
    rows: dict[str, list[float]] = {}
    for row, content in re.findall(r'<tr data-row="(\w+)">(.*?)</tr>', page):
        rows.setdefault(row, []).extend(float(v) for v in re.findall(r'data-value="([-0-9.e+na]+)"', content))
    return rows


def _printed(summary: str, tokens: list[str]) -> dict[str, list[float]]:
    """The per-token rows of the printed summary (a header line, then one line per token)."""
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["token"])
    names = lines[start].split()[1:]
    out: dict[str, list[float]] = {n: [] for n in names}
    for token, line in zip(tokens, lines[start + 1:start + 1 + len(tokens)]):
        assert line.startswith(token)
        for name, value in zip(names, line[len(token):].split()):
            out[name].append(float(value))
    return out


def _three_views(model_dir, capsys, *cli_options):
    """The same sentence, with every view's defaults: ``Explainer.explain``, ``hf-attn explain --json``
    and the Space's own handler (one thread, as the Space runs)."""
    import json

    from test_space_security import load_app_module

    from hf_attn import Explainer
    from hf_attn.app.space import ModelCache, ModelPolicy
    from hf_attn.cli import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        notebook = Explainer.from_pretrained(model_dir, device="cpu").explain(TEXT)
        capsys.readouterr()
        assert main(["explain", model_dir, TEXT, "--device", "cpu", "--json", *cli_options]) == 0
        printed = json.loads(capsys.readouterr().out)
        app = load_app_module()
        _, explain, _ = app.make_handlers(ModelCache(ModelPolicy((model_dir,))))
        space = explain(model_dir, TEXT)  # the handler's defaults: the Space page's widgets
    finally:
        torch.set_num_threads(threads)
    return notebook, printed, space


def test_the_three_views_agree_with_their_defaults(model_dir, capsys):
    """One sentence through the notebook (``Explainer.explain``), the command line (``hf-attn explain
    --json``) and the Space's API function, each with its own defaults: the same settings (one
    ``ExplainSettings``) and the same numbers — probabilities, attention, gradient, LOO-TVD, integrated
    gradients, the permutations and the adversary's ε-max JSD — to float tolerance."""
    pytest.importorskip("gradio")
    from hf_attn.explanation.settings import ExplainSettings

    notebook, printed, (label, _, heatmaps, _, values) = _three_views(model_dir, capsys)
    e = notebook[0]
    assert notebook.settings == printed["settings"] == ExplainSettings().to_dict()
    assert notebook.settings["adversary_steps"] == 500 and notebook.settings["ig"] is True
    cli = printed["sentences"][0]
    assert e.ig is not None and values["ig"] is not None and cli["ig"] is not None  # IG in every view
    for name in ("probabilities", "attention", "gradient", "loo", "ig", "permutation_tvd", "adversary_attention"):
        np.testing.assert_allclose(cli[name], getattr(e, name), rtol=1e-6, atol=1e-9, err_msg=f"cli {name}")
        np.testing.assert_allclose(values[name], getattr(e, name), rtol=1e-6, atol=1e-9, err_msg=f"space {name}")
    for name in ("eps_max_jsd", "adversary_jsd", "adversary_tvd", "ig_completeness_gap"):
        assert cli[name] == pytest.approx(getattr(e, name), abs=1e-9) == values[name], name
    assert label == pytest.approx(dict(zip(e.label_names, e.probabilities)), abs=1e-9)
    assert cli["prediction"] == values["prediction"] == e.label_names[e.predicted]
    if "bert" in model_dir:  # the class names of config.id2label, in every view
        assert e.label_names == list(CLASS_NAMES) and set(label) == set(CLASS_NAMES)
        assert printed["sentences"][0]["label_names"] == list(CLASS_NAMES)
    # the Space's heatmap shows raw values by default, as the notebook and the CLI
    shown = _cells(heatmaps)
    for row in ("attention", "gradient", "loo", "ig"):
        np.testing.assert_allclose(shown[row], getattr(e, row), rtol=1e-6, atol=1e-9, err_msg=row)
    assert 'data-units="raw"' in heatmaps


def test_notebook_cli_and_space_show_the_same_numbers(model_dir, capsys):
    pytest.importorskip("gradio")
    from test_space_security import load_app_module

    from hf_attn import Explainer
    from hf_attn.app.space import ModelCache, ModelPolicy
    from hf_attn.cli import main
    from hf_attn.explanation.render import markdown_text

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the Space runs
    try:
        # the notebook
        notebook = Explainer.from_pretrained(model_dir, device="cpu").explain(
            TEXT, adversary_steps=STEPS, eps=EPS, seed=SEED)
        page = notebook._repr_html_()
        # the command line, raw values and shares
        capsys.readouterr()
        options = ["--adversary-steps", str(STEPS), "--eps", str(EPS), "--seed", str(SEED), "--device", "cpu"]
        assert main(["explain", model_dir, TEXT, *options]) == 0
        printed = capsys.readouterr().out
        assert main(["explain", model_dir, TEXT, *options, "--shares"]) == 0
        printed_shares = capsys.readouterr().out
        # the Space, through the app's own handler, raw values and shares
        app = load_app_module()
        _, explain, _ = app.make_handlers(ModelCache(ModelPolicy((model_dir,))))
        label, summary, heatmaps, _, values = explain(model_dir, TEXT, EPS, STEPS, SEED)
        *_, share_heatmaps, _, _ = explain(model_dir, TEXT, EPS, STEPS, SEED, True, True)
    finally:
        torch.set_num_threads(threads)

    e = notebook[0]
    # the same object's numbers on the notebook page and on the Space's heatmap: raw by default
    shown, space, space_shares = _cells(page), _cells(heatmaps), _cells(share_heatmaps)
    for row in ("attention", "gradient", "loo", "ig", "adversary_attention"):
        np.testing.assert_allclose(space[row], shown[row], rtol=1e-6, atol=1e-9, err_msg=row)
    np.testing.assert_allclose(shown["attention"], e.attention, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(shown["gradient"], e.gradient, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(shown["loo"], e.loo, rtol=1e-6, atol=1e-9)
    # the shares toggle: g/Σg and Δŷ/ΣΔŷ, labelled, summing to 1
    np.testing.assert_allclose(space_shares["gradient"], e.gradient_share, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(space_shares["loo"], e.loo_share, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(space_shares["attention"], e.attention, rtol=1e-6, atol=1e-9)
    assert sum(space_shares["gradient"]) == pytest.approx(1.0, abs=1e-6)
    assert 'data-units="shares"' in share_heatmaps and "gradient g/Σg" in share_heatmaps
    assert "gradient g = |∂ŷ/∂e·e|<br>" in heatmaps and "gradient g/Σg<br>" not in heatmaps
    # the Space's JSON and prediction
    np.testing.assert_allclose(values["attention"], e.attention, atol=1e-9)
    np.testing.assert_allclose(values["gradient"], e.gradient, atol=1e-9)
    np.testing.assert_allclose(values["loo"], e.loo, atol=1e-9)
    np.testing.assert_allclose(values["ig"], e.ig, atol=1e-9)
    np.testing.assert_allclose(values["permutation_tvd"], e.permutation_tvd, atol=1e-9)
    assert values["eps_max_jsd"] == pytest.approx(e.eps_max_jsd, abs=1e-9)
    assert label == pytest.approx(dict(zip(e.label_names, e.probabilities)), abs=1e-9)
    predicted = e.label_names[e.predicted]
    assert f"Prediction: {markdown_text(predicted)}" in summary and f"{predicted} ({e.probabilities[e.predicted]:.3f})" in page
    assert f"prediction: {predicted}" in printed
    # the printed summary: the same values per token, to the 4 decimals it prints
    rows = _printed(printed, e.tokens)
    for name, column in (("attention", "attention"), ("gradient", "gradient"), ("loo", "LOO-TVD"), ("ig", "ig")):
        np.testing.assert_allclose(rows[column], getattr(e, name), atol=5.1e-5, err_msg=name)
    rows = _printed(printed_shares, e.tokens)
    np.testing.assert_allclose(rows["g/Σg"], e.gradient_share, atol=5.1e-5)
    np.testing.assert_allclose(rows["Δŷ/ΣΔŷ"], e.loo_share, atol=5.1e-5)
    np.testing.assert_allclose(rows["ig"], e.ig, atol=5.1e-5)
    assert "as shares of their sum" in printed_shares and "as shares of their sum" not in printed
    for pair in ("attention_gradient", "attention_loo"):
        tau = e.kendall[pair]["tau"]
        assert f"{tau:.4f}" in printed and f"{tau:.2f}" in summary and f"τ = {tau:.2f}" in page
    assert f"ε-max JSD = {e.eps_max_jsd:.3f}" in printed and f"ε-max JSD = {e.eps_max_jsd:.3f}" in summary
    assert f"ε-max JSD {e.eps_max_jsd:.3f}" in page
    assert f"median Δŷ = {e.permutation_median:.4f}" in printed and f"median Δŷ = {e.permutation_median:.4f}" in summary
    # every scale has its legend, on both pages
    for html_page in (page, heatmaps):
        assert 'id="hfa-legend"' in html_page and "α and adversarial α: 0 <span" in html_page
        assert f"gradient g (raw): 0 <span" in html_page
    assert "α, g/Σg, Δŷ/ΣΔŷ and adversarial α: 0 <span" in share_heatmaps


def test_word_level_sums_are_shown_where_a_word_has_several_tokens():
    """The notebook heatmap adds the per-word sums under the tokens (``act`` + ``##ing`` = ``acting``),
    the printed summary too; each row keeps the legend's scale."""
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    e = Explainer(model, tokenizer, device="cpu").explain(TEXT, adversary=False, num_permutations=0)
    s = e[0]
    assert "acting" in s.words and len(s.words) < len(s.tokens)
    page = e._repr_html_()
    assert 'class="hfa-words"' in page and "Per word (the sum of its tokens)" in page
    words = re.findall(r'<tr data-word-row="attention">(.*?)</tr>', page)[0]
    sums = [float(v) for v in re.findall(r'data-value="([-0-9.e+]+)"', words)]
    np.testing.assert_allclose(sums, s.word_values("attention"), rtol=1e-6)
    assert "integrated gradients: −" in page and "rollout: 0 <span" in page
    assert "per word (the sum of its tokens):" in e.summary()


def test_tidy_explanation_frame():
    """``to_pandas(long=True)``: one row per (text, token, measure), no list-valued cells."""
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    e = Explainer(model, tokenizer, device="cpu").explain([TEXT, "fun"], adversary=False, num_permutations=0)
    long = e.to_pandas(long=True)
    wide = e.to_pandas()
    assert set(long["measure"]) == {"attention", "gradient", "loo", "ig", "rollout"}
    assert len(long) == 5 * len(wide)
    merged = long[long["measure"] == "gradient"]["value"].to_numpy()
    np.testing.assert_allclose(merged, wide["gradient"].to_numpy())


def test_battery_and_faithfulness_frames_are_tidy():
    """``jw.to_pandas()`` has no list-valued cells (per-token values in ``to_pandas("token")``),
    ``jw.tidy()`` and ``faithfulness().tidy()`` are long: one row per (instance, measure) and per
    (method, metric)."""
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    ex = Explainer(model, tokenizer, device="cpu")
    texts = [TEXT, "a fun film", "dull"]
    jw = ex.jw(texts, [0, 1, 0], num_permutations=4, k=1, steps=2)
    frame = jw.to_pandas()
    assert len(frame) == 3 and not frame.map(lambda v: isinstance(v, (list, dict))).any().any()
    tokens = jw.to_pandas("token")
    assert len(tokens) == sum(len(row["tokens"]) for row in jw.instances)
    np.testing.assert_allclose(tokens[tokens["instance"] == 0]["attention"], jw.instances[0]["attention"])
    long = jw.tidy()
    assert {"instance", "measure", "value"} == set(long.columns) and "eps_max_jsd" in set(long["measure"])
    faithfulness = ex.faithfulness(texts, methods=("attention", "saliency", "random"), naopc_beam=0, soft_draws=1,
                                   soft_max_draws=1)
    tidy = faithfulness.tidy()
    assert list(tidy.columns[:3]) == ["method", "metric", "mean"]
    assert not tidy.duplicated(["method", "metric"]).any() and set(tidy["method"]) == set(faithfulness.methods)
    wide = faithfulness.to_pandas()
    for _, row in tidy.iterrows():
        assert row["mean"] == pytest.approx(wide.loc[row["method"], row["metric"]], nan_ok=True)
