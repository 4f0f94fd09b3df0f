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
import warnings

import numpy as np


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
