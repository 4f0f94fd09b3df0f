"""Faithfulness metrics of per-token attributions: arrays in, numbers out (no model here; the
probabilities they need come from :mod:`hf_attn.batteries.faithfulness`).

- ERASER comprehensiveness / sufficiency and their AOPC (DeYoung et al. 2020, §4):
  :func:`erasure_differences` (the probability drops), AOPC = mean over the bins
  (:func:`hf_attn.methods.eraser.aopc`, one source with the ``eraser_faithfulness`` module).
- Soft normalised comprehensiveness / sufficiency (Zhao & Aletras 2023, "Incorporating Attribution
  Importance for Improving Faithfulness Metrics", ACL, §3): :func:`soft_normalised_comprehensiveness`,
  :func:`soft_normalised_sufficiency`, with the soft masks of :func:`soft_keep_probabilities`.
- Normalised AOPC (Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe & Maistro 2024, "Normalized AOPC:
  Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability", ACL, §3):
  :func:`normalised_aopc`; its bounds over every ordering are :mod:`hf_attn.core.naopc`.
- Paired tests between two methods' per-sentence values (:func:`paired_test`, Wilcoxon signed-rank)
  and rankings in which ties share a rank (:func:`shared_ranks`).
- Rank agreement: Kendall τ-b per instance (:func:`rank_agreement`; with a leave-one-out measure as
  one side, τ with LOO as in Jain & Wallace 2019 §4.1, whose leave-one-out is the LOO-TVD; the
  faithfulness table's is the LOO-drop, :mod:`hf_attn.core.measure_names`) and top-k feature
  agreement (Krishna et al. 2022, "The Disagreement Problem in Explainable Machine Learning", §3.1:
  |top-k(a) ∩ top-k(b)| / k, :func:`top_k_agreement`).
- Means with 95 % confidence intervals over sentences (:func:`mean_ci`, Student t) and over seeds
  (:func:`mean_ci_over_seeds`).

Shapes: N instances, T positions (a ``mask`` ``(N, T)`` marks each instance's tokens), K bins,
S seeds.
"""

from __future__ import annotations

import math

import numpy as np

from hf_attn.core.numpy_measures import aopc  # noqa: F401  (one source with eraser_faithfulness)
from hf_attn.core.numpy_measures import normalised_aopc as _normalised_aopc  # one bounds check with normalized_aopc


def _array(value, name: str, ndim: int | None = None) -> np.ndarray:
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric arrays ({error})") from None
    if ndim is not None and out.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {out.shape}")
    return out


def _probabilities(value, name: str, ndim: int | None = None) -> np.ndarray:
    out = _array(value, name, ndim)
    if not np.isfinite(out).all() or (out < 0).any() or (out > 1).any():
        raise ValueError(f"{name} must be probabilities in [0, 1]")
    return out


def mean_ci(values, confidence: float = 0.95) -> dict:
    """Mean of the finite ``values`` with its ``confidence`` interval (Student t with n − 1 degrees of
    freedom: mean ± t · sd / √n). ``{"mean", "low", "high", "n"}``; bounds NaN for n < 2, everything
    NaN for n = 0 (NaN inputs — undefined per-instance values — are left out and not counted)."""
    from scipy.stats import t as student

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    arr = _array(values, "values").ravel()
    arr = arr[np.isfinite(arr)]
    n = len(arr)
    if n == 0:
        return {"mean": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    mean = float(arr.mean())
    if n < 2:
        return {"mean": mean, "low": math.nan, "high": math.nan, "n": 1}
    half = float(student.ppf(0.5 + confidence / 2, n - 1) * arr.std(ddof=1) / math.sqrt(n))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def mean_ci_over_seeds(values, confidence: float = 0.95) -> dict:
    """``values`` ``(S, N)``: per seed the mean over the instances (NaN left out), then
    :func:`mean_ci` over the S seed means: the spread the seeds cause, not the sentences."""
    arr = _array(values, "values", 2)
    with np.errstate(invalid="ignore"):
        per_seed = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in arr])
    return mean_ci(per_seed, confidence) | {"seeds": int(arr.shape[0])}


def erasure_differences(full_probability, erased_probability) -> np.ndarray:
    """ERASER's drops ŷ_c(x) − ŷ_c(x̃) ``(N, K)`` for ``full_probability`` ``(N,)`` ŷ_c(x) and
    ``erased_probability`` ``(N, K)`` ŷ_c of the erased inputs (top-k removed: comprehensiveness;
    only top-k kept: sufficiency; DeYoung et al. 2020 §4)."""
    full = _probabilities(full_probability, "full_probability", 1)
    erased = _probabilities(erased_probability, "erased_probability", 2)
    if erased.shape[0] != full.shape[0]:
        raise ValueError(f"erased_probability has {erased.shape[0]} rows for {full.shape[0]} instances")
    return full[:, None] - erased


def soft_keep_probabilities(importance, mask) -> np.ndarray:
    """Zhao & Aletras 2023 §3: each token's importance min–max normalised to [0, 1] over the
    instance's tokens (the probability that its embedding's elements are kept in soft sufficiency;
    1 − it in soft comprehensiveness). 0 outside ``mask``; an instance with equal scores gets 1
    everywhere (nothing ranks above anything). ``(N, T)``."""
    scores = _array(importance, "importance", 2)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != scores.shape:
        raise ValueError(f"mask shape {mask.shape} differs from importance {scores.shape}")
    if not np.isfinite(scores[mask]).all():
        raise ValueError("importance contains NaN or inf on a token")
    low = np.where(mask, scores, np.inf).min(1, keepdims=True)
    high = np.where(mask, scores, -np.inf).max(1, keepdims=True)
    span = high - low
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(span > 0, (scores - low) / np.where(span > 0, span, 1), 1.0)
    return np.where(mask, out, 0.0)


def _null_denominator(full, null):
    """1 − S(x, ŷ, 0) = max(0, ŷ(x) − ŷ(0)) (Carton et al. 2020's normaliser, used by Zhao & Aletras)."""
    return np.maximum(0.0, full - null)


def soft_normalised_sufficiency(full_probability, soft_kept_probability, null_probability, clip: bool = True
                                ) -> np.ndarray:
    """Soft-NS (Zhao & Aletras 2023, §3) per instance:
    (S(x, ŷ, x') − S(x, ŷ, 0)) / (1 − S(x, ŷ, 0)), S(x, ŷ, x') = 1 − max(0, ŷ(x) − ŷ(x')), x' the
    soft-kept input (each element of the embedding layer's output kept with the token's normalised
    importance), 0 the null input (every input id 0). Higher = more sufficient (better).
    ``clip`` (default, as the authors' ``normalized_sufficiency_soft_`` in
    ``casszhao/multilingual-faith``, ``src/common_code/metrics.py``): max(0, ·) and clipped to
    [0, 1]. NaN where ŷ(x) ≤ ŷ(0) (the normaliser is 0: the authors' code subtracts 1e-4 from
    S(x, ŷ, 0) instead, which turns these instances into 0 or 1). ``soft_kept_probability``
    ``(N,)`` or ``(S, N)`` (draws)."""
    full = _probabilities(full_probability, "full_probability", 1)
    kept = _probabilities(soft_kept_probability, "soft_kept_probability")
    null = _probabilities(null_probability, "null_probability", 1)
    denominator = _null_denominator(full, null)
    s_kept = 1 - np.maximum(0.0, full - kept)
    s_null = 1 - denominator
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (s_kept - s_null) / np.where(denominator > 1e-12, denominator, 1)
    if clip:
        value = np.clip(value, 0.0, 1.0)
    return np.where(denominator > 1e-12, value, np.nan)


def soft_normalised_comprehensiveness(full_probability, soft_removed_probability, null_probability,
                                      clip: bool = True) -> np.ndarray:
    """Soft-NC (Zhao & Aletras 2023, §3) per instance: max(0, ŷ(x) − ŷ(x'')) / (1 − S(x, ŷ, 0)),
    x'' the soft-removed input (each element kept with 1 − the token's normalised importance).
    Higher = more comprehensive (better). ``clip`` (default, as the authors' code): clipped to
    [0, 1]; without it the ratio is unbounded when ŷ(0) is almost as confident as ŷ(x). NaN where
    ŷ(x) ≤ ŷ(0)."""
    full = _probabilities(full_probability, "full_probability", 1)
    removed = _probabilities(soft_removed_probability, "soft_removed_probability")
    null = _probabilities(null_probability, "null_probability", 1)
    denominator = _null_denominator(full, null)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.maximum(0.0, full - removed) / np.where(denominator > 1e-12, denominator, 1)
    if clip:
        value = np.clip(value, 0.0, 1.0)
    return np.where(denominator > 1e-12, value, np.nan)


def normalised_aopc(aopc_value, lower, upper) -> np.ndarray:
    """NAOPC (Edin et al. 2024, §3): (AOPC − AOPC_min) / (AOPC_max − AOPC_min) per instance, AOPC_min
    / AOPC_max the lowest / highest AOPC of any ordering of that instance's tokens
    (:mod:`hf_attn.core.naopc`); for comprehensiveness higher is better, for sufficiency (ascending
    deletion) lower. The bounds check is the one the ``normalized_aopc`` module ships
    (:func:`hf_attn.core.numpy_measures.normalised_aopc`): an AOPC past a bound by float32 rounding
    (:func:`~hf_attn.core.numpy_measures.bound_tolerance`, a few units in the last place) is clipped
    onto it, one farther out is a ``ValueError`` naming the instance, the value and the bounds. NaN
    where the bounds are equal (one token, or no deletion moves ŷ) or a value is NaN."""
    value = _array(aopc_value, "aopc_value")
    low = _array(lower, "lower")
    high = _array(upper, "upper")
    if not (value.shape == low.shape == high.shape):
        raise ValueError(f"aopc_value, lower and upper must have one shape, got {value.shape}, {low.shape}, {high.shape}")
    return _normalised_aopc(value, low, high, names=("aopc_value", "lower", "upper"))


def rank_agreement(scores_a, scores_b, mask) -> np.ndarray:
    """Kendall τ-b per instance between two attributions over the masked tokens ``(N,)`` (NaN for
    fewer than 2 tokens or constant scores): :func:`hf_attn.core.measures.kendall_tau`, equal to
    ``scipy.stats.kendalltau``."""
    from hf_attn.core.measures import kendall_tau

    a = _array(scores_a, "scores_a", 2)
    b = _array(scores_b, "scores_b", 2)
    mask = np.asarray(mask, dtype=bool)
    if not (a.shape == b.shape == mask.shape):
        raise ValueError(f"scores_a, scores_b and mask must have one shape, got {a.shape}, {b.shape}, {mask.shape}")
    return kendall_tau(np.where(mask, a, 0.0), np.where(mask, b, 0.0), mask).tau


def top_k_agreement(scores_a, scores_b, mask, fraction: float = 0.2) -> np.ndarray:
    """Feature agreement (Krishna et al. 2022 §3.1) per instance: |top-k(a) ∩ top-k(b)| / k, k =
    ceil(fraction · n) clipped to [1, n] (n = masked tokens); ties broken by position (earlier
    first), as the erasure metrics rank. ``(N,)``."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    a = _array(scores_a, "scores_a", 2)
    b = _array(scores_b, "scores_b", 2)
    mask = np.asarray(mask, dtype=bool)
    if not (a.shape == b.shape == mask.shape):
        raise ValueError(f"scores_a, scores_b and mask must have one shape, got {a.shape}, {b.shape}, {mask.shape}")
    n = mask.sum(1)
    k = np.clip(np.ceil(np.round(n * fraction, 9)), 1, np.maximum(n, 1)).astype(int)

    def top(scores):
        order = np.argsort(np.where(mask, -scores, np.inf), axis=1, kind="stable")
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None].repeat(len(scores), 0), 1)
        return (ranks < k[:, None]) & mask

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (top(a) & top(b)).sum(1) / k, np.nan)



def paired_test(values_a, values_b) -> dict:
    """Two-sided Wilcoxon signed-rank test of paired per-instance values (instances where either is
    undefined left out): ``{"p", "n", "median_difference"}`` (a − b). p = 1 when every pair is equal,
    NaN for fewer than 2 pairs. Used to say whether two methods' columns differ, sentence by sentence."""
    from scipy.stats import wilcoxon

    a = _array(values_a, "values_a").ravel()
    b = _array(values_b, "values_b").ravel()
    if a.shape != b.shape:
        raise ValueError(f"values_a and values_b must pair up, got {a.shape} and {b.shape}")
    both = np.isfinite(a) & np.isfinite(b)
    diff = a[both] - b[both]
    n = int(both.sum())
    if n < 2:
        return {"p": math.nan, "n": n, "median_difference": float(np.median(diff)) if n else math.nan}
    if np.all(np.abs(diff) <= 1e-12):
        return {"p": 1.0, "n": n, "median_difference": 0.0}
    return {"p": float(wilcoxon(a[both], b[both], zero_method="zsplit").pvalue), "n": n,
            "median_difference": float(np.median(diff))}


def shared_ranks(values: dict, higher_is_better: bool) -> dict:
    """Rank (1 = best) of each key of ``values`` {name: number}: ties share the mean of their
    positions (``scipy.stats.rankdata``, "average"); undefined (NaN) values get no rank (NaN)."""
    from scipy.stats import rankdata

    names = [k for k, v in values.items() if v is not None and math.isfinite(v)]
    out = {k: math.nan for k in values}
    if names:
        key = np.array([-values[k] if higher_is_better else values[k] for k in names], dtype=np.float64)
        for name, rank in zip(names, rankdata(np.round(key, 12), method="average")):
            out[name] = float(rank)
    return out


__all__ = ["aopc", "erasure_differences", "mean_ci", "mean_ci_over_seeds", "normalised_aopc", "paired_test",
           "rank_agreement", "shared_ranks", "soft_keep_probabilities", "soft_normalised_comprehensiveness",
           "soft_normalised_sufficiency", "top_k_agreement"]
