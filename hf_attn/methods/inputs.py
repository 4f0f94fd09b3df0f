"""Checks of the padded token batches the ERASER and integrated-gradients methods take.

These are torch ``(N, T)`` batches with a right-padding contract and per-token scores that may be
anything on pads, so :mod:`hf_attn.core.validation` (ragged NumPy rows, every value checked) has
no equivalent; errors are ``ValueError`` naming the argument.
"""

from __future__ import annotations

import numpy as np
import torch


def as_long_matrix(x, name: str) -> torch.Tensor:
    """``x`` (tensor or array-like) as a long ``(instances, tokens)`` tensor."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if t.dim() != 2:
        raise ValueError(f"{name} must be (instances, tokens), got shape {tuple(t.shape)}")
    return t.long()


def check_token_inputs(input_ids, attention_mask) -> tuple[torch.Tensor, torch.Tensor]:
    """``(N, T)`` ids and mask (None: all real) → long ids and bool mask; every row has at least one
    real token and is right-padded."""
    ids = as_long_matrix(input_ids, "input_ids")
    if attention_mask is None:
        mask = torch.ones_like(ids, dtype=torch.bool)
    else:
        mask = as_long_matrix(attention_mask, "attention_mask").bool()
    if mask.shape != ids.shape:
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(ids.shape)}")
    if ids.shape[1] == 0 or not bool(mask[:, 0].all()):
        raise ValueError("every instance needs at least one real token, and pads must be on the right")
    if not bool((mask[:, 1:] <= mask[:, :-1]).all()):
        raise ValueError("attention_mask must be right-padded (1…1 0…0 per row)")
    return ids, mask


def check_importance(importance, mask: torch.Tensor) -> torch.Tensor:
    """Per-token scores ``(N, T)`` shaped like ``mask`` → float64 CPU tensor; NaN/inf on a real token
    is an error (a ranking needs finite scores), pads may hold anything."""
    imp = importance if isinstance(importance, torch.Tensor) else torch.as_tensor(np.asarray(importance))
    if tuple(imp.shape) != tuple(mask.shape):
        raise ValueError(f"importance has shape {tuple(imp.shape)}, expected {tuple(mask.shape)} "
                         "(instances, tokens) like input_ids")
    imp = imp.detach().to(torch.float64).cpu()
    bad = ~torch.isfinite(imp) & mask
    if bool(bad.any()):
        rows = torch.nonzero(bad.any(1)).flatten()[:5].tolist()
        raise ValueError(f"importance has NaN/inf on real tokens (instances {rows}…): "
                         "a ranking needs finite scores")
    return imp


__all__ = ["as_long_matrix", "check_importance", "check_token_inputs"]
