# Generated from hf_attn/core/numpy_primitives.py and hf_attn/core/numpy_measures.py
# by scripts/generate_metric_copies.py: do not edit.
# It holds what this folder's scripts import from it and what that uses, nothing more.
# Edit the sources and run `python scripts/generate_metric_copies.py` to update every copy.
"""The measures behind hf_attn's ``evaluate`` modules, in plain NumPy (scikit-learn / SciPy imported
only by the functions that need them): what a module computes when hf_attn is not installed.

``evaluate.load("USER/<metric>")`` downloads ``<metric>.py`` and the files it imports *relatively*
(``from ._hf_attn_measures import ...``), never a package from PyPI; hf_attn is not on any index,
so each module script imports only its copy of this file, NumPy and the evaluate stack. This file
and :mod:`hf_attn.core.numpy_primitives` (the input checks, distances and Kendall's τ-b, which this
file re-exports) are the one source: ``python scripts/generate_metric_copies.py`` writes, under a
generated-file header, the part of them each module folder uses (the names its script imports,
what those use and the imports they need) as ``hf_attn/metrics/<name>/_hf_attn_measures.py`` (so
each folder loads on its own, locally and from the Hub), ``--check`` fails when a copy is stale, and
``hf-attn push-metric`` refuses a stale copy. It must therefore stay self-contained: it imports
nothing from hf_attn but ``numpy_primitives`` (whose definitions the copies inline).

Every module returns its result through :func:`report_undefined`: an undefined value is None and
named with its reason in the result's ``undefined`` map, never NaN. The count settings' upper bounds
(:data:`COUNT_LIMITS`) and the float32-aware bounds check (:func:`check_within_bounds`, NAOPC) are
in ``numpy_primitives`` (importable from here too), so the library and the modules check alike.

Where the library's function is the same code (the input checks, the J&W/W&P/T&Š summaries that
are pure NumPy, Kendall's exact null), the library imports it from here; the others are NumPy ports
of the library's torch functions, named in their docstrings, and ``tests/test_metric_spaces.py``
checks that they return the library's values.
"""

from __future__ import annotations

import math

import numpy as np

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
# undefined values: None with a reason, in every evaluate module's result
UNDEFINED_KEY = "undefined"


def _is_undefined(value) -> bool:
    if value is None:
        return True
    return isinstance(value, (float, np.floating)) and not math.isfinite(float(value))


def _positions(indices: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(i) for i in indices[:limit])
    return shown + (f", … ({len(indices)} in all)" if len(indices) > limit else "")


def _reason_for(path: str, reasons: dict) -> str | None:
    """The reason for ``path`` (keys joined by ".", a list's items as "[]"): the first key of
    ``reasons`` that matches it component by component ("*" matches any one component), else the
    reason given for its last component alone."""
    parts = path.split(".")
    for pattern, reason in reasons.items():
        wanted = pattern.split(".")
        if len(wanted) == len(parts) and all(w in ("*", p) for w, p in zip(wanted, parts)):
            return reason
    return reasons.get(parts[-1])


def report_undefined(summary: dict, reasons: dict) -> dict:
    """``summary`` as plain JSON types (:func:`jsonable`) in which every undefined value (NaN, ±inf
    or None) is ``None`` and named, with why, in ``result["undefined"]`` (``{path: reason}``;
    ``{}`` when every value is defined), so that no module returns NaN or a silent null.

    ``path`` joins dict keys with "."; the undefined items of a list are named once, under the
    list's path with "[]" for the items' position (``"tau[]"``, ``"by_max_attention[].median"``),
    their positions added to the reason. ``reasons`` maps a path pattern ("*" matches any one
    component: ``"per_class.*.mean"``) or a last component (``"mean"``) to the reason. An undefined
    value without a reason is a ``RuntimeError``: the module, not its input, is at fault."""
    found: dict[str, list[int]] = {}

    def walk(value, path, position):
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k), position) for k, v in value.items()}
        if isinstance(value, (list, tuple, np.ndarray)):
            items = value.tolist() if isinstance(value, np.ndarray) else value
            return [walk(v, f"{path}[]", i) for i, v in enumerate(items)]
        if _is_undefined(value):
            found.setdefault(path, [])
            if position is not None:
                found[path].append(position)
            return None
        return jsonable(value)

    out = walk(summary, "", None)
    undefined = {}
    for path, positions in found.items():
        reason = _reason_for(path, reasons)
        if reason is None:
            raise RuntimeError(f"{path} is undefined and no reason is given for it")
        undefined[path] = reason + (f" (positions {_positions(sorted(set(positions)))})" if positions else "")
    out[UNDEFINED_KEY] = undefined
    return out
