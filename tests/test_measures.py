"""Shared measures against hand-computed values and scipy."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from hf_attn.core.measures import LN2, jsd, kendall_tau, kl_divergence, merge_near_ties, tvd


def test_tvd_hand_computed():
    assert float(tvd([0.2, 0.8], [0.5, 0.5])) == pytest.approx(0.3)
    assert float(tvd([1.0, 0.0, 0.0], [0.0, 0.0, 1.0])) == pytest.approx(1.0)


def test_jsd_identical_disjoint_and_zeros():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    out = jsd(p, q)
    assert out[0] == 0 and out[2] == 0
    assert float(out[1]) == pytest.approx(LN2)
    assert torch.isfinite(out).all()
    # hand-computed: p = [1, 0], q = [½, ½] → m = [¾, ¼]; ½(log(4/3)) + ½(½ log(2/3) + ½ log 2)
    expected = 0.5 * math.log(4 / 3) + 0.5 * (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25))
    assert float(jsd([1.0, 0.0], [0.5, 0.5])) == pytest.approx(expected)


def test_jsd_gradient_is_finite_on_zeros():
    p = torch.tensor([0.7, 0.3, 0.0], dtype=torch.float64, requires_grad=True)
    q = torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64)
    jsd(p, q).backward()
    assert torch.isfinite(p.grad).all()


def test_kl_masks_pads_before_the_log():
    p = torch.tensor([[0.5, 0.5, 0.0]])
    q = torch.tensor([[0.25, 0.75, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert float(kl_divergence(p, q, mask)) == pytest.approx(expected, rel=1e-6)
    assert float(kl_divergence(p, p, mask)) == 0.0


def test_kendall_matches_scipy_with_and_without_ties():
    rng = np.random.default_rng(0)
    rows, lengths = [], []
    for n in [2, 3, 5, 9, 20, 33, 34, 50]:
        for ties in (False, True):
            x = rng.normal(size=n)
            y = rng.normal(size=n) + 0.5 * x
            if ties:
                x = np.round(x, 0)
                y = np.round(y * 2, 0)
            rows.append((x, y))
            lengths.append(n)
    T = max(lengths)
    X = np.zeros((len(rows), T))
    Y = np.zeros((len(rows), T))
    M = np.zeros((len(rows), T), dtype=bool)
    for i, (x, y) in enumerate(rows):
        X[i, :len(x)], Y[i, :len(y)], M[i, :len(x)] = x, y, True
        X[i, len(x):] = 99.0  # pads must be ignored
    result = kendall_tau(X, Y, M)
    for i, (x, y) in enumerate(rows):
        ref = kendalltau(x, y)
        if np.isnan(ref.statistic):
            assert not result.valid[i]
            continue
        assert result.valid[i]
        assert result.tau[i] == pytest.approx(ref.statistic, abs=1e-12)
        assert result.pvalue[i] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)


def test_kendall_skips_length_one_and_constant_rows():
    X = np.array([[0.3, 0.0, 0.0], [1.0, 1.0, 1.0], [0.1, 0.2, 0.3]])
    Y = np.array([[0.5, 0.0, 0.0], [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    M = np.array([[1, 0, 0], [1, 1, 1], [1, 1, 1]], dtype=bool)
    r = kendall_tau(X, Y, M)
    assert r.valid.tolist() == [False, False, True]
    assert r.tau[2] == pytest.approx(-1.0)
    assert np.isnan(r.tau[0]) and np.isnan(r.tau[1])


def test_kendall_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        kendall_tau(np.array([[0.1, np.nan]]), np.array([[0.1, 0.2]]))


def test_merge_near_ties_chains_within_tolerance_and_keeps_order():
    x = np.array([0.3, 0.1, 0.1 + 4e-7, 0.2, 0.3 + 9e-7, 0.1 + 8e-7, 0.5])
    got = merge_near_ties(x, tolerance=1e-6)
    # 0.1, 0.1+4e-7, 0.1+8e-7 form one chain (neighbours within 1e-6) even though 0.1 and
    # 0.1+8e-7 would fall on different sides of a 1e-6 rounding grid's boundary at 0.1000005
    assert got.tolist() == [0.3, 0.1, 0.1, 0.2, 0.3, 0.1, 0.5]
    assert np.array_equal(np.argsort(got, kind="stable"), np.argsort(x, kind="stable"))
    assert np.round(0.1 + 4e-7, 6) != np.round(0.1 + 8e-7, 6)  # what plain rounding would split
    assert merge_near_ties(x, tolerance=0.0).tolist() == x.tolist()  # 0: unchanged
    # rows are independent; masked positions never join a group and are returned unchanged
    X = np.array([[0.2, 0.2 + 1e-7, 9.0], [0.2 + 1e-7, 0.5, 0.2]])
    M = np.array([[1, 1, 0], [1, 1, 1]], dtype=bool)
    assert merge_near_ties(X, M, 1e-6).tolist() == [[0.2, 0.2, 9.0], [0.2, 0.5, 0.2]]
    with pytest.raises(ValueError, match="tolerance"):
        merge_near_ties(x, tolerance=-1.0)


def test_kendall_with_tie_tolerance_is_scipy_on_merged_values():
    """A pair of values 1e-7 apart (an exact tie up to float32 noise) is a tie
    after merging; τ then equals scipy's τ-b of the merged values, while the raw values give a
    different τ (the tie counted as ordered)."""
    attention = np.array([0.10, 0.35, 0.20, 0.05, 0.30])
    loo = np.array([0.40, 0.40 + 6e-8, 0.10, 0.02, 0.25])  # tokens 0 and 1: the same deletion
    raw = kendall_tau(attention[None], loo[None])
    merged = kendall_tau(attention[None], loo[None], tie_tolerance=1e-6)
    ref = kendalltau(merge_near_ties(attention, tolerance=1e-6), merge_near_ties(loo, tolerance=1e-6))
    assert merged.tau[0] == pytest.approx(ref.statistic, abs=1e-12)
    assert merged.pvalue[0] == pytest.approx(ref.pvalue, rel=1e-9)
    assert raw.tau[0] == pytest.approx(kendalltau(attention, loo).statistic, abs=1e-12)
    assert abs(raw.tau[0] - merged.tau[0]) > 0.05
    # batched, random lengths with planted near-ties: every row equals scipy on the merged row
    rng = np.random.default_rng(1)
    X, Y, M = np.zeros((30, 12)), np.zeros((30, 12)), np.zeros((30, 12), dtype=bool)
    for i in range(30):
        n = int(rng.integers(2, 13))
        x, y = rng.normal(size=n), rng.normal(size=n)
        if n >= 3:
            y[1] = y[0] + rng.uniform(-5e-7, 5e-7)
        X[i, :n], Y[i, :n], M[i, :n] = x, y, True
    result = kendall_tau(X, Y, M, tie_tolerance=1e-6)
    for i in range(30):
        n = int(M[i].sum())
        ref = kendalltau(merge_near_ties(X[i, :n], tolerance=1e-6), merge_near_ties(Y[i, :n], tolerance=1e-6))
        if np.isnan(ref.statistic):
            assert not result.valid[i]
            continue
        assert result.tau[i] == pytest.approx(ref.statistic, abs=1e-12)
        assert result.pvalue[i] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
