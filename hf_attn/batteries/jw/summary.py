"""Summary statistics of the Jain & Wallace battery from per-instance arrays (J&W Table 2, Figs 2–5).

Plain NumPy functions on ragged per-instance arrays (one 1-D array per instance, lengths may
differ; the ε-max JSD selection is the battery's own, :func:`hf_attn.methods.adversary.best_feasible_adversary`);
the ``evaluate`` modules in ``hf_attn/metrics/jw_*`` hold a NumPy copy of them.
"""

from __future__ import annotations

import numpy as np
import torch

from hf_attn.core.published import JW_PUBLISHED, JW_SST_SUMMARY
from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.measures import kendall_tau
from hf_attn.methods.adversary import best_feasible_adversary

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import (_class_ids, _describe, binned_by_max_attention,  # noqa: F401
                                         jsonable)

PUBLISHED_SST = JW_SST_SUMMARY  # J&W Table 2, SST (hf_attn.core.published)

MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)

# Importances closer than this (absolute) are tied before Kendall τ (see
# :func:`hf_attn.core.measures.merge_near_ties`). Attention weights, leave-one-out TVDs and gradient ×
# input are all computed in float32 from probabilities of order 1, so their rounding error is
# absolute, a few ulp(1) = 1.2e-7. Measured 2026-11-22 on the 2-core machine, against a float64
# copy of an SST BiLSTM (GloVe-50d, 8 epochs, seed 0), the largest error over the 1821 test
# sentences was 2.2e-7 (attention), 3.4e-7 (gradient) and 5.5e-7 (leave-one-out), and 143 of the
# 432 pairs of adjacent identical tokens got leave-one-out values differing by up to 6.7e-8
# although both deletions give the same sentence. 1e-6 sits above that noise and far below the
# values' own scale (the smallest per-sentence maximum was 1.6e-3). A tolerance relative to each
# sentence's largest value would not fit: the noise does not shrink with the values. Models whose
# importances are all of order 1e-6 (saturated outputs) need a smaller tolerance.
TIE_TOLERANCE = 1e-6


def kendall_per_instance(x, y, pair_budget: int = 500_000, tie_tolerance: float = 0.0
                         ) -> dict[str, np.ndarray]:
    """Kendall τ-b and p-value of each instance's ``x`` vs ``y`` (ragged 1-D arrays of equal
    length per instance), computed with :func:`hf_attn.core.measures.kendall_tau` in length buckets of
    at most ``pair_budget`` (instances × T²) entries, after merging values within
    ``tie_tolerance`` of each other (:func:`hf_attn.core.measures.merge_near_ties`; 0: exact values).
    Instances with fewer than 2 tokens, a constant ranking (also after merging) or a non-finite
    value are not valid (τ = p = NaN; reported as skipped)."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} instances, y {len(y)}")
    n = len(x)
    tau = np.full(n, np.nan)
    pvalue = np.full(n, np.nan)
    valid = np.zeros(n, dtype=bool)
    lengths = np.array([np.size(a) for a in x], dtype=np.int64)
    for i, (a, b) in enumerate(zip(x, y)):
        if np.size(a) != np.size(b):
            raise ValueError(f"instance {i}: x has {np.size(a)} values, y {np.size(b)}")
    finite = np.array([np.isfinite(a).all() and np.isfinite(b).all() for a, b in zip(x, y)], dtype=bool)
    usable = np.flatnonzero(finite & (lengths >= 2))
    order = usable[np.argsort(lengths[usable], kind="stable")]
    start = 0
    while start < len(order):
        width = lengths[order[start:]]
        cost = np.arange(1, len(width) + 1) * width.astype(np.float64) ** 2
        stop = start + max(1, int(np.searchsorted(cost, pair_budget, side="right")))
        chunk = order[start:stop]
        xs, mask = ragged_to_padded([x[i] for i in chunk])
        ys, _ = ragged_to_padded([y[i] for i in chunk])
        result = kendall_tau(xs, ys, mask, tie_tolerance)
        tau[chunk], pvalue[chunk], valid[chunk] = result.tau, result.pvalue, result.valid
        start = stop
    return {"tau": tau, "pvalue": pvalue, "valid": valid, "length": lengths}


def _ranked(lengths, n: int) -> np.ndarray:
    """Instances with at least 2 tokens (all of them when ``lengths`` is None)."""
    if lengths is None:
        return np.ones(n, dtype=bool)
    lengths = np.asarray(lengths).reshape(-1)
    if len(lengths) != n:
        raise ValueError(f"{n} instances but {len(lengths)} lengths")
    return lengths >= 2


def correlation_summary(x, y, predictions, num_classes: int | None = None, alpha: float = 0.05,
                        pair_budget: int = 4_000_000, tie_tolerance: float = TIE_TOLERANCE) -> dict:
    """J&W Table 2 for one pair of rankings (e.g. attention vs gradient): per predicted class and
    overall, mean ± std of τ over valid instances, fraction with p < ``alpha``, and the number of
    skipped instances (fewer than 2 tokens or a constant ranking: no τ, never counted as 0).

    Values of one instance within ``tie_tolerance`` (absolute; default :data:`TIE_TOLERANCE` =
    1e-6, whose comment says why) are tied before ranking, so float32 noise does not order exact
    ties; the per-instance ``tau`` equals ``scipy.stats.kendalltau`` of the merged values
    (:func:`hf_attn.core.measures.merge_near_ties`). ``tie_tolerance=0`` ranks the raw values."""
    predictions, num_classes = _class_ids(predictions, num_classes)
    if len(predictions) != len(x):
        raise ValueError(f"{len(x)} instances but {len(predictions)} predictions")
    result = kendall_per_instance(x, y, pair_budget, tie_tolerance)
    tau, pvalue, valid = result["tau"], result["pvalue"], result["valid"]

    def block(select: np.ndarray) -> dict:
        ok = select & valid
        stats = _describe(tau[ok])
        stats["fraction_significant"] = float((pvalue[ok] < alpha).mean()) if ok.any() else None
        stats["skipped"] = int((select & ~valid).sum())
        return stats

    return {"per_class": {str(c): block(predictions == c) for c in range(num_classes)},
            "overall": block(np.ones(len(predictions), dtype=bool)), "alpha": alpha,
            "tau": tau, "pvalue": pvalue, "valid": valid}


def permutation_summary(permutation_tvd, max_attention, predictions, num_classes: int | None = None,
                        lengths=None) -> dict:
    """J&W §4.2.1: Δŷ_med = median over permutations of TVD(ŷ_p, ŷ) per instance (``permutation_tvd``
    ragged or ``(N, P)``); its distribution per predicted class and by max attention (Fig. 3).

    Given ``lengths`` (tokens per instance), instances with fewer than 2 tokens are skipped as for
    Kendall τ: a single token has one permutation, itself, so its Δŷ = 0 says nothing about
    attention. They are left out of ``per_class``, ``overall`` and ``by_max_attention``, counted in
    ``skipped``, and their ``median_tvd`` is NaN (``valid`` False). Without ``lengths`` every
    instance counts and the result has no ``skipped`` / ``valid`` (the evaluate module's output)."""
    predictions, num_classes = _class_ids(predictions, num_classes)
    if isinstance(permutation_tvd, np.ndarray) and permutation_tvd.ndim == 2:
        medians = np.median(permutation_tvd.astype(np.float64), axis=1)
    else:  # ragged
        medians = np.array([float(np.median(np.asarray(v, dtype=np.float64))) for v in permutation_tvd])
    max_attention = np.asarray(max_attention, dtype=np.float64).reshape(-1)
    if not (len(medians) == len(max_attention) == len(predictions)):
        raise ValueError("permutation_tvd, max_attention and predictions differ in length")
    valid = _ranked(lengths, len(medians))
    medians = np.where(valid, medians, np.nan)

    def block(select):
        stats = _describe(medians[select & valid])
        if lengths is not None:
            stats["skipped"] = int((select & ~valid).sum())
        return stats

    result = {"per_class": {str(c): block(predictions == c) for c in range(num_classes)},
              "overall": block(np.ones(len(predictions), dtype=bool)),
              "by_max_attention": binned_by_max_attention(medians[valid], max_attention[valid],
                                                          predictions[valid], num_classes),
              "median_tvd": medians}
    return result if lengths is None else result | {"valid": valid}


def adversary_summary(adversary_tvd, adversary_jsd, max_attention, predictions, eps: float = 0.01,
                      num_classes: int | None = None, lengths=None) -> dict:
    """J&W Alg. 3 / Figs 4–5: ε-max JSD = max JSD(α(i), α̂) over adversaries with TVD ≤ ε (0 if none;
    :func:`hf_attn.methods.adversary.best_feasible_adversary`, as the battery and the explorer) per instance, its distribution per predicted class, the fraction of instances with a feasible
    adversary, and ε-max JSD by max attention.

    Given ``lengths`` (tokens per instance), instances with fewer than 2 tokens are skipped as for
    Kendall τ: their only attention is α = [1], so every adversary equals it (JSD 0, always
    "feasible"). They are left out of ``per_class``, ``overall`` (also ``fraction_feasible``) and
    ``by_max_attention``, counted in ``skipped``, and their ``eps_max_jsd`` is NaN (``valid``
    False). Without ``lengths`` every instance counts and the result has no ``skipped`` /
    ``valid`` (the evaluate module's output)."""
    predictions, num_classes = _class_ids(predictions, num_classes)
    if len(adversary_tvd) != len(adversary_jsd):
        raise ValueError(f"adversary_tvd has {len(adversary_tvd)} instances, adversary_jsd {len(adversary_jsd)}")
    # ragged rows (k may differ per instance) padded with never-feasible adversaries (TVD = inf)
    tvds, tvd_mask = ragged_to_padded(adversary_tvd, fill=np.inf)
    jsds, jsd_mask = ragged_to_padded(adversary_jsd)
    if tvd_mask.shape != jsd_mask.shape or not np.array_equal(tvd_mask, jsd_mask):
        raise ValueError("adversary_tvd and adversary_jsd differ in the number of adversaries of an instance")
    best = best_feasible_adversary(torch.from_numpy(tvds), torch.from_numpy(jsds), eps)
    eps_max, feasible_any = best.eps_max_jsd.numpy(), best.any_feasible.numpy()
    max_attention = np.asarray(max_attention, dtype=np.float64).reshape(-1)
    if not (len(eps_max) == len(max_attention) == len(predictions)):
        raise ValueError("adversary arrays, max_attention and predictions differ in length")

    valid = _ranked(lengths, len(eps_max))
    eps_max = np.where(valid, eps_max, np.nan)

    def block(select):
        ok = select & valid
        stats = _describe(eps_max[ok])
        stats["fraction_feasible"] = float(feasible_any[ok].mean()) if ok.any() else None
        if lengths is not None:
            stats["skipped"] = int((select & ~valid).sum())
        return stats

    result = {"eps": eps,
              "per_class": {str(c): block(predictions == c) for c in range(num_classes)},
              "overall": block(np.ones(len(predictions), dtype=bool)),
              "by_max_attention": binned_by_max_attention(eps_max[valid], max_attention[valid],
                                                          predictions[valid], num_classes),
              "eps_max_jsd": eps_max}
    return result if lengths is None else result | {"valid": valid}


# the models J&W Table 2 reports, by results.json's model "encoder"
PUBLISHED_ENCODERS = {"lstm": "BiLSTM", "average": "Average"}


def published_for_model(results: dict) -> tuple[dict | None, str]:
    """``(J&W's published values for this results.json's model and data, where they come from)``,
    or ``(None, "")`` when J&W published none for it.

    J&W Tables 1–2 cover their own BiLSTM and Average encoders with additive attention (and, for
    pairs, their tanh decoder): any other model (a transformer, CNN, dot or uniform attention, a
    T&Š variant) gets None. The values are results.json's ``published`` block for the encoder
    (SST, SNLI, QA), else J&W Table 2 for IMDB / AG News (:data:`hf_attn.core.published.JW_PUBLISHED`).
    Shape as ``published``: ``{"tau_gradient": {"mean": …, "std": …, "fraction_significant": …},
    "tau_loo": …, "test_accuracy" | "test_micro_f1": …}``, each value a list over the C classes
    (per predicted class) or one number (QA: all instances)."""
    model = results.get("model") or {}
    encoder = model.get("encoder")
    if (encoder not in PUBLISHED_ENCODERS or model.get("attention", "additive") != "additive"
            or model.get("variant", "base") != "base" or model.get("pair_decoder", "tanh") != "tanh"):
        return None, ""
    dataset = str(results.get("dataset") or "")
    published = results.get("published")
    block = published.get(encoder) if isinstance(published, dict) else None
    if not isinstance(block, dict):
        table = JW_PUBLISHED.get(dataset)
        if not table:
            return None, ""
        suffix = "" if encoder == "lstm" else "_average"
        block = {"tau_gradient": {"mean": table[f"tau_gradient{suffix}"], "std": table.get(f"tau_gradient{suffix}_std"),
                                  "fraction_significant": table[f"tau_gradient{suffix}_sig"]}}
        if encoder == "lstm":
            block["tau_loo"] = {"mean": table["tau_loo"], "std": table["tau_loo_std"],
                                "fraction_significant": table["tau_loo_sig"]}
    where = f"J&W 2019 Table 2, {dataset}, {PUBLISHED_ENCODERS[encoder]} + additive attention"
    if results.get("data"):  # generated data (bAbI): J&W's values are those of the released data
        where += " (on J&W's released data, not this data)"
    return block, where


def strip_arrays(summary: dict) -> dict:
    """The summary without its per-instance arrays (for results.json)."""
    return {k: (strip_arrays(v) if isinstance(v, dict) else v) for k, v in summary.items()
            if not isinstance(v, np.ndarray)}
