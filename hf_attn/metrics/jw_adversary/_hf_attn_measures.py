# Generated from hf_attn/core/numpy_measures.py by scripts/generate_metric_copies.py: do not edit.
# It holds what this folder's scripts import from it and what that uses, nothing more.
# Edit the source and run `python scripts/generate_metric_copies.py` to update every copy.
"""The measures behind hf_attn's ``evaluate`` modules, in plain NumPy (scikit-learn / SciPy imported
only by the functions that need them): what a module computes when hf_attn is not installed.

``evaluate.load("USER/<metric>")`` downloads ``<metric>.py`` and the files it imports *relatively*
(``from ._hf_attn_measures import ...``), never a package from PyPI; hf_attn is not on any index,
so each module script imports only its copy of this file, NumPy and the evaluate stack. This file
is the one source: ``python scripts/generate_metric_copies.py`` writes, under a generated-file
header, the part of it each module folder uses (the names its script imports, what those use and
the imports they need) as ``hf_attn/metrics/<name>/_hf_attn_measures.py`` (so each folder loads on
its own, locally and from the Hub), ``--check`` fails when a copy is stale, and
``hf-attn push-metric`` refuses a stale copy. It must therefore stay self-contained: it imports
nothing from hf_attn.

Where the library's function is the same code (the input checks, the J&W/W&P/T&Š summaries that
are pure NumPy, Kendall's exact null), the library imports it from here; the others are NumPy ports
of the library's torch functions, named in their docstrings, and ``tests/test_metric_spaces.py``
checks that they return the library's values.
"""

from __future__ import annotations

import math

import numpy as np

MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)


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


def check_whole(name: str, value, low: int = 1, high: int | None = None) -> int:
    """A whole number (not a bool, not a float) in ``[low, high]``; a ``ValueError`` naming ``name``
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return int(value)


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


def _class_ids(predictions, num_classes: int | None) -> tuple[np.ndarray, int]:
    num_classes = check_num_classes(num_classes)
    predictions = np.asarray(predictions, dtype=np.int64).reshape(-1)
    if num_classes is None:
        num_classes = int(predictions.max()) + 1 if len(predictions) else 0
        check_num_classes(max(num_classes, 1), "the largest prediction + 1")
    if len(predictions) and (predictions.min() < 0 or predictions.max() >= num_classes):
        raise ValueError(f"predictions must be class ids in [0, {num_classes})")
    return predictions, num_classes


def _describe(values: np.ndarray) -> dict[str, float | int | None]:
    if len(values) == 0:
        return {"count": 0, "mean": None, "std": None, "median": None}
    return {"count": int(len(values)), "mean": float(values.mean()), "std": float(values.std()),
            "median": float(np.median(values))}


def binned_by_max_attention(values: np.ndarray, max_attention: np.ndarray, predictions: np.ndarray,
                            num_classes: int, bins=MAX_ATTENTION_BINS) -> list[dict]:
    """Per max-attention bin and predicted class: count, median and quartiles of ``values``."""
    edges = np.asarray(bins, dtype=np.float64)
    which = np.clip(np.searchsorted(edges, max_attention, side="right") - 1, 0, len(edges) - 2)
    rows = []
    for b in range(len(edges) - 1):
        for c in range(num_classes):
            v = values[(which == b) & (predictions == c)]
            rows.append({"bin": [float(edges[b]), float(edges[b + 1])], "class": c, "count": int(len(v)),
                         "median": float(np.median(v)) if len(v) else None,
                         "q25": float(np.quantile(v, 0.25)) if len(v) else None,
                         "q75": float(np.quantile(v, 0.75)) if len(v) else None})
    return rows


def adversary_summary(adversary_tvd, adversary_jsd, max_attention, predictions, eps: float = 0.01,
                      num_classes: int | None = None) -> dict:
    """J&W Alg. 3 / Figs 4–5: ε-max JSD per instance, per predicted class and by max attention.
    ``eps`` must be a finite number >= 0 and every instance needs at least one adversary (an ε-max
    JSD of "none found" is 0, which would be indistinguishable from a search that never ran)."""
    eps = check_number("eps", eps, 0.0)
    predictions, num_classes = _class_ids(predictions, num_classes)
    eps_max, feasible_any = [], []
    for i, (t, j) in enumerate(zip(adversary_tvd, adversary_jsd)):
        t, j = np.asarray(t, dtype=np.float64), np.asarray(j, dtype=np.float64)
        if t.size == 0:
            raise ValueError(f"adversary_tvd: instance {i} has no adversaries (k must be >= 1)")
        ok = t <= eps
        eps_max.append(float(j[ok].max()) if ok.any() else 0.0)
        feasible_any.append(bool(ok.any()))
    eps_max = np.array(eps_max)
    feasible_any = np.array(feasible_any, dtype=bool)
    max_attention = np.asarray(max_attention, dtype=np.float64).reshape(-1)
    if not (len(eps_max) == len(max_attention) == len(predictions)):
        raise ValueError("adversary arrays, max_attention and predictions differ in length")

    def block(select):
        stats = _describe(eps_max[select])
        stats["fraction_feasible"] = float(feasible_any[select].mean()) if select.any() else None
        return stats

    return {"eps": eps,
            "per_class": {str(c): block(predictions == c) for c in range(num_classes)},
            "overall": block(np.ones(len(predictions), dtype=bool)),
            "by_max_attention": binned_by_max_attention(eps_max, max_attention, predictions, num_classes),
            "eps_max_jsd": eps_max}


def jsonable(value):
    """Summary → plain JSON types (arrays → lists, NaN → None): what the evaluate modules return."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (float, np.floating)):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
