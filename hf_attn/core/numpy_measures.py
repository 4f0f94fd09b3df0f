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
import warnings

import numpy as np

from hf_attn.core.numpy_primitives import (  # noqa: F401  (re-exported: the checks and primitives)
    bound_tolerance, BOUND_ULPS, check_class_ids, check_distributions, check_finite, check_num_classes,
    check_number, check_range, check_same_count, check_same_shapes, check_seed, check_whole,
    check_within_bounds, COUNT_LIMITS, FLOAT32_EPS, _inversion_cdf, jsd, kendall_tau, KendallResult,
    kl_divergence, LN2, MAX_CLASSES, MAX_SEED, merge_near_ties, normalised_aopc, _rows, SUM_TOLERANCE,
    tvd)

BASE_ATTENTION_FLOOR = 1e-12  # hf_attn.training.wp.BASE_ATTENTION_FLOOR
MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)
DEFAULT_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)  # hf_attn.faithfulness.DEFAULT_FRACTIONS


# ------------------------------------------------------------------------------------------------
# Jain & Wallace summaries: hf_attn.batteries.jw.summary (copied verbatim)
def ragged_to_padded(arrays, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """List of 1-D arrays → ``(N, T)`` float64 values (``fill`` beyond each length) and bool mask."""
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    width = int(lengths.max()) if len(arrays) else 0
    values = np.full((len(arrays), width), fill, dtype=np.float64)
    mask = np.arange(width)[None, :] < lengths[:, None]
    if len(arrays):
        values[mask] = np.concatenate(arrays) if width else []
    return values, mask


def kendall_per_instance(x, y, pair_budget: int = 500_000) -> dict[str, np.ndarray]:
    """Kendall τ-b and p-value of each instance's ``x`` vs ``y``, in length buckets of at most
    ``pair_budget`` (instances × T²) entries; instances with fewer than 2 tokens, a constant ranking
    or a non-finite value are not valid (τ = p = NaN)."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} instances, y {len(y)}")
    n = len(x)
    tau = np.full(n, np.nan)
    pvalue = np.full(n, np.nan)
    valid = np.zeros(n, dtype=bool)
    lengths = np.array([np.size(a) for a in x], dtype=np.int64)
    for i, (a, b) in enumerate(zip(x, y)):
        if np.size(a) != np.size(b):
            raise ValueError(f"instance {i}: x has {np.size(a)} values, y {np.size(b)}")
    finite = np.array([np.isfinite(a).all() and np.isfinite(b).all() for a, b in zip(x, y)], dtype=bool)
    usable = np.flatnonzero(finite & (lengths >= 2))
    order = usable[np.argsort(lengths[usable], kind="stable")]
    start = 0
    while start < len(order):
        width = lengths[order[start:]]
        cost = np.arange(1, len(width) + 1) * width.astype(np.float64) ** 2
        stop = start + max(1, int(np.searchsorted(cost, pair_budget, side="right")))
        chunk = order[start:stop]
        xs, mask = ragged_to_padded([x[i] for i in chunk])
        ys, _ = ragged_to_padded([y[i] for i in chunk])
        result = kendall_tau(xs, ys, mask)
        tau[chunk], pvalue[chunk], valid[chunk] = result.tau, result.pvalue, result.valid
        start = stop
    return {"tau": tau, "pvalue": pvalue, "valid": valid, "length": lengths}


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


def correlation_summary(x, y, predictions, num_classes: int | None = None, alpha: float = 0.05,
                        pair_budget: int = 4_000_000) -> dict:
    """J&W Table 2 for one pair of rankings: per predicted class and overall, mean ± std of τ over
    valid instances, fraction with p < ``alpha``, number of skipped instances."""
    alpha = check_number("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    predictions, num_classes = _class_ids(predictions, num_classes)
    if len(predictions) != len(x):
        raise ValueError(f"{len(x)} instances but {len(predictions)} predictions")
    result = kendall_per_instance(x, y, pair_budget)
    tau, pvalue, valid = result["tau"], result["pvalue"], result["valid"]

    def block(select: np.ndarray) -> dict:
        ok = select & valid
        stats = _describe(tau[ok])
        stats["fraction_significant"] = float((pvalue[ok] < alpha).mean()) if ok.any() else None
        stats["skipped"] = int((select & ~valid).sum())
        return stats

    return {"per_class": {str(c): block(predictions == c) for c in range(num_classes)},
            "overall": block(np.ones(len(predictions), dtype=bool)), "alpha": alpha,
            "tau": tau, "pvalue": pvalue, "valid": valid}


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


def permutation_summary(permutation_tvd, max_attention, predictions, num_classes: int | None = None
                        ) -> dict:
    """J&W §4.2.1: Δŷ_med per instance, its distribution per predicted class and by max attention."""
    predictions, num_classes = _class_ids(predictions, num_classes)
    if isinstance(permutation_tvd, np.ndarray) and permutation_tvd.ndim == 2:
        medians = np.median(permutation_tvd.astype(np.float64), axis=1)
    else:  # ragged
        medians = np.array([float(np.median(np.asarray(v, dtype=np.float64))) for v in permutation_tvd])
    max_attention = np.asarray(max_attention, dtype=np.float64).reshape(-1)
    if not (len(medians) == len(max_attention) == len(predictions)):
        raise ValueError("permutation_tvd, max_attention and predictions differ in length")
    return {"per_class": {str(c): _describe(medians[predictions == c]) for c in range(num_classes)},
            "overall": _describe(medians),
            "by_max_attention": binned_by_max_attention(medians, max_attention, predictions, num_classes),
            "median_tvd": medians}


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


def divergence_summary(jsd_values, tvd_values) -> dict:
    """Mean/median/std of per-instance JSD and TVD (``hf_attn.batteries.wp.divergence_summary``)."""
    j, t = np.asarray(jsd_values, dtype=np.float64), np.asarray(tvd_values, dtype=np.float64)
    return {"mean_jsd": float(j.mean()), "median_jsd": float(np.median(j)), "std_jsd": float(j.std()),
            "mean_tvd": float(t.mean()), "median_tvd": float(np.median(t)), "std_tvd": float(t.std())}


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


# ------------------------------------------------------------------------------------------------
# Tutek & Šnajder: hf_attn.batteries.ts (NumPy ports of the list-level functions)
def pad_token_logits(token_logits, attentions=None):
    """Ragged per-instance ``token_logits`` (each ``(T_i, K)`` or ``(T_i,)``) and ``attentions``
    (each ``(T_i,)``) → float32 ``(B, T, K)``, ``(B, T)`` and mask ``(B, T)``
    (``hf_attn.batteries.ts.pad_token_logits``)."""
    rows = [np.asarray(x, dtype=np.float32) for x in token_logits]
    if not rows:
        raise ValueError("no instances")
    rows = [r[:, None] if r.ndim == 1 else r for r in rows]
    k = rows[0].shape[-1]
    if any(r.ndim != 2 or r.shape[-1] != k or r.shape[0] == 0 for r in rows):
        raise ValueError("each token_logits entry must be a non-empty (tokens, K) array, same K")
    steps = max(r.shape[0] for r in rows)
    padded = np.zeros((len(rows), steps, k), dtype=np.float32)
    mask = np.zeros((len(rows), steps), dtype=bool)
    for i, r in enumerate(rows):
        padded[i, :len(r)] = r
        mask[i, :len(r)] = True
    alpha = None
    if attentions is not None:
        if len(attentions) != len(rows):
            raise ValueError(f"{len(attentions)} attentions for {len(rows)} token_logits")
        alpha = np.zeros((len(rows), steps), dtype=np.float32)
        for i, a in enumerate(attentions):
            a = np.asarray(a, dtype=np.float32)
            if a.shape != (len(rows[i]),):
                raise ValueError(f"instance {i}: attention has {tuple(a.shape)}, expected ({len(rows[i])},)")
            alpha[i, :len(a)] = a
    return padded, alpha, mask


def expand_logits(raw: np.ndarray) -> np.ndarray:
    """K = 1 (one sigmoid logit z) → ``[0, z]`` so softmax gives ``[1−σ(z), σ(z)]``; K > 1 as is
    (``hf_attn.modeling_hf_attn.expand_binary_logits``)."""
    return np.concatenate([np.zeros_like(raw), raw], axis=-1) if raw.shape[-1] == 1 else raw


def logits_from_token_logits(token_logits: np.ndarray, attention: np.ndarray) -> np.ndarray:
    """Σ_t α_t · token_logits_t (T&Š Eq. 9; the decoder is linear), expanded: ``(B, T, K)`` and
    ``(..., B, T)`` → ``(..., B, C)``. Accumulated in float64 from the float32 inputs."""
    return expand_logits(np.einsum("...bt,btk->...bk", attention.astype(np.float64),
                                   token_logits.astype(np.float64)))


def uniform_attention(mask: np.ndarray) -> np.ndarray:
    """``(B, T)`` bool mask → float32 uniform α over the real tokens, 0 on pads."""
    weights = mask.astype(np.float32)
    return weights / weights.sum(-1, keepdims=True)


def torch_uniform_keys(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 values ``torch.rand(shape, generator=torch.Generator().manual_seed(seed))`` gives
    on CPU, without torch: its generator is the 32-bit Mersenne Twister seeded like NumPy's legacy
    ``RandomState``, and each float is the low 24 bits of one draw times 2⁻²⁴."""
    draws = np.random.RandomState(int(seed) % 2 ** 32).randint(0, 2 ** 32, size=int(np.prod(shape)),
                                                                dtype=np.uint32)
    return ((draws & np.uint32(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)).reshape(shape)


def permute_attention(attention: np.ndarray, mask: np.ndarray, seed: int, draws: int = 1) -> np.ndarray:
    """``draws`` uniformly random permutations of each row's α within its real tokens ``(draws, B, T)``,
    pads 0: the permutations ``hf_attn.batteries.ts.permute_attention`` draws with
    ``torch.Generator().manual_seed(seed)`` (random keys, pads sorted last)."""
    batch, steps = mask.shape
    keys = torch_uniform_keys(seed, (draws, batch, steps))
    keys[:, ~mask] = 2.0  # pads sort after every real token
    source = np.argsort(keys, axis=-1, kind="stable")  # position t takes α from real position source[t]
    permuted = np.take_along_axis(np.broadcast_to(attention, (draws, batch, steps)), source, axis=-1)
    return permuted * mask[None].astype(permuted.dtype)


def f1_score_of(predictions, labels, num_labels: int) -> float:
    """F1 as ``hf_attn.batteries.ts.f1_score_of`` (scikit-learn's ``f1_score``, zero_division=0):
    positive class for binary tasks, macro over classes 0 … C−1 otherwise (in [0, 1])."""
    predictions, labels = np.asarray(predictions).reshape(-1), np.asarray(labels).reshape(-1)
    classes = [1] if num_labels == 2 else list(range(num_labels))
    scores = []
    for c in classes:
        true_positive = float(np.sum((predictions == c) & (labels == c)))
        denominator = float(np.sum(labels == c) + np.sum(predictions == c))
        scores.append(2 * true_positive / denominator if denominator else 0.0)
    return float(np.mean(scores))


def fragility_scores(labels, trained, uniform, permuted, num_labels: int) -> dict[str, float]:
    """T&Š Table 1 row in percent (``hf_attn.batteries.ts.fragility_scores``)."""
    labels = np.asarray(labels)
    permuted = np.atleast_2d(np.asarray(permuted))
    if not (len(labels) == len(trained) == len(uniform) == permuted.shape[1]):
        raise ValueError("labels and predictions must have the same length")
    if len(labels) == 0:
        raise ValueError("no instances")
    f1_trained = 100 * f1_score_of(np.asarray(trained), labels, num_labels)
    f1_uniform = 100 * f1_score_of(np.asarray(uniform), labels, num_labels)
    f1_permuted = [100 * f1_score_of(p, labels, num_labels) for p in permuted]
    return {"f1_trained": f1_trained, "f1_uniform": f1_uniform,
            "f1_permuted": float(np.mean(f1_permuted)),
            "f1_permuted_std_over_draws": float(np.std(f1_permuted)),
            "delta_uniform": f1_uniform - f1_trained,
            "delta_permuted": float(np.mean(f1_permuted)) - f1_trained,
            "permutation_draws": int(permuted.shape[0]), "instances": int(len(labels))}


def fragility_from_token_logits(token_logits, attentions, references, seed: int = 0,
                                permutation_draws: int = 10) -> dict[str, float]:
    """T&Š Table 1 from per-instance decoder outputs ``(T_i, K)`` and trained α ``(T_i,)``
    (``hf_attn.batteries.ts.fragility_from_token_logits``, the same permutations for a seed)."""
    tok, alpha, mask = pad_token_logits(token_logits, attentions)
    trained = logits_from_token_logits(tok, alpha).argmax(-1)
    uniform = logits_from_token_logits(tok, uniform_attention(mask)).argmax(-1)
    permuted = logits_from_token_logits(tok, permute_attention(alpha, mask, seed, permutation_draws)).argmax(-1)
    num_labels = 2 if tok.shape[-1] == 1 else tok.shape[-1]
    return fragility_scores(np.asarray(references), trained, uniform, permuted, num_labels)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(-1, keepdims=True)


def token_probability_score(per_instance, correct) -> dict[str, float]:
    """T&Š Table 3: mean of the per-instance values over correctly classified instances
    (``hf_attn.batteries.ts.token_probability_score``)."""
    per_instance = np.asarray(per_instance, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if not correct.any():  # undefined: a mean over no instance
        return {"token_probability": float("nan"), "correct_instances": 0, "instances": int(len(correct))}
    return {"token_probability": float(per_instance[correct].mean()),
            "correct_instances": int(correct.sum()), "instances": int(len(correct))}


def token_probability_from_token_logits(token_logits, attentions, references) -> dict[str, float]:
    """T&Š Table 3 from per-instance decoder outputs ``(T_i, K)`` and trained α ``(T_i,)``
    (``hf_attn.batteries.ts.token_probability_from_token_logits``)."""
    tok, alpha, mask = pad_token_logits(token_logits, attentions)
    predicted = logits_from_token_logits(tok, alpha).argmax(-1)
    probabilities = softmax(expand_logits(tok.astype(np.float64)))  # (B, T, C): all attention on t
    chosen = np.take_along_axis(probabilities, predicted[:, None, None], axis=-1)[..., 0] * mask
    per_instance = chosen.sum(-1) / mask.sum(-1)
    return token_probability_score(per_instance, predicted == np.asarray(references))


def cluster_labels(vectors: np.ndarray, n_clusters: int = 1000, batch_size: int = 100,
                   seed: int = 0) -> np.ndarray:
    """MiniBatchKMeans labels ``(N,)`` of ``vectors (N, dim)`` (``hf_attn.batteries.ts.cluster_labels``)."""
    from sklearn.cluster import MiniBatchKMeans

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(vectors) < n_clusters:
        raise ValueError(f"{len(vectors)} vectors cannot form {n_clusters} clusters")
    with warnings.catch_warnings():
        # e_t has at most one distinct vector per word type: k-means++ may find duplicate centres.
        warnings.simplefilter("ignore")
        km = MiniBatchKMeans(n_clusters=n_clusters, batch_size=batch_size, random_state=seed,
                             n_init="auto")
        return km.fit_predict(vectors)


def clustered_mutual_information(inputs: np.ndarray, hidden: np.ndarray, n_clusters: int = 1000,
                                 batch_size: int = 100, seed: int = 0) -> float:
    """I(cluster(e); cluster(h)) in nats (``hf_attn.batteries.ts.clustered_mutual_information``)."""
    from sklearn.metrics import mutual_info_score

    if len(inputs) != len(hidden):
        raise ValueError(f"inputs ({len(inputs)}) and hidden ({len(hidden)}) must be row-aligned")
    return float(mutual_info_score(cluster_labels(inputs, n_clusters, batch_size, seed),
                                   cluster_labels(hidden, n_clusters, batch_size, seed)))


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
