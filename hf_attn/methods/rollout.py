"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3)."""

from __future__ import annotations

import torch

from hf_attn.adapters.rollout import attention_rollout  # noqa: F401 (re-exported)


@torch.no_grad()
def rollout_importance(adapter, batch) -> torch.Tensor:
    """``(B, T)`` attention rollout (Abnar & Zuidema 2020, §3, R = Ã_L ··· Ã_1 with Ã = ½A + ½I,
    heads averaged; :func:`attention_rollout`) of the query rows the head reads, 0 on pads and
    special tokens: ``adapter.forward(batch).rollout``. Refused (``UnsupportedModelError``) for a
    model whose adapter has no rollout (one attention layer over a recurrent encoder)."""
    from hf_attn.adapters.base import UnsupportedModelError

    rolled = adapter.forward(batch).rollout
    if rolled is None:
        raise UnsupportedModelError(f"{type(adapter).__name__} has no attention rollout (no stack of attention layers)")
    return torch.where(batch.content, rolled.float(), torch.zeros((), device=rolled.device))


__all__ = ["attention_rollout", "rollout_importance"]
