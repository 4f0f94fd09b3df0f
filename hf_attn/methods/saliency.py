"""Saliency (Simonyan, Vedaldi & Zisserman 2014, "Deep Inside Convolutional Networks", §3.1, the
class saliency w = ∂S_c/∂I; for text Li, Chen, Hovy & Jurafsky 2016, "Visualizing and Understanding
Neural Models in NLP", §3: the norm of the gradient over a token's embedding).

importance_t = ‖∂ŷ_c(x)/∂e_t‖₂, e_t the input embedding of token t (the adapter's
``embeddings``), ŷ_c the predicted class's probability (``target="probability"``, the quantity the
erasure metrics measure) or its logit. The model's own function: no attention is detached.
"""

from __future__ import annotations

import torch

from hf_attn.methods.kept_logits import keep


def class_scores(logits: torch.Tensor, target_class: torch.Tensor, target: str) -> torch.Tensor:
    """``(B,)`` ŷ_c (``"probability"``) or the logit z_c (``"logit"``) of ``target_class``."""
    if target == "probability":
        return logits.float().softmax(-1).gather(1, target_class[:, None]).squeeze(1)
    if target == "logit":
        return logits.float().gather(1, target_class[:, None]).squeeze(1)
    raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")


def embedding_gradient(adapter, batch, target_class: torch.Tensor | None = None, target: str = "probability"):
    """``(embeddings (B, T, E), ∂f/∂embeddings (B, T, E), target_class (B,))`` for f = ``target``
    of ``target_class`` (default: the predicted class)."""
    embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
    with torch.enable_grad():
        logits = adapter.logits_from_embeddings(batch, embeddings)
        keep(batch, logits)
        if target_class is None:
            target_class = logits.detach().argmax(-1)
        (grad,) = torch.autograd.grad(class_scores(logits, target_class, target).sum(), embeddings)
    return embeddings.detach(), grad, target_class


def saliency(adapter, batch, target_class: torch.Tensor | None = None, target: str = "probability") -> torch.Tensor:
    """``(B, T)`` ‖∂ŷ_c/∂e_t‖₂ (module docstring), 0 on pads and special tokens; one forward and
    backward for the batch."""
    _, grad, _ = embedding_gradient(adapter, batch, target_class, target)
    return saliency_from_gradient(batch, grad)


def saliency_from_gradient(batch, grad: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` ‖∂f/∂e_t‖₂ from the gradient ``(B, T, E)``, 0 on pads and special tokens."""
    return torch.where(batch.content, grad.norm(dim=-1), torch.zeros((), device=grad.device))


__all__ = ["class_scores", "embedding_gradient", "saliency", "saliency_from_gradient"]
