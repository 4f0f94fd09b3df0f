"""Gradient × input (Shrikumar, Greenside, Shcherbina & Kundaje 2016, "Not Just a Black Box",
§2; for token embeddings Denil, Demiraj & de Freitas 2014): importance_t = Σ_d e_t,d · ∂ŷ_c/∂e_t,d,
signed (positive = supports the predicted class c). It is the first-order Taylor term of ŷ_c
around the all-zero embeddings, and integrated gradients with one right-rule step.
"""

from __future__ import annotations

import torch

from hf_attn.methods.saliency import embedding_gradient


def gradient_x_input(adapter, batch, target_class: torch.Tensor | None = None,
                     target: str = "probability", foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` Σ_d e_t,d ∂ŷ_c/∂e_t,d (module docstring; ``target`` and ``foil_class`` as
    :func:`hf_attn.methods.saliency.saliency`), 0 on pads and special tokens."""
    embeddings, grad, _ = embedding_gradient(adapter, batch, target_class, target, foil_class)
    return gradient_times_input(batch, embeddings, grad)


def gradient_times_input(batch, embeddings: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` Σ_d e_t,d ∂f/∂e_t,d from the embeddings and their gradient ``(B, T, E)``, 0 on pads
    and special tokens."""
    return torch.where(batch.content, (embeddings * grad).sum(-1), torch.zeros((), device=grad.device))


__all__ = ["gradient_times_input", "gradient_x_input"]
