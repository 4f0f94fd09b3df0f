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


# The most classes a summary is built for: a per-class table is allocated per class, so a count
# beyond any real label set (a typo, 10**9) is refused before anything is allocated.
MAX_CLASSES = 100_000

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


MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)


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


def seed_variance_statistics(base_attention, seed_attentions, base_probs, seed_probs, mask) -> dict:
    """W&P §3.3 per instance (``hf_attn.batteries.wp.seed_variance_statistics``): ``jsd``/``tvd``
    ``(S, B)``, their max and median over seeds ``(B,)`` and the base's ``max_attention``."""
    base_attention = np.asarray(base_attention, dtype=np.float64)
    seed_attentions = np.asarray(seed_attentions, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    if seed_attentions.ndim != 3 or seed_attentions.shape[1:] != base_attention.shape:
        raise ValueError(f"seed_attentions must be (S, B, T) with (B, T) = {tuple(base_attention.shape)}, "
                         f"got {tuple(seed_attentions.shape)}")
    base_probs = np.asarray(base_probs, dtype=np.float64)
    seed_probs = np.asarray(seed_probs, dtype=np.float64)
    divergences = jsd(seed_attentions, base_attention[None], mask[None])
    distances = tvd(seed_probs, base_probs[None])
    return {"jsd": divergences, "tvd": distances,
            "max_jsd": divergences.max(0), "median_jsd": np.median(divergences, axis=0),
            "max_tvd": distances.max(0), "median_tvd": np.median(distances, axis=0),
            "max_attention": (base_attention * mask).max(-1)}


def binned_summary(values, max_attention, labels, bins=MAX_ATTENTION_BINS, label_names=None) -> list[dict]:
    """Per (class, bin of max attention): count, mean, median, quartiles of ``values``
    (``hf_attn.batteries.wp.binned_summary``)."""
    values, max_attention, labels = (np.asarray(values, dtype=np.float64), np.asarray(max_attention),
                                     np.asarray(labels))
    edges = np.asarray(bins, dtype=np.float64)
    which = np.clip(np.searchsorted(edges, max_attention, side="right") - 1, 0, len(edges) - 2)
    rows = []
    for c in sorted(set(labels.tolist())):
        for b in range(len(edges) - 1):
            sel = (labels == c) & (which == b)
            v = values[sel]
            rows.append({"class": label_names[c] if label_names else int(c), "bin": [float(edges[b]), float(edges[b + 1])],
                         "count": int(sel.sum()),
                         "mean": float(v.mean()) if v.size else None,
                         "median": float(np.median(v)) if v.size else None,
                         "q25": float(np.quantile(v, 0.25)) if v.size else None,
                         "q75": float(np.quantile(v, 0.75)) if v.size else None})
    return rows


def seed_variance_summary(base_attention, seed_attentions, base_probabilities, seed_probabilities,
                          labels=None, statistic: str = "max", bins=MAX_ATTENTION_BINS) -> dict:
    """Ragged-input W&P §3.3 summary (``hf_attn.batteries.wp.seed_variance_summary``)."""
    if statistic not in ("max", "median"):
        raise ValueError(f"statistic must be 'max' or 'median', got {statistic!r}")
    if labels is not None:
        classes = np.asarray(base_probabilities, dtype=np.float64)
        check_class_ids("labels", labels, classes.shape[-1] if classes.ndim == 2 else None)
    base, mask = pad_ragged([np.asarray(a, dtype=np.float64) for a in base_attention])
    seeds = [np.asarray(s, dtype=np.float64) for s in seed_attentions]
    num_seeds = {s.shape[0] for s in seeds}
    if len(num_seeds) != 1:
        raise ValueError(f"every instance needs the same number of seed models, got {sorted(num_seeds)}")
    stacked = np.zeros((num_seeds.pop(),) + base.shape)
    for i, s in enumerate(seeds):
        if s.shape[1] != mask[i].sum():
            raise ValueError(f"instance {i}: seed attention has {s.shape[1]} tokens, base {mask[i].sum()}")
        stacked[:, i, :s.shape[1]] = s
    stats = seed_variance_statistics(base, stacked, np.asarray(base_probabilities, dtype=np.float64),
                                     np.transpose(np.asarray(seed_probabilities, dtype=np.float64), (1, 0, 2)),
                                     mask)
    values = stats[f"{statistic}_jsd"]
    out = {"statistic": statistic, "num_seeds": int(stacked.shape[0]),
           "mean_max_jsd": float(stats["max_jsd"].mean()), "mean_median_jsd": float(stats["median_jsd"].mean()),
           "mean_max_tvd": float(stats["max_tvd"].mean()), "mean_median_tvd": float(stats["median_tvd"].mean()),
           "jsd": values.tolist(), "tvd": stats[f"{statistic}_tvd"].tolist(),
           "max_attention": stats["max_attention"].tolist()}
    if labels is not None:
        out["by_class_and_max_attention"] = binned_summary(values, stats["max_attention"], labels, bins)
    return out
