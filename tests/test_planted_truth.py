"""The faithfulness metrics against a planted truth (hf_attn.batteries.faithfulness.planted): a
hand-set classifier whose logit is the mean of known word weights, so the true attribution of every
text is known. Checked here: the model computes that logit; a brute force over every set of k
tokens finds the truth's top-k the best deletion and the best kept set; every metric ranks the truth
first and its negation last among {truth, random, anti-truth} by paired tests; NAOPC gives the truth
exactly 1 / 0 and τ with the LOO-drop exactly 1; the soft metrics refuse a constant row and give a
two-level one their best value (recorded, not hidden); the committed page is re-made from its record."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_attn import Explainer
from hf_attn.batteries.faithfulness.planted import (CONTROLS, WEIGHTS, planted_logit, planted_model, planted_rows,
                                                    planted_texts, planted_verdicts, true_attributions)
from hf_attn.batteries.faithfulness.settings import METRICS

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_torch_thread")
# every method that runs on this model but Kernel SHAP (the slowest, and not needed for the checks)
METHODS = ("attention", "saliency", "gradient_x_input", "integrated_gradients", "leave_one_out", "random")
TEXTS = planted_texts(32)


@pytest.fixture(scope="module")
def planted():
    return planted_model()


@pytest.fixture(scope="module")
def table(planted):
    model, tokenizer = planted
    explainer = Explainer(model, tokenizer, device="cpu")
    return explainer.faithfulness(TEXTS, methods=METHODS, attributions=planted_rows(tokenizer, TEXTS))


def _probabilities(model, tokenizer, texts) -> np.ndarray:
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**encoded).logits.double().softmax(-1).numpy()


def test_the_model_computes_the_planted_logit(planted):
    model, tokenizer = planted
    encoded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits
    expected = [planted_logit(tokenizer, t) for t in TEXTS]
    np.testing.assert_allclose(logits[:, 1].numpy(), expected, atol=1e-6)
    assert logits[:, 0].abs().max() == 0
    # by hand: "the good movie" has weights (0, 2.5, 0): z = 2.5 / 3, the truth (0, 2.5/3, 0)
    assert planted_logit(tokenizer, "the good movie") == pytest.approx(2.5 / 3)
    np.testing.assert_allclose(true_attributions(tokenizer, ["the good movie", "bad plot"])[0], [0, 2.5 / 3, 0])
    np.testing.assert_allclose(true_attributions(tokenizer, ["bad plot"])[0], [1.5, 0])  # toward "negative"
    assert all(1 <= sum(w in WEIGHTS for w in t.split()) <= 3 and 4 <= len(t.split()) <= 10 for t in TEXTS)


def test_the_truths_top_k_is_the_best_set_of_k_tokens_by_brute_force(planted):
    """Every set of k tokens deleted (and kept), scored by explicit forwards: the largest drop of the
    predicted class's probability is the truth's top-k deleted, the smallest the truth's top-k kept."""
    model, tokenizer = planted
    for text in TEXTS[:6]:
        words = tokenizer.tokenize(text)
        n = len(words)
        full = _probabilities(model, tokenizer, [text])[0]
        c = int(full.argmax())
        order = np.argsort(-true_attributions(tokenizer, [text])[0], kind="stable")
        for k in range(1, n):
            subsets = list(itertools.combinations(range(n), k))
            kept = [" ".join(w for i, w in enumerate(words) if i not in s) for s in subsets]
            p = _probabilities(model, tokenizer, kept)[:, c]
            top = set(order[:k].tolist())
            truth_deleted = p[subsets.index(tuple(sorted(top)))]
            assert full[c] - truth_deleted == pytest.approx(full[c] - p.min(), abs=1e-6), (text, k)
            # keeping the top-k = deleting the other n − k
            kept_only = " ".join(words[i] for i in sorted(top))
            best_kept = _probabilities(model, tokenizer, [" ".join(words[i] for i in s) for s in subsets])[:, c].max()
            assert _probabilities(model, tokenizer, [kept_only])[0, c] == pytest.approx(best_kept, abs=1e-6), (text, k)


def test_every_metric_ranks_the_truth_first_and_its_negation_last(table):
    verdicts = planted_verdicts(table)
    assert list(verdicts) == list(METRICS)
    for metric, verdict in verdicts.items():
        assert verdict["passes"], (metric, verdict)
        if metric != "agreement":  # the one column without per-sentence values
            assert all(t["n"] == len(TEXTS) and t["p"] < 1e-3 for t in verdict["tests"].values()), metric
    assert verdicts["agreement"]["tests"] is None and verdicts["agreement"]["caveat"]
    assert verdicts["tau_loo"]["caveat"]
    values = table.per_instance
    # the truth is the best ordering there is: NAOPC exactly 1 / 0 (exact bounds: ≤ 10 tokens), its
    # negation exactly 0 / 1, and no row deletes or keeps better on any sentence
    assert table.metric_details["naopc"]["bounds"]["exact"] == len(TEXTS)
    np.testing.assert_allclose(values["truth"]["naopc_comprehensiveness"], 1, atol=1e-6)
    np.testing.assert_allclose(values["truth"]["naopc_sufficiency"], 0, atol=1e-6)
    np.testing.assert_allclose(values["anti_truth"]["naopc_comprehensiveness"], 0, atol=1e-6)
    for row in table.methods:
        assert np.all(np.asarray(values["truth"]["comprehensiveness"])
                      >= np.asarray(values[row]["comprehensiveness"]) - 1e-6), row
        assert np.all(np.asarray(values["truth"]["sufficiency"]) <= np.asarray(values[row]["sufficiency"]) + 1e-6), row
    # the LOO-drop ranks the tokens exactly as the truth on this model (same n − 1 for every deletion)
    np.testing.assert_allclose(values["truth"]["tau_loo"], 1, atol=1e-12)
    np.testing.assert_allclose(values["anti_truth"]["tau_loo"], -1, atol=1e-12)


def test_the_soft_metrics_refuse_a_constant_row_and_reward_a_two_level_one(table):
    """Uniform attention scores every token alike: it ranks nothing, so its soft cells are undefined on
    every sentence with the reason (a keep probability of 1 everywhere would keep the whole input in
    Soft-NS and remove it whole in Soft-NC, the best value of both); saliency (the same gradient norm
    for every marked word, 0 elsewhere) separates the marked words from the rest without ranking them,
    and the soft metrics score it exactly 1, above the graded truth (recorded, not hidden)."""
    from hf_attn.batteries.faithfulness.soft import EQUAL_SCORES

    verdicts = planted_verdicts(table)
    for metric in ("soft_comprehensiveness", "soft_sufficiency"):
        assert np.isnan(np.asarray(table.per_instance["attention"][metric], dtype=float)).all()
        assert table.undefined_reasons["attention"][metric] == {EQUAL_SCORES: len(table.texts)}
        np.testing.assert_allclose(table.per_instance["saliency"][metric], 1.0, atol=1e-12)
        assert set(verdicts[metric]["beaten_by"]) == {"saliency"}, verdicts[metric]["beaten_by"]
    for metric in ("comprehensiveness", "sufficiency", "naopc_comprehensiveness", "naopc_sufficiency", "tau_loo"):
        assert verdicts[metric]["beaten_by"] == {}, metric


def test_bad_inputs_are_refused_in_one_line(planted, table):
    _, tokenizer = planted
    with pytest.raises(ValueError, match="logit 0 on the planted model"):
        true_attributions(tokenizer, ["good good fine plot bad dull dull"])  # 2.5 + 2.5 + 1 − 3 − 1.5 − 1.5
    with pytest.raises(ValueError, match="count must be"):
        planted_texts(0)
    with pytest.raises(ValueError, match="min_words and max_words"):
        planted_texts(3, min_words=6, max_words=5)
    model, _ = planted
    bare = Explainer(model, tokenizer, device="cpu").faithfulness(TEXTS[:3], methods=("random",), naopc_beam=0,
                                                                   metrics=("comprehensiveness",))
    with pytest.raises(ValueError, match=r"lacks the control rows \['truth', 'anti_truth'\]"):
        planted_verdicts(bare)


def test_the_page_is_remade_from_its_record():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "planted_truth.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((ROOT / "docs" / "faithfulness" / "planted_truth.json").read_text(encoding="utf-8"))
    assert record["texts"] == planted_texts(len(record["texts"]), record["seed"])
    assert record["rows"][:3] == list(CONTROLS) and "kernel_shap" in record["rows"]
    assert all(v["passes"] for v in record["verdicts"].values())
    page = (ROOT / "docs" / "faithfulness" / "planted_truth.md").read_text(encoding="utf-8")
    assert page.startswith("<!-- generated by scripts/planted_truth.py")
