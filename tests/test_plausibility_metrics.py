"""Plausibility metrics (hf_attn.core.plausibility): hand-computed values on tiny cases, AUPRC and
average precision against sklearn, IOU F1 against a slow reference written from ERASER's definition,
and the word-piece → word sums."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import auc, average_precision_score, precision_recall_curve

from hf_attn.core.plausibility import (auprc, average_precision, iou_f1, plausibility, rationale_share, spans,
                                       token_prf, top_k_mask, whitespace_word_ids, word_scores)

SCORES = [0.9, 0.8, 0.1, 0.5]
TRUTH = [1, 0, 0, 1]


def test_auprc_and_average_precision_by_hand():
    # ranked: 0.9 (hit), 0.8 (miss), 0.5 (hit), 0.1 (miss): points (R, P) = (0, 1), (1/2, 1), (1/2, 1/2),
    # (1, 2/3), (1, 1/2). Trapezoids: 1/2 · 1 + 0 + 1/2 · (1/2 + 2/3)/2 + 0 = 19/24;
    # steps: 1/2 · 1 + 1/2 · 2/3 = 5/6
    assert auprc(SCORES, TRUTH) == pytest.approx(19 / 24)
    assert average_precision(SCORES, TRUTH) == pytest.approx(5 / 6)
    # every word marked: precision 1 at every threshold, area 1 whatever the scores
    assert auprc([0.3, 0.1], [1, 1]) == pytest.approx(1.0)
    # ties form one threshold: both words at 0.5, one marked: points (0, 1), (1, 1/2): area 3/4, AP 1/2
    assert auprc([0.5, 0.5], [0, 1]) == pytest.approx(0.75) and average_precision([0.5, 0.5], [0, 1]) == 0.5


def test_auprc_and_average_precision_match_sklearn_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 30))
        truth = (rng.random(n) < rng.random()).astype(int)
        truth[rng.integers(n)] = 1
        scores = rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else rng.random(n)
        precision, recall, _ = precision_recall_curve(truth, scores)
        assert auprc(scores, truth) == pytest.approx(auc(recall, precision), abs=1e-12)
        if not truth.all():
            assert average_precision(scores, truth) == pytest.approx(average_precision_score(truth, scores), abs=1e-12)


def test_top_k_spans_and_token_prf_by_hand():
    assert top_k_mask(SCORES, 2).tolist() == [True, True, False, False]
    assert top_k_mask([1, 2, 2, 0], 2).tolist() == [False, True, True, False]
    assert top_k_mask([1, 1, 1], 1).tolist() == [True, False, False]  # ties: the earlier word
    assert spans([0, 1, 1, 0, 1]) == [(1, 3), (4, 5)] and spans([1, 1]) == [(0, 2)] and spans([0, 0]) == []
    # text 1: pred {0, 1}, truth {0, 3}: P = R = F1 = 1/2; text 2: pred {}, truth {1}: P = R = F1 = 0
    out = token_prf([[1, 1, 0, 0], [0, 0]], [TRUTH, [0, 1]])
    assert out["macro_p"] == 0.25 and out["macro_r"] == 0.25 and out["macro_f1"] == 0.25
    # pooled: 1 hit of 2 predicted, of 3 marked: P 1/2, R 1/3, F1 = 2/5
    assert out["micro_p"] == 0.5 and out["micro_r"] == pytest.approx(1 / 3) and out["micro_f1"] == pytest.approx(0.4)


def test_iou_f1_by_hand():
    # pred span [0, 2) vs human [0, 1) (IOU 1/2, counts at 0.5) and [3, 4): 1 TP of 1 predicted, of 2 human
    out = iou_f1([[1, 1, 0, 0]], [TRUTH])
    assert out["macro_p"] == 1 and out["macro_r"] == 0.5 and out["macro_f1"] == pytest.approx(2 / 3)
    assert iou_f1([[1, 1, 1, 0]], [TRUTH])["macro_f1"] == 0  # IOU 1/3 < 0.5
    assert iou_f1([[1, 1, 1, 0]], [TRUTH], threshold=0.3)["macro_f1"] == pytest.approx(2 / 3)
    # macro vs micro: text A 1 TP of 1 pred / 1 human; text B 0 TP of 2 pred / 1 human
    # macro P = (1 + 0)/2, R = (1 + 0)/2 → 1/2; micro P = 1/3, R = 1/2 → 2/5
    out = iou_f1([[1, 0], [1, 0, 1]], [[1, 0], [0, 1, 0]])
    assert out["macro_f1"] == pytest.approx(0.5) and out["micro_f1"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="threshold must be in"):
        iou_f1([[1]], [[1]], threshold=0)


def reference_iou_f1(predicted, truth, threshold=0.5):
    """ERASER §4.1: a predicted rationale span matches when its token overlap (IOU: |∩| / |∪| of
    the token sets) with some human span is at least the threshold; precision = matches / predicted
    spans, recall = matches / human spans, per instance, averaged over instances, F1 of the averages.
    Written with explicit token sets and loops, no shared code."""

    def runs(mask):
        out, current = [], []
        for i, v in enumerate(list(mask) + [0]):
            if v:
                current.append(i)
            elif current:
                out.append(set(current))
                current = []
        return out

    precisions, recalls = [], []
    for pred, true in zip(predicted, truth):
        p_spans, t_spans = runs(pred), runs(true)
        matches = 0
        for p in p_spans:
            if any(len(p & t) / len(p | t) >= threshold for t in t_spans):
                matches += 1
        if p_spans:
            precisions.append(matches / len(p_spans))
        if t_spans:
            recalls.append(matches / len(t_spans))
    p = sum(precisions) / len(precisions) if precisions else 0.0
    r = sum(recalls) / len(recalls) if recalls else 0.0
    return 0.0 if p == 0 or r == 0 else 2 * p * r / (p + r)


def test_iou_f1_matches_the_slow_reference():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n_texts = int(rng.integers(1, 6))
        lengths = rng.integers(1, 25, n_texts)
        truth = [(rng.random(n) < rng.random()).astype(int) for n in lengths]
        pred = [(rng.random(n) < rng.random()).astype(int) for n in lengths]
        for threshold in (0.5, 0.25, 1.0):
            assert iou_f1(pred, truth, threshold)["macro_f1"] == pytest.approx(reference_iou_f1(pred, truth, threshold))


def test_plausibility_counts_texts_without_rationale_and_fully_marked():
    scores = [SCORES, [0.2, 0.7], [0.3, 0.1, 0.5]]
    truth = [TRUTH, [0, 0], [1, 1, 1]]
    out = plausibility(scores, truth, k_fraction=0.5)
    assert (out.n_texts, out.scored, out.without_rationale, out.fully_marked) == (3, 2, (1,), 1)
    assert out.auprc == pytest.approx((19 / 24 + 1) / 2)
    assert out.average_precision == pytest.approx(5 / 6)  # the fully marked text is left out, as ERASER
    # k = int(0.5 · 4) = 2 → {0, 1}: F1 1/2; k = int(0.5 · 3) = 1 → {2}: P 1, R 1/3, F1 1/2
    assert out.token_f1 == pytest.approx(0.5) and out.instance_token_f1 == pytest.approx((0.5, 0.5))
    # IOU: text 1 as in test_iou_f1_by_hand (1 TP, 1 pred, 2 human); text 3: [2, 3) vs [0, 3): IOU 1/3, no TP
    # macro P = (1 + 0)/2, R = (1/2 + 0)/2 → F1 = 2 · 1/2 · 1/4 / (3/4) = 1/3
    assert out.iou_f1 == pytest.approx(1 / 3)
    # default k_fraction: the scored rationales' mean share, (2/4 + 3/3)/2 = 3/4
    assert plausibility(scores, truth).k_fraction == pytest.approx(0.75)
    per_text = plausibility(scores, truth, per_instance_k=True)  # k = 2 and 3: text 3 all predicted
    assert per_text.instance_token_f1 == pytest.approx((0.5, 1.0))
    assert out.to_dict()["without_rationale"] == [1]


def test_plausibility_refuses_mismatches():
    with pytest.raises(ValueError, match="text 0: 3 scores but 2 rationale marks"):
        plausibility([[1, 2, 3]], [[0, 1]])
    with pytest.raises(ValueError, match="text 1: scores must be finite"):
        plausibility([[1.0], [np.nan]], [[1], [1]])
    with pytest.raises(ValueError, match="rationale marks must be 0 or 1"):
        plausibility([[1.0]], [[2]])
    with pytest.raises(ValueError, match="none of the 1 texts has a rationale"):
        plausibility([[1.0]], [[0]])
    with pytest.raises(ValueError, match="k_fraction must be in"):
        plausibility([[1.0]], [[1]], k_fraction=1.5)


def test_word_pieces_sum_into_whitespace_words():
    text = "unbelievably good , isn't it"
    # a WordPiece-like split: [CLS] un ##believ ##ably good , isn ' t it [SEP]
    offsets = [(0, 0), (0, 2), (2, 8), (8, 12), (13, 17), (18, 19), (20, 23), (23, 24), (24, 25), (26, 28), (0, 0)]
    ids = whitespace_word_ids(text, offsets)
    assert ids == [None, 0, 0, 0, 1, 2, 3, 3, 3, 4, None]
    pieces = [9.0, 0.1, 0.2, 0.3, 0.5, 0.05, 0.1, 0.1, 0.1, 0.25, 9.0]
    assert word_scores(pieces, ids) == pytest.approx([0.6, 0.5, 0.05, 0.3, 0.25])
    # a text cut by max_length: words no piece reached get 0
    assert word_scores([0.1, 0.2], [0, 1], num_words=4) == pytest.approx([0.1, 0.2, 0, 0])
    # a SentencePiece-like piece whose offsets include the space before the word goes to that word
    assert whitespace_word_ids("a bc", [(0, 1), (1, 4)]) == [0, 1]
    with pytest.raises(ValueError, match="reach word 2 but the text has 2 words"):
        word_scores([1, 1, 1], [0, 1, 2], num_words=2)


def test_the_default_k_fraction_is_the_marking_rationales_mean_share():
    """(1/4 + 2/2) / 2: the rationale that marks nothing is left out; none marking a word is refused."""
    rationales = [np.array([1, 0, 0, 0]), np.array([0, 0]), np.array([1, 1])]
    assert rationale_share(rationales) == 0.625
    scores = [np.array([4.0, 3.0, 2.0, 1.0]), np.array([1.0, 2.0]), np.array([2.0, 1.0])]
    assert plausibility(scores, rationales).k_fraction == 0.625
    with pytest.raises(ValueError, match="none of the 2 rationales marks a word"):
        rationale_share([np.zeros(3), np.zeros(1)])
