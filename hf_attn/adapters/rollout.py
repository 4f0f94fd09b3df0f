"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3): the
arithmetic behind :attr:`hf_attn.adapters.base.Forward.rollout`, which an adapter with a stack of
attention layers fills in its forward (the method over an adapter is :mod:`hf_attn.methods.rollout`)."""

from __future__ import annotations

import torch


def attention_rollout(attentions, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention rollout: per layer average the heads, add the identity for the residual
    connection and renormalise the rows (Ã = ½A + ½I, since A's rows sum to 1), then multiply
    through the layers, R = Ã_L ··· Ã_1. Returns R ``(B, T, T)``; the query row(s) the classifier
    reads give an importance per input token.

    ``attentions``: sequence of ``(B, H, T, T)`` per layer (first layer first). ``attention_mask``
    ``(B, T)`` (optional): pad rows and columns are zeroed first, so padded batches give each
    instance's unpadded rollout."""
    rollout = None
    for layer in attentions:
        a = layer.mean(1)  # (B, T, T)
        if attention_mask is not None:
            m = attention_mask.to(a.dtype)
            a = a * m[:, :, None] * m[:, None, :]
            eye = torch.diag_embed(m)
        else:
            eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand_as(a)
        a = a + eye
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
        rollout = a if rollout is None else a @ rollout
    if rollout is None:
        raise ValueError("no attention layers")
    return rollout
