"""Raw attention as an explanation (Jain & Wallace 2019, §2; Wiegreffe & Pinter 2019, §2): the
attention weights α of the query row(s) the classifier reads, at a chosen layer and head(s).

Where the adapter streams its attention (:func:`hf_attn.adapters.streaming.streams`) only the chosen
layer's query rows are computed — the model's own eager arithmetic on those rows — and no layer's
``(H, T, T)`` maps are kept; otherwise the rows are read from a recording forward."""

from __future__ import annotations

import torch

from hf_attn.adapters.internals import content_only, query_average, record_internals
from hf_attn.adapters.streaming import query_row_sums, streams


def _layer_index(layer, layers: int) -> int:
    if not isinstance(layer, int) or isinstance(layer, bool) or not -layers <= layer < layers:
        raise ValueError(f"layer must be an int in [-{layers}, {layers}), got {layer!r}")
    return layer % layers


def _pick_heads(rows: torch.Tensor, heads) -> torch.Tensor:
    """``(B, H, ·)`` → ``(B, ·)``: the head mean or one head."""
    if heads == "mean":
        return rows.mean(1)
    if isinstance(heads, int) and not isinstance(heads, bool) and 0 <= heads < rows.shape[1]:
        return rows[:, heads]
    raise ValueError(f"heads must be 'mean' or a head index in [0, {rows.shape[1]}), got {heads!r}")


@torch.no_grad()
def raw_attention(adapter, batch, layer: int | None = None, heads: str | int | None = None) -> torch.Tensor:
    """``(B, T)`` importance α_q,t of each text token t for the query rows q the head reads
    (``batch.query``; averaged when several), 0 on pads and special tokens.

    ``layer`` / ``heads`` None: the adapter's explained attention (``adapter.forward(batch).attention``:
    its :class:`~hf_attn.adapters.base.AttentionSpec`). Otherwise ``layer`` (negative counts from the
    end) and ``heads`` (``"mean"`` or one head index) pick another slice, read from a recording
    forward (transformers models only)."""
    if streams(adapter):  # one layer's query rows, nothing else recorded
        index = adapter.layer if layer is None else _layer_index(layer, adapter.num_layers)
        rows = query_row_sums(adapter, batch, index)  # (B, H, T)
        return content_only(batch, _pick_heads(rows, adapter.spec.heads if heads is None else heads))
    if layer is None and heads is None:
        return content_only(batch, adapter.forward(batch).attention)
    layers = record_internals(adapter, batch)
    index = adapter.layer if layer is None else _layer_index(layer, len(layers))
    probs = layers[index].probs  # (B, H, T, T)
    heads = adapter.spec.heads if heads is None else heads
    return content_only(batch, query_average(batch, _pick_heads(probs, heads)))


__all__ = ["raw_attention"]
