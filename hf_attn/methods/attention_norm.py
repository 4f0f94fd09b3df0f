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

import torch

from hf_attn.adapters.internals import content_only, head_contributions, record_internals


@torch.no_grad()
def attention_norm(adapter, batch, layer: int | None = None) -> torch.Tensor:
    """``(B, T)`` ‖Σ_h α^h_qt f^h(x_t)‖₂ for the query rows q the head reads (averaged when several)
    at ``layer`` (default: the adapter's explained layer), 0 on pads and special tokens. Refused
    (``UnsupportedModelError``) where the block layout is not known."""
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


__all__ = ["attention_norm"]
