"""Gauss–Kronrod rules for any n: the (2n+1)-point Kronrod extension of the n-point Gauss–Legendre
rule, which keeps the n Gauss nodes and adds n + 1 (exact for polynomials of degree 3n + 1).

The Kronrod rule's Jacobi matrix comes from Laurie's algorithm (D. P. Laurie 1997, "Calculation of
Gauss–Kronrod quadrature rules", Math. Comp. 66, 1133–1145), ported from its published form as
Gautschi's ``r_kronrod`` and Julia's QuadGK ``kronrod(n)`` (MIT licence); nodes and weights are
the eigenvalues and the squared first eigenvector components of that matrix (Golub & Welsch).
:func:`kronrod_extension` maps the rule to [0, 1] for integrated gradients' path
(:mod:`hf_attn.methods.adapter_integrated_gradients`).
"""

from __future__ import annotations

import numpy as np


def _check_order(n) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be an int ≥ 1, got {n!r}")
    return int(n)


def kronrod_jacobi(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The recurrence coefficients (a, b) (length 2n + 1 each) of the (2n+1)-point Gauss–Kronrod
    rule of the Legendre weight on [−1, 1] by Laurie's algorithm; b[0] = 2 is the weight's mass."""
    n = _check_order(n)
    size = 2 * n + 1
    a = np.zeros(size)  # the Legendre weight is symmetric: every a is 0
    b = np.zeros(size)
    b[0] = 2.0
    k = np.arange(1, -(-3 * n // 2) + 1)
    b[k] = k ** 2 / (4.0 * k ** 2 - 1)  # Legendre: b_k = k² / (4k² − 1), k = 1 … ⌈3n/2⌉
    s = np.zeros(n // 2 + 2)
    t = np.zeros(n // 2 + 2)
    t[1] = b[n + 1]
    for m in range(n - 1):  # the first loop of Laurie's algorithm (the a terms vanish)
        u = 0.0
        for kk in range((m + 1) // 2, -1, -1):
            ll = m - kk
            u += b[kk + n + 1] * s[kk] - b[ll] * s[kk + 1]
            s[kk + 1] = u
        s, t = t, s
    for j in range(n // 2, -1, -1):
        s[j + 1] = s[j]
    for m in range(n - 1, 2 * n - 2):
        u = 0.0
        j = 0
        for kk in range(m + 1 - n, (m - 1) // 2 + 1):
            ll = m - kk
            j = n - 1 - ll
            u += -b[kk + n + 1] * s[j + 1] + b[ll] * s[j + 2]
            s[j + 1] = u
        kk = (m + 1) // 2
        if m % 2 == 1:  # odd m: a new b (even m would give a new a, 0 here)
            b[kk + n + 1] = s[j + 1] / s[j + 2]
        s, t = t, s
    a[2 * n] = a[n - 1] - b[2 * n] * s[1] / t[1]  # 0 for the symmetric weight
    return a, b


def kronrod(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (ascending) and weights of the (2n+1)-point Gauss–Kronrod rule on [−1, 1]; the nodes
    at the odd positions 1, 3, …, 2n − 1 are the n Gauss–Legendre nodes."""
    a, b = kronrod_jacobi(n)
    if np.any(b[1:] <= 0):
        raise ValueError(f"no real Gauss–Kronrod rule with positive weights for n={n}")
    nodes, vectors = np.linalg.eigh(np.diag(a) + np.diag(np.sqrt(b[1:]), 1) + np.diag(np.sqrt(b[1:]), -1))
    weights = b[0] * vectors[0] ** 2
    nodes = (nodes - nodes[::-1]) / 2  # symmetric about 0 exactly (the rule is)
    weights = (weights + weights[::-1]) / 2
    return nodes, weights


def kronrod_extension(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Kronrod extension of the n-point Gauss–Legendre rule on [0, 1] (the rule of
    ``quadrature(n, "gauss-legendre")``): ``(gauss_weights, new_nodes, new_weights)`` — the
    Kronrod weights of the n Gauss nodes (in ``numpy.polynomial.legendre.leggauss(n)``'s order) and
    the n + 1 added nodes with theirs. Σ gauss_weights + Σ new_weights = 1."""
    nodes, weights = kronrod(n)
    gauss = np.arange(1, 2 * n, 2)
    new = np.arange(0, 2 * n + 1, 2)
    return weights[gauss] / 2, (nodes[new] + 1) / 2, weights[new] / 2


def gauss_kronrod(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole (2n+1)-point Kronrod rule on [0, 1] as one node list: the n Gauss–Legendre nodes
    exactly as ``leggauss(n)`` gives them, then the n + 1 added nodes, with their weights."""
    gauss_nodes = (np.polynomial.legendre.leggauss(_check_order(n))[0] + 1) / 2
    gauss_weights, new_nodes, new_weights = kronrod_extension(n)
    return np.concatenate([gauss_nodes, new_nodes]), np.concatenate([gauss_weights, new_weights])


__all__ = ["gauss_kronrod", "kronrod", "kronrod_extension", "kronrod_jacobi"]
