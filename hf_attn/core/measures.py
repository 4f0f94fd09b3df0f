"""Shared measures: TVD, JSD, masked KL and batched Kendall τ-b with p-values
(optionally with near-ties merged first, :func:`merge_near_ties`).

All functions take batched tensors / arrays with the distribution over the last axis and are exact:
0·log 0 = 0, never NaN on zeros or masked positions.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
# Kendall τ and near-tie merging are NumPy code shared with the evaluate modules' copies
from hf_attn.core.numpy_measures import KendallResult, kendall_tau, merge_near_ties  # noqa: F401

LN2 = math.log(2.0)


def _as_tensor(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), dtype=torch.float64)


def binary_to_two_class(p: torch.Tensor) -> torch.Tensor:
    """``(...,)`` positive-class probabilities → ``(..., 2)`` ``[1 − p, p]``."""
    return torch.stack([1 - p, p], dim=-1)


def tvd(p, q) -> torch.Tensor:
    """Total variation distance ½ Σ_i |p_i − q_i| over the last axis (J&W §3)."""
    p, q = _as_tensor(p), _as_tensor(q)
    return 0.5 * (p - q).abs().sum(-1)


def _xlogy_ratio(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    # p · log(p / q) with 0 · log(0 / q) = 0 (also where q = 0), computed without NaN gradients.
    positive = p > 0
    safe_p = torch.where(positive, p, torch.ones_like(p))
    safe_q = torch.where(positive, q, torch.ones_like(q))
    return torch.where(positive, p * (safe_p.log() - safe_q.log()), torch.zeros_like(p))


def kl_divergence(p, q, mask=None) -> torch.Tensor:
    """KL(p ‖ q) = Σ p log(p/q) over the last axis (natural log), only where ``mask`` (pads are
    dropped before the log, W&P §4). Infinite where p > 0 = q."""
    p, q = _as_tensor(p), _as_tensor(q)
    terms = _xlogy_ratio(p, q)
    if mask is not None:
        terms = terms * _as_tensor(mask).to(terms.dtype)
    return terms.sum(-1)


def jsd(p, q, mask=None) -> torch.Tensor:
    """Jensen–Shannon divergence ½ KL(p‖m) + ½ KL(q‖m), m = (p+q)/2, natural log:
    0 ≤ JSD ≤ ln 2, exactly 0 for identical inputs and ln 2 for disjoint supports."""
    p, q = _as_tensor(p), _as_tensor(q)
    m = 0.5 * (p + q)
    return (0.5 * (kl_divergence(p, m, mask) + kl_divergence(q, m, mask))).clamp(0.0, LN2)
