"""Attributions by captum (Kokhlikyan et al. 2020, "Captum: A unified and generic model
interpretability library for PyTorch"), an optional extra (``pip install 'hf_attn[captum]'``):
methods captum implements well, run on the adapter's embeddings, so they go on the same table as
ours.

- ``"kernel_shap"``: Kernel SHAP (Lundberg & Lee 2017, "A Unified Approach to Interpreting Model
  Predictions", §4.1 / Theorem 2: Shapley values as a weighted linear regression over coalitions),
  ``captum.attr.KernelShap``: each text token one feature, absent = its embedding zeroed (the
  special tokens always present), ``n_samples`` coalitions per instance.
- ``"shapley_sampling"``: Shapley value sampling (Castro, Gómez & Tejada 2009), permutations.

A text of one token is one player: its Shapley value is exactly f(x) − f(x') (efficiency), computed
directly from those two forwards for both sampling methods (captum's Kernel SHAP has no coalition
of a size strictly between 0 and 1 to sample and fails there;
:mod:`hf_attn.methods.one_token`).
- ``"integrated_gradients"``: captum's ``IntegratedGradients`` (Sundararajan et al. 2017, Eq. 3,
  Gauss–Legendre), summed over the embedding dimensions; our own is
  :mod:`hf_attn.methods.adapter_integrated_gradients`.
- ``"deeplift"``: DeepLift with the rescale rule (Shrikumar, Greenside & Kundaje 2017, "Learning
  Important Features Through Propagating Activation Differences", ``captum.attr.DeepLift``), see
  :func:`deeplift_attribution`.

The explained output is ŷ_c, the probability of the predicted class, except for DeepLift, which
explains the predicted class's normalised logit (Shrikumar et al. §3.6, see
:func:`deeplift_attribution`). The baseline of every method is the input with the content tokens'
embeddings zeroed (special tokens and pads keep theirs).
"""

from __future__ import annotations

import torch

from hf_attn.core import deadline

CAPTUM_METHODS = ("kernel_shap", "shapley_sampling", "integrated_gradients", "deeplift")


def captum_available() -> str | None:
    """None when captum imports, else the reason it cannot be used."""
    try:
        import captum.attr  # noqa: F401
    except ImportError as error:
        return f"captum is not installed ({error}); pip install 'hf_attn[captum]'"
    return None


def captum_attribution(adapter, batch, method: str = "kernel_shap", n_samples: int = 64, steps: int = 32,
                       seed: int = 0, target_class: torch.Tensor | None = None,
                       foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` captum attributions of ``method`` (module docstring), 0 on pads and special tokens.
    ``foil_class``: explain ŷ_target − ŷ_foil (Yin & Neubig 2022's contrast: captum is given that
    difference as the model's one output). Raises ``ImportError`` with the install hint when captum
    is missing."""
    if method not in CAPTUM_METHODS:
        raise ValueError(f"method must be one of {CAPTUM_METHODS}, got {method!r}")
    if not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int ≥ 2, got {n_samples!r}")
    reason = captum_available()
    if reason:
        raise ImportError(reason)
    if method == "deeplift":
        return deeplift_attribution(adapter, batch, target_class, foil_class)
    import captum.attr

    embeddings = adapter.embeddings(batch).detach()
    baseline = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
    with torch.no_grad():
        if target_class is None:
            target_class = adapter.logits_from_embeddings(batch, embeddings).argmax(-1)
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=embeddings.device)
    if method == "integrated_gradients":
        def whole(e):
            index = [i % len(batch) for i in range(len(e))]
            probabilities = adapter.logits_from_embeddings(batch.select(index), e).softmax(-1)
            return probabilities if foil_class is None else _difference(probabilities, target_class[index],
                                                                       foil_class[index])

        attributions = captum.attr.IntegratedGradients(whole).attribute(
            embeddings, baselines=baseline, target=target_class if foil_class is None else 0, n_steps=steps,
            method="gausslegendre", internal_batch_size=len(batch) * steps)
        return torch.where(batch.content, attributions.sum(-1).float(), torch.zeros((), device=out.device))
    import warnings

    with warnings.catch_warnings():  # captum warns about feature masks on every call; ours are deliberate
        warnings.filterwarnings("ignore", message=_FEATURE_MASK_WARNINGS)
        _sample(adapter, batch, method, embeddings, baseline, target_class, n_samples, out, seed, foil_class)
    return torch.where(batch.content, out, torch.zeros((), device=out.device))


def _difference(outputs: torch.Tensor, target: torch.Tensor, foil: torch.Tensor) -> torch.Tensor:
    """``(R, 1)``: each row's output of its target class minus its foil class's (the contrast's one
    output column)."""
    rows = torch.arange(len(outputs), device=outputs.device)
    return (outputs[rows, target.to(outputs.device)] - outputs[rows, foil.to(outputs.device)]).unsqueeze(-1)


# captum's warnings about the feature mask its sampling methods are given: feature 0 (the positions
# that are not the text's, in every coalition) is never ablated, which captum reports as a mask
# "missing some integers" once per sampled permutation
_FEATURE_MASK_WARNINGS = r"(Feature mask is missing some integers|Minimum element in feature mask)"


def _sentence_seed(seed: int, tokens: torch.Tensor) -> int:
    """A seed of one instance: ``seed`` and the instance's own token ids, never its place in a batch."""
    from hf_attn.core.seeding import seed_of, token_hash

    return seed_of([seed, token_hash(tokens)])


def _sample(adapter, batch, method, embeddings, baseline, target_class, n_samples, out, seed: int = 0,
            foil_class: torch.Tensor | None = None) -> None:
    """Kernel SHAP / Shapley value sampling of each instance of ``batch`` into ``out`` (in place).
    captum samples from torch's global generator; it is seeded per instance from ``seed`` and the
    instance's tokens (:func:`_sentence_seed`), so an instance's coalitions are the same alone, in any
    batch and in any order, inside ``torch.random.fork_rng`` so the caller's generator state is kept."""
    for i in range(len(batch)):  # captum's sampling methods take one instance at a time
        deadline.check()  # a time budget, if one is set (hf_attn.core.deadline)
        # the instance on its own positions: a batch's padding would be one more feature to sample
        real = batch.attention_mask[i].bool()
        one = batch.select([i]).trimmed(int(real.sum()), left=bool(batch.attention_mask[i, -1]))
        row = torch.zeros(one.input_ids.shape[1], dtype=out.dtype, device=out.device)
        # the caller's generator state is restored afterwards: seeding here leaves no global trace
        with torch.random.fork_rng(devices=[out.device] if out.device.type == "cuda" else []):
            torch.manual_seed(_sentence_seed(seed, one.input_ids[0]))
            _sample_one(adapter, one, method, embeddings[i:i + 1][:, real], baseline[i:i + 1][:, real],
                        int(target_class[i]), n_samples, row, None if foil_class is None else int(foil_class[i]))
        out[i, real] = row


def _sample_one(adapter, one, method, embeddings, baseline, target: int, n_samples: int, out,
                foil: int | None = None) -> None:
    """Kernel SHAP / Shapley value sampling of the one instance ``one`` (its real positions only;
    ``embeddings``, ``baseline`` ``(1, T, E)``) into ``out`` ``(T,)``; with ``foil``, of ŷ_target − ŷ_foil."""
    import captum.attr

    def forward(e):
        probabilities = adapter.logits_from_embeddings(one.select([0] * len(e)), e).softmax(-1)
        return probabilities if foil is None else probabilities[:, [target]] - probabilities[:, [foil]]

    if foil is not None:
        target = 0  # the difference is the one output column

    if int(one.content.sum()) == 1:  # one player: its Shapley value is f(x) − f(x') exactly
        with torch.no_grad():
            both = forward(torch.cat([embeddings, baseline]))[:, target]
        out[:] = torch.where(one.content[0], (both[0] - both[1]).float(), torch.zeros((), device=out.device))
        return
    # feature 0: every position that is not the text's (present in every coalition); 1…n: its tokens
    features = torch.cumsum(one.content.long(), -1) * one.content.long()
    mask = features.unsqueeze(-1).expand_as(embeddings).contiguous()
    with torch.no_grad():
        if method == "kernel_shap":
            values = captum.attr.KernelShap(forward).attribute(
                embeddings, baselines=baseline, target=target, feature_mask=mask, n_samples=n_samples,
                perturbations_per_eval=n_samples)
        else:
            values = captum.attr.ShapleyValueSampling(forward).attribute(
                embeddings, baselines=baseline, target=target, feature_mask=mask,
                n_samples=max(1, n_samples // max(int(one.content.sum()), 1)),
                perturbations_per_eval=max(1, int(one.content.sum())))
    out[:] = values[0, :, 0].float()  # one value per feature, broadcast over its elements


class _NormalisedLogits(torch.nn.Module):
    """``e ↦ z − mean_k z_k`` (``(R, C)``) of the adapter's logits from embeddings ``e`` ``(R, T, E)``,
    row r being the batch's row ``r mod B`` (captum's DeepLift stacks inputs and baselines). The
    adapter's model is a submodule, so captum's hooks reach its nonlinearity modules."""

    def __init__(self, adapter, batch, target_class=None, foil_class=None):
        super().__init__()
        self.model = adapter.model
        self._adapter, self._batch = adapter, batch
        self._target, self._foil = target_class, foil_class

    def forward(self, embeddings):
        index = [i % len(self._batch) for i in range(len(embeddings))]
        logits = self._adapter.logits_from_embeddings(self._batch.select(index), embeddings)
        if self._foil is not None:  # (z_t − mean z) − (z_f − mean z) = z_t − z_f: one output column
            return _difference(logits, self._target[index], self._foil[index])
        return logits - logits.mean(-1, keepdim=True)


def _deeplift_refusal(model) -> str | None:
    """Why captum's DeepLift cannot be applied to ``model`` (None when it can)."""
    from captum.attr._core.deep_lift import SUPPORTED_NON_LINEAR

    name = type(model).__name__
    recurrent = [n or name for n, m in model.named_modules() if isinstance(m, torch.nn.RNNBase)]
    if recurrent:
        return (f"deeplift: {name} has recurrent modules ({', '.join(recurrent[:3])}); captum's DeepLift cannot "
                "reach the gates inside nn.LSTM / nn.GRU / nn.RNN, so their multipliers would be plain "
                "gradients, not the rescale rule: use integrated_gradients or kernel_shap for this model")
    if not any(type(m) in SUPPORTED_NON_LINEAR for m in model.modules()):
        return (f"deeplift: {name} has no nonlinearity module captum's DeepLift hooks (nn.ReLU, nn.Tanh, "
                "nn.Sigmoid, nn.Softmax, …; its nonlinearities are function calls), so the result would be "
                "gradient × (x − baseline), not DeepLift: use integrated_gradients or kernel_shap for this model")
    return None


def deeplift_attribution(adapter, batch, target_class: torch.Tensor | None = None,
                         foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` DeepLift attributions (Shrikumar, Greenside & Kundaje 2017) by
    ``captum.attr.DeepLift``, summed over the embedding dimensions; 0 on pads and special tokens.

    DeepLift explains the difference of the output t from its value t⁰ at a reference input x⁰
    through contributions C_{Δx_i Δt} with summation-to-delta (§3.1, Eq. 1):
    Σ_i C_{Δx_i Δt} = Δt = t(x) − t(x⁰). Multipliers m_{Δx Δt} = C_{Δx Δt} / Δx (§3.2, Eq. 2)
    compose by the chain rule m_{Δx_i Δz} = Σ_j m_{Δx_i Δy_j} m_{Δy_j Δz} (§3.3, Eq. 3); linear
    units pass them on with their weights, and an elementwise nonlinearity y = f(x) gets the
    **rescale rule** (§3.5.2): m_{Δx Δy} = Δy / Δx = (f(x) − f(x⁰)) / (x − x⁰) (the gradient when
    Δx ≈ 0). Attribution of embedding element i: C_i = (x_i − x⁰_i)·m_{Δx_i Δt}; of a token: the
    sum over its elements.

    Here x = the input embeddings, x⁰ = the same with the content tokens' embeddings zeroed (the
    other captum methods' baseline) and t = z_c − (1/C) Σ_k z_k, the predicted class's logit
    minus the mean logit (``target_class`` overrides the class): §3.6 recommends explaining the
    linear layer before a softmax, with the contributions normalised by subtracting their mean over
    the classes, which is this target. ``foil_class``: t = z_target − z_foil (Yin & Neubig 2022's
    contrast; the mean cancels).

    What captum computes: the rescale rule at every nonlinearity that is an ``nn.Module`` of the
    types captum supports (ReLU, ELU, LeakyReLU, Sigmoid, Tanh, Softplus, Softmax, MaxPool);
    nonlinearities that are function calls or other modules (the softmax inside attention,
    GELU, LayerNorm, products of activations) back-propagate their plain gradient. On a
    transformer this is therefore "DeepLift where captum's hooks reach" (e.g. the pooler's tanh),
    not the full rescale rule, and summation-to-delta holds only approximately; on a network made
    of linear layers and supported activation modules it is exact DeepLift-rescale. Models whose
    nonlinearities captum cannot reach at all are refused with
    :class:`hf_attn.adapters.base.UnsupportedModelError`: recurrent modules (``nn.LSTM`` gates are
    inside one fused call, e.g. the papers' BiLSTM), models with no supported nonlinearity
    module (where the result would be gradient × Δinput) and adapters without ``adapter.model``."""
    reason = captum_available()
    if reason:
        raise ImportError(reason)
    from hf_attn.adapters.base import UnsupportedModelError

    model = getattr(adapter, "model", None)
    if not isinstance(model, torch.nn.Module):
        raise UnsupportedModelError("deeplift needs the adapter's model as a torch.nn.Module (adapter.model) for "
                                    "captum's hooks; this adapter keeps only the adapter contract")
    refusal = _deeplift_refusal(model)
    if refusal:
        raise UnsupportedModelError(refusal)
    import captum.attr

    embeddings = adapter.embeddings(batch).detach()
    baseline = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
    with torch.no_grad():
        if target_class is None:
            target_class = adapter.logits_from_embeddings(batch, embeddings).argmax(-1)
    import warnings

    with warnings.catch_warnings():  # captum announces its temporary hooks on every call
        warnings.filterwarnings("ignore", message="Setting forward, backward hooks")
        attributions = captum.attr.DeepLift(_NormalisedLogits(adapter, batch, target_class, foil_class)).attribute(
            embeddings.requires_grad_(True), baselines=baseline,
            target=target_class if foil_class is None else 0).detach()
    return torch.where(batch.content, attributions.sum(-1).float(), torch.zeros((), device=embeddings.device))


__all__ = ["CAPTUM_METHODS", "captum_attribution", "captum_available", "deeplift_attribution"]
