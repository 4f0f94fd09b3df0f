"""Checks for arrays supplied by users (``evaluate`` modules, analysis functions): each raises
``ValueError`` with a message that names the argument, the instance and the problem.

Rows may be ragged (one ``(T_i,)`` or ``(k, T_i)`` array per instance). Used at API boundaries,
not inside hot loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# float32 attention over a few thousand tokens sums to 1 within ~1e-5; 1e-3 leaves room for
# values rounded when written to JSON/CSV, and still catches unnormalised scores.
SUM_TOLERANCE = 1e-3


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


def check_same_shapes(first_name: str, first: Sequence[np.ndarray], second_name: str,
                      second: Sequence[np.ndarray], axis: int | None = -1) -> None:
    """Per instance, the two arrays have the same length along ``axis`` (None: the same shape)."""
    check_same_count(**{first_name: first, second_name: second})
    for i, (a, b) in enumerate(zip(first, second)):
        a, b = np.asarray(a), np.asarray(b)
        same = a.shape == b.shape if axis is None else (a.ndim > 0 and b.ndim > 0
                                                         and a.shape[axis] == b.shape[axis])
        if not same:
            raise ValueError(f"instance {i}: {first_name} has shape {a.shape}, {second_name} {b.shape}: "
                             f"they must match (one value per token / per adversary of the instance)")


def check_class_ids(name: str, values, num_classes: int | None = None) -> np.ndarray:
    """Integer class ids in ``[0, num_classes)``."""
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


__all__ = ["check_finite", "check_distributions", "check_range", "check_same_count", "check_same_shapes",
           "check_class_ids", "SUM_TOLERANCE"]
