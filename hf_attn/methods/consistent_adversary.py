"""The model-consistent adversary's objective (Wiegreffe & Pinter 2019, §4; Tutek & Šnajder 2020,
§3.3 Eq. 6).

W&P §4 train a new model M_a against a fixed base model M_b to change the attention while keeping
the predictions: L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b) (their Eq. 3). T&Š use the same objective
with the Jensen–Shannon divergence, L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b) (Eq. 6, their Fig. 1):
``divergence="jsd"``. ``ADVERSARY_PROTOCOLS`` records how W&P's own code trains it ("wp") beside
this package's shorter protocol ("fast").

Plain tensor functions (shapes in each docstring); the Trainer that optimises the objective is
``hf_attn.training.wp.ConsistentAdversaryTrainer``.
"""

from __future__ import annotations

import numpy as np
import torch

from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.measures import jsd, kl_divergence, tvd

# Where the base attention underflowed to exactly 0 on a real token, KL(α_a‖α_b) would be +inf:
# floor the base there (float32 softmax underflow only; ordinary values are untouched).
BASE_ATTENTION_FLOOR = 1e-12

# divergence of the attention term: W&P §4 use KL(α_a‖α_b); T&Š §3.3 Eq. 6 (their Fig. 1) use
# JSD(α_a, α_b) in the same objective ("L = TVD(ŷa, ŷb) − λJSD(αa, αb)").
ADVERSARY_DIVERGENCES = {"kl": "W&P §4: L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b)",
                         "jsd": "T&Š Eq. 6: L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b)"}


def check_divergence(divergence: str) -> str:
    """``divergence`` if it is one of ``ADVERSARY_DIVERGENCES`` ("kl", "jsd"), else ValueError."""
    if divergence not in ADVERSARY_DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(ADVERSARY_DIVERGENCES)}, got {divergence!r}")
    return divergence


def attention_divergence(adversary_attention: torch.Tensor, base_attention: torch.Tensor,
                         mask: torch.Tensor, divergence: str = "kl") -> torch.Tensor:
    """Per-instance ``(B,)`` KL(α_a‖α_b) (base floored at ``BASE_ATTENTION_FLOOR`` where it
    underflowed to 0 on a real token) or JSD(α_a, α_b) (natural log, ≤ ln 2; finite without a
    floor), over the real tokens of ``mask`` only."""
    mask = mask.bool()
    if check_divergence(divergence) == "jsd":
        return jsd(adversary_attention, base_attention, mask)
    floored = torch.where(mask & (base_attention <= 0),
                          torch.full_like(base_attention, BASE_ATTENTION_FLOOR), base_attention)
    return kl_divergence(adversary_attention, floored, mask)


# Training protocols of the consistent adversary. "wp" is W&P's own code
# (github.com/sarahwie/attention @ d867a2b):
# * schedule: run_adversarial.sh passes ``--n_iters 80`` (80 epochs); Trainers/TrainerBC.py
#   ``train_adversarial`` (l. 63–124) keeps the epoch with the lowest TRAINING loss (``loss_tr <
#   best_loss``, l. 89) and stops after 10 epochs without a decrease (``n_fail >= 10``, l. 99–100;
#   ``break``, l. 123–124); no dev set is used for selection.
# * TVD scale: common_code/metrics.py l. 12–13 ``batch_tvd = (0.5 * |σ(z_a) − ŷ_b|).sum()`` on the
#   positive-class probability only, i.e. half the binary TVD ½Σ_c|p_c − q_c| = |p − q| that
#   :func:`hf_attn.core.measures.tvd` computes. Their L = ½·TVD − λ·KL is ½·(TVD − 2λ·KL): W&P's λ is our
#   "fast" λ/2 (model/Binary_Classification.py l. 125–127; both terms are batch sums, KLDivLoss
#   with reduction="sum", so the λ ratio equals the per-instance-mean one).
# * class weighting: model/Binary_Classification.py l. 132–133 ``weight = y·pos_weight + (1 − y)``,
#   ``loss = (loss_orig * weight).mean(1).sum()`` with the scalar batch objective ``loss_orig``: the
#   whole batch objective is multiplied by Σ_i w_i (gold labels y, pos_weight = #neg/#pos of the
#   training split, Trainers/DatasetBC.py l. 23–25). Here: mean_i(w_i) · mean_i(ℓ_i) (their value
#   divided by B², a constant that Adam ignores).
# "fast" is this package's earlier protocol: the base's epochs (8 on SST), full TVD, no class
# weights, the checkpoint with the lowest dev objective.
ADVERSARY_PROTOCOLS = {
    "wp": {"max_epochs": 80, "patience": 10, "tvd_scale": 0.5, "class_weighted": True,
           "selection": "train_objective"},
    "fast": {"max_epochs": None, "patience": None, "tvd_scale": 1.0, "class_weighted": False,
             "selection": "dev_objective"},
}


def adversary_protocol(protocol: str = "fast", **overrides) -> dict:
    """The settings of ``protocol`` ("wp" or "fast", see ``ADVERSARY_PROTOCOLS``) with explicit
    ``overrides`` (``max_epochs``, ``patience``, ``tvd_scale``, ``class_weighted``, ``selection``;
    None leaves the protocol's value). ``max_epochs`` None = the base's epochs."""
    if protocol not in ADVERSARY_PROTOCOLS:
        raise ValueError(f"protocol must be one of {sorted(ADVERSARY_PROTOCOLS)}, got {protocol!r}")
    out = dict(ADVERSARY_PROTOCOLS[protocol], name=protocol)
    for key, value in overrides.items():
        if key not in out or key == "name":
            raise ValueError(f"unknown adversary protocol field {key!r}")
        if value is not None:
            out[key] = value
    if out["selection"] not in ("train_objective", "dev_objective"):
        raise ValueError(f"selection must be 'train_objective' or 'dev_objective', got {out['selection']!r}")
    if out["tvd_scale"] <= 0:
        raise ValueError(f"tvd_scale must be > 0, got {out['tvd_scale']}")
    if out["max_epochs"] is not None and out["max_epochs"] < 1:
        raise ValueError(f"max_epochs must be >= 1, got {out['max_epochs']}")
    if out["patience"] is not None and out["patience"] < 1:
        raise ValueError(f"patience must be >= 1, got {out['patience']}")
    return out


def consistent_adversary_loss(adversary_probs: torch.Tensor, base_probs: torch.Tensor,
                              adversary_attention: torch.Tensor, base_attention: torch.Tensor,
                              mask: torch.Tensor, lam: float, reduction: str = "mean",
                              divergence: str = "kl", tvd_scale: float = 1.0,
                              weights: torch.Tensor | None = None):
    """W&P §4 Eq. (3): L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b) per instance; with
    ``divergence="jsd"`` T&Š Eq. 6: L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b).

    Args:
        adversary_probs, base_probs: ``(B, C)`` class probabilities.
        adversary_attention, base_attention: ``(B, T)`` distributions over the real tokens.
        mask: ``(B, T)`` True on real tokens: pads are dropped before the log (0·log 0 = 0).
        lam: λ ≥ 0.
        reduction: ``"mean"`` → ``()``, ``"none"`` → ``(B,)``.
        divergence: ``"kl"`` (W&P, the default) or ``"jsd"`` (T&Š).
        tvd_scale: factor on the TVD term: 1 (full TVD ½Σ_c|p_c − q_c|) or 0.5 (W&P's code:
            ½|p_1 − q_1| = half the binary TVD), so L = tvd_scale·TVD − λ·div.
        weights: optional ``(B,)`` class weights (W&P: 1 for negatives, #neg/#pos for positives);
            with ``reduction="mean"`` the loss is mean(weights)·mean(L), W&P's batch-level
            weighting (their code multiplies the scalar batch objective by Σ_i w_i).

    Returns ``(loss, tvd (B,), divergence (B,))`` (the KL or the JSD). Never NaN: for KL, where the
    base attention is exactly 0 on a real token it is floored at ``BASE_ATTENTION_FLOOR`` (KL stays
    finite); JSD is finite as it is.
    """
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    if tvd_scale <= 0:
        raise ValueError(f"tvd_scale must be > 0, got {tvd_scale}")
    div = attention_divergence(adversary_attention, base_attention, mask, divergence)
    distance = tvd(adversary_probs, base_probs)
    loss = tvd_scale * distance - lam * div
    if reduction == "mean":
        loss = loss.mean()
        if weights is not None:
            loss = loss * weights.to(loss.dtype).mean()
    elif reduction != "none":
        raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
    elif weights is not None:
        raise ValueError("weights (W&P's batch-level class weighting) need reduction='mean'")
    return loss, distance, div


def protocol_tag(protocol: str = "fast", max_epochs: int | None = None) -> str:
    """Folder-name tag of an adversary protocol: "" for "fast" (the folders of earlier versions),
    "wp" for W&P's, "wp-e30" for W&P's with another epoch cap."""
    proto = adversary_protocol(protocol, max_epochs=max_epochs)
    if proto["name"] == "fast":
        return ""
    default = ADVERSARY_PROTOCOLS[proto["name"]]["max_epochs"]
    return proto["name"] + ("" if proto["max_epochs"] == default else f"-e{proto['max_epochs']}")


def distances_to_base(attention, probs, base_attention, base_probs) -> dict[str, np.ndarray]:
    """Per-instance JSD(α_m, α_b), KL(α_m‖α_b) (base floored at ``BASE_ATTENTION_FLOOR`` where it is
    0 on a real token) and TVD(ŷ_m, ŷ_b) ``(N,)`` of a model m to the base b.

    ``attention`` / ``base_attention``: per instance a ``(T_i,)`` array (real tokens only, the same
    T_i for both); ``probs`` / ``base_probs``: ``(N, C)``. The model-running form is
    ``hf_attn.training.wp.divergence_to_base``."""
    a, mask = ragged_to_padded(attention)
    b, _ = ragged_to_padded(base_attention)
    floored = np.where(mask & (b <= 0), BASE_ATTENTION_FLOOR, b)
    a, b, floored, mask = (torch.from_numpy(x) for x in (a, b, floored, mask))
    return {"jsd": jsd(a, b, mask).numpy(), "kl": kl_divergence(a, floored, mask).numpy(),
            "tvd": tvd(torch.from_numpy(np.asarray(probs)), torch.from_numpy(np.asarray(base_probs))).numpy()}


__all__ = ["BASE_ATTENTION_FLOOR", "ADVERSARY_DIVERGENCES", "ADVERSARY_PROTOCOLS", "attention_divergence",
           "consistent_adversary_loss", "adversary_protocol", "protocol_tag", "check_divergence",
           "distances_to_base"]
