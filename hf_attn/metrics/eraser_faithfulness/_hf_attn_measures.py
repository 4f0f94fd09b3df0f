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


DEFAULT_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)  # hf_attn.faithfulness.DEFAULT_FRACTIONS


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
    """Dataset summary of per-instance ERASER scores (``hf_attn.faithfulness.summarize_eraser``).
    An instance with an undefined bin (NaN or None: ``hf-attn eraser`` leaves a one-token text's
    bins undefined on a model without an empty input) is left out of that score's aggregates;
    when any is, ``<score>_n`` (the instances the aggregates cover) and ``undefined_instances``
    (``{score: [instance positions]}``) are added, and aggregates over no instance are NaN.
    ``inf`` is refused."""
    fractions = check_fractions(fractions)
    out: dict = {"fractions": fractions}
    left_out: dict = {}
    for name, values in (("comprehensiveness", comprehensiveness), ("sufficiency", sufficiency)):
        try:
            arr = np.asarray(values, dtype=np.float64)  # None → NaN (undefined)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be (instances, {len(fractions)} bins) of numbers ({err})") from None
        if arr.ndim != 2 or arr.shape[1] != len(fractions):
            raise ValueError(f"{name} must be (instances, {len(fractions)} bins) for fractions "
                             f"{fractions}, got shape {arr.shape}")
        if len(arr) == 0:
            raise ValueError(f"{name} is empty")
        if np.isinf(arr).any():
            raise ValueError(f"{name} contains inf (undefined bins are NaN or None)")
        defined = ~np.isnan(arr).any(1)
        # differences of two probabilities of the predicted class: always in [-1, 1]
        check_range(name, arr[defined], -1.0, 1.0)
        kept = arr[defined]
        if len(kept):
            per_instance = aopc(kept, include_zero_bin)
            out[f"{name}_aopc"] = float(per_instance.mean())
            out[f"{name}_aopc_stderr"] = (float(per_instance.std(ddof=1) / math.sqrt(len(kept)))
                                          if len(kept) > 1 else 0.0)
            out[name] = kept.mean(0).tolist()
        else:
            out[f"{name}_aopc"] = out[f"{name}_aopc_stderr"] = float("nan")
            out[name] = [float("nan")] * len(fractions)
        if not defined.all():
            out[f"{name}_n"] = int(defined.sum())
            left_out[name] = np.flatnonzero(~defined).tolist()
    if np.shape(comprehensiveness)[0] != np.shape(sufficiency)[0]:
        raise ValueError("comprehensiveness and sufficiency have different numbers of instances")
    out["num_instances"] = int(np.shape(comprehensiveness)[0])
    if left_out:
        out["undefined_instances"] = left_out
    return out
