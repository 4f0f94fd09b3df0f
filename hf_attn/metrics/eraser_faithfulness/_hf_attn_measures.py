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

DEFAULT_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)  # hf_attn.faithfulness.DEFAULT_FRACTIONS


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


# ------------------------------------------------------------------------------------------------
# ERASER: hf_attn.faithfulness (copied verbatim)
def check_fractions(fractions) -> list[float]:
    """ERASER bins: a non-empty list of finite fractions of the tokens, each in (0, 1]
    (``hf_attn.faithfulness._check_fractions``)."""
    try:
        values = [float(f) for f in fractions]
    except (TypeError, ValueError) as err:
        raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1], got {fractions!r}") from err
    bad = [f for f in values if not 0.0 < f <= 1.0]  # also NaN
    if not values or bad:
        raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1] (fractions of an "
                         f"instance's tokens), got {values}" + (f": {bad[0]} is not in (0, 1]" if bad else ""))
    return values


def aopc(scores, include_zero_bin: bool = False) -> np.ndarray:
    """Area over the perturbation curve per instance: ``(N, K)`` → ``(N,)`` (``hf_attn.faithfulness.aopc``)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] == 0:
        raise ValueError(f"scores must be (instances, bins), got shape {scores.shape}")
    return scores.sum(1) / (scores.shape[1] + (1 if include_zero_bin else 0))


def summarize_eraser(comprehensiveness, sufficiency, fractions=DEFAULT_FRACTIONS,
                     include_zero_bin: bool = False) -> dict:
    """Dataset summary of per-instance ERASER scores (``hf_attn.faithfulness.summarize_eraser``)."""
    fractions = check_fractions(fractions)
    out: dict = {"fractions": fractions}
    for name, values in (("comprehensiveness", comprehensiveness), ("sufficiency", sufficiency)):
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != len(fractions):
            raise ValueError(f"{name} must be (instances, {len(fractions)} bins) for fractions "
                             f"{fractions}, got shape {arr.shape}")
        if len(arr) == 0:
            raise ValueError(f"{name} is empty")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf")
        # differences of two probabilities of the predicted class: always in [-1, 1]
        check_range(name, arr, -1.0, 1.0)
        per_instance = aopc(arr, include_zero_bin)
        out[f"{name}_aopc"] = float(per_instance.mean())
        out[f"{name}_aopc_stderr"] = (float(per_instance.std(ddof=1) / math.sqrt(len(arr)))
                                      if len(arr) > 1 else 0.0)
        out[name] = arr.mean(0).tolist()
    if np.shape(comprehensiveness)[0] != np.shape(sufficiency)[0]:
        raise ValueError("comprehensiveness and sufficiency have different numbers of instances")
    out["num_instances"] = int(np.shape(comprehensiveness)[0])
    return out
