"""ERASER comprehensiveness, sufficiency and AOPC (DeYoung et al. 2020, "ERASER: A Benchmark to
Evaluate Rationalized NLP Models", §4).

For an importance vector over the real tokens of x and c = the class the model predicts for the
full x:

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

Shapes: N or B instances, T tokens (right-padded), K fraction bins, R rows, C classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hf_attn.core.batching import forward_tokens, length_batches
from hf_attn.methods.inputs import check_importance, check_token_inputs

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import aopc  # noqa: F401

DEFAULT_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)
DEFAULT_TOKEN_BUDGET = 65536  # padded tokens per forward pass


@torch.inference_mode()
def batched_probabilities(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          token_budget: int = DEFAULT_TOKEN_BUDGET) -> torch.Tensor:
    """ŷ for many right-padded rows ``(R, T)`` → ``(R, C)``: rows sorted by length, one forward per
    batch of at most ``token_budget`` padded tokens (on a CPU at most
    :data:`hf_attn.core.batching.CPU_FORWARD_TOKENS`), each batch trimmed to its longest row."""
    lengths = attention_mask.sum(1).cpu().numpy()
    device = next(model.parameters()).device
    out = torch.empty(len(lengths), model.config.num_labels, dtype=torch.float32)
    for batch in length_batches(lengths, forward_tokens(token_budget, device)):
        width = int(lengths[batch].max())
        index = torch.from_numpy(batch)
        logits = model(input_ids=input_ids[index, :width].to(device),
                       attention_mask=attention_mask[index, :width].to(device)).logits
        out[index] = logits.float().softmax(-1).cpu()
    return out


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
    ids, mask = check_token_inputs(input_ids, attention_mask)
    imp = check_importance(importance, mask)
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
    groups = length_batches(lengths, max(token_budget, rows * int(lengths.max())) * 4, rows_per_item=rows)
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
    ids, mask = check_token_inputs(input_ids, attention_mask)
    imp = check_importance(importance, mask)
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


__all__ = ["DEFAULT_FRACTIONS", "DEFAULT_TOKEN_BUDGET", "EraserResult", "aopc", "batched_probabilities",
           "eraser_scores", "eraser_scores_slow", "erasure_variants", "rank_tokens", "summarize_eraser",
           "tokens_per_fraction"]
