"""Normalised AOPC (Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe & Maistro 2024, "Normalized AOPC:
Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability", ACL, §3–4): the
bounds of the AOPC over every ordering of an instance's N features, exactly or by beam search.

Definitions (the paper's §3 and the authors' released code, ``JoakimEdin/naopc``,
``aopc/aopc/methods.py``):

- an ordering π of the features deletes them one by one; S_k = {π_1 … π_k} and
  d(S) = f(x) − f(x with the features of S deleted) (f: the probability of the predicted class);
- AOPC(π) = 1/N Σ_{k=1..N} d(S_k) — every k, not ERASER's bins. (The paper writes 1/(N+1) with a
  k = 0 term d(∅) = 0; the code divides by N. NAOPC is the same either way: the factor cancels.)
- comprehensiveness deletes the most important feature first (π by descending importance),
  sufficiency the least important first (ascending): over every k the inputs "top-k kept" and
  "N − k least important deleted" are the same sets, so one pair of bounds serves both;
- NAOPC = (AOPC − AOPC_min) / (AOPC_max − AOPC_min), AOPC_min / AOPC_max over every ordering
  (:func:`hf_attn.core.faithfulness.normalised_aopc`). High is good for comprehensiveness, low for
  sufficiency (as the authors report both).

Bounds:

- :func:`exact_bounds`: dynamic programming over the 2^N subsets. The AOPC of an ordering is a sum
  along a chain ∅ ⊂ S_1 ⊂ … ⊂ S_N, so V(S) = w(|S|)·d(S) + max_{t ∈ S} V(S \\ {t}) (min for the
  lower bound) with V(∅) = 0 gives the best chain; w(k) = 1 for every k, or only at chosen sizes
  (ERASER's bins: :func:`exact_bounds` with ``sizes``). 2^N forwards: for short inputs only.
- :class:`BeamSearch`: the paper's §4 approximation as the authors' code runs it — each kept
  ordering prefix is extended by every remaining feature, candidates are ranked by their cumulative
  Σ d(S_k) (the AOPC so far; all candidates of a step have the same length, so this is the AOPC's
  own ranking), the best ``width`` are kept (one per subset: the future of a prefix depends only on
  its set). N steps, at most width · N candidates each. The width defaults to the authors' 5
  (:data:`DEFAULT_BEAM_WIDTH`). Its result is an approximation of the
  bound (a lower bound of AOPC_max, an upper bound of AOPC_min), labelled as such.

Subsets are Python ``int`` bit masks over the instance's features (bit t = feature t).
"""

from __future__ import annotations

import numpy as np

EXACT_LIMIT = 20  # 2^20 subsets: beyond this the exact bounds are refused
# The authors' beam width: ``Aopc.evaluate`` and ``Aopc.evaluate_dset`` of their released package default
# to ``beam_size=5`` (``JoakimEdin/naopc``, ``aopc/aopc/main.py``, commit 96fa7e8); the faithfulness
# table's ``naopc_beam`` and ``--faith-naopc-beam`` default to it.
DEFAULT_BEAM_WIDTH = 5


def all_subsets(n: int) -> list[int]:
    """Every subset of n features as a bit mask, in increasing order (0 … 2^n − 1)."""
    if not isinstance(n, int) or n < 0 or n > EXACT_LIMIT:
        raise ValueError(f"exact NAOPC bounds enumerate 2^n subsets: n must be an int in [0, {EXACT_LIMIT}], got {n!r}")
    return list(range(1 << n))


def exact_bounds(n: int, drops, sizes=None) -> tuple[float, float]:
    """``(AOPC_min, AOPC_max)`` over every ordering of ``n`` features, exactly.

    Args:
        n: the number of features (≤ :data:`EXACT_LIMIT`).
        drops: ``(2^n,)`` d(S) per subset bit mask S (``drops[0]`` = d(∅), unused).
        sizes: the subset sizes k the AOPC averages (default every k = 1..n, Edin et al.'s AOPC;
            ERASER's bins: e.g. ``[1, 3, 5]``).
    Returns:
        The lowest and highest mean of d(S_k) over k ∈ ``sizes`` along any chain of nested subsets
        (= any ordering)."""
    drops = np.asarray(drops, dtype=np.float64)
    if drops.shape != (1 << n,):
        raise ValueError(f"drops must have 2^{n} = {1 << n} values (one per subset), got shape {drops.shape}")
    sizes = list(range(1, n + 1)) if sizes is None else sorted({int(k) for k in sizes})
    if not sizes or any(not 1 <= k <= n for k in sizes):
        raise ValueError(f"sizes must be a non-empty subset of 1..{n}, got {sizes}")
    if n == 0:
        return 0.0, 0.0
    masks = np.arange(1 << n, dtype=np.int64)
    popcount = np.zeros(1 << n, dtype=np.int64)
    for t in range(n):
        popcount += (masks >> t) & 1
    weight = np.isin(popcount, sizes).astype(np.float64)
    low = np.zeros(1 << n)
    high = np.zeros(1 << n)
    for k in range(1, n + 1):  # layer by layer: every S \ {t} is in the layer below
        layer = masks[popcount == k]
        best_low = np.full(len(layer), np.inf)
        best_high = np.full(len(layer), -np.inf)
        for t in range(n):
            has = (layer >> t) & 1 == 1
            below = layer[has] ^ (1 << t)
            best_low[has] = np.minimum(best_low[has], low[below])
            best_high[has] = np.maximum(best_high[has], high[below])
        gain = weight[layer] * drops[layer]
        low[layer] = gain + best_low
        high[layer] = gain + best_high
    full = (1 << n) - 1
    return float(low[full] / len(sizes)), float(high[full] / len(sizes))


def ordering_aopc(order, drop_of) -> float:
    """AOPC(π) = 1/N Σ_{k=1..N} d(S_k) of one ordering ``order`` (feature indices, first deleted
    first), ``drop_of``: bit mask → d."""
    mask, total = 0, 0.0
    for t in order:
        mask |= 1 << int(t)
        total += float(drop_of[mask])
    return total / len(order) if len(order) else float("nan")


def ordering_masks(order) -> list[int]:
    """The bit masks of S_1 … S_N of an ordering (what :func:`ordering_aopc` reads)."""
    out, mask = [], 0
    for t in order:
        mask |= 1 << int(t)
        out.append(mask)
    return out


class BeamSearch:
    """The beam search of Edin et al. §4 for one instance and one direction (module docstring).

    Drive it with :meth:`requests` (the subsets whose d is needed next) and :meth:`update` (their d,
    same order) until :attr:`done`; :attr:`value` is then the AOPC of the best ordering found.
    ``highest``: search for AOPC_max (True) or AOPC_min (False)."""

    def __init__(self, n: int, width: int, highest: bool):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"beam width must be an int ≥ 1, got {width!r}")
        self.n, self.width, self.highest = n, width, highest
        self.beam = [(0.0, 0)]  # (Σ d so far, subset)
        self.step = 0
        self._pending: list[tuple[float, int]] = []

    @property
    def done(self) -> bool:
        return self.step >= self.n

    def requests(self) -> list[int]:
        if self.done:
            return []
        candidates = {}
        for total, mask in self.beam:
            for t in range(self.n):
                if not mask >> t & 1:
                    new = mask | (1 << t)
                    # one candidate per subset: the best total reaching it (its future is the same)
                    old = candidates.get(new)
                    if old is None or (total > old if self.highest else total < old):
                        candidates[new] = total
        self._pending = [(total, mask) for mask, total in candidates.items()]
        return [mask for _, mask in self._pending]

    def update(self, drops) -> None:
        scored = [(total + float(d), mask) for (total, mask), d in zip(self._pending, drops)]
        scored.sort(key=lambda item: (-item[0] if self.highest else item[0], item[1]))
        self.beam = scored[: self.width]
        self.step += 1
        self._pending = []

    @property
    def value(self) -> float:
        if not self.done:
            raise RuntimeError("the beam search has not finished")
        return self.beam[0][0] / self.n if self.n else float("nan")


__all__ = ["DEFAULT_BEAM_WIDTH", "EXACT_LIMIT", "BeamSearch", "all_subsets", "exact_bounds", "ordering_aopc", "ordering_masks"]
