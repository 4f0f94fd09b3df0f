"""Norm-based attention (Kobayashi, Kuribayashi, Yokoi & Inui 2020, "Attention is Not Only a
Weight: Analyzing Transformers with Vector Norms", EMNLP, §3).

The attention output of row i is Σ_j α_ij f(x_j) (+ b_O) with f(x) = (x W_V + b_V) W_O, so the
amount token j contributes to row i is the norm of the vector it adds, ‖α_ij f(x_j)‖ (the paper's
§3 equation for the "weighted norm"), and for a multi-head layer the norm of the heads' summed
contribution, ‖Σ_h α^h_ij f^h(x_j)‖ (its §3 multi-head form; f^h uses head h's slice of W_O).
α alone ignores that f(x_j) can be small (e.g. for frequent tokens and [SEP]); the norm does not.
The value vectors come from the adapter's recording forward (biases included, grouped key/value
heads repeated), W_O from :data:`hf_attn.adapters.internals.LAYOUTS`.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from hf_attn.adapters.internals import block_layout, content_only, head_contributions, record_internals
from hf_attn.adapters.streaming import ROW_ELEMENTS, LayerRows, streamed_call, streams


@torch.no_grad()
def attention_norm(adapter, batch, layer: int | None = None) -> torch.Tensor:
    """``(B, T)`` ‖Σ_h α^h_qt f^h(x_t)‖₂ for the query rows q the head reads (averaged when several)
    at ``layer`` (default: the adapter's explained layer), 0 on pads and special tokens. Refused
    (``UnsupportedModelError``) where the block layout is not known.

    Where the adapter streams its attention (:func:`hf_attn.adapters.streaming.streams`) only that
    layer's query rows and values are computed: memory ``B·H·T·D`` for f plus a slice of rows,
    instead of every layer's ``(B, H, T, T)`` maps."""
    if streams(adapter):
        return _streamed(adapter, batch, layer)
    layers = record_internals(adapter, batch)
    index = adapter.layer if layer is None else layer
    if not isinstance(index, int) or not -len(layers) <= index < len(layers):
        raise ValueError(f"layer must be an int in [-{len(layers)}, {len(layers)}), got {layer!r}")
    internals = layers[index]
    f = head_contributions(internals)  # (B, H, T, D)
    rows, positions = batch.query.nonzero(as_tuple=True)  # the query rows, one (instance, position) each
    probs = internals.probs[rows, :, positions]  # (N, H, T)
    norms = torch.einsum("nht,nhtD->ntD", probs, f[rows]).norm(dim=-1)  # (N, T)
    total = torch.zeros(batch.query.shape, dtype=norms.dtype, device=norms.device).index_add_(0, rows, norms)
    return content_only(batch, total / batch.query.sum(-1, keepdim=True).clamp_min(1))


def _streamed(adapter, batch, layer) -> torch.Tensor:
    """:func:`attention_norm` from a streamed forward: the norms of each slice of query rows summed
    as they come (the same arithmetic per row)."""
    layers = adapter.num_layers
    index = adapter.layer if layer is None else layer
    if not isinstance(index, int) or isinstance(index, bool) or not -layers <= index < layers:
        raise ValueError(f"layer must be an int in [-{layers}, {layers}), got {layer!r}")
    total = torch.zeros(batch.query.shape, dtype=torch.float32, device=batch.query.device)
    held: dict = {}

    def reduce(module, rows, probs, values):  # probs (B, H, r, T) of the query positions `rows`
        if "f" not in held:
            held["f"] = head_contributions(SimpleNamespace(values=values, layout=block_layout(adapter, module)))
        f = held["f"]  # (B, H, T, D)
        steps, dim = f.shape[2], f.shape[3]
        per = max(1, ROW_ELEMENTS // max(steps * dim, 1))  # rows of the (r, T, D) sum at once
        query = batch.query[:, rows]  # (B, r)
        for b in range(query.shape[0]):
            mine = query[b].nonzero().flatten()
            for start in range(0, len(mine), per):
                pick = mine[start:start + per]
                summed = torch.einsum("hrt,htD->rtD", probs[b][:, pick], f[b])
                total[b] += summed.norm(dim=-1).sum(0)

    streamed_call(adapter, batch, LayerRows(batch, index % layers, reduce))
    return content_only(batch, total / batch.query.sum(-1, keepdim=True).clamp_min(1))


__all__ = ["attention_norm"]
