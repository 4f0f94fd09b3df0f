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


def check_same_count(**named) -> int:
    """All arguments hold the same number of instances → that number."""
    counts = {name: len(value) for name, value in named.items() if value is not None}
    if len(set(counts.values())) > 1:
        raise ValueError("different numbers of instances: "
                         + ", ".join(f"{name} has {n}" for name, n in counts.items()))
    if counts and next(iter(counts.values())) == 0:
        raise ValueError(f"no instances given ({', '.join(counts)} are empty)")
    return next(iter(counts.values()), 0)


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


BASE_ATTENTION_FLOOR = 1e-12  # hf_attn.training.wp.BASE_ATTENTION_FLOOR


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
# Wiegreffe & Pinter: hf_attn.batteries.wp and hf_attn.training.wp (NumPy ports)
def pad_ragged(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """List of ``(T_i,)`` arrays → ``(N, T_max)`` float64 zero-padded array and its bool mask
    (``hf_attn.training.wp.pad_ragged``)."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.zeros((len(rows), int(lengths.max()) if len(rows) else 0), dtype=np.float64)
    mask = np.arange(out.shape[1])[None, :] < lengths[:, None]
    out[mask] = np.concatenate(rows) if len(rows) else []
    return out, mask


def divergence_summary(jsd_values, tvd_values) -> dict:
    """Mean/median/std of per-instance JSD and TVD (``hf_attn.batteries.wp.divergence_summary``)."""
    j, t = np.asarray(jsd_values, dtype=np.float64), np.asarray(tvd_values, dtype=np.float64)
    return {"mean_jsd": float(j.mean()), "median_jsd": float(np.median(j)), "std_jsd": float(j.std()),
            "mean_tvd": float(t.mean()), "median_tvd": float(np.median(t)), "std_tvd": float(t.std())}


def consistent_adversary_loss(adversary_probs, base_probs, adversary_attention, base_attention, mask,
                              lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W&P §4 Eq. (3) per instance: ``(loss, tvd, kl)`` with L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b), the
    base attention floored at ``BASE_ATTENTION_FLOOR`` on real tokens
    (``hf_attn.training.wp.consistent_adversary_loss``, ``reduction="none"``)."""
    lam = check_number("lam", lam, 0.0)
    mask = np.asarray(mask, dtype=bool)
    base_attention = np.asarray(base_attention, dtype=np.float64)
    floored = np.where(mask & (base_attention <= 0), BASE_ATTENTION_FLOOR, base_attention)
    kl = kl_divergence(adversary_attention, floored, mask)
    distance = tvd(adversary_probs, base_probs)
    return distance - lam * kl, distance, kl


def consistent_adversary_summary(adversary_attention, base_attention, adversary_probabilities,
                                 base_probabilities, lam: float = 0.001) -> dict:
    """W&P §4 measures of an adversary against its base over a set of instances
    (``hf_attn.batteries.wp.consistent_adversary_summary``)."""
    a, mask = pad_ragged([np.asarray(x, dtype=np.float64) for x in adversary_attention])
    b, mask_b = pad_ragged([np.asarray(x, dtype=np.float64) for x in base_attention])
    if a.shape != b.shape or not (mask == mask_b).all():
        raise ValueError("adversary and base attention must have the same length per instance")
    loss, distance, kl = consistent_adversary_loss(
        np.asarray(adversary_probabilities, dtype=np.float64), np.asarray(base_probabilities, dtype=np.float64),
        a, b, mask, lam)
    divergence = jsd(a, b, mask)
    return {"lambda": float(lam), **divergence_summary(divergence, distance),
            "mean_kl": float(kl.mean()), "objective": float(loss.mean()),
            "jsd": divergence.tolist(), "tvd": distance.tolist(), "kl": kl.tolist()}
