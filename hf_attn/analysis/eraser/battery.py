"""Faithfulness of per-token importances beyond the three papers (SPEC §7).

* **ERASER comprehensiveness / sufficiency / AOPC** (DeYoung et al. 2020, "ERASER: A Benchmark to
  Evaluate Rationalized NLP Models", §4). For an importance vector over the real tokens of x and
  c = the class the model predicts for the full x:

  - comprehensiveness_k = ŷ_c(x) − ŷ_c(x \\ r_k)   (the top-k tokens *removed*)
  - sufficiency_k       = ŷ_c(x) − ŷ_c(r_k)        (*only* the top-k tokens kept)

  r_k = the k most important tokens. Tokens are *removed* (the sequence is shortened, the order of
  the remaining tokens kept), as ERASER does, not masked or replaced. High comprehensiveness and
  low sufficiency mean a faithful ranking. k is a fraction of the instance's real tokens, bins
  {1, 5, 10, 20, 50} %; AOPC = mean over the bins (as the released ERASER code computes it:
  ``np.average`` over the thresholds; the printed formula in §4 normalises by |B|+1, which is
  this mean × |B|/(|B|+1) if the extra term is the 0 % bin: ``aopc(..., include_zero_bin=True)``).

  Conventions (the paper is silent on them):
  - k = ceil(fraction · n), at least 1 and at most n (n = real tokens): for SST's short sentences
    the 1 % and 5 % bins remove exactly one token.
  - Ties in importance are broken by position: among equal scores the earlier token ranks higher
    (a stable sort), so results are deterministic.
  - Removing every token (comprehensiveness with k = n, i.e. one-token inputs) leaves an empty
    input, which the model cannot read: it is represented by one ``[PAD]`` token marked real, whose
    embedding the model zeroes (the "no information" input; the same point as the zero baseline of
    integrated gradients).

* **Integrated gradients** on the input embeddings (Sundararajan et al. 2017, "Axiomatic
  Attribution for Deep Networks", Eq. 1 and §3 "completeness"):
  IG_t = Σ_dims (e_t − b_t) · ∫₀¹ ∂f(b + a(e − b))/∂e_t da, with the integral a Riemann sum over
  ``steps`` intervals (trapezoid rule by default, right rule optional). Completeness:
  Σ_t IG_t = f(x) − f(b) up to the quadrature error; :func:`integrated_gradients` returns the gap.

Shapes: N or B instances, T tokens (right-padded), d embedding size, K fraction bins.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hf_attn.core.io import save_figure_atomic, write_text_atomic

DEFAULT_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)
DEFAULT_TOKEN_BUDGET = 65536  # padded tokens per forward pass
DEFAULT_IG_TOKEN_BUDGET = 4096  # padded tokens per forward + backward: cache-sized batches are fastest
# on CPU (measured: 4096 beats 8192 by ~25 %; the 1 + m path points of one instance already fill a batch)


# ------------------------------------------------------------------------------------------------
# input checks and batching helpers

def _as_long(x, name: str) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if t.dim() != 2:
        raise ValueError(f"{name} must be (instances, tokens), got shape {tuple(t.shape)}")
    return t.long()


def _check_inputs(input_ids, attention_mask) -> tuple[torch.Tensor, torch.Tensor]:
    ids = _as_long(input_ids, "input_ids")
    if attention_mask is None:
        mask = torch.ones_like(ids, dtype=torch.bool)
    else:
        mask = _as_long(attention_mask, "attention_mask").bool()
    if mask.shape != ids.shape:
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(ids.shape)}")
    if ids.shape[1] == 0 or not bool(mask[:, 0].all()):
        raise ValueError("every instance needs at least one real token, and pads must be on the right")
    if not bool((mask[:, 1:] <= mask[:, :-1]).all()):
        raise ValueError("attention_mask must be right-padded (1…1 0…0 per row)")
    return ids, mask


def _check_importance(importance, mask: torch.Tensor) -> torch.Tensor:
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


def length_batches(lengths: np.ndarray, token_budget: int, rows_per_item: int = 1) -> list[np.ndarray]:
    """Indices of items sorted by length, cut into batches whose padded size
    ``len(batch) · rows_per_item · max_length`` stays within ``token_budget`` (≥ 1 item each)."""
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        stop = start + 1
        # lengths ascend, so the last item of a batch sets its padded length
        while stop < len(order) and (stop + 1 - start) * rows_per_item * lengths[order[stop]] <= token_budget:
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches


@torch.inference_mode()
def batched_probabilities(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          token_budget: int = DEFAULT_TOKEN_BUDGET) -> torch.Tensor:
    """ŷ for many right-padded rows ``(R, T)`` → ``(R, C)``: rows sorted by length, one forward per
    batch of at most ``token_budget`` padded tokens, each batch trimmed to its longest row."""
    lengths = attention_mask.sum(1).cpu().numpy()
    device = next(model.parameters()).device
    out = torch.empty(len(lengths), model.config.num_labels, dtype=torch.float32)
    for batch in length_batches(lengths, token_budget):
        width = int(lengths[batch].max())
        index = torch.from_numpy(batch)
        logits = model(input_ids=input_ids[index, :width].to(device),
                       attention_mask=attention_mask[index, :width].to(device)).logits
        out[index] = logits.float().softmax(-1).cpu()
    return out


# ------------------------------------------------------------------------------------------------
# ERASER

def _check_fractions(fractions) -> list[float]:
    """ERASER bins: a non-empty list of finite fractions of the tokens, each in (0, 1]."""
    try:
        values = [float(f) for f in fractions]
    except (TypeError, ValueError) as err:
        raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1], got {fractions!r}") from err
    bad = [f for f in values if not 0.0 < f <= 1.0]  # also NaN
    if not values or bad:
        raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1] (fractions of an "
                         f"instance's tokens), got {values}" + (f": {bad[0]} is not in (0, 1]" if bad else ""))
    return values


def tokens_per_fraction(lengths, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> np.ndarray:
    """k = ceil(fraction · n) clipped to [1, n] for each instance length n: ``(N,)`` → ``(N, K)``.
    (Rounded to 9 decimals first so 0.1 · 30 counts as 3, not 4.)"""
    lengths = np.asarray(lengths, dtype=np.int64)
    fractions = np.asarray(_check_fractions(fractions), dtype=np.float64)
    if (lengths < 1).any():
        raise ValueError("every instance needs at least one real token")
    k = np.ceil(np.round(lengths[:, None] * fractions[None, :], 9)).astype(np.int64)
    return np.clip(k, 1, lengths[:, None])


def rank_tokens(importance: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` rank of each position (0 = most important) among the real tokens; ties are
    broken by position (earlier first); pads rank after every real token."""
    key = torch.where(mask, -importance.to(torch.float64), torch.full_like(importance, math.inf,
                                                                           dtype=torch.float64))
    order = torch.sort(key, dim=1, stable=True).indices  # ascending −importance, stable: ties by position
    positions = torch.arange(mask.shape[1]).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, positions)


def erasure_variants(input_ids: torch.Tensor, mask: torch.Tensor, ranks: torch.Tensor,
                     counts: torch.Tensor, pad_token_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """All ERASER inputs of a batch as one tensor.

    Args:
        input_ids, mask: ``(B, T)``; ranks: ``(B, T)`` from :func:`rank_tokens`;
        counts: ``(B, K)`` tokens in r_k (from :func:`tokens_per_fraction`).
    Returns:
        ``(B, 1 + 2K, T)`` ids and mask: row 0 the full input, rows 1…K x \\ r_k
        (comprehensiveness), rows K+1…2K r_k alone (sufficiency); kept tokens shifted left in their
        original order, right-padded. An input left empty becomes one real ``[PAD]`` token.
    """
    top = (ranks[:, None, :] < counts[:, :, None]) & mask[:, None, :]  # (B, K, T) in r_k
    keep = torch.cat([mask[:, None, :], mask[:, None, :] & ~top, top], dim=1)  # (B, 1+2K, T)
    # kept positions first, in order (stable sort of 0 = kept / 1 = dropped): removal, not masking
    order = torch.sort((~keep).to(torch.int8), dim=-1, stable=True).indices
    ids = input_ids[:, None, :].expand_as(keep).gather(-1, order)
    kept = keep.sum(-1, keepdim=True)
    new_mask = torch.arange(keep.shape[-1]) < kept
    empty = kept.squeeze(-1) == 0
    new_mask[..., 0] |= empty
    ids = torch.where(new_mask & ~empty[..., None], ids, torch.full_like(ids, pad_token_id))
    return ids, new_mask


@dataclass
class EraserResult:
    """Per-instance ERASER scores. ``comprehensiveness``/``sufficiency``: ``(N, K)``, one column per
    fraction; ``tokens``: ``(N, K)`` k per bin; ``predicted_class``/``full_probability``: ``(N,)``
    c and ŷ_c(x); ``lengths``: ``(N,)`` real tokens."""

    fractions: tuple[float, ...]
    comprehensiveness: np.ndarray
    sufficiency: np.ndarray
    tokens: np.ndarray
    predicted_class: np.ndarray
    full_probability: np.ndarray
    lengths: np.ndarray

    @property
    def comprehensiveness_aopc(self) -> np.ndarray:
        """``(N,)`` mean over the bins."""
        return self.comprehensiveness.mean(1)

    @property
    def sufficiency_aopc(self) -> np.ndarray:
        return self.sufficiency.mean(1)

    def summary(self) -> dict:
        return summarize_eraser(self.comprehensiveness, self.sufficiency, self.fractions)


def eraser_scores(model, input_ids, attention_mask, importance,
                  fractions: Sequence[float] = DEFAULT_FRACTIONS, *,
                  token_budget: int = DEFAULT_TOKEN_BUDGET, progress: bool = False) -> EraserResult:
    """ERASER comprehensiveness and sufficiency (DeYoung et al. 2020 §4) of ``importance``.

    Args:
        model: an ``AttnClassifierForSequenceClassification`` (any model with ``.logits`` whose
            softmax is ŷ and a ``config.pad_token_id``).
        input_ids, attention_mask: ``(N, T)`` right-padded.
        importance: ``(N, T)`` any per-token score (attention, gradient, LOO, IG; higher = more
            important); pads are ignored, NaN/inf on real tokens is an error.
        fractions: the bins (default 1/5/10/20/50 %).
        token_budget: padded tokens per forward pass (bounds memory).
    Returns:
        :class:`EraserResult`. All 1 + 2K inputs of every instance are built with index tensors;
        instances are grouped by length and their variants run in token-bounded forwards.
    """
    ids, mask = _check_inputs(input_ids, attention_mask)
    imp = _check_importance(importance, mask)
    fractions = tuple(float(f) for f in fractions)
    lengths = mask.sum(1).numpy()
    counts = torch.from_numpy(tokens_per_fraction(lengths, fractions))
    num_bins = len(fractions)
    rows = 1 + 2 * num_bins
    pad_id = int(getattr(model.config, "pad_token_id", 0) or 0)
    was_training = model.training
    model.eval()
    probabilities = torch.empty(len(lengths), rows, model.config.num_labels)
    # groups of instances of similar length; a group's variants are one batched_probabilities call
    groups = length_batches(lengths, max(token_budget, rows * int(lengths.max())) * 4, rows)
    iterator = groups
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(groups, desc="ERASER", unit="batch")
    try:
        for group in iterator:
            index = torch.from_numpy(group)
            width = int(lengths[group].max())
            sub_ids, sub_mask = ids[index, :width], mask[index, :width]
            ranks = rank_tokens(imp[index, :width], sub_mask)
            var_ids, var_mask = erasure_variants(sub_ids, sub_mask, ranks, counts[index], pad_id)
            flat = batched_probabilities(model, var_ids.reshape(-1, width), var_mask.reshape(-1, width),
                                         token_budget)
            probabilities[index] = flat.view(len(group), rows, -1)
    finally:
        model.train(was_training)
    full = probabilities[:, 0]
    predicted = full.argmax(-1)
    p_c = probabilities.gather(2, predicted[:, None, None].expand(-1, rows, 1)).squeeze(-1).double()
    return EraserResult(
        fractions=fractions,
        comprehensiveness=(p_c[:, :1] - p_c[:, 1:1 + num_bins]).numpy(),
        sufficiency=(p_c[:, :1] - p_c[:, 1 + num_bins:]).numpy(),
        tokens=counts.numpy(), predicted_class=predicted.numpy(), full_probability=p_c[:, 0].numpy(),
        lengths=lengths)


@torch.inference_mode()
def eraser_scores_slow(model, input_ids, attention_mask, importance,
                       fractions: Sequence[float] = DEFAULT_FRACTIONS) -> EraserResult:
    """Reference implementation: one instance and one bin at a time, Python lists, the literal
    definition. For tests and the benchmark; use :func:`eraser_scores`."""
    ids, mask = _check_inputs(input_ids, attention_mask)
    imp = _check_importance(importance, mask)
    model.eval()
    pad_id = int(getattr(model.config, "pad_token_id", 0) or 0)

    def prob(tokens: list[int]) -> torch.Tensor:
        tokens = tokens or [pad_id]  # an empty input: one [PAD] (see the module docstring)
        return model(input_ids=torch.tensor([tokens]), attention_mask=torch.ones(1, len(tokens))
                     ).logits.softmax(-1)[0].double()

    comp, suff, counts, predicted, full_p, lengths = [], [], [], [], [], []
    for row in range(len(ids)):
        n = int(mask[row].sum())
        tokens = ids[row, :n].tolist()
        scores = imp[row, :n].tolist()
        full = prob(tokens)
        c = int(full.argmax())
        ranking = sorted(range(n), key=lambda t: (-scores[t], t))
        c_row, s_row, k_row = [], [], []
        for f in fractions:
            k = min(n, max(1, math.ceil(round(f * n, 9))))
            top = set(ranking[:k])
            c_row.append(float(full[c] - prob([w for t, w in enumerate(tokens) if t not in top])[c]))
            s_row.append(float(full[c] - prob([w for t, w in enumerate(tokens) if t in top])[c]))
            k_row.append(k)
        comp.append(c_row), suff.append(s_row), counts.append(k_row)
        predicted.append(c), full_p.append(float(full[c])), lengths.append(n)
    return EraserResult(tuple(float(f) for f in fractions), np.array(comp), np.array(suff),
                        np.array(counts), np.array(predicted), np.array(full_p), np.array(lengths))


def aopc(scores, include_zero_bin: bool = False) -> np.ndarray:
    """Area over the perturbation curve per instance: ``(N, K)`` → ``(N,)`` mean over the bins
    (ERASER code). ``include_zero_bin``: divide the sum by K+1 instead (ERASER §4's printed
    1/(|B|+1) normaliser, counting a 0 % bin whose score is 0)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] == 0:
        raise ValueError(f"scores must be (instances, bins), got shape {scores.shape}")
    return scores.sum(1) / (scores.shape[1] + (1 if include_zero_bin else 0))


def summarize_eraser(comprehensiveness, sufficiency, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                     include_zero_bin: bool = False) -> dict:
    """Dataset summary of per-instance ERASER scores (model-free; the ``eraser_faithfulness``
    evaluate module calls this).

    Args:
        comprehensiveness, sufficiency: ``(N, K)`` per instance and bin; probability differences,
            so finite and in [-1, 1] (else ``ValueError`` naming the argument and instance).
        fractions: the K bins, each in (0, 1] (else ``ValueError``).
    Returns:
        ``comprehensiveness_aopc``, ``sufficiency_aopc`` (mean over instances of the per-instance
        AOPC), their standard errors, per-bin means ``comprehensiveness`` / ``sufficiency``
        (lists of K), ``fractions`` and ``num_instances``.
    """
    from hf_attn.core.validation import check_range

    fractions = _check_fractions(fractions)
    out: dict = {"fractions": fractions}
    for name, values in (("comprehensiveness", comprehensiveness), ("sufficiency", sufficiency)):
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != len(fractions):
            raise ValueError(f"{name} must be (instances, {len(fractions)} bins) for fractions "
                             f"{fractions}, got shape {arr.shape}")
        if len(arr) == 0:
            raise ValueError(f"{name} is empty")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf")
        # differences of two probabilities of the predicted class: always in [-1, 1]
        check_range(name, arr, -1.0, 1.0)
        per_instance = aopc(arr, include_zero_bin)
        out[f"{name}_aopc"] = float(per_instance.mean())
        out[f"{name}_aopc_stderr"] = (float(per_instance.std(ddof=1) / math.sqrt(len(arr)))
                                      if len(arr) > 1 else 0.0)
        out[name] = arr.mean(0).tolist()
    if np.shape(comprehensiveness)[0] != np.shape(sufficiency)[0]:
        raise ValueError("comprehensiveness and sufficiency have different numbers of instances")
    out["num_instances"] = int(np.shape(comprehensiveness)[0])
    return out


# ------------------------------------------------------------------------------------------------
# integrated gradients

@dataclass
class IntegratedGradientsResult:
    """``attributions`` ``(B, T)`` signed IG per token (0 on pads); ``completeness_gap`` ``(B,)``
    Σ_t IG_t − (f(x) − f(b)); ``target_input``/``target_baseline`` ``(B,)`` f(x), f(b);
    ``target_class`` ``(B,)``."""

    attributions: torch.Tensor
    completeness_gap: torch.Tensor
    target_input: torch.Tensor
    target_baseline: torch.Tensor
    target_class: torch.Tensor


def _path_points(steps: int, rule: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if rule == "trapezoid":
        alphas = torch.arange(steps + 1, dtype=torch.float64) / steps
        weights = torch.full((steps + 1,), 1.0 / steps, dtype=torch.float64)
        weights[0] = weights[-1] = 0.5 / steps
    elif rule == "right":
        alphas = torch.arange(1, steps + 1, dtype=torch.float64) / steps
        weights = torch.full((steps,), 1.0 / steps, dtype=torch.float64)
    else:
        raise ValueError(f"rule must be 'trapezoid' or 'right', got {rule!r}")
    return alphas, weights


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
    """
    ids, mask = _check_inputs(input_ids, attention_mask)
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
    groups = length_batches(lengths, token_budget, num_points)
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


# ------------------------------------------------------------------------------------------------
# the ERASER table: every importance measure of one model on one split

IMPORTANCE_MEASURES = ("attention", "gradient", "loo", "ig", "ig_abs", "random")
MEASURE_DESCRIPTIONS = {
    "attention": "attention weights α (J&W §2)",
    "gradient": "|∇ŷ_c · e_t| with α detached (J&W Alg. 1)",
    "loo": "leave-one-out TVD(ŷ(x₋t), ŷ(x)) (J&W §4.1)",
    "ig": "integrated gradients, signed (Sundararajan et al. 2017; toward c ranks first)",
    "ig_abs": "|integrated gradients|",
    "random": "uniform random scores (the floor)",
}


def importance_scores(model, input_ids, attention_mask, measures: Sequence[str] = IMPORTANCE_MEASURES,
                      *, ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0,
                      token_budget: int = 16384, progress: bool = False) -> tuple[dict, dict]:
    """``{measure: (N, T) float64}`` per-token importances for ERASER, plus ``{measure: seconds}``.

    Gradient and leave-one-out are the J&W battery's own functions
    (:func:`hf_attn.analysis.jw.battery.gradient_importance`, :func:`~hf_attn.analysis.jw.battery.leave_one_out`),
    run over length-sorted batches. Single-token instances have no leave-one-out value (NaN):
    their one token gets 0 (any ranking of one token is the same). IG scores both ``ig`` and
    ``ig_abs`` from one run; ``random`` is seeded.
    """
    from hf_attn.analysis.jw.battery import JWSettings, _in_row_chunks, gradient_importance, leave_one_out

    unknown = sorted(set(measures) - set(IMPORTANCE_MEASURES))
    if unknown:
        raise ValueError(f"unknown importance measure(s) {unknown}; choose from {list(IMPORTANCE_MEASURES)}")
    ids, mask = _check_inputs(input_ids, attention_mask)
    lengths = mask.sum(1).numpy()
    model.eval()
    out: dict[str, torch.Tensor] = {}
    seconds: dict[str, float] = {}
    batches = length_batches(lengths, token_budget)

    def per_batch(name, fn):
        start = time.perf_counter()
        result = torch.zeros(ids.shape, dtype=torch.float64)
        for batch in batches:
            index = torch.from_numpy(batch)
            width = int(lengths[batch].max())
            result[index, :width] = fn(ids[index, :width], mask[index, :width]).detach().double().cpu()
        seconds[name] = time.perf_counter() - start
        return result

    if "attention" in measures:
        with torch.inference_mode():
            out["attention"] = per_batch("attention", lambda i, m: model(input_ids=i, attention_mask=m).attentions)
    if "gradient" in measures:
        out["gradient"] = per_batch("gradient", lambda i, m: _in_row_chunks(
            lambda ii, mm: gradient_importance(model, ii, mm), i, m, JWSettings().gradient_token_budget))
    if "loo" in measures:
        with torch.inference_mode():
            out["loo"] = torch.nan_to_num(per_batch("loo", lambda i, m: leave_one_out(
                model, i, m, token_budget=4 * token_budget)), nan=0.0)
    if "ig" in measures or "ig_abs" in measures:
        start = time.perf_counter()
        ig = integrated_gradients(model, ids, mask, steps=ig_steps, baseline=ig_baseline, progress=progress)
        seconds["ig"] = time.perf_counter() - start
        if "ig" in measures:
            out["ig"] = ig.attributions
        if "ig_abs" in measures:
            out["ig_abs"] = ig.attributions.abs()
        out["_ig_completeness_gap"] = ig.completeness_gap
    if "random" in measures:
        out["random"] = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return out, seconds


def _importance_correlations(scores: dict, attention_mask, predicted, num_classes: int) -> dict:
    """J&W Table 2-style Kendall τ (per predicted class) between every pair of the importance
    measures, IG included: how the rankings ERASER scores relate to one another."""
    from hf_attn.analysis.jw.summary import correlation_summary, jsonable, strip_arrays

    mask = _as_long(attention_mask, "attention_mask").bool()
    lengths = mask.sum(1).tolist()
    names = [n for n in ("attention", "gradient", "loo", "ig_abs", "ig") if n in scores]
    ragged = {n: [row[:k].numpy() for row, k in zip(scores[n], lengths)] for n in names}
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if {a, b} == {"ig", "ig_abs"}:
                continue
            summary = strip_arrays(correlation_summary(ragged[a], ragged[b], predicted, num_classes))
            out[f"{a}~{b}"] = jsonable(summary)
    return out


def eraser_table(model, input_ids, attention_mask, measures: Sequence[str] = IMPORTANCE_MEASURES,
                 fractions: Sequence[float] = DEFAULT_FRACTIONS, *, ig_steps: int = 50,
                 ig_baseline: str = "zero", seed: int = 0, token_budget: int = 16384,
                 progress: bool = False) -> dict:
    """ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020 §4) of each importance
    measure for one model on ``(N, T)`` inputs: the question the three papers left open — is
    attention a worse explanation than gradients by a measure other than rank correlation?

    Returns a JSON-able dict: ``measures`` {name: :func:`summarize_eraser` output + description},
    ``ig_completeness`` (mean / max |Σ IG − (f(x) − f(0))|), ``seconds`` per step, ``parameters``.
    """
    start = time.perf_counter()
    scores, seconds = importance_scores(model, input_ids, attention_mask, measures, ig_steps=ig_steps,
                                        ig_baseline=ig_baseline, seed=seed, token_budget=token_budget,
                                        progress=progress)
    table, predicted = {}, None
    for name in measures:
        t0 = time.perf_counter()
        result = eraser_scores(model, input_ids, attention_mask, scores[name], fractions,
                               token_budget=4 * token_budget, progress=progress)
        seconds[f"eraser_{name}"] = time.perf_counter() - t0
        predicted = result.predicted_class
        table[name] = summarize_eraser(result.comprehensiveness, result.sufficiency, fractions) | {
            "description": MEASURE_DESCRIPTIONS[name]}
    out = {"measures": table,
           "kendall_tau": _importance_correlations(scores, attention_mask, predicted, model.config.num_labels),
           "parameters": {"fractions": list(fractions), "ig_steps": ig_steps, "ig_baseline": ig_baseline,
                          "ig_rule": "trapezoid", "ig_target": "probability", "seed": seed,
                          "k_rounding": "ceil(fraction * n), clipped to [1, n]",
                          "ties": "earlier position first", "aopc": "mean over the bins"},
           "seconds": seconds | {"total": time.perf_counter() - start}}
    if "_ig_completeness_gap" in scores:
        gap = scores["_ig_completeness_gap"].abs()
        out["ig_completeness"] = {"mean_abs_gap": float(gap.mean()), "max_abs_gap": float(gap.max())}
    return out


def format_eraser_table(results: dict) -> str:
    """Markdown table of :func:`eraser_table` results (AOPC ± standard error, per-bin values)."""
    fractions = results["parameters"]["fractions"]
    bins = " / ".join(f"{round(100 * f)}%" for f in fractions)
    lines = [f"| importance | comprehensiveness AOPC ↑ | sufficiency AOPC ↓ | comprehensiveness {bins} | sufficiency {bins} |",
             "|---|---|---|---|---|"]
    for name, row in results["measures"].items():
        lines.append(f"| {name} | {row['comprehensiveness_aopc']:.3f} ± {row['comprehensiveness_aopc_stderr']:.3f} "
                     f"| {row['sufficiency_aopc']:.3f} ± {row['sufficiency_aopc_stderr']:.3f} "
                     f"| {' / '.join(f'{v:.3f}' for v in row['comprehensiveness'])} "
                     f"| {' / '.join(f'{v:.3f}' for v in row['sufficiency'])} |")
    lines += ["", f"± is the standard error of the mean over the {results.get('num_instances', 'N')} instances "
              "(standard deviation / √N), not a standard deviation; AOPC = mean over the bins (DeYoung et al. "
              "2020, §4)."]
    return "\n".join(lines)


def write_eraser_figure(results: dict, path: str, title: str = "") -> str:
    """Comprehensiveness and sufficiency against the fraction of tokens, one line per measure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = [100 * f for f in results["parameters"]["fractions"]]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharex=True)
    for name, row in results["measures"].items():
        axes[0].plot(fractions, row["comprehensiveness"], marker="o", label=name)
        axes[1].plot(fractions, row["sufficiency"], marker="o", label=name)
    for ax, label in zip(axes, ("comprehensiveness ↑ (top-k removed)", "sufficiency ↓ (only top-k kept)")):
        ax.set_xscale("log")
        ax.set_xticks(fractions, [f"{f:g}" for f in fractions])
        ax.set_xlabel("k (% of tokens)")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Δ p(predicted class)")
    axes[1].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=130)
    plt.close(fig)
    return path


def run_eraser(model_dir: str, output_dir: str, split: str = "test",
               measures: Sequence[str] = IMPORTANCE_MEASURES, fractions: Sequence[float] = DEFAULT_FRACTIONS,
               *, ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0, token_budget: int = 16384,
               max_instances: int | None = None, progress: bool = True) -> dict:
    """ERASER table of a model folder written by ``hf-attn train`` on ``split``: writes
    ``OUT/results.json`` (atomic), ``OUT/eraser.md`` and ``OUT/eraser.png``; returns the results.
    A finished ``OUT/results.json`` with the same parameters is returned as is."""
    import json

    from hf_attn.analysis.jw.battery import load_model_and_split
    from hf_attn.training.engine import environment_versions, write_json_atomic

    path = os.path.join(output_dir, "results.json")
    params = {"split": split, "measures": list(measures), "fractions": list(fractions), "ig_steps": ig_steps,
              "ig_baseline": ig_baseline, "seed": seed, "max_instances": max_instances}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == params:
            return previous
    model, tokenizer, texts, labels, label_names, dataset = load_model_and_split(model_dir, split)
    if max_instances:
        texts = texts[:max_instances]
    max_length = int(getattr(model.config, "max_tokens", 512))
    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    results = eraser_table(model, enc["input_ids"], enc["attention_mask"], measures, fractions,
                           ig_steps=ig_steps, ig_baseline=ig_baseline, seed=seed,
                           token_budget=token_budget, progress=progress)
    results = {"analysis": "eraser", "paper": "DeYoung et al. 2020, ERASER, §4; Sundararajan et al. 2017 (IG)",
               "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": split,
               "num_instances": len(texts),
               "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                         "variant": model.config.variant},
               "request": params, **results, "versions": environment_versions()}
    os.makedirs(output_dir, exist_ok=True)
    table = format_eraser_table(results)
    write_text_atomic(os.path.join(output_dir, "eraser.md"),
                      f"ERASER on {dataset} {split} ({len(texts)} instances), {model_dir}\n\n{table}\n")
    name = f"{model.config.encoder}+{model.config.attention} ({model.config.variant})"
    results["figure"] = os.path.basename(write_eraser_figure(
        results, os.path.join(output_dir, "eraser.png"), f"ERASER, {dataset} {split}, {name}"))
    write_json_atomic(path, results)
    if progress:
        print(table)
    return results


def add_parser(subparsers) -> None:
    """``hf-attn eraser DIR --output-dir OUT``."""
    p = subparsers.add_parser(
        "eraser", help="ERASER faithfulness of attention / gradient / LOO / IG rankings",
        description="ERASER comprehensiveness, sufficiency and AOPC (DeYoung et al. 2020 §4) of each "
                    "importance measure of a trained model; writes results.json, eraser.md, eraser.png.")
    p.add_argument("model_dir")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--measures", nargs="+", default=list(IMPORTANCE_MEASURES), choices=list(IMPORTANCE_MEASURES))
    p.add_argument("--fractions", nargs="+", type=float, default=list(DEFAULT_FRACTIONS))
    p.add_argument("--ig-steps", type=int, default=50)
    p.add_argument("--ig-baseline", choices=["zero", "pad"], default="zero")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--token-budget", type=int, default=16384)
    p.add_argument("--max-instances", type=int, default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    from hf_attn.core.io import exclusive_output_folder

    with exclusive_output_folder(args.output_dir):  # one writer per output folder
        run_eraser(args.model_dir, args.output_dir, args.split, args.measures, args.fractions,
                   ig_steps=args.ig_steps, ig_baseline=args.ig_baseline, seed=args.seed,
                   token_budget=args.token_budget, max_instances=args.max_instances, progress=not args.quiet)
    return 0


__all__ = ["DEFAULT_FRACTIONS", "EraserResult", "IntegratedGradientsResult", "aopc",
           "batched_probabilities", "eraser_scores", "eraser_scores_slow", "erasure_variants",
           "integrated_gradients", "integrated_gradients_importance", "length_batches",
           "rank_tokens", "summarize_eraser", "tokens_per_fraction", "IMPORTANCE_MEASURES",
           "importance_scores", "eraser_table", "format_eraser_table", "run_eraser"]
