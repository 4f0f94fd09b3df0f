"""AttnLRP (Achtibat et al. 2024, "AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for
Transformers", ICML) and CP-LRP (Ali et al. 2022, "XAI for Transformers: Better Explanations through
Conservative Propagation", ICML), in the Gradient × Input form of LXT's efficient implementation
(rachtibat/LRP-eXplains-Transformers ``lxt/efficient``): relevance_t = Σ_d e_t,d ∂̃z_c/∂e_t,d, the
input embeddings times the gradient of the explained **logit** z_c under the rules' backward
(:mod:`hf_attn.adapters.lrp_rules`: the attention rules at the seam, the norms' and activations'
rules by module type).

LRP decomposes the logit: Σ_t R_t ≈ z_c. What is not conserved — the bias terms, the position and
token-type embeddings added to the token embeddings (their relevance is not the tokens'), the
softmax rule's bias term under AttnLRP (Prop. 3.1) — is reported per sentence as the ratio
Σ_t R_t / z_c over all positions (:class:`LRPResult`); on a model without biases or added embeddings
CP-LRP conserves exactly, AttnLRP up to its softmax terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.methods.kept_logits import keep

RULES = {"attnlrp": "attnlrp", "cp_lrp": "cp"}


@dataclass
class LRPResult:
    """``relevance`` ``(B, T)`` per token (0 on pads and special tokens); ``total`` ``(B,)`` Σ_t R_t over
    every position (special tokens included); ``logit`` ``(B,)`` the explained z_c (or z_c − z_f);
    ``ratio`` ``(B,)`` total / logit, the share of the logit the relevance conserves."""

    relevance: torch.Tensor
    total: torch.Tensor
    logit: torch.Tensor
    ratio: torch.Tensor
    target_class: torch.Tensor


def check_lrp_model(adapter, mode: str) -> None:
    """Refuse, in one line, a model whose components the rules of ``mode`` do not reach."""
    from hf_attn.adapters.lrp_rules import LABELS, check_components

    label = LABELS[mode]
    model = getattr(adapter, "model", None)
    if isinstance(model, torch.nn.Module):
        check_components(model, mode)  # the papers' BiLSTM: its recurrent cell, named
    if not hasattr(adapter, "_model_call") or not isinstance(model, torch.nn.Module):
        raise UnsupportedModelError(f"{label} applies to transformers models explained through the attention "
                                    f"interface; {type(adapter).__name__} has no such seam")
    own = getattr(adapter, "own_attention", None)
    if own:
        raise UnsupportedModelError(f"{label}: the attention of {', '.join(own)} is computed in the model's own "
                                    "modules, which the LRP attention rules (applied at transformers' attention "
                                    "interface) do not reach")


def lrp(adapter, batch, mode: str = "attnlrp", target_class: torch.Tensor | None = None,
        foil_class: torch.Tensor | None = None) -> LRPResult:
    """AttnLRP (``mode="attnlrp"``) or CP-LRP (``"cp"``) relevance of the logit of ``target_class``
    (default: the predicted class), minus that of ``foil_class`` when given; one forward and one
    backward for the batch (module docstring)."""
    from hf_attn.adapters.interface import Intervention
    from hf_attn.adapters.lrp_rules import MODES, lrp_rules
    from hf_attn.adapters.device import frozen_parameters
    from hf_attn.adapters.transformer_probe import _quiet

    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    check_lrp_model(adapter, mode)
    model = adapter.model
    embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
    with torch.enable_grad(), _quiet(type(model).__module__), frozen_parameters(model), lrp_rules(model, mode):
        intervention = Intervention(lrp=mode)
        logits = adapter._model_call(batch.input_ids, batch.attention_mask, embeddings, intervention,
                                     batch.position_ids).logits
        if intervention.calls == 0:
            raise UnsupportedModelError(f"{type(model).__name__}: no attention call reached the seam, so the LRP "
                                        "attention rules were not applied")
        keep(batch, logits.float())
        if target_class is None:
            target_class = logits.detach().argmax(-1)
        target_class = target_class.to(logits.device)
        explained = logits.float().gather(1, target_class[:, None]).squeeze(1)
        if foil_class is not None:
            explained = explained - logits.float().gather(1, foil_class.to(logits.device)[:, None]).squeeze(1)
        (grad,) = torch.autograd.grad(explained.sum(), embeddings)
    per_position = (embeddings.detach().float() * grad.float()).sum(-1)
    per_position = torch.where(batch.attention_mask.bool(), per_position, torch.zeros((), device=grad.device))
    total = per_position.sum(1)
    logit = explained.detach()
    relevance = torch.where(batch.content, per_position, torch.zeros((), device=grad.device))
    return LRPResult(relevance, total, logit, total / logit, target_class)


def attnlrp(adapter, batch, target_class: torch.Tensor | None = None,
            foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` AttnLRP relevance of the explained logit, 0 on pads and special tokens."""
    return lrp(adapter, batch, "attnlrp", target_class, foil_class).relevance


def cp_lrp(adapter, batch, target_class: torch.Tensor | None = None,
           foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` CP-LRP relevance of the explained logit, 0 on pads and special tokens."""
    return lrp(adapter, batch, "cp", target_class, foil_class).relevance


__all__ = ["LRPResult", "RULES", "attnlrp", "check_lrp_model", "cp_lrp", "lrp"]
