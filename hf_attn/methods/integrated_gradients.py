"""Integrated gradients on the input embeddings (Sundararajan et al. 2017, "Axiomatic Attribution
for Deep Networks", Eq. 1 and §3 "completeness").

IG_t = Σ_dims (e_t − b_t) · ∫₀¹ ∂f(b + a(e − b))/∂e_t da, with the integral a Riemann sum over
``steps`` intervals (trapezoid rule by default, right rule optional). Completeness:
Σ_t IG_t = f(x) − f(b) up to the quadrature error; :func:`integrated_gradients` returns the gap.

Shapes: B instances, T tokens (right-padded), d embedding size, m path intervals, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hf_attn.core.batching import length_batches
from hf_attn.methods.inputs import check_token_inputs

DEFAULT_IG_TOKEN_BUDGET = 4096  # padded tokens per forward + backward: cache-sized batches are fastest
# on CPU (measured: 4096 beats 8192 by ~25 %; the 1 + m path points of one instance already fill a batch)


@dataclass
class IntegratedGradientsResult:
    """``attributions`` ``(B, T)`` signed IG per token (0 on pads); ``completeness_gap`` ``(B,)``
    Σ_t IG_t − (f(x) − f(b)); ``target_input``/``target_baseline`` ``(B,)`` f(x), f(b);
    ``target_class`` ``(B,)``; ``node_contributions`` ``(B, nodes, T)`` (only when asked for) each
    node's unweighted Σ_d ∂f/∂e_t · (e_t − b_t), so that another rule sharing nodes can reuse them."""

    attributions: torch.Tensor
    completeness_gap: torch.Tensor
    target_input: torch.Tensor
    target_baseline: torch.Tensor
    target_class: torch.Tensor
    node_contributions: torch.Tensor | None = None  # (B, nodes, T) Σ_d ∂f/∂e_t·(e − e') per node, unweighted


def completeness_summary(results) -> dict:
    r"""How well the quadrature of ``results`` (:class:`IntegratedGradientsResult`\ s, e.g. one per
    batch) met completeness (§3: Σ_t IG_t = f(x) − f(x') for the exact integral): the mean |gap|, the
    mean |f(x) − f(x')| and the share of instances whose |gap| is ≤ 1 % of their |f(x) − f(x')|."""
    gaps = np.abs(np.concatenate([r.completeness_gap.double().cpu().numpy() for r in results]))
    differences = np.abs(np.concatenate([(r.target_input - r.target_baseline).double().cpu().numpy()
                                         for r in results]))
    return {"completeness_gap_mean_abs": float(gaps.mean()), "output_difference_mean_abs": float(differences.mean()),
            "completeness_within_1pct_share": float(np.mean(gaps <= 0.01 * differences))}


RULES = ("gauss-legendre", "trapezoid", "riemann-right", "gauss-kronrod")


def quadrature(steps: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Nodes a_k ∈ [0, 1] and weights w_k (Σ w_k = 1) of ``rule`` with ``steps``. ``"gauss-kronrod"``
    is the nested rule's first pass, the ``steps``-point Gauss–Legendre rule itself; its Kronrod
    extension is :func:`hf_attn.methods.kronrod.kronrod_extension`."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be an int ≥ 1, got {steps!r}")
    if rule in ("gauss-legendre", "gauss-kronrod"):
        x, w = np.polynomial.legendre.leggauss(steps)
        return (x + 1) / 2, w / 2
    if rule == "trapezoid":
        a = np.arange(steps + 1) / steps
        w = np.full(steps + 1, 1.0 / steps)
        w[[0, -1]] = 0.5 / steps
        return a, w
    if rule == "riemann-right":
        return np.arange(1, steps + 1) / steps, np.full(steps, 1.0 / steps)
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def _path_points(steps: int, rule: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The nodes and weights of this module's rules (``"trapezoid"``, ``"right"``: the Riemann
    right rule) as float64 tensors, from :func:`quadrature`."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if rule not in ("trapezoid", "right"):
        raise ValueError(f"rule must be 'trapezoid' or 'right', got {rule!r}")
    alphas, weights = quadrature(steps, "riemann-right" if rule == "right" else rule)
    return torch.from_numpy(alphas), torch.from_numpy(weights)


def _target_values(logits: torch.Tensor, target_class: torch.Tensor, target: str) -> torch.Tensor:
    if target == "probability":
        return logits.softmax(-1).gather(1, target_class[:, None]).squeeze(1)
    if logits.shape[-1] == 2:  # binary [0, z]: log-odds of class c, ±z
        return torch.where(target_class == 1, logits[:, 1] - logits[:, 0], logits[:, 0] - logits[:, 1])
    return logits.gather(1, target_class[:, None]).squeeze(1)


def integrated_gradients(model, input_ids, attention_mask=None, *, steps: int = 50,
                         baseline: str = "zero", rule: str = "trapezoid", target: str = "probability",
                         target_class=None, detach_attention: bool = False,
                         token_budget: int = DEFAULT_IG_TOKEN_BUDGET,
                         progress: bool = False) -> IntegratedGradientsResult:
    """Integrated gradients w.r.t. the input embeddings (Sundararajan et al. 2017, Eq. 1).
    (Long mostly for this docstring: the computation itself is one batched loop over path chunks.)

    IG_t = Σ_dims (e_t − b_t) · Σ_j w_j ∂f(b + a_j (e − b))/∂e_t, a_j, w_j the ``rule``'s nodes and
    weights over ``steps`` intervals: "trapezoid" (default; a_j = j/m, j = 0…m, end weights
    1/(2m)), or "right" (a_j = j/m, j = 1…m, weights 1/m; with ``steps=1`` this is gradient × (e − b)
    at the input). Only real tokens move along the path; pads stay pads.

    Args:
        model: an ``AttnClassifierForSequenceClassification``.
        input_ids, attention_mask: ``(B, T)`` right-padded.
        steps: m (default 50).
        baseline: "zero" (b = 0) or "pad" (b_t = the ``[PAD]`` embedding at every real position;
            identical to "zero" when that row is zero, as in models trained by ``hf_attn``).
        target: f = "probability" of the class (default, as J&W's gradient importance) or "logit"
            (binary: the log-odds of the class, ±z; C > 2: the class logit).
        target_class: ``(B,)`` class ids; default the class predicted for the full input.
        detach_attention: cut the graph at α (J&W's gradient convention). Default False: IG of the
            model's actual function, the only setting in which completeness holds.
        token_budget: padded tokens (instances × path points × T) per forward + backward.
    Returns:
        :class:`IntegratedGradientsResult` (attributions are signed).

    One function of ~90 lines on purpose: argument checks, the length-sorted groups and the path
    points of each group share the group's tensors (embeddings, baseline, classes) in one loop.
    """
    ids, mask = check_token_inputs(input_ids, attention_mask)
    if baseline not in ("zero", "pad"):
        raise ValueError(f"baseline must be 'zero' or 'pad', got {baseline!r}")
    if target not in ("probability", "logit"):
        raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")
    alphas, weights = _path_points(steps, rule)
    device = next(model.parameters()).device
    dtype = model.embedding.weight.dtype
    num_points = len(alphas)
    lengths = mask.sum(1).numpy()
    classes = None
    if target_class is not None:
        classes = torch.as_tensor(np.asarray(target_class)).long().flatten()
        if classes.shape != (len(ids),):
            raise ValueError(f"target_class must have one class per instance ({len(ids)}), "
                             f"got shape {tuple(classes.shape)}")
        if bool((classes < 0).any()) or bool((classes >= model.config.num_labels).any()):
            raise ValueError(f"target_class must be in [0, {model.config.num_labels})")

    attributions = torch.zeros(ids.shape, dtype=torch.float64)
    f_input = torch.empty(len(ids), dtype=torch.float64)
    f_base = torch.empty(len(ids), dtype=torch.float64)
    chosen = torch.empty(len(ids), dtype=torch.long)
    was_training = model.training
    model.eval()
    groups = length_batches(lengths, token_budget, rows_per_item=num_points)
    iterator = groups
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(groups, desc="integrated gradients", unit="batch")
    try:
        for group in iterator:
            index = torch.from_numpy(group)
            width = int(lengths[group].max())
            sub_ids = ids[index, :width].to(device)
            sub_mask = mask[index, :width].to(device)
            maskf = sub_mask.unsqueeze(-1).to(dtype)
            with torch.no_grad():
                emb = model.embedding(sub_ids) * maskf
                if baseline == "zero":
                    base = torch.zeros_like(emb)
                else:
                    base = model.embedding.weight[model.config.pad_token_id].expand_as(emb) * maskf
                ends = model(inputs_embeds=torch.cat([emb, base]), attention_mask=sub_mask.repeat(2, 1)).logits
                n = len(group)
                cls = ends[:n].argmax(-1) if classes is None else classes[index].to(device)
                values = _target_values(ends, cls.repeat(2), target).double()
            f_input[index], f_base[index], chosen[index] = values[:n].cpu(), values[n:].cpu(), cls.cpu()
            delta = emb - base
            grad_sum = torch.zeros_like(emb, dtype=torch.float64)
            # path points of this group, split further only if one instance alone exceeds the budget
            per_pass = max(1, token_budget // max(1, n * width))
            for start in range(0, num_points, per_pass):
                a = alphas[start:start + per_pass].to(device=device, dtype=dtype)
                w = weights[start:start + per_pass].to(device)
                path = (base[None] + a[:, None, None, None] * delta[None]).reshape(-1, width, emb.shape[-1])
                path.requires_grad_(True)
                out = model(inputs_embeds=path, attention_mask=sub_mask.repeat(len(a), 1),
                            detach_attention=detach_attention).logits
                f = _target_values(out, cls.repeat(len(a)), target)
                (grad,) = torch.autograd.grad(f.sum(), path)
                grad_sum += (grad.view(len(a), n, width, -1).double() * w[:, None, None, None]).sum(0)
            attributions[index, :width] = ((grad_sum * delta.double()).sum(-1) * sub_mask).cpu()
    finally:
        model.train(was_training)
    gap = attributions.sum(1) - (f_input - f_base)
    return IntegratedGradientsResult(attributions, gap, f_input, f_base, chosen)


def integrated_gradients_importance(model, input_ids, attention_mask=None, *, absolute: bool = True,
                                    **kwargs) -> torch.Tensor:
    """IG as a per-token importance ``(B, T)`` in the style of J&W's ``gradient_importance(model,
    input_ids, attention_mask)``: |IG_t| by default (like J&W's |∇·e|, for rank correlations with
    α), signed with ``absolute=False`` (for ERASER, where tokens pushing *towards* the predicted
    class should rank first). Pads are 0. ``kwargs`` go to :func:`integrated_gradients`."""
    attributions = integrated_gradients(model, input_ids, attention_mask, **kwargs).attributions
    return attributions.abs() if absolute else attributions


__all__ = ["DEFAULT_IG_TOKEN_BUDGET", "IntegratedGradientsResult", "completeness_summary", "integrated_gradients",
           "integrated_gradients_importance"]

