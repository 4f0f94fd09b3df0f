"""Faithfulness metrics (hf_attn.core.faithfulness) against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from hf_attn.core.faithfulness import (aopc, erasure_differences, mean_ci, mean_ci_over_seeds, normalised_aopc,
                                       rank_agreement, soft_keep_probabilities, soft_normalised_comprehensiveness,
                                       soft_normalised_sufficiency, top_k_agreement)


def test_mean_ci_hand_computed():
    # values 1, 2, 3: mean 2, sd 1, t_{0.975, 2} = 4.302652729911275 → half-width 4.3027 / √3
    out = mean_ci([1.0, 2.0, 3.0])
    assert out["mean"] == 2.0 and out["n"] == 3
    assert math.isclose(out["high"] - 2.0, 4.302652729911275 / math.sqrt(3), rel_tol=1e-9)
    assert math.isclose(out["low"], 2.0 - 4.302652729911275 / math.sqrt(3), rel_tol=1e-9)
    single = mean_ci([np.nan, 5.0])  # NaN (an undefined instance) left out
    assert single["mean"] == 5.0 and single["n"] == 1 and math.isnan(single["low"])
    assert mean_ci([])["n"] == 0
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=1.5)


def test_mean_ci_over_seeds_uses_seed_means():
    # seed means 1 and 3 (NaN left out): mean 2, sd √2, t_{0.975, 1} = 12.706204736174698
    out = mean_ci_over_seeds([[0.0, 2.0, np.nan], [3.0, 3.0, 3.0]])
    assert out["mean"] == 2.0 and out["seeds"] == 2 and out["n"] == 2
    assert math.isclose(out["high"] - 2.0, 12.706204736174698 * math.sqrt(2) / math.sqrt(2), rel_tol=1e-9)


def test_erasure_differences_and_aopc():
    drops = erasure_differences([0.9, 0.6], [[0.5, 0.1], [0.6, 0.7]])
    np.testing.assert_allclose(drops, [[0.4, 0.8], [0.0, -0.1]])
    np.testing.assert_allclose(aopc(drops, False), [0.6, -0.05])
    with pytest.raises(ValueError, match="erased_probability"):
        erasure_differences([0.9], [[1.5]])


def test_soft_keep_probabilities_min_max():
    keep = soft_keep_probabilities([[2.0, 4.0, 3.0, 99.0], [1.0, 1.0, 0.0, 0.0]],
                                   [[True, True, True, False], [True, True, False, False]])
    np.testing.assert_allclose(keep, [[0.0, 1.0, 0.5, 0.0], [1.0, 1.0, 0.0, 0.0]])


def test_soft_normalised_metrics_hand_computed():
    full, null = np.array([0.9, 0.8, 0.5]), np.array([0.5, 0.4, 0.6])
    # instance 0: kept 0.8 → S = 1 − 0.1 = 0.9, S0 = 1 − 0.4 = 0.6 → (0.9 − 0.6) / 0.4 = 0.75
    # instance 1: kept 0.9 (above ŷ(x)) → S = 1 → (1 − 0.6) / 0.4 = 1; instance 2: ŷ(x) < ŷ(0) → NaN
    ns = soft_normalised_sufficiency(full, [0.8, 0.9, 0.5], null)
    np.testing.assert_allclose(ns[:2], [0.75, 1.0])
    assert math.isnan(ns[2])
    # removed 0.6 → max(0, 0.3) / 0.4 = 0.75; removed 0.85 → 0 / 0.4 = 0
    nc = soft_normalised_comprehensiveness(full, [0.6, 0.85, 0.1], null)
    np.testing.assert_allclose(nc[:2], [0.75, 0.0])
    # draws on the first axis; removed 0.5 → 0.4 / 0.4 = 1; removed 0.4 → 0.4 / 0.4 = 1
    np.testing.assert_allclose(soft_normalised_comprehensiveness(full, [[0.6, 0.85, 0.1], [0.5, 0.4, 0.1]], null)[1, :2],
                               [1.0, 1.0])
    # clipping (the authors' code): removed 0.1 with ŷ(x) 0.9, ŷ(0) 0.5 → 0.8 / 0.4 = 2 → 1; kept 0.95 → 1
    wide = soft_normalised_comprehensiveness(full, [0.1, 0.85, 0.1], null, clip=False)
    np.testing.assert_allclose(wide[0], 2.0)
    np.testing.assert_allclose(soft_normalised_comprehensiveness(full, [0.1, 0.85, 0.1], null)[0], 1.0)
    # sufficiency below the null input's: S = 1 − 0.8 = 0.2 < S0 = 0.6 → −1 unclipped, 0 clipped
    np.testing.assert_allclose(soft_normalised_sufficiency(full, [0.1, 0.9, 0.5], null, clip=False)[0], -1.0)
    np.testing.assert_allclose(soft_normalised_sufficiency(full, [0.1, 0.9, 0.5], null)[0], 0.0)


def test_normalised_aopc_hand_computed():
    out = normalised_aopc([0.3, 0.5, 0.1], [0.1, 0.5, 0.0], [0.5, 0.5, 0.1])
    np.testing.assert_allclose(out[[0, 2]], [0.5, 1.0])
    assert math.isnan(out[1])
    with pytest.raises(ValueError, match="lower must not exceed upper"):
        normalised_aopc([0.3], [0.6], [0.5])


def test_normalised_aopc_shares_the_modules_float32_aware_bounds_check():
    """The library and the normalized_aopc module run one check (numpy_measures.check_within_bounds):
    an AOPC past its bound by float32 rounding (2e-7, measured between a float32 AOPC and its bounds)
    is clipped onto it; one past by more than the tolerance (a few float32 units of the magnitudes) is
    refused naming the instance, the value and the bounds: 0.5 within [0, 0.4] gave 1.25 before."""
    from hf_attn.core.numpy_measures import BOUND_ULPS, FLOAT32_EPS, bound_tolerance

    assert float(bound_tolerance(0.5, 0.0, 0.4)) == BOUND_ULPS * FLOAT32_EPS  # ≈ 9.5e-7 for probabilities
    assert float(bound_tolerance(3.0, 0.0, 0.4)) == 3 * BOUND_ULPS * FLOAT32_EPS  # scales with the magnitude
    out = normalised_aopc([0.4 - 2e-7 - 0.4, 0.4 + 2e-7], [0.0, 0.0], [0.4, 0.4])
    assert out.tolist() == [0.0, 1.0]  # clipped onto the bounds, not -5e-7 / 1.0000005
    with pytest.raises(ValueError, match=r"aopc_value of instance 0 \(0.5\) lies outside its bounds \[0, 0.4\]"):
        normalised_aopc([0.5], [0.0], [0.4])
    with pytest.raises(ValueError, match=r"instance 1 .* outside its bounds \[0.1, 0.3\]"):
        normalised_aopc([0.2, 0.1 - 2e-6], [0.1, 0.1], [0.3, 0.3])
    assert math.isnan(normalised_aopc([0.2], [0.2], [0.2 + 1e-7])[0])  # bounds equal within float32: undefined
    assert math.isnan(normalised_aopc([np.nan], [0.0], [1.0])[0])  # an undefined AOPC stays undefined
    with pytest.raises(ValueError, match="finite"):
        normalised_aopc([np.inf], [0.0], [1.0])


def test_rank_agreement_is_kendall_tau_b():
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 7)), rng.random((4, 7))
    b[1, :3] = 0.5  # ties
    mask = np.ones((4, 7), bool)
    mask[2, 5:] = False
    got = rank_agreement(a, b, mask)
    for i in range(4):
        assert math.isclose(got[i], kendalltau(a[i][mask[i]], b[i][mask[i]]).statistic, abs_tol=1e-12)
    # hand-computed: (1, 2, 3) vs (1, 3, 2): 2 concordant, 1 discordant → τ = 1/3
    assert math.isclose(rank_agreement([[1, 2, 3]], [[1, 3, 2]], [[True] * 3])[0], 1 / 3)


def test_top_k_agreement_hand_computed():
    a = [[5, 4, 3, 2, 1], [1, 1, 1, 1, 0]]
    b = [[5, 1, 4, 2, 3], [0, 1, 1, 1, 1]]
    mask = [[True] * 5, [True, True, True, True, False]]
    # k = ceil(0.4 · 5) = 2: {0, 1} ∩ {0, 2} → 1/2; row 2: n = 4, k = 2, ties by position:
    # a → {0, 1}, b → {1, 2} → 1/2
    np.testing.assert_allclose(top_k_agreement(a, b, mask, 0.4), [0.5, 0.5])
    np.testing.assert_allclose(top_k_agreement(a, a, mask, 1.0), [1.0, 1.0])
    with pytest.raises(ValueError, match="fraction"):
        top_k_agreement(a, b, mask, 0.0)


def test_naopc_exact_bounds_are_every_ordering_also_for_bins_below_all_tokens():
    """Dynamic programming over subsets against brute force over every ordering, on random set
    functions (drops may be negative): every k (Edin et al.), and ERASER-style bins whose last bin
    stays below 100 % of the tokens; the beam search of full width finds the same extremes."""
    import itertools

    from hf_attn.core.naopc import BeamSearch, exact_bounds, ordering_aopc, ordering_masks

    rng = np.random.default_rng(7)
    for n in range(1, 7):
        drops = rng.uniform(-0.4, 1.0, 1 << n)
        drops[0] = 0.0
        orders = list(itertools.permutations(range(n)))
        every = [ordering_aopc(order, drops) for order in orders]
        low, high = exact_bounds(n, drops)
        assert low == pytest.approx(min(every), abs=1e-12) and high == pytest.approx(max(every), abs=1e-12)
        if n >= 3:
            sizes = [1, n - 1]  # the last bin leaves one token
            binned = [np.mean([drops[ordering_masks(order)[k - 1]] for k in sizes]) for order in orders]
            low, high = exact_bounds(n, drops, sizes)
            assert low == pytest.approx(min(binned), abs=1e-12) and high == pytest.approx(max(binned), abs=1e-12)
        for highest in (True, False):
            search = BeamSearch(n, 10_000, highest)
            while not search.done:
                search.update(drops[search.requests()])
            assert search.value == pytest.approx(max(every) if highest else min(every), abs=1e-12)
    with pytest.raises(ValueError, match="2\\^3"):
        exact_bounds(3, np.zeros(5))
