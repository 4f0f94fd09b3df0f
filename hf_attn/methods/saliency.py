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


def class_scores(logits: torch.Tensor, target_class: torch.Tensor, target: str,
                 foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B,)`` ŷ_c (``"probability"``) or the logit z_c (``"logit"``) of ``target_class``; with
    ``foil_class`` the contrastive f = ŷ_c − ŷ_f (or z_c − z_f): why c rather than f (Yin & Neubig
    2022, §2.2; their code, kayoyin/interpret-lm ``lm_saliency.py``, differentiates the logit difference
    and erases with the probability difference)."""
    if target == "probability":
        values = logits.float().softmax(-1)
    elif target == "logit":
        values = logits.float()
    else:
        raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")
    chosen = values.gather(1, target_class[:, None]).squeeze(1)
    if foil_class is None:
        return chosen
    return chosen - values.gather(1, foil_class.to(target_class.device)[:, None]).squeeze(1)


def embedding_gradient(adapter, batch, target_class: torch.Tensor | None = None, target: str = "probability",
                       foil_class: torch.Tensor | None = None):
    """``(embeddings (B, T, E), ∂f/∂embeddings (B, T, E), target_class (B,))`` for f = ``target``
    of ``target_class`` (default: the predicted class), minus that of ``foil_class`` when given
    (:func:`class_scores`)."""
    embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
    with torch.enable_grad():
        logits = adapter.logits_from_embeddings(batch, embeddings)
        keep(batch, logits)
        if target_class is None:
            target_class = logits.detach().argmax(-1)
        (grad,) = torch.autograd.grad(class_scores(logits, target_class, target, foil_class).sum(), embeddings)
    return embeddings.detach(), grad, target_class


def saliency(adapter, batch, target_class: torch.Tensor | None = None, target: str = "probability",
             foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` ‖∂ŷ_c/∂e_t‖₂ (module docstring), 0 on pads and special tokens; one forward and
    backward for the batch. ``foil_class``: the contrastive ‖∂(ŷ_c − ŷ_f)/∂e_t‖₂."""
    _, grad, _ = embedding_gradient(adapter, batch, target_class, target, foil_class)
    return saliency_from_gradient(batch, grad)


def saliency_from_gradient(batch, grad: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` ‖∂f/∂e_t‖₂ from the gradient ``(B, T, E)``, 0 on pads and special tokens."""
    return torch.where(batch.content, grad.norm(dim=-1), torch.zeros((), device=grad.device))


__all__ = ["class_scores", "embedding_gradient", "saliency", "saliency_from_gradient"]
