"""Attributions by captum (Kokhlikyan et al. 2020, "Captum: A unified and generic model
interpretability library for PyTorch"), an optional extra (``pip install 'hf_attn[captum]'``):
methods captum implements well, run on the adapter's embeddings, so they go on the same table as
ours.

- ``"kernel_shap"``: Kernel SHAP (Lundberg & Lee 2017, "A Unified Approach to Interpreting Model
  Predictions", §4.1 / Theorem 2: Shapley values as a weighted linear regression over coalitions),
  ``captum.attr.KernelShap``: each text token one feature, absent = its embedding zeroed (the
  special tokens always present), ``n_samples`` coalitions per instance.
- ``"shapley_sampling"``: Shapley value sampling (Castro, Gómez & Tejada 2009), permutations.
- ``"integrated_gradients"``: captum's ``IntegratedGradients`` (Sundararajan et al. 2017, Eq. 3,
  Gauss–Legendre), summed over the embedding dimensions; our own is
  :mod:`hf_attn.methods.adapter_integrated_gradients`.

The explained output is ŷ_c, the probability of the predicted class.
"""

from __future__ import annotations

import torch

CAPTUM_METHODS = ("kernel_shap", "shapley_sampling", "integrated_gradients")


def captum_available() -> str | None:
    """None when captum imports, else the reason it cannot be used."""
    try:
        import captum.attr  # noqa: F401
    except ImportError as error:
        return f"captum is not installed ({error}); pip install 'hf_attn[captum]'"
    return None


def captum_attribution(adapter, batch, method: str = "kernel_shap", n_samples: int = 64, steps: int = 32,
                       seed: int = 0, target_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` captum attributions of ``method`` (module docstring), 0 on pads and special tokens.
    Raises ``ImportError`` with the install hint when captum is missing."""
    if method not in CAPTUM_METHODS:
        raise ValueError(f"method must be one of {CAPTUM_METHODS}, got {method!r}")
    if not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int ≥ 2, got {n_samples!r}")
    reason = captum_available()
    if reason:
        raise ImportError(reason)
    import captum.attr

    embeddings = adapter.embeddings(batch).detach()
    baseline = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
    with torch.no_grad():
        if target_class is None:
            target_class = adapter.logits_from_embeddings(batch, embeddings).argmax(-1)
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=embeddings.device)
    if method == "integrated_gradients":
        def whole(e):
            rows = batch.select([i % len(batch) for i in range(len(e))])
            return adapter.logits_from_embeddings(rows, e).softmax(-1)

        attributions = captum.attr.IntegratedGradients(whole).attribute(
            embeddings, baselines=baseline, target=target_class, n_steps=steps, method="gausslegendre",
            internal_batch_size=len(batch) * steps)
        return torch.where(batch.content, attributions.sum(-1).float(), torch.zeros((), device=out.device))
    torch.manual_seed(seed)
    for i in range(len(batch)):  # captum's sampling methods take one instance at a time
        one = batch.select([i])

        def forward(e, one=one):
            return adapter.logits_from_embeddings(one.select([0] * len(e)), e).softmax(-1)

        # feature 0: every position that is not the text's (present in every coalition); 1…n: its tokens
        features = torch.cumsum(one.content.long(), -1) * one.content.long()
        mask = features.unsqueeze(-1).expand_as(embeddings[i:i + 1]).contiguous()
        with torch.no_grad():
            if method == "kernel_shap":
                values = captum.attr.KernelShap(forward).attribute(
                    embeddings[i:i + 1], baselines=baseline[i:i + 1], target=int(target_class[i]),
                    feature_mask=mask, n_samples=n_samples, perturbations_per_eval=n_samples)
            else:
                values = captum.attr.ShapleyValueSampling(forward).attribute(
                    embeddings[i:i + 1], baselines=baseline[i:i + 1], target=int(target_class[i]),
                    feature_mask=mask, n_samples=max(1, n_samples // max(int(one.content.sum()), 1)),
                    perturbations_per_eval=max(1, int(one.content.sum())))
        out[i] = values[0, :, 0].float()  # one value per feature, broadcast over its elements
    return torch.where(batch.content, out, torch.zeros((), device=out.device))


__all__ = ["CAPTUM_METHODS", "captum_attribution", "captum_available"]
