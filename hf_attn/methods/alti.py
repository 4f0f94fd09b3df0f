"""ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando, Gállego & Costa-jussà
2022, "Measuring the Mixing of Contextual Information in the Transformer", EMNLP, §2–3).

The attention block's output for token i is decomposed into one vector per input token j:

- the transformed vectors T_i(x_j) = Σ_h α^h_ij f^h(x_j) + δ_ij x_i, f^h(x) = (x W^h_V + b^h_V) W^h_O
  (the residual connection adds x_i to its own term);
- post-LN blocks (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT: y_i = LN(x_i + Attn_i + b_O)): the
  layer norm is split linearly as in the paper, L_i(z) = γ ⊙ (z − mean(z)) / σ_i with σ_i the
  standard deviation (ε included) of the whole pre-norm vector of row i, so that
  y_i = Σ_j L_i(T_i(x_j)) + L_i(b_O) + β exactly; the terms L_i(T_i(x_j)) are what is compared;
- pre-LN blocks (Llama, Qwen2, Mistral, GPT-2, ModernBERT: y_i = x_i + Attn_i(LN(x)) + b_O): each
  LN(x_j) depends on x_j alone, so it is part of f^h(x_j) and y_i = Σ_j T_i(x_j) + b_O exactly;
  this case is not in the paper (it analyses post-LN encoders), it is the same decomposition;

then the contribution of j to i (the paper's contribution equation, §2) is
c_ij = max(0, −d_ij + ‖y_i‖₁) / Σ_k max(0, −d_ik + ‖y_i‖₁), d_ij = ‖y_i − T_i(x_j)‖₁ (Manhattan
distance, as the paper chooses), and the layers are aggregated by rollout without an added
identity (the residual is already inside T_i(x_i)): C = C^L ··· C^1 (§3). The importance of token
j for the classifier is C's query row(s).

Simplifications (as the paper): the feed-forward sub-layer is not decomposed (it acts on each
position alone and is treated as not mixing tokens); b_O and the norm's β are not attributed to any
token (they stay in y_i). Architectures whose block layout is not in
:data:`hf_attn.adapters.internals.LAYOUTS` are refused with the reason.
"""

from __future__ import annotations

import torch

from hf_attn.adapters.internals import (LayerInternals, content_only, head_contributions, query_average,
                                        record_internals)
from hf_attn.adapters.streaming import Rollout, streams
from hf_attn.adapters.streaming_internals import stream_internals
from hf_attn.core import deadline


# Elements of the (instances, rows i, tokens j, D) tensor of the transformed vectors computed at once
# (64 MB in float32): a long sentence's layer is computed in slices of rows i (every row is
# independent), so memory stays bounded and a time budget is checked between slices
# (hf_attn.core.deadline); a short sentence's layer is one slice, as before.
CHUNK_ELEMENTS = 2**24


def _slices(count: int, steps: int, dim: int) -> list[tuple[slice, slice]]:
    """``(instances, rows i)`` slices covering a ``(count, steps, steps, dim)`` tensor in pieces of at
    most :data:`CHUNK_ELEMENTS` elements (at least one row of one instance each)."""
    per_instance = steps * steps * dim
    if count * per_instance <= CHUNK_ELEMENTS:
        return [(slice(0, count), slice(0, steps))]
    if per_instance <= CHUNK_ELEMENTS:
        size = CHUNK_ELEMENTS // per_instance
        return [(slice(b, b + size), slice(0, steps)) for b in range(0, count, size)]
    rows = max(1, CHUNK_ELEMENTS // max(steps * dim, 1))
    return [(slice(b, b + 1), slice(i, i + rows)) for b in range(count) for i in range(0, steps, rows)]


def alti_contributions(layer: LayerInternals, attention_mask: torch.Tensor) -> torch.Tensor:
    """One layer's contribution matrix ``(B, T, T)`` c_ij (module docstring); rows of real tokens sum
    to 1, pad rows and columns are 0. Computed in slices of instances and rows (:data:`CHUNK_ELEMENTS`)."""
    f = head_contributions(layer)  # (B, H, T, D)
    count, _, steps, dim = f.shape
    out = torch.zeros((count, steps, steps), dtype=f.dtype, device=f.device)
    for b, i in deadline.paced(_slices(count, steps, dim)):
        out[b, i] = _contribution_rows(layer, f[b], attention_mask[b], b, i)
    return out


def _contribution_rows(layer: LayerInternals, f: torch.Tensor, attention_mask: torch.Tensor, b: slice,
                       i: slice) -> torch.Tensor:
    """c_ij of the instances ``b`` and rows ``i`` of one layer: ``(b, i, T)`` (``f``: their
    :func:`head_contributions`, ``attention_mask``: theirs)."""
    transformed = torch.einsum("bhij,bhjD->bijD", layer.probs[b, :, i], f)  # (B, T_i, T_j, D)
    rows = torch.arange(transformed.shape[1], device=transformed.device)
    columns = rows + (i.start or 0)  # T_i(x_i) holds the residual x_i
    transformed[:, rows, columns] += layer.residual[b][:, columns]
    if layer.layout.kind == "post":
        norm = layer.layout.norm
        whole = transformed.sum(2)  # x_i + Attn_i (without b_O)
        if layer.layout.bias is not None:
            whole = whole + layer.layout.bias.float()
        sigma = torch.sqrt(whole.var(-1, unbiased=False) + float(getattr(norm, "eps", 1e-12)))  # (B, T_i)
        gamma = layer.layout.norm_weight.float() if layer.layout.norm_weight is not None else 1.0
        transformed = gamma * (transformed - transformed.mean(-1, keepdim=True)) / sigma[:, :, None, None]
    y = layer.output[b, i]  # (B, T_i, D): the block's actual output
    distance = (y[:, :, None, :] - transformed).abs().sum(-1)  # (B, T_i, T_j)
    scores = (y.abs().sum(-1, keepdim=True) - distance).clamp_min(0.0)
    m = attention_mask.to(scores.dtype)
    scores = scores * m[:, i, None] * m[:, None, :]
    return scores / scores.sum(-1, keepdim=True).clamp_min(1e-30)


@torch.no_grad()
def alti(adapter, batch) -> torch.Tensor:
    """``(B, T)`` ALTI (module docstring): the query row(s) of C = C^L ··· C^1, 0 on pads and special
    tokens. One recording forward; the contribution matrices are batched tensor code.

    Where the adapter streams its attention (:func:`hf_attn.adapters.streaming.streams`) no layer's
    ``(H, T, T)`` maps are kept: each layer's C^l ``(B, T, T)`` is computed when the forward reaches
    its block's output, from probabilities recomputed a slice of rows at a time
    (:func:`hf_attn.adapters.streaming_internals.stream_internals`), and the product kept as
    :class:`hf_attn.adapters.streaming.Rollout` says — ALTI needs every layer's T × T contributions:
    ``L·B·T²`` floats (or two ``B·T²`` buffers and ``O(L·B·T³)`` work for long texts), plus one
    layer's ``(B, H, T, D)`` transformed values and a 64 MB slice, instead of ``L·B·H·T²``."""
    if streams(adapter):
        count, steps = batch.attention_mask.shape
        product = Rollout(count, steps, adapter.num_layers)

        def consume(index, layer):
            product.rows(slice(None), alti_contributions(layer, batch.attention_mask))
            product.done()

        stream_internals(adapter, batch, consume)
        query = batch.query.to(torch.float32)
        return content_only(batch, product.query_rows(query / query.sum(-1, keepdim=True).clamp_min(1.0)))
    total = None
    for layer in deadline.paced(record_internals(adapter, batch)):  # a time budget's pace, if one is set
        contributions = alti_contributions(layer, batch.attention_mask)
        total = contributions if total is None else contributions @ total
    return content_only(batch, query_average(batch, total))


__all__ = ["alti", "alti_contributions"]
