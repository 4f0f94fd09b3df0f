"""The plausibility evaluate module (ERASER's AUPRC, average precision, token F1, IOU F1 against human
rationales): its card's examples run (doctest), hand-computed cases, the library's values
(hf_attn.core.plausibility) on random inputs, scikit-learn's per text, bad inputs refused naming the
argument, and a generated copy that holds the plausibility code and nothing of hf_attn."""

from __future__ import annotations

import doctest
import subprocess
import sys
import types
from pathlib import Path

import evaluate
import numpy as np
import pytest
from sklearn.metrics import auc, average_precision_score, precision_recall_curve

from hf_attn.core import metric_copies
from hf_attn.core.plausibility import plausibility

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "hf_attn" / "metrics" / "plausibility"


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(str(FOLDER))


def test_card_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(FOLDER / "README.md"), module_relative=False)
    assert result.attempted >= 5 and result.failed == 0


def test_perfect_ranking(metric):
    """Both marked words first: AUPRC 1, and the top int(0.5 × 4) = 2 words are the rationale."""
    out = metric.compute(predictions=[[0.9, 0.1, 0.8, 0.2]], references=[[1, 0, 1, 0]], k_fraction=0.5)
    assert out["auprc"] == out["average_precision"] == out["token_f1"] == out["iou_f1"] == 1.0
    assert (out["scored"], out["without_rationale"], out["fully_marked"], out["undefined"]) == (1, [], 0, {})


def test_a_tie_and_a_miss_by_hand(metric):
    """scores (0.5, 0.5, 0.2, 0.9), marks (1, 0, 1, 0): by score, 0.9 (unmarked), then 0.5 twice (one
    marked), then 0.2 (marked). (recall, precision): (0, 1), (0, 0), (1/2, 1/3), (1, 1/2).
    AUPRC (trapezoids) = 1/2 · (0 + 1/3)/2 + 1/2 · (1/3 + 1/2)/2 = 7/24; average precision (steps)
    = 1/2 · 1/3 + 1/2 · 1/2 = 5/12. Top 2: the 4th word and, the tie to the earlier word, the 1st:
    one hit of 2 predicted and 2 marked: P = R = F1 = 1/2; spans predicted {0}, {3} against {0}, {2}:
    one IOU of 1, one of 0: IOU F1 1/2. The unmarked third text is left out and listed."""
    out = metric.compute(predictions=[[0.5, 0.5, 0.2, 0.9], [0.3, 0.1]], references=[[1, 0, 1, 0], [0, 0]])
    assert out["auprc"] == pytest.approx(7 / 24) and out["average_precision"] == pytest.approx(5 / 12)
    assert out["k_fraction"] == 0.5  # the scored rationale's share: 2 of 4 words
    assert out["token_f1"] == out["token_precision"] == out["token_recall"] == out["iou_f1"] == 0.5
    assert (out["n_texts"], out["scored"], out["without_rationale"]) == (2, 1, [1])
    assert average_precision_score([1, 0, 1, 0], [0.5, 0.5, 0.2, 0.9]) == pytest.approx(5 / 12)


def test_k_and_the_iou_threshold_by_hand(metric):
    """scores (0.9, 0.8, 0.1, 0.2), marks (1, 0, 0, 0): k = int(0.5 × 4) = 2 predicts words 1-2, one
    hit: P 1/2, R 1, F1 2/3; the span {0, 1} has IOU 1/2 with {0}: a hit at 0.5, not at 0.6.
    per_instance_k: k = 1 mark, the top word alone: F1 1."""
    kwargs = dict(predictions=[[0.9, 0.8, 0.1, 0.2]], references=[[1, 0, 0, 0]], k_fraction=0.5)
    out = metric.compute(**kwargs)
    assert out["token_f1"] == pytest.approx(2 / 3) and out["iou_f1"] == 1.0 and out["auprc"] == 1.0
    assert metric.compute(**kwargs, iou_threshold=0.6)["iou_f1"] == 0.0
    assert metric.compute(**kwargs, per_instance_k=True)["token_f1"] == 1.0


def test_a_fully_marked_text_has_no_average_precision(metric):
    out = metric.compute(predictions=[[0.2, 0.1]], references=[[1, 1]])
    assert out["auprc"] == 1.0 and out["fully_marked"] == 1
    assert out["average_precision"] is None and "marked entirely" in out["undefined"]["average_precision"]


def _random_texts(rng, n):
    scores, marks = [], []
    for i in range(n):
        words = int(rng.integers(1, 25))
        scores.append(rng.normal(size=words).round(1).tolist())  # rounded: ties
        share = (0.0, 1.0, 0.3, 0.5)[i % 4] if i < 8 else rng.uniform(0.05, 0.9)
        marks.append((rng.uniform(size=words) < share).astype(int).tolist())
    marks[-1][0] = 1  # at least one text marks a word
    return scores, marks


@pytest.mark.parametrize("kwargs", [{}, {"k_fraction": 0.2}, {"per_instance_k": True},
                                    {"k_fraction": 0.35, "iou_threshold": 0.3}, {"k_fraction": 1.0}])
def test_module_equals_the_library(metric, kwargs):
    rng = np.random.default_rng(7)
    for n in (1, 5, 40):
        scores, marks = _random_texts(rng, n)
        out = metric.compute(predictions=scores, references=marks, **kwargs)
        out.pop("undefined")
        want = plausibility(scores, marks, **kwargs).to_dict()
        assert out == want, (n, kwargs)


def test_per_text_values_equal_scikit_learn(metric):
    """Per text: average precision = sklearn's average_precision_score; AUPRC = ERASER's _auprc,
    sklearn's precision_recall_curve then auc."""
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(60):
        words = int(rng.integers(2, 30))
        marks = (rng.uniform(size=words) < rng.uniform(0.1, 0.9)).astype(int)
        if marks.all() or not marks.any():
            continue
        scores = rng.uniform(size=words).round(1)  # ties
        out = metric.compute(predictions=[scores.tolist()], references=[marks.tolist()])
        assert out["average_precision"] == pytest.approx(average_precision_score(marks, scores), rel=1e-12)
        precision, recall, _ = precision_recall_curve(marks, scores)
        assert out["auprc"] == pytest.approx(auc(recall, precision), rel=1e-12)
        checked += 1
    assert checked > 40


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(predictions=[[0.1, 0.2]], references=[[1]]),
     r"predictions and references: text 0 has 2 scores but 1 rationale marks"),
    (dict(predictions=[[0.1, 0.2], [0.3]], references=[[1, 0], [2]]), r"references: text 1 has the mark 2; .* 0 or 1"),
    (dict(predictions=[[0.1, 0.2]], references=[[1, 0.5]]), r"references: text 0 has the mark 0.5"),
    (dict(predictions=[[0.1, float("nan")]], references=[[1, 0]]), r"predictions: text 0 .* not a finite number"),
    (dict(predictions=[[0.1, 0.2]], references=[[0, 0]]), r"references: no text marks a word \(1 given\)"),
    (dict(predictions=[[0.1, 0.2]], references=[[1, 0]], k_fraction=1.5), r"k_fraction must be <= 1"),
    (dict(predictions=[[0.1, 0.2]], references=[[1, 0]], iou_threshold=0), r"iou_threshold must be > 0"),
    (dict(predictions=[[0.1, 0.2]], references=[[1, 0]], per_instance_k="yes"), r"per_instance_k must be True or False"),
    (dict(predictions=[[0.1, 0.2], [0.3]], references=[[1, 0]]), r"number of predictions \(2\) and references \(1\)"),
])
def test_bad_inputs_are_refused_in_one_line(metric, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        metric.compute(**kwargs)
    assert "\n" not in str(info.value)


def test_the_copy_holds_the_plausibility_code_and_nothing_of_hf_attn():
    """The generator's --check passes; the copy is headed by plausibility.py and holds plausibility()
    and what it uses, not the word-piece helpers (whose hf_attn import no copy may need), and it runs
    on its own; the other modules' copies draw nothing from plausibility.py."""
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_metric_copies.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    text = (FOLDER / "_hf_attn_measures.py").read_text()
    assert text == metric_copies.copy_text(FOLDER)
    assert text.startswith("# Generated from hf_attn/core/numpy_primitives.py, hf_attn/core/numpy_measures.py and "
                           "hf_attn/core/plausibility.py\n")
    assert "def plausibility(" in text and "class PlausibilityResult" in text and "def report_undefined(" in text
    assert "def word_scores(" not in text and "merge_word_pieces" not in text.split('"""')[2]
    assert "import re\n" not in text and "hf_attn." not in "".join(
        line for line in text.splitlines(keepends=True) if line.startswith(("import", "from")))
    namespace = {"__name__": "copy_of_plausibility"}
    sys.modules[namespace["__name__"]] = types.ModuleType(namespace["__name__"])  # dataclasses look it up
    try:
        exec(compile(text, "copy", "exec"), namespace)
    finally:
        sys.modules.pop(namespace["__name__"])
    assert namespace["plausibility"]([[0.9, 0.1]], [[1, 0]]).auprc == 1.0
    for folder in metric_copies.module_folders():
        if folder != FOLDER:
            head = (folder / "_hf_attn_measures.py").read_text().splitlines()[0]
            assert head == "# Generated from hf_attn/core/numpy_primitives.py and hf_attn/core/numpy_measures.py"


def test_a_copy_that_needs_an_uncopied_hf_attn_import_is_refused(tmp_path):
    """plausibility.py imports merge_word_pieces from hf_attn.core.word_pieces, which no source
    defines: fine while no copy needs it, refused for a module that imports word_scores."""
    module = tmp_path / "needs_word_scores"
    module.mkdir()
    (module / "needs_word_scores.py").write_text("import evaluate\nfrom ._hf_attn_measures import word_scores\n")
    with pytest.raises(ValueError, match="imports merge_word_pieces from hf_attn.core.word_pieces, which no source"):
        metric_copies.copy_text(module)
