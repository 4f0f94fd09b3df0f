"""Shared measures: TVD, JSD, masked KL and batched Kendall τ-b with p-values
(optionally with near-ties merged first, :func:`merge_near_ties`).

All functions take batched tensors / arrays with the distribution over the last axis and are exact:
0·log 0 = 0, never NaN on zeros or masked positions.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import ndtr

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import KendallResult, _inversion_cdf  # noqa: F401

LN2 = math.log(2.0)


def _as_tensor(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), dtype=torch.float64)


def binary_to_two_class(p: torch.Tensor) -> torch.Tensor:
    """``(...,)`` positive-class probabilities → ``(..., 2)`` ``[1 − p, p]``."""
    return torch.stack([1 - p, p], dim=-1)


def tvd(p, q) -> torch.Tensor:
    """Total variation distance ½ Σ_i |p_i − q_i| over the last axis (J&W §3)."""
    p, q = _as_tensor(p), _as_tensor(q)
    return 0.5 * (p - q).abs().sum(-1)


def _xlogy_ratio(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    # p · log(p / q) with 0 · log(0 / q) = 0 (also where q = 0), computed without NaN gradients.
    positive = p > 0
    safe_p = torch.where(positive, p, torch.ones_like(p))
    safe_q = torch.where(positive, q, torch.ones_like(q))
    return torch.where(positive, p * (safe_p.log() - safe_q.log()), torch.zeros_like(p))


def kl_divergence(p, q, mask=None) -> torch.Tensor:
    """KL(p ‖ q) = Σ p log(p/q) over the last axis (natural log), only where ``mask`` (pads are
    dropped before the log, W&P §4). Infinite where p > 0 = q."""
    p, q = _as_tensor(p), _as_tensor(q)
    terms = _xlogy_ratio(p, q)
    if mask is not None:
        terms = terms * _as_tensor(mask).to(terms.dtype)
    return terms.sum(-1)


def jsd(p, q, mask=None) -> torch.Tensor:
    """Jensen–Shannon divergence ½ KL(p‖m) + ½ KL(q‖m), m = (p+q)/2, natural log:
    0 ≤ JSD ≤ ln 2, exactly 0 for identical inputs and ln 2 for disjoint supports."""
    p, q = _as_tensor(p), _as_tensor(q)
    m = 0.5 * (p + q)
    return (0.5 * (kl_divergence(p, m, mask) + kl_divergence(q, m, mask))).clamp(0.0, LN2)


def merge_near_ties(x, mask=None, tolerance: float = 0.0) -> np.ndarray:
    """Each row of ``x`` with values closer than ``tolerance`` set equal, before ranking.

    Within a row (only where ``mask`` holds), the values are sorted and every value within
    ``tolerance`` (absolute, ≤) of its sorted neighbour joins that neighbour's group; each group
    takes its smallest value. Groups are chains, so two values within ``tolerance`` of each other
    are always tied (rounding to a grid of step ``tolerance`` would split a pair that straddles a
    grid boundary), and the order between groups is kept. Values outside ``mask`` and rows without
    near-ties are returned unchanged; ``tolerance`` 0 merges nothing (a copy of ``x``).

    Why: two readings of the same quantity computed along different float32 paths, such
    as the leave-one-out values of two adjacent identical tokens (deleting either gives the same
    sentence), differ in the 7th digit, and Kendall τ would rank such exact ties as ordered.
    """
    x = np.array(x, dtype=np.float64)  # a copy
    if tolerance < 0 or not np.isfinite(tolerance):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")
    if tolerance == 0 or x.size == 0:
        return x
    squeeze = x.ndim == 1
    x2 = x.reshape(1, -1) if squeeze else x
    mask = np.ones(x2.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(x2.shape)
    filled = np.where(mask, x2, np.inf)  # masked positions sort last and never join a group
    order = np.argsort(filled, axis=-1, kind="stable")
    ordered = np.take_along_axis(filled, order, -1)
    starts = np.ones(ordered.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        starts[:, 1:] = ~(np.diff(ordered, axis=-1) <= tolerance)  # inf − inf = NaN: a new group
    first = np.maximum.accumulate(np.where(starts, np.arange(ordered.shape[1]), 0), axis=-1)
    merged = np.empty_like(filled)
    np.put_along_axis(merged, order, np.take_along_axis(ordered, first, -1), -1)
    out = np.where(mask, merged, x2)
    return out.reshape(-1) if squeeze else out


def kendall_tau(x, y, mask=None, tie_tolerance: float = 0.0) -> KendallResult:
    """Kendall τ-b of each row of ``x`` and ``y`` over the positions where ``mask`` holds, with
    the p-value ``scipy.stats.kendalltau`` gives (method 'auto': exact null distribution when
    there are no ties and n ≤ 33, else the tie-corrected normal approximation).

    ``tie_tolerance`` > 0 first applies :func:`merge_near_ties` to each row of ``x`` and of ``y``:
    values within the tolerance count as tied, and the result equals ``scipy.stats.kendalltau`` of
    the merged values. The default 0 ranks the values exactly as given.

    Vectorised over rows: O(B·T²) memory, so call it on batches of similar length.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"x and y must be (instances, tokens) of the same shape, got {x.shape}, {y.shape}")
    mask = np.ones(x.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if mask.shape != x.shape:
        raise ValueError(f"mask shape {mask.shape} differs from {x.shape}")
    if not (np.isfinite(x[mask]).all() and np.isfinite(y[mask]).all()):
        raise ValueError("Kendall τ inputs contain NaN or inf")
    if tie_tolerance:
        x, y = merge_near_ties(x, mask, tie_tolerance), merge_near_ties(y, mask, tie_tolerance)
    n = mask.sum(1)
    real = mask.astype(np.int8)

    def signs(v):  # sign(v_i − v_j) over real pairs, as int8 (every pair counted twice: i<j, j<i)
        out = (v[:, :, None] > v[:, None, :]).astype(np.int8)
        out -= v[:, :, None] < v[:, None, :]
        out *= real[:, :, None]
        out *= real[:, None, :]
        return out

    sx, sy = signs(x), signs(y)
    s = np.einsum("bij,bij->b", sx, sy, dtype=np.int64) / 2  # concordant − discordant
    untied_x = np.abs(sx).sum((1, 2), dtype=np.int64) / 2
    untied_y = np.abs(sy).sum((1, 2), dtype=np.int64) / 2
    total = n * (n - 1) / 2
    valid = (n >= 2) & (untied_x > 0) & (untied_y > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(valid, s / np.sqrt(untied_x * untied_y), np.nan)
    tau = np.clip(tau, -1.0, 1.0)

    # tie statistics from, for each element, how many real elements equal it (itself included)
    def tie_terms(v):
        equal = (v[:, :, None] == v[:, None, :]) & mask[:, :, None] & mask[:, None, :]
        c = equal.sum(2).astype(np.float64) * mask
        t1 = ((c - 1) * mask).sum(1)  # Σ t(t−1)
        t2 = ((c - 1) * (c - 2) * mask).sum(1)  # Σ t(t−1)(t−2)
        t3 = ((c - 1) * (2 * c + 5) * mask).sum(1)  # Σ t(t−1)(2t+5)
        return t1 / 2, t2, t3

    xtie, x0, x1 = tie_terms(x)
    ytie, y0, y1 = tie_terms(y)
    pvalue = np.full(len(x), np.nan)
    # without ties s = total − 2·discordant; scipy's 'auto' takes the exact null distribution here
    dis = (total - s) / 2
    exact = valid & (xtie == 0) & (ytie == 0) & ((n <= 33) | (np.minimum(dis, total - dis) <= 1))
    for i in np.flatnonzero(exact):  # a table lookup per instance (cached per length)
        c, ni = int(round(min(dis[i], total[i] - dis[i]))), int(n[i])
        if ni <= 33:
            pvalue[i] = min(1.0, 2.0 * _inversion_cdf(ni)[c])
        else:  # c ∈ {0, 1}: 2·(1 or n−1 permutations)/n!
            pvalue[i] = (2.0 / math.factorial(ni - c)) if ni - c < 171 else 0.0
    approx = valid & ~exact
    m = n * (n - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = ((m * (2 * n + 5) - x1 - y1) / 18 + (2 * xtie * ytie) / m
               + np.where(n > 2, x0 * y0 / (9 * m * (n - 2)), 0.0))
        z = s / np.sqrt(var)
    pvalue[approx] = np.clip(2 * ndtr(-np.abs(z[approx])), 0.0, 1.0)
    return KendallResult(tau=tau, pvalue=pvalue, valid=valid, length=n)
