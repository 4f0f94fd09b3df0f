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
import warnings

import numpy as np

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
