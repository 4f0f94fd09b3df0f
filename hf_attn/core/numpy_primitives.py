"""The input checks and the primitive measures of hf_attn's ``evaluate`` modules, in plain NumPy
(SciPy imported only by the function that needs it): the count and value checks with their upper
bounds (:data:`COUNT_LIMITS`), the float32-aware bounds check (:func:`check_within_bounds`, NAOPC),
the distances (TVD, KL, JSD) and Kendall's τ-b with its exact null.

The lower half of the one source of the modules' ``_hf_attn_measures.py`` copies:
:mod:`hf_attn.core.numpy_measures` (the summaries of the batteries) builds on it and re-exports every
name here, and ``python scripts/generate_metric_copies.py`` reads both files (this one first). It must
stay self-contained: it imports nothing from hf_attn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LN2 = math.log(2.0)
# float32 attention over a few thousand tokens sums to 1 within ~1e-5; 1e-3 leaves room for
# values rounded when written to JSON/CSV, and still catches unnormalised scores.
SUM_TOLERANCE = 1e-3


# ------------------------------------------------------------------------------------------------
# input checks: the one source (hf_attn.core.validation re-exports them)
def _rows(name: str, rows) -> list[np.ndarray]:
    if rows is None:
        raise ValueError(f"{name} is missing")
    if isinstance(rows, np.ndarray) and rows.dtype != object:
        rows = list(rows)
    try:
        out = [np.asarray([np.nan if v is None else v for v in r] if isinstance(r, list)
                          and r and not isinstance(r[0], (list, tuple, np.ndarray)) else r,
                          dtype=np.float64) for r in rows]
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numbers per instance ({err})") from err
    return out


def check_finite(name: str, rows, allow_nan: bool = False) -> list[np.ndarray]:
    """Every value finite (``allow_nan``: NaN allowed as "undefined", ±inf never) → float arrays."""
    arrays = _rows(name, rows)
    for i, a in enumerate(arrays):
        bad = np.isinf(a) if allow_nan else ~np.isfinite(a)
        if bad.any():
            where = np.argwhere(bad)[0].tolist()
            raise ValueError(f"{name}: instance {i} has {float(a[tuple(where)])} at position {where}: values "
                             f"must be finite{' (NaN/None marks an undefined value)' if allow_nan else ''}")
    return arrays


def check_distributions(name: str, rows, tolerance: float = SUM_TOLERANCE) -> list[np.ndarray]:
    """Each row (last axis) a probability distribution: finite, ≥ 0, sums to 1 ± ``tolerance``."""
    arrays = check_finite(name, rows)
    for i, a in enumerate(arrays):
        if a.size == 0 or a.shape[-1] == 0:
            raise ValueError(f"{name}: instance {i} is empty (a distribution needs at least one value)")
        if (a < 0).any():
            raise ValueError(f"{name}: instance {i} has negative values (min {a.min():.4g}): not a "
                             f"probability distribution")
        sums = a.sum(-1)
        off = np.abs(sums - 1.0) > tolerance
        if np.any(off):
            raise ValueError(f"{name}: instance {i} sums to {np.ravel(sums)[np.argmax(np.ravel(off))]:.6g}, "
                             f"not 1 (tolerance {tolerance}): pass normalised weights (softmax), not raw scores")
    return arrays


def check_range(name: str, rows, low: float, high: float, allow_nan: bool = False) -> list[np.ndarray]:
    """Finite values in ``[low, high]`` (e.g. TVD in [0, 1], JSD in [0, ln 2])."""
    arrays = check_finite(name, rows, allow_nan=allow_nan)
    for i, a in enumerate(arrays):
        real = a[~np.isnan(a)]
        if real.size and (real.min() < low or real.max() > high):
            raise ValueError(f"{name}: instance {i} has values outside [{low:.4g}, {high:.4g}] "
                             f"(min {real.min():.4g}, max {real.max():.4g})")
    return arrays


def check_same_count(**named) -> int:
    """All arguments hold the same number of instances → that number."""
    counts = {name: len(value) for name, value in named.items() if value is not None}
    if len(set(counts.values())) > 1:
        raise ValueError("different numbers of instances: "
                         + ", ".join(f"{name} has {n}" for name, n in counts.items()))
    if counts and next(iter(counts.values())) == 0:
        raise ValueError(f"no instances given ({', '.join(counts)} are empty)")
    return next(iter(counts.values()), 0)


def check_same_shapes(first_name: str, first, second_name: str, second, axis: int | None = -1) -> None:
    """Per instance, the two arrays have the same length along ``axis`` (None: the same shape)."""
    check_same_count(**{first_name: first, second_name: second})
    for i, (a, b) in enumerate(zip(first, second)):
        a, b = np.asarray(a), np.asarray(b)
        same = a.shape == b.shape if axis is None else (a.ndim > 0 and b.ndim > 0
                                                         and a.shape[axis] == b.shape[axis])
        if not same:
            raise ValueError(f"instance {i}: {first_name} has shape {a.shape}, {second_name} {b.shape}: "
                             f"they must match (one value per token / per adversary of the instance)")


# The most classes a summary is built for: a per-class table is allocated per class, so a count
# beyond any real label set (a typo, 10**9) is refused before anything is allocated.
MAX_CLASSES = 100_000


def check_number(name: str, value, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in ``[low, high]`` (``low_open`` / ``high_open``: the bound excluded);
    a ``ValueError`` naming ``name`` otherwise (NaN and ±inf included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (number <= low if low_open else number < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if high is not None and (number >= high if high_open else number > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value!r}")
    return number


# A seed is a whole number in [0, MAX_SEED]: what both torch.manual_seed (below 2^64) and NumPy's
# default_rng (non-negative, below 2^128) accept, with room for the per-batch offsets added to it.
MAX_SEED = 2 ** 63 - 1

# Upper bounds of the count settings: kind → (the largest count, why). A count beyond its bound
# cannot be meant (a typo, 10**9) and would fail late, as a MemoryError after minutes or a run of
# years; every settings class, the Explainer, the command line and the evaluate modules refuse it
# where it is given, naming the setting and the reason (``check_whole(..., limit=kind)``).
COUNT_LIMITS = {
    "ig_nodes": (4096, "beyond 4096 integrated-gradients nodes the quadrature error of a smooth path is below "
                       "float32 rounding, the trapezoid rule's error falling as 1/n² to 6e-8, and every node "
                       "is one more forward and backward"),
    "shap_samples": (65_536, "the Monte-Carlo error of Kernel SHAP falls as 1/√n, to 0.4 % of the output range "
                             "at 65,536 coalitions, and every coalition is one more forward"),
    "draws": (10_000, "the Monte-Carlo standard error of the soft masks falls as 1/√n, to 1 % of one draw's "
                      "spread at 10,000 draws, and every draw is one more forward per sentence"),
    "permutations": (100_000, "the median over 100,000 random permutations is within 0.4 % of their spread, "
                              "its standard error being 1.25 σ/√n; Jain & Wallace use 100, and every "
                              "permutation is one more forward per instance"),
    "steps": (100_000, "an adversary's optimisation runs at most 200 times Jain & Wallace's 500 steps, each a "
                       "forward and backward of every instance's adversaries"),
    "adversaries": (1000, "every step runs k rows per instance and compares every pair of adversaries, k² "
                          "divergences; 1000 is 200 times Jain & Wallace's k = 5"),
    "beam_width": (1024, "every step of the NAOPC beam search runs width × N forwards; 1024 is 20 times the "
                         "widest beam Edin et al. tried, 50"),
    "tokens": (1_000_000, "no model reads a text of more tokens"),
    "token_budget": (1 << 24, "2^24 padded tokens of a 4096-wide model are 256 GiB of activations per layer, "
                              "beyond any accelerator's memory"),
    "batch_size": (65_536, "65,536 texts of 64 tokens of a 4096-wide model are 64 GiB of activations per "
                           "layer, beyond any accelerator's memory"),
    "seed_models": (1000, "each model of another seed is a whole training run"),
    "epochs": (10_000, "each epoch is a pass over the training set"),
    "clusters": (100_000, "every k-means pass computes k distances per occurrence; 100,000 is 100 times "
                          "Tutek & Šnajder's 1000"),
    "word_types": (1_000_000, "no data set's vocabulary has more word types"),
    "occurrences": (100_000_000, "100 times Tutek & Šnajder's million occurrences, whose vectors alone would "
                                 "fill tens of GiB"),
    "threads": (4096, "the largest machines have a few thousand cores; threads beyond the cores only spin against "
                      "each other, and OpenMP allocates every thread's stack and buffers up front"),
    "seed": (MAX_SEED, "a seed must be one that torch (below 2^64) and NumPy (at least 0) both accept, with room "
                       "for the per-batch offsets added to it"),
}


def check_whole(name: str, value, low: int = 1, high: int | None = None, *, limit: str | None = None) -> int:
    """A whole number (not a bool, not a float) in ``[low, high]``; a ``ValueError`` naming ``name``
    otherwise. ``limit``: a kind of :data:`COUNT_LIMITS`, the count's upper bound (when ``high`` is
    None), whose reason a count above it is told."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if limit is not None:
        bound, why = COUNT_LIMITS[limit]
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value!r}")
        if value > (bound if high is None else min(high, bound)):
            raise ValueError(f"{name} must be <= {bound if high is None else min(high, bound)}, got {value!r}: "
                             f"{why}")
        return int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return int(value)


def check_seed(value, name: str = "seed") -> int:
    """A seed: a whole number (a Python or NumPy integer, not a bool) in ``[0, MAX_SEED]``, which both
    ``torch.manual_seed`` and ``numpy.random.default_rng`` accept; a ``ValueError`` naming ``name``
    otherwise, with the reason. Returns it as an int."""
    return check_whole(name, value, 0, limit="seed")


def check_num_classes(num_classes, name: str = "num_classes") -> int | None:
    """None, or a class count in ``[1, MAX_CLASSES]`` (checked before any per-class allocation)."""
    if num_classes is None:
        return None
    return check_whole(name, num_classes, 1, MAX_CLASSES)


def check_class_ids(name: str, values, num_classes: int | None = None) -> np.ndarray:
    """Integer class ids in ``[0, num_classes)``."""
    num_classes = check_num_classes(num_classes)
    array = np.asarray(values)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.isfinite(array)) or not np.all(np.asarray(array, dtype=np.float64) % 1 == 0):
            raise ValueError(f"{name} must be integer class ids, got {array[:5].tolist()}…")
    array = array.astype(np.int64)
    if array.size and (array.min() < 0 or (num_classes is not None and array.max() >= num_classes)):
        bad = int(np.argmax((array < 0) | (array >= (num_classes or np.iinfo(np.int64).max))))
        raise ValueError(f"{name}: instance {bad} has class {int(array[bad])}, outside "
                         f"[0, {num_classes if num_classes is not None else '∞'})")
    return array


# ------------------------------------------------------------------------------------------------
# values checked against bounds computed along another float32 path: one check for the library and
# the evaluate modules (NAOPC's AOPC within [AOPC_min, AOPC_max])
FLOAT32_EPS = float(np.finfo(np.float32).eps)  # 2^-23: the spacing of float32 numbers at 1
# How many float32 units in the last place a value may lie past its bound: an AOPC and its bounds are
# means of differences of float32 probabilities (each ≤ 1) computed in other batches and orders, so
# they disagree by a few units of 1 (measured: 2e-7, under 2 units); 8 units (9.5e-7) leaves room.
BOUND_ULPS = 8


def bound_tolerance(*magnitudes) -> np.ndarray:
    """How far a value may lie past a bound that was computed along another float32 path:
    :data:`BOUND_ULPS` float32 units in the last place of the largest magnitude involved, at least of
    1 (probabilities and their differences: 8 · 2⁻²³ ≈ 9.5e-7). Elementwise over broadcast arrays."""
    arrays = np.broadcast_arrays(*(np.abs(np.asarray(m, dtype=np.float64)) for m in magnitudes))
    scale = np.ones(arrays[0].shape)
    for array in arrays:  # fmax: a NaN (undefined) magnitude counts as none
        scale = np.fmax(scale, array)
    return BOUND_ULPS * FLOAT32_EPS * scale


def check_within_bounds(values, low, high, names=("value", "lower bound", "upper bound")) -> np.ndarray:
    """``values`` clipped into ``[low, high]`` (elementwise, float64) where they lie past a bound by
    at most :func:`bound_tolerance` (float32 rounding); a ``ValueError`` naming the instance, the
    value and its bounds where one lies farther out or a lower bound exceeds its upper one by more
    than the tolerance. NaN (an undefined value) passes through; ±inf is refused."""
    value_name, low_name, high_name = names
    value, low, high = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (values, low, high)))
    for name, array in ((value_name, value), (low_name, low), (high_name, high)):
        if np.isinf(array).any():
            i = int(np.flatnonzero(np.isinf(array).ravel())[0])
            raise ValueError(f"{name} of instance {i} is {array.ravel()[i]}: values must be finite")
    tolerance = bound_tolerance(value, low, high)
    with np.errstate(invalid="ignore"):
        crossed = np.flatnonzero((low - high > tolerance).ravel())
        if len(crossed):
            i = int(crossed[0])
            raise ValueError(f"{low_name} must not exceed {high_name}: instance {i} has [{low.ravel()[i]:.9g}, "
                             f"{high.ravel()[i]:.9g}] (tolerance {tolerance.ravel()[i]:.2g}, a few float32 units)")
        outside = np.flatnonzero(((value < low - tolerance) | (value > high + tolerance)).ravel())
    if len(outside):
        i = int(outside[0])
        raise ValueError(f"{value_name} of instance {i} ({value.ravel()[i]:.9g}) lies outside its bounds "
                         f"[{low.ravel()[i]:.9g}, {high.ravel()[i]:.9g}] by more than float32 rounding "
                         f"(tolerance {tolerance.ravel()[i]:.2g}): the bounds must be the extremes over every "
                         "ordering, the attribution's ordering included")
    top = np.maximum(low, high)  # bounds crossed within the tolerance are equal
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(value), value, np.clip(value, low, top))


def normalised_aopc(aopc_value, lower, upper, names=("aopc", "aopc_min", "aopc_max")) -> np.ndarray:
    """NAOPC (Edin et al. 2024, §3) per instance: (AOPC − AOPC_min) / (AOPC_max − AOPC_min) after
    :func:`check_within_bounds` (an AOPC past its bounds by float32 rounding is clipped onto them,
    one farther out is refused); NaN where the bounds are equal within that tolerance (one token, or
    no deletion moves ŷ) or a value is NaN. One source for ``hf_attn.core.faithfulness`` and the
    ``normalized_aopc`` module."""
    value = check_within_bounds(aopc_value, lower, upper, names)
    low, high = np.broadcast_arrays(np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64))
    span = high - low
    with np.errstate(invalid="ignore", divide="ignore"):
        defined = span > bound_tolerance(value, low, high)
        return np.where(defined, (value - low) / np.where(defined, span, 1.0), np.nan)


# ------------------------------------------------------------------------------------------------
# distances: hf_attn.measures (NumPy ports of the torch functions, float64)
def tvd(p, q) -> np.ndarray:
    """Total variation distance ½ Σ_i |p_i − q_i| over the last axis (``hf_attn.measures.tvd``)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return 0.5 * np.abs(p - q).sum(-1)


def kl_divergence(p, q, mask=None) -> np.ndarray:
    """KL(p ‖ q) over the last axis, natural log, 0·log 0 = 0, only where ``mask``
    (``hf_attn.measures.kl_divergence``)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    p, q = np.broadcast_arrays(p, q)
    positive = p > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(positive, p * (np.log(np.where(positive, p, 1.0)) - np.log(np.where(positive, q, 1.0))),
                         0.0)
    if mask is not None:
        terms = terms * np.asarray(mask, dtype=np.float64)
    return terms.sum(-1)


def jsd(p, q, mask=None) -> np.ndarray:
    """Jensen–Shannon divergence in [0, ln 2], natural log (``hf_attn.measures.jsd``)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = 0.5 * (p + q)
    return np.clip(0.5 * (kl_divergence(p, m, mask) + kl_divergence(q, m, mask)), 0.0, LN2)


# ------------------------------------------------------------------------------------------------
# Kendall τ-b: hf_attn.measures.kendall_tau (copied verbatim; SciPy's normal CDF for the p-values)
@dataclass
class KendallResult:
    """Per-instance τ-b and two-sided p-values; ``valid`` is False where τ is undefined."""

    tau: np.ndarray
    pvalue: np.ndarray
    valid: np.ndarray
    length: np.ndarray


@lru_cache(maxsize=64)
def _inversion_cdf(n: int) -> np.ndarray:
    """P(#inversions ≤ k) of a uniform random permutation of n items (Mahonian numbers)."""
    dist = np.array([1.0])
    for m in range(2, n + 1):  # the m-th item adds 0 … m−1 inversions, each with probability 1/m
        dist = np.convolve(dist, np.ones(m)) / m
    return np.cumsum(dist)


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
    from scipy.special import ndtr

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
    dis = (total - s) / 2
    exact = valid & (xtie == 0) & (ytie == 0) & ((n <= 33) | (np.minimum(dis, total - dis) <= 1))
    for i in np.flatnonzero(exact):
        c, ni = int(round(min(dis[i], total[i] - dis[i]))), int(n[i])
        if ni <= 33:
            pvalue[i] = min(1.0, 2.0 * _inversion_cdf(ni)[c])
        else:
            pvalue[i] = (2.0 / math.factorial(ni - c)) if ni - c < 171 else 0.0
    approx = valid & ~exact
    m = n * (n - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = ((m * (2 * n + 5) - x1 - y1) / 18 + (2 * xtie * ytie) / m
               + np.where(n > 2, x0 * y0 / (9 * m * (n - 2)), 0.0))
        z = s / np.sqrt(var)
    pvalue[approx] = np.clip(2 * ndtr(-np.abs(z[approx])), 0.0, 1.0)
    return KendallResult(tau=tau, pvalue=pvalue, valid=valid, length=n)
