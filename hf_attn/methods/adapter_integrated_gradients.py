"""Integrated gradients over any adapter (Sundararajan, Taly & Yan 2017, "Axiomatic Attribution for
Deep Networks", ICML, Eq. 1 and §3 "completeness"; the Riemann approximation of their Eq. 3).

IG_t = Σ_d (e_t − e'_t)_d ∫₀¹ ∂f(e' + a(e − e'))/∂e_t,d da on the input embeddings (the adapter's
``embeddings`` / ``logits_from_embeddings``): e' the baseline — the text's tokens' embeddings
replaced by zeros (or the pad token's or the mean input embedding:
:mod:`hf_attn.methods.ig_baselines`), the special tokens' and pads' embeddings unchanged (so only the
text moves);
f = ŷ_c (``target="probability"``, c the predicted class) or the logit z_c.

The integral is a quadrature over ``steps`` nodes: ``"gauss-legendre"`` (default; exact for a
polynomial path of degree 2·steps − 1), ``"trapezoid"`` (steps intervals, steps + 1 nodes) or
``"riemann-right"`` (the paper's Eq. 3). Completeness, Σ_t IG_t = f(x) − f(x'), holds for the
exact integral; the gap Σ_t IG_t − (f(x) − f(x')) measures the quadrature error and is returned.
The quadrature rules and the result type are those of :mod:`hf_attn.methods.integrated_gradients`
(the model-level integrated gradients of the papers' models).
"""

from __future__ import annotations

import numpy as np
import torch

from hf_attn.core import deadline
from hf_attn.core.batching import forward_tokens, release_freed_memory
from hf_attn.methods.ig_baselines import baseline_embeddings, check_baseline
from hf_attn.methods.kept_logits import keep
from hf_attn.methods.integrated_gradients import RULES, IntegratedGradientsResult, quadrature  # noqa: F401
from hf_attn.methods.saliency import class_scores

def integrated_gradients_attribution(adapter, batch, steps: int = 16, rule: str = "gauss-legendre",
                                     target: str = "probability", target_class: torch.Tensor | None = None,
                                     baseline: str = "zero", token_budget: int | None = None,
                                     foil_class: torch.Tensor | None = None, *, nodes=None,
                                     node_contributions: bool = False, ends=None) -> IntegratedGradientsResult:
    """Integrated gradients (module docstring) of every instance of ``batch``: at most
    ``token_budget`` padded tokens per forward + backward, so memory stays bounded at any length (all
    path points of several instances, or some points of one). The default is the adapter's budget,
    capped on a CPU at :data:`hf_attn.core.batching.CPU_BACKWARD_TOKENS` (the measurements there).
    ``baseline``: ``"zero"`` (the text's embeddings replaced by 0), ``"pad"`` (by the pad token's
    embedding) or ``"mean"`` (by the mean input embedding; :mod:`hf_attn.methods.ig_baselines`, which
    says per model where the zero baseline cannot meet completeness). ``foil_class``: f = ŷ_c − ŷ_f
    (contrastive, :func:`hf_attn.methods.saliency.class_scores`); completeness then holds for the
    difference. ``nodes``: explicit ``(alphas, weights)`` on [0, 1], used instead of ``steps`` and
    ``rule`` (e.g. :func:`hf_attn.methods.kronrod.kronrod_extension`'s added nodes);
    ``node_contributions=True``: the result also holds each node's unweighted token contributions
    ``(B, nodes, T)`` (0 off the text), so that a nested rule can reuse them. ``ends``: ``(f(x), f(x'))``
    ``(B,)`` of an earlier pass with the same ``target_class``, target, baseline and foil (a refinement
    of that pass), reused instead of two more forwards per text."""
    check_baseline(baseline)
    if target not in ("probability", "logit"):
        raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")
    if ends is not None:
        if target_class is None:
            raise ValueError("ends needs the target_class they were computed for")
        shapes = [tuple(torch.as_tensor(v).shape) for v in ends]
        if len(shapes) != 2 or any(shape != (len(batch.input_ids),) for shape in shapes):
            raise ValueError(f"ends must be two ({len(batch.input_ids)},) tensors (f(x), f(x') per text), got "
                             f"shapes {shapes}")
    lengths = batch.attention_mask.sum(1)
    if bool((lengths != batch.input_ids.shape[1]).any()):  # padding-free: each length apart, trimmed
        return _by_length(adapter, batch, lengths, steps=steps, rule=rule, target=target,
                          target_class=target_class, baseline=baseline, token_budget=token_budget,
                          foil_class=foil_class, nodes=nodes, node_contributions=node_contributions, ends=ends)
    alphas, weights = quadrature(steps, rule) if nodes is None else _check_nodes(nodes)
    embeddings = adapter.embeddings(batch).detach()
    baseline = baseline_embeddings(adapter, batch, embeddings, baseline)
    count, width = batch.input_ids.shape
    # the CPU's cap for a forward + backward bounds every pass (hf_attn.core.batching.CPU_BACKWARD_TOKENS:
    # as fast as larger passes, in less memory); an explicit token_budget is kept exactly
    budget = token_budget or forward_tokens(getattr(adapter, "token_budget", 8192), getattr(adapter, "device", None),
                                            backward=True)
    if ends is None:
        f_input, f_base, target_class = _ends(adapter, batch, embeddings, baseline, budget, target, target_class,
                                              foil_class)
    else:  # f(x) and f(x') of an earlier pass over the same texts (a refinement): not run again
        f_input, f_base = (torch.as_tensor(v, dtype=torch.float64, device=embeddings.device) for v in ends)
    delta = embeddings - baseline
    device = embeddings.device
    a = torch.as_tensor(alphas, dtype=embeddings.dtype, device=device)
    w = torch.as_tensor(weights, dtype=torch.float64, device=device)
    grads = torch.zeros(embeddings.shape, dtype=torch.float64, device=device)
    per_node = (torch.zeros((count, len(a), width), dtype=torch.float64, device=device)
                if node_contributions else None)
    # instances × path points × width ≤ budget per forward + backward: several instances with all
    # their points; beyond, one instance and its points in passes of equal size (50 points of 25
    # tokens in a 512-token budget: 3 passes of 17, 17 and 16, not 20 + 20 + 10)
    if width * len(a) <= budget:
        per_chunk, per_pass = budget // (width * len(a)), len(a)
    else:
        passes = -(-len(a) // max(1, budget // width))
        per_chunk, per_pass = 1, -(-len(a) // passes)
    # the passes, paced by a time budget if one is set (hf_attn.core.deadline)
    passes = [(start, first) for start in range(0, count, per_chunk) for first in range(0, len(a), per_pass)]
    for start, first in deadline.paced(passes):
        rows = list(range(start, min(count, start + per_chunk)))
        n = len(rows)
        nodes = a[first:first + per_pass]
        m = len(nodes)
        path = (baseline[rows][None] + nodes[:, None, None, None] * delta[rows][None]
                ).reshape(-1, width, delta.shape[-1])
        repeated = batch.select([i for _ in range(m) for i in rows])
        path.requires_grad_(True)
        with torch.enable_grad():
            logits = adapter.logits_from_embeddings(repeated, path)
            values = class_scores(logits, target_class[rows].repeat(m), target,
                                  None if foil_class is None else foil_class[rows].repeat(m))
            (grad,) = torch.autograd.grad(values.sum(), path)
        grads[rows] += (grad.view(m, n, width, -1).double() * w[first:first + m, None, None, None]).sum(0)
        if per_node is not None:
            per_node[rows, first:first + m] = (grad.view(m, n, width, -1).double()
                                               * delta[rows].double()[None]).sum(-1).transpose(0, 1)
    release_freed_memory(device)  # the passes' freed activations back to the system (CPU)
    attributions = (grads * delta.double()).sum(-1)
    attributions = torch.where(batch.content, attributions, torch.zeros((), dtype=torch.float64, device=device))
    gap = attributions.sum(-1) - (f_input - f_base)
    if per_node is not None:
        per_node = torch.where(batch.content[:, None], per_node, torch.zeros((), dtype=torch.float64, device=device))
    return IntegratedGradientsResult(attributions.float(), gap, f_input, f_base, target_class, per_node)


def _ends(adapter, batch, embeddings, baseline, budget: int, target: str, target_class, foil_class):
    """f(x) and f(x') ``(B,)`` float64 and the target class (the prediction when None), as many texts
    per forward as ``budget`` allows."""
    count, width = batch.input_ids.shape
    ends = []
    with torch.no_grad():
        step = max(1, budget // max(2 * width, 1))
        for start in range(0, count, step):
            rows = list(range(start, min(count, start + step)))
            ends.append(adapter.logits_from_embeddings(batch.select(rows * 2),
                                                       torch.cat([embeddings[rows], baseline[rows]])
                                                       ).view(2, len(rows), -1))
        ends = torch.cat(ends, dim=1)  # (2, B, C)
        keep(batch, ends[0])
        if target_class is None:
            target_class = ends[0].argmax(-1)
        return (class_scores(ends[0], target_class, target, foil_class).double(),
                class_scores(ends[1], target_class, target, foil_class).double(), target_class)


def kronrod_refinement(adapter, batch, gauss_contributions: torch.Tensor, **settings) -> IntegratedGradientsResult:
    """The (2n+1)-point Gauss–Kronrod integrated gradients of ``batch`` from its n-point
    Gauss–Legendre pass: ``gauss_contributions`` ``(B, n, T)`` are that pass's
    ``node_contributions`` (``integrated_gradients_attribution(..., steps=n, node_contributions=True)``),
    reused with their Kronrod weights; only the n + 1 added nodes are evaluated
    (:func:`hf_attn.methods.kronrod.kronrod_extension`). ``settings`` (target, target_class, baseline,
    token_budget, foil_class) must be those of the Gauss pass. The result's ``node_contributions``
    are the 2n + 1 nodes' in :func:`hf_attn.methods.kronrod.gauss_kronrod`'s order."""
    from hf_attn.methods.kronrod import kronrod_extension

    if gauss_contributions.ndim != 3 or gauss_contributions.shape[0] != len(batch.input_ids) \
            or gauss_contributions.shape[2] != batch.input_ids.shape[1]:
        raise ValueError(f"gauss_contributions must have shape (B, n, T) = ({len(batch.input_ids)}, n, "
                         f"{batch.input_ids.shape[1]}), got {tuple(gauss_contributions.shape)}")
    gauss_weights, new_nodes, new_weights = kronrod_extension(gauss_contributions.shape[1])
    added = integrated_gradients_attribution(adapter, batch, nodes=(new_nodes, new_weights), node_contributions=True,
                                             **settings)
    device = added.node_contributions.device
    contributions = torch.cat([gauss_contributions.to(device=device, dtype=torch.float64), added.node_contributions], 1)
    weights = torch.as_tensor(np.concatenate([gauss_weights, new_weights]), dtype=torch.float64, device=device)
    attributions = (contributions * weights[:, None]).sum(1)
    gap = attributions.sum(-1) - (added.target_input - added.target_baseline)
    return IntegratedGradientsResult(attributions.float(), gap, added.target_input, added.target_baseline,
                                     added.target_class, contributions)


def _check_nodes(nodes) -> tuple:
    """``nodes`` as (alphas, weights): two equal-length 1-D sequences, alphas in [0, 1]."""
    try:
        alphas, weights = (np.asarray(part, dtype=np.float64) for part in nodes)
    except (TypeError, ValueError):
        raise ValueError(f"nodes must be a pair (alphas, weights) of number sequences, got {nodes!r}") from None
    if alphas.ndim != 1 or alphas.shape != weights.shape or not len(alphas):
        raise ValueError(f"nodes must be two non-empty 1-D sequences of one length, got shapes "
                         f"{alphas.shape} and {weights.shape}")
    if not (np.isfinite(alphas).all() and np.isfinite(weights).all()) or alphas.min() < 0 or alphas.max() > 1:
        raise ValueError("nodes must hold finite weights and alphas in [0, 1]")
    return alphas, weights


def _by_length(adapter, batch, lengths: torch.Tensor, target_class, foil_class=None,
               node_contributions: bool = False, ends=None, **settings) -> IntegratedGradientsResult:
    """:func:`integrated_gradients_attribution` on the texts of each length apart, each group cut to
    its length (no path point is a pad: the passes hold one length's texts and nodes only), the
    results put back at the batch's positions (right padding: the first positions; left: the last)."""
    count, width = batch.input_ids.shape
    left = bool(getattr(adapter, "left_padding", False))
    device = batch.input_ids.device
    ends = None if ends is None else tuple(torch.as_tensor(v) for v in ends)
    attributions = torch.zeros((count, width), dtype=torch.float32, device=device)
    gap, f_input, f_base = (torch.zeros(count, dtype=torch.float64, device=device) for _ in range(3))
    classes = torch.zeros(count, dtype=torch.long, device=device)
    per_node = None
    for length in sorted(set(lengths.tolist())):
        rows = torch.nonzero(lengths == length).flatten()
        cut = slice(width - length, None) if left else slice(0, length)
        sub = batch.select(rows.tolist()).trimmed(length, left)
        part = integrated_gradients_attribution(adapter, sub, target_class=None if target_class is None
                                                else target_class[rows],
                                                foil_class=None if foil_class is None else foil_class[rows],
                                                node_contributions=node_contributions,
                                                ends=None if ends is None else
                                                tuple(v[rows.to(v.device)] for v in ends), **settings)
        attributions[rows, cut] = part.attributions.to(attributions.dtype)
        if node_contributions:
            if per_node is None:
                per_node = torch.zeros((count, part.node_contributions.shape[1], width), dtype=torch.float64,
                                       device=device)
            per_node[rows, :, cut] = part.node_contributions
        gap[rows], f_input[rows], f_base[rows] = part.completeness_gap, part.target_input, part.target_baseline
        classes[rows] = part.target_class
    return IntegratedGradientsResult(attributions, gap, f_input, f_base, classes, per_node)


__all__ = ["RULES", "integrated_gradients_attribution", "kronrod_refinement", "quadrature"]
