"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", ACL, §3).

The layered attention graph has a node (l, i) per layer l = 0…L (0: the inputs) and position i,
and an edge (l−1, j) → (l, i) of capacity Ã^l_ij, Ã = ½A + ½I the head-averaged attention with the
residual connection, rows renormalised (as in attention rollout). The attention flow of input
token j to the output row q is the value of a maximum flow from (0, j) to (L, q).

Solver: :func:`scipy.sparse.csgraph.maximum_flow` (Dinic), which takes **integer** capacities:
they are Ã · ``scale`` rounded (default scale 10⁶, a resolution of 10⁻⁶ per edge), and flows are
divided by ``scale`` again; each rounded capacity is within ½/scale of Ã, so a flow value is within
(edges of a minimum cut)/(2·scale) ≤ L·n²/(2·scale) of the exact one (n real tokens).

Cost: one maximum flow per (source token, query row) on a graph of (L+1)·n nodes and L·n² edges
(of which each copy keeps the (L−2)·n² inner ones and the 2n at its own source and sink, the only
ones of the first and last layers that can carry its flow: :func:`_end_edges`);
Dinic's augmenting phases visit the edges, so a sentence costs about ``FLOW_SECONDS_PER_L_N3`` ·
L · n³ seconds per query row (measured on one CPU core with dense attention: 0.92 s at L = 4, n = 128;
an hour at n = 2,048). No polynomial bound better than Dinic's O(V²E) per flow holds, so
:func:`attention_flow` refuses a text longer than ``max_tokens`` (default :data:`FLOW_MAX_TOKENS`)
with the estimate of what it would cost; rollout is the linear-algebra approximation of the same
graph (Abnar & Zuidema 2020 §3) at any length.

Batching: the problems of many (sentence, source j, query row q) are solved in **one** call on the
disjoint union of their graphs, joined by a super-source S → (0, j) of each copy and (L, q) → a
super-sink Z of each copy. The copies share no edges, so a maximum flow of the union restricted to
one copy is a maximum flow of that copy: the flow on the edge S → copy c is copy c's flow value.
"""

from __future__ import annotations

import numpy as np
import torch

from hf_attn.adapters.internals import attention_matrices
from hf_attn.core import deadline

DEFAULT_SCALE = 10**6
_INT32 = 2**31 - 1
# the longest text attention flow solves by default, and the measured seconds per L·n³ of one query row
# (scipy's Dinic, one CPU core, dense attention rows: 0.92 s at L = 4, n = 128); an estimate, not a bound
FLOW_MAX_TOKENS = 512
FLOW_SECONDS_PER_L_N3 = 1.1e-7


def flow_seconds_estimate(layers: int, tokens: int, query_rows: int = 1) -> float:
    """The seconds :func:`attention_flow` is expected to take on one text of ``tokens`` real positions
    through ``layers`` layers (module docstring: ``FLOW_SECONDS_PER_L_N3`` · L · n³ per query row)."""
    return FLOW_SECONDS_PER_L_N3 * layers * tokens ** 3 * query_rows


def check_flow_length(layers: int, tokens: int, query_rows: int = 1, max_tokens: int | None = FLOW_MAX_TOKENS) -> None:
    """A one-line ``ValueError`` when a text of ``tokens`` real positions is longer than ``max_tokens``
    (None: no limit), with the estimate of what its attention flow would cost."""
    if max_tokens is not None and tokens > max_tokens:
        from hf_attn.methods.one_token import TextRefused

        estimate = flow_seconds_estimate(layers, tokens, query_rows)
        said = f"{estimate:,.0f}" if estimate >= 10 else f"{estimate:.3g}"
        raise TextRefused(f"attention flow is refused on a text of {tokens} tokens (more than {max_tokens}): it "
                          f"solves one maximum flow per token on a graph of {layers}·{tokens}² edges, about {said} s "
                          f"on one CPU core (≈ {FLOW_SECONDS_PER_L_N3:g} s · L · n³); use rollout, shorter texts, or "
                          "raise flow_max_tokens (--faith-flow-max-tokens)")


def residual_attention(probs: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Ã = ½A + ½I of one layer: heads averaged, pads zeroed, identity added, rows renormalised
    (``(B, H, T, T)`` → ``(B, T, T)``; :func:`hf_attn.methods.rollout.attention_rollout`'s step)."""
    a = probs.float().mean(1)
    m = attention_mask.to(a.dtype)
    a = a * m[:, :, None] * m[:, None, :] + torch.diag_embed(m)
    return a / a.sum(-1, keepdim=True).clamp_min(1e-30)


def _layer_edges(capacities: np.ndarray):
    """The inner edges of one sentence's layered graph, those every copy shares: ``capacities``
    ``(L, n, n)`` integers, ``[l, i, j]`` the capacity of (l, j) → (l+1, i); the edges out of the input
    layer and into the output layer are left out (:func:`_end_edges` adds each copy's own). Returns
    (tails, heads, capacities) over the nonzero ones."""
    layers, n, _ = capacities.shape
    l, i, j = np.nonzero(capacities[1:-1])
    return (l + 1) * n + j, (l + 2) * n + i, capacities[1:-1][l, i, j]


def _end_edges(capacities: np.ndarray, sources: np.ndarray, sinks: np.ndarray, offsets: np.ndarray):
    """Each copy's edges out of its source (0, s) and into its sink (L, q), the copies' nodes starting
    at ``offsets``: the only edges of the first and last layers that can carry its flow (an input
    node other than the source has no way in, an output node other than the sink no way out), so
    each copy holds L − 2 layers of n² edges and 2n more instead of L·n², for the same maximum flow."""
    layers, n, _ = capacities.shape
    if layers == 1:  # one layer: the source's edge to the sink alone
        c = capacities[0, sinks, sources]
        k = np.flatnonzero(c)
        return offsets[k] + sources[k], offsets[k] + n + sinks[k], c[k]
    first = capacities[0][:, sources].T  # (copies, n): (0, s_k) → (1, i)
    k, i = np.nonzero(first)
    last = capacities[-1][sinks]  # (copies, n): (L − 1, j) → (L, q_k)
    m, j = np.nonzero(last)
    return (np.concatenate([offsets[k] + sources[k], offsets[m] + (layers - 1) * n + j]),
            np.concatenate([offsets[k] + n + i, offsets[m] + layers * n + sinks[m]]),
            np.concatenate([first[k, i], last[m, j]]))


MAX_EDGES_PER_CALL = 4_000_000  # edges of one solver call (the union's arrays stay near 100 MB)


def _calls(bounds: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The solver call of each copy, in order: a call closes before its flow bound would leave int32
    or its edges exceed :data:`MAX_EDGES_PER_CALL` (one long sentence has n copies of L·n² edges:
    all in one call would need tens of GB)."""
    call = np.zeros(len(bounds), dtype=np.int64)
    current, flow, count = 0, 0, 0
    for i, (bound, size) in enumerate(zip(bounds.tolist(), edges.tolist())):
        if count and (flow + bound > _INT32 // 2 or count + size > MAX_EDGES_PER_CALL):
            current, flow, count = current + 1, 0, 0
        call[i] = current
        flow, count = flow + bound, count + size
    return call


def max_flows(graphs, scale: int = DEFAULT_SCALE) -> list[np.ndarray]:
    """Maximum flows for a list of problems ``(capacities (L, n, n) float, sources (S,), sinks (S,))``:
    for each problem, the flow from input node (0, sources[s]) to output node (L, sinks[s]).
    All problems go to :func:`scipy.sparse.csgraph.maximum_flow` as disjoint copies under one
    super-source and super-sink (module docstring), in as few calls as the int32 capacities allow.
    Returns one ``(S,)`` float64 array per problem."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    if not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive int, got {scale!r}")
    prepared = []
    for capacities, sources, sinks in graphs:
        cap = np.rint(np.asarray(capacities, dtype=np.float64) * scale).astype(np.int64)
        if (cap < 0).any():
            raise ValueError("capacities must be ≥ 0")
        layers, n = cap.shape[0], cap.shape[1]
        # a copy's flow is bounded by the in-capacity of its sink node
        bound = int(cap[-1].sum(1).max()) + 1 if cap.size else 1
        prepared.append((cap, np.asarray(sources, dtype=np.int64), np.asarray(sinks, dtype=np.int64), bound,
                         _layer_edges(cap), (layers + 1) * n, layers * n))
    out = [np.zeros(len(p[1])) for p in prepared]
    # every copy: (problem, source index); calls cut so that the flow through Z stays within int32
    problem = np.concatenate([np.full(len(p[1]), i, dtype=np.int64) for i, p in enumerate(prepared)] or [np.zeros(0, int)])
    within = np.concatenate([np.arange(len(p[1])) for p in prepared] or [np.zeros(0, int)])
    bounds = np.array([p[3] for p in prepared], dtype=np.int64)[problem] if len(problem) else np.zeros(0, np.int64)
    # a copy's edges: the shared inner layers' and at most 2n of its own ends
    edges = np.array([len(p[4][0]) + 2 * p[0].shape[1] for p in prepared], dtype=np.int64)[problem] \
        if len(problem) else bounds
    call = _calls(bounds, edges)
    for c in deadline.paced(np.unique(call)):  # paced by a time budget if one is set (hf_attn.core.deadline)
        copies = np.flatnonzero(call == c)
        tails, heads, data, starts = [], [], [], []
        offset = 0
        for i in np.unique(problem[copies]):  # per problem: its copies tiled with numpy
            cap, sources, sinks, bound, (t, h, d), nodes, last = prepared[i]
            mine = within[copies[problem[copies] == i]]
            offsets = offset + nodes * np.arange(len(mine))
            tails.append((t[None] + offsets[:, None]).ravel())
            heads.append((h[None] + offsets[:, None]).ravel())
            data.append(np.tile(d, len(mine)))
            for part, values in zip((tails, heads, data), _end_edges(cap, sources[mine], sinks[mine], offsets)):
                part.append(values)
            starts.append(np.stack([offsets + sources[mine], offsets + last + sinks[mine],
                                    np.full(len(mine), bound), np.full(len(mine), i), mine], 1))
            offset += nodes * len(mine)
        starts = np.concatenate(starts)
        source_node, sink_node = offset, offset + 1
        tails += [np.full(len(starts), source_node), starts[:, 1]]
        heads += [starts[:, 0], np.full(len(starts), sink_node)]
        data += [starts[:, 2], starts[:, 2]]
        graph = csr_matrix((np.concatenate(data).astype(np.int32),
                            (np.concatenate(tails), np.concatenate(heads))), shape=(offset + 2, offset + 2))
        flow = maximum_flow(graph, source_node, sink_node, method="dinic").flow.tocsr()
        values = np.asarray(flow[source_node, starts[:, 0]].todense()).ravel() / scale
        for i in np.unique(starts[:, 3]):
            rows = starts[:, 3] == i
            out[i][starts[rows, 4]] = values[rows]
    return out


@torch.no_grad()
def attention_flow(adapter, batch, scale: int = DEFAULT_SCALE, normalise: bool = True,
                   max_tokens: int | None = FLOW_MAX_TOKENS) -> torch.Tensor:
    """``(B, T)`` attention flow (Abnar & Zuidema 2020, §3) from each text token to the query rows
    the head reads (the mean over them when several), 0 on pads and special tokens: one recording
    forward for the attention of every layer, then one batched max-flow solve (module docstring)
    over every (instance, source token, query row). ``scale``: capacities are rounded to 1/scale.

    ``normalise`` (default): each query row's flows are divided by their sum over every input
    position, special tokens included, as the authors' ``compute_flows``
    (``samiraabnar/attention_flow``, ``attention_graph_util.py``: ``flow_values[u] /=
    flow_values[u].sum()``) reports them; False gives the raw max-flow values (same ranking, other
    scale). ``max_tokens``: a text with more real positions is refused before any forward, with the
    estimated cost (:func:`check_flow_length`; None: no limit)."""
    from hf_attn.adapters.internals import require_internals

    require_internals(adapter, "the attention of every layer")  # a model without layers: refused first
    lengths = batch.attention_mask.sum(1)
    longest = int(lengths.argmax())
    check_flow_length(int(getattr(adapter, "num_layers", 1) or 1), int(lengths[longest]),
                      int(batch.query[longest].sum()), max_tokens)
    matrices = torch.stack([residual_attention(p, batch.attention_mask)
                            for p in attention_matrices(adapter, batch)], 1)  # (B, L, T, T)
    real = batch.attention_mask.bool().cpu()
    content = batch.content.cpu()
    query = batch.query.cpu()
    graphs, where = [], []
    arrays = matrices.double().cpu().numpy()
    for b in range(len(batch)):  # per instance: its real positions only
        positions = real[b].nonzero().flatten().numpy()
        local = np.full(real.shape[1], -1)
        local[positions] = np.arange(len(positions))
        # the normaliser needs the flow from every real position, specials included
        source_positions = real[b] if normalise else content[b]
        sources = local[source_positions.numpy()]
        keep = content[b].numpy()[source_positions.numpy()]  # which sources are text tokens
        sinks = local[query[b].numpy()]
        cap = arrays[b][:, positions][:, :, positions]
        graphs.append((cap, np.repeat(sources, len(sinks)), np.tile(sinks, len(sources))))
        where.append((content[b].nonzero().flatten(), len(sources), len(sinks), keep))
    flows = max_flows(graphs, scale)
    out = torch.zeros(real.shape, dtype=torch.float32)
    for b, (flow, (positions, count, rows, keep)) in enumerate(zip(flows, where)):
        if count:
            values = flow.reshape(count, rows)  # (sources, query rows)
            if normalise:
                total = values.sum(0, keepdims=True)
                values = np.where(total > 0, values / np.where(total > 0, total, 1.0), 0.0)
            values = values[keep]
            if len(values):
                out[b, positions] = torch.from_numpy(values.mean(1)).float()
    return out.to(batch.input_ids.device)


__all__ = ["DEFAULT_SCALE", "FLOW_MAX_TOKENS", "attention_flow", "check_flow_length", "flow_seconds_estimate",
           "max_flows", "residual_attention"]
