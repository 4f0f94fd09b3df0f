"""Raw attention as an explanation (Jain & Wallace 2019, §2; Wiegreffe & Pinter 2019, §2): the
attention weights α of the query row(s) the classifier reads, at a chosen layer and head(s)."""

from __future__ import annotations

import torch

from hf_attn.adapters.internals import content_only, query_average, record_internals


@torch.no_grad()
def raw_attention(adapter, batch, layer: int | None = None, heads: str | int | None = None) -> torch.Tensor:
    """``(B, T)`` importance α_q,t of each text token t for the query rows q the head reads
    (``batch.query``; averaged when several), 0 on pads and special tokens.

    ``layer`` / ``heads`` None: the adapter's explained attention (``adapter.forward(batch).attention``:
    its :class:`~hf_attn.adapters.base.AttentionSpec`). Otherwise ``layer`` (negative counts from the
    end) and ``heads`` (``"mean"`` or one head index) pick another slice, read from a recording
    forward (transformers models only)."""
    if layer is None and heads is None:
        return content_only(batch, adapter.forward(batch).attention)
    layers = record_internals(adapter, batch)
    index = adapter.layer if layer is None else layer
    if not isinstance(index, int) or not -len(layers) <= index < len(layers):
        raise ValueError(f"layer must be an int in [-{len(layers)}, {len(layers)}), got {layer!r}")
    probs = layers[index].probs  # (B, H, T, T)
    heads = adapter.spec.heads if heads is None else heads
    if heads == "mean":
        rows = probs.mean(1)
    elif isinstance(heads, int) and not isinstance(heads, bool) and 0 <= heads < probs.shape[1]:
        rows = probs[:, heads]
    else:
        raise ValueError(f"heads must be 'mean' or a head index in [0, {probs.shape[1]}), got {heads!r}")
    return content_only(batch, query_average(batch, rows))


__all__ = ["raw_attention"]
