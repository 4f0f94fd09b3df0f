"""The columns that delete tokens: ERASER comprehensiveness and sufficiency, leave-one-out through
the shared cache, and normalised AOPC with its bounds (exact, beam search or the table's own
orderings)."""

from __future__ import annotations

import math
import time

import numpy as np

from hf_attn.core import faithfulness as fm
from hf_attn.methods.eraser import DEFAULT_FRACTIONS, tokens_per_fraction
from hf_attn.batteries.faithfulness.inputs import _Instance, _ProbabilityCache, _instances, _ranks, _subset


def _erasure(cache, instances, scores, counts, pad):
    """ERASER drops (N, K) comprehensiveness and sufficiency of one method."""
    removed, kept = [], []
    for inst, s, ks in zip(instances, scores, counts):
        ranks = _ranks(s[inst.content])
        for k in ks:
            top = ranks < k
            removed.append(_subset(inst, ~top, pad))
            kept.append(_subset(inst, top, pad))
    n, bins = len(instances), counts.shape[1]
    p_removed = cache.get(removed).reshape(n, bins, -1)
    p_kept = cache.get(kept).reshape(n, bins, -1)
    return p_removed, p_kept


def _perturbed(instance: _Instance, removed: int, pad: int, mask_id: int | None) -> tuple:
    """The instance's tokens with the content tokens in the bit mask ``removed`` deleted (``mask_id``
    None) or replaced by ``mask_id``; special tokens always kept; an empty result is one pad token."""
    content = np.flatnonzero(instance.content)
    hit = np.array([bool(removed >> t & 1) for t in range(len(content))], dtype=bool)
    if mask_id is not None:
        tokens = instance.tokens.copy()
        tokens[content[hit]] = mask_id
        return tuple(int(t) for t in tokens)
    return _subset(instance, ~hit, pad)


class _Drops:
    """d(S) = ŷ_c(x) − ŷ_c(x with S perturbed) for bit masks S over each instance's content tokens,
    through the shared probability cache (one forward per distinct input)."""

    def __init__(self, cache, instances, p_full, predicted, pad, mask_id):
        self.cache, self.instances, self.p_full, self.predicted = cache, instances, p_full, predicted
        self.pad, self.mask_id = pad, mask_id

    def __call__(self, requests: list[tuple[int, int]]) -> np.ndarray:
        """``requests``: (instance, bit mask) pairs → their drops."""
        if not requests:
            return np.zeros(0)
        inputs = [_perturbed(self.instances[i], mask, self.pad, self.mask_id) for i, mask in requests]
        probs = self.cache.get(inputs)
        rows = np.array([i for i, _ in requests])
        return self.p_full[rows] - probs[np.arange(len(requests)), self.predicted[rows]]


def _cached_leave_one_out(cache, instances, p_full, predicted, pad, empty_refusal: str | None = None
                          ) -> list[np.ndarray]:
    """The LOO-drop ŷ_c(x) − ŷ_c(x₋t) per text token (Li et al. 2016; the ``leave_one_out`` method's
    definition) with every deletion scored through the shared cache, so the ERASER and NAOPC inputs
    that delete one token reuse these forwards. Per instance, over its real positions (0 on specials).
    A one-token text without special tokens is NaN when ``empty_refusal`` says the model has no empty
    input (:mod:`hf_attn.methods.one_token`)."""
    requests, owners = [], []
    out = [np.zeros(len(inst.tokens)) for inst in instances]
    for i, inst in enumerate(instances):
        size = int(inst.content.sum())
        if size == 1 and empty_refusal is not None and inst.content.all():
            out[i][inst.content] = np.nan
            continue
        for t in range(size):
            keep = np.ones(size, bool)
            keep[t] = False
            requests.append(_subset(inst, keep, pad))
            owners.append((i, t))
    probs = cache.get(requests) if requests else np.zeros((0, 0))
    positions = [np.flatnonzero(inst.content) for inst in instances]
    for (i, t), p in zip(owners, probs):
        out[i][positions[i][t]] = p_full[i] - p[predicted[i]]
    return out


def naopc_sizes(n: int, every_k_max: int) -> np.ndarray:
    """The k's an AOPC averages for a sentence of ``n`` tokens: every k = 1..n (Edin et al. §3) up to
    ``every_k_max`` tokens; beyond, ``every_k_max`` k's evenly spaced from 1 to n (an approximation
    that keeps a 512-token sentence to a few hundred forwards per ordering, recorded)."""
    if n <= every_k_max:
        return np.arange(1, n + 1)
    return np.unique(np.round(np.linspace(1, n, every_k_max)).astype(np.int64))


def _ordering_aopcs(drops: _Drops, orders: list[np.ndarray], every_k_max: int) -> np.ndarray:
    """AOPC of one ordering per instance over the k's of :func:`naopc_sizes`: ``(N,)``."""
    from hf_attn.core.naopc import ordering_masks

    requests, spans = [], []
    for i, order in enumerate(orders):
        masks = ordering_masks(order)
        chosen = [masks[k - 1] for k in naopc_sizes(len(order), every_k_max)]
        spans.append((len(requests), len(chosen)))
        requests += [(i, m) for m in chosen]
    values = drops(requests)
    return np.array([values[at:at + count].mean() if count else math.nan for at, count in spans])


def _naopc_bounds(drops: _Drops, sizes: np.ndarray, settings, own: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """AOPC_min and AOPC_max per instance (:mod:`hf_attn.core.naopc`), with the method used:
    ``"exact"`` (n ≤ ``naopc_exact_max``), ``"beam"`` (n ≤ ``naopc_beam_max``), else
    ``"orderings"``; ``own`` ``(M, N)``: the AOPC of the table's orderings, which every bound is
    widened to contain (each is an ordering too)."""
    from hf_attn.core.naopc import BeamSearch, all_subsets, exact_bounds

    n = len(sizes)
    low, high = own.min(0).copy(), own.max(0).copy()
    how = ["orderings"] * n
    exact = [i for i in range(n) if sizes[i] <= settings.naopc_exact_max]
    requests = [(i, m) for i in exact for m in all_subsets(int(sizes[i]))[1:]]
    values = drops(requests)
    at = 0
    for i in exact:
        count = (1 << int(sizes[i])) - 1
        lo, hi = exact_bounds(int(sizes[i]), np.concatenate([[0.0], values[at:at + count]]))
        low[i], high[i], how[i] = min(lo, low[i]), max(hi, high[i]), "exact"
        at += count
    searches = {(i, highest): BeamSearch(int(sizes[i]), settings.naopc_beam, highest)
                for i in range(n) if settings.naopc_exact_max < sizes[i] <= settings.naopc_beam_max
                for highest in (True, False)}
    while any(not b.done for b in searches.values()):
        asked = {key: b.requests() for key, b in searches.items() if not b.done}
        values = drops([(key[0], m) for key, masks in asked.items() for m in masks])
        at = 0
        for key, masks in asked.items():
            searches[key].update(values[at:at + len(masks)])
            at += len(masks)
    for (i, highest), search in searches.items():
        if highest:
            high[i] = max(high[i], search.value)
        else:
            low[i] = min(low[i], search.value)
        how[i] = "beam"
    return low, high, how


def _naopc_columns(cache, instances, scores, methods, p_full, predicted, settings, pad, mask_id) -> dict:
    """Per method ``{"naopc_comprehensiveness", "naopc_sufficiency"}`` ``(N,)`` and the bounds'
    provenance (Edin et al. 2024 §3–4; :mod:`hf_attn.core.naopc`)."""
    start = time.perf_counter()
    drops = _Drops(cache, instances, p_full, predicted, pad, mask_id)
    sizes = np.array([int(i.content.sum()) for i in instances])
    descending, ascending = {}, {}
    for method in methods:
        content_scores = [row[inst.content] for row, inst in zip(scores[method], instances)]
        every = settings.naopc_every_k_max
        descending[method] = _ordering_aopcs(drops, [np.argsort(-c, kind="stable") for c in content_scores], every)
        ascending[method] = _ordering_aopcs(drops, [np.argsort(c, kind="stable") for c in content_scores], every)
    own = np.stack([descending[m] for m in methods] + [ascending[m] for m in methods])
    low, high, how = _naopc_bounds(drops, sizes, settings, own)
    columns = {m: {"naopc_comprehensiveness": fm.normalised_aopc(descending[m], low, high),
                   "naopc_sufficiency": fm.normalised_aopc(ascending[m], low, high)} for m in methods}
    info = {"bounds": {k: how.count(k) for k in ("exact", "beam", "orderings")},
            "bound_method": how, "aopc_min": low.tolist(), "aopc_max": high.tolist(),
            "perturbation": settings.naopc_perturbation, "exact_max_tokens": settings.naopc_exact_max,
            "beam_max_tokens": settings.naopc_beam_max, "beam_width": settings.naopc_beam,
            "every_k_max_tokens": settings.naopc_every_k_max,
            "k_grid_sentences": int((sizes > settings.naopc_every_k_max).sum()),
            "seconds": time.perf_counter() - start}
    return {"columns": columns, "info": info}


def erasure_scores(adapter, texts, attributions, fractions=DEFAULT_FRACTIONS) -> dict:
    """ERASER comprehensiveness and sufficiency ``(N, K)`` (DeYoung et al. 2020 §4) of attributions
    computed anywhere (captum, ferret, inseq, …): ``attributions`` per text, one score per position
    of ``adapter.encode([text])`` (special tokens included, ignored) or one per text token
    (``batch.content``). Returns ``{"comprehensiveness", "sufficiency", "fractions"}``, ready for
    the ``eraser_faithfulness`` evaluate module. A bin that removes every token of a text without
    special tokens, on a model with no empty input (:mod:`hf_attn.methods.one_token`), is NaN in
    ``comprehensiveness``, with the reason per text in ``undefined`` (None: defined)."""
    from hf_attn.methods.one_token import empty_input_refusal

    batch = adapter.encode(list(texts))
    instances = _instances(adapter, batch)
    if len(attributions) != len(instances):
        raise ValueError(f"attributions has {len(attributions)} rows for {len(instances)} texts")
    scores = []
    for i, (inst, row) in enumerate(zip(instances, attributions)):
        row = np.asarray(row, dtype=np.float64)
        if len(row) == inst.content.sum():
            full_row = np.zeros(len(inst.tokens))
            full_row[inst.content] = row
            row = full_row
        if len(row) != len(inst.tokens):
            raise ValueError(f"attributions[{i}] has {len(row)} scores; text {i} has {len(inst.tokens)} positions "
                             f"({int(inst.content.sum())} text tokens)")
        scores.append(row)
    cache = _ProbabilityCache(adapter, 4096)
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    predicted = full.argmax(1)
    rows = np.arange(len(instances))
    counts = tokens_per_fraction([int(i.content.sum()) for i in instances], fractions)
    p_removed, p_kept = _erasure(cache, instances, scores, counts, int(getattr(adapter, "pad_id", 0)))
    p_full = full[rows, predicted]
    comprehensiveness = fm.erasure_differences(p_full, p_removed[rows, :, predicted])
    refusal = empty_input_refusal(adapter)
    sizes = np.array([int(i.content.sum()) for i in instances])
    framed = np.array([bool((~i.content).any()) for i in instances])
    emptied = (counts == sizes[:, None]) & ~framed[:, None] & (refusal is not None)
    comprehensiveness[emptied] = np.nan
    return {"comprehensiveness": comprehensiveness,
            "sufficiency": fm.erasure_differences(p_full, p_kept[rows, :, predicted]), "fractions": list(fractions),
            "undefined": [refusal if e else None for e in emptied.any(1)]}
