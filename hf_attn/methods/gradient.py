"""Gradient importance (Jain & Wallace 2019, §4.1 and Alg. 1; sentence pairs: appendix B).

g_t = |Σ_dims (∂ŷ/∂e_t) · e_t| for the input embeddings e_t, ŷ the predicted class's probability,
with the computation graph cut at the attention weights α (J&W §4.1: "we disconnect the
computation graph at the attention module"), so the gradient flows only through the encoder states.
Alg. 1 writes the gradient w.r.t. the one-hot input times the one-hot, which is the embedding
gradient · e_t (gradient × input).

Shapes: B instances, T tokens (right-padded; for pairs, premise tokens), U hypothesis tokens.
"""

from __future__ import annotations

import torch

from hf_attn.methods.masks import input_mask


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                        ) -> torch.Tensor:
    """J&W Alg. 1 gradient importance ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t|, 0 on pads.

    ``input_ids``, ``attention_mask``: ``(B, T)`` (mask None: every token real). ŷ is the
    predicted class's probability; α is detached (``detach_attention=True``). Instances are
    independent, so one backward of Σ_b ŷ_b gives every instance's gradient at once.
    """
    mask = input_mask(attention_mask, input_ids)
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask, detach_attention=True)
            probabilities = out.logits.softmax(-1)
            predicted = probabilities.max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


def pair_gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                             hypothesis_input_ids: torch.Tensor,
                             hypothesis_attention_mask: torch.Tensor) -> torch.Tensor:
    """J&W Alg. 1 over the premise ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t| for the premise
    embeddings e_t (premise ``(B, T)``, hypothesis ``(B, U)`` ids and masks), ŷ the predicted
    class probability, α detached; 0 on premise pads. The hypothesis is held fixed."""
    mask = attention_mask.bool()
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask,
                        hypothesis_input_ids=hypothesis_input_ids,
                        hypothesis_attention_mask=hypothesis_attention_mask, detach_attention=True)
            predicted = out.logits.softmax(-1).max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


__all__ = ["gradient_importance", "pair_gradient_importance"]
