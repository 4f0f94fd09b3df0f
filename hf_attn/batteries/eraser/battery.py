"""The ERASER table: ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020,
§4) of every per-token importance measure of one model on one split — attention, gradient,
leave-one-out (J&W), integrated gradients (Sundararajan et al. 2017) and a random floor — plus the
Kendall τ between the measures; ``hf-attn eraser DIR --output-dir OUT`` (:mod:`hf_attn.runs.eraser`)
writes results.json, eraser.md and eraser.png.

The methods themselves are :mod:`hf_attn.methods.eraser` and
:mod:`hf_attn.methods.integrated_gradients` (their names stay importable from here).

Shapes: N instances, T tokens (right-padded), K fraction bins.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from hf_attn.core.batching import in_row_chunks, length_batches
from hf_attn.core.io import save_figure_atomic
from hf_attn.methods.eraser import (DEFAULT_FRACTIONS, DEFAULT_TOKEN_BUDGET, EraserResult, aopc,
                                    batched_probabilities, eraser_scores, eraser_scores_slow,
                                    erasure_variants, rank_tokens, summarize_eraser, tokens_per_fraction)
from hf_attn.methods.gradient import gradient_importance
from hf_attn.methods.inputs import as_long_matrix, check_token_inputs
from hf_attn.methods.integrated_gradients import (DEFAULT_IG_TOKEN_BUDGET, IntegratedGradientsResult,
                                                  integrated_gradients, integrated_gradients_importance)
from hf_attn.methods.leave_one_out import leave_one_out


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

    Gradient and leave-one-out are the J&W battery's own methods
    (:func:`hf_attn.methods.gradient.gradient_importance`, :func:`hf_attn.methods.leave_one_out.leave_one_out`),
    run over length-sorted batches. Single-token instances have no leave-one-out value (NaN):
    their one token gets 0 (any ranking of one token is the same). IG scores both ``ig`` and
    ``ig_abs`` from one run; ``random`` is seeded.
    """
    from hf_attn.batteries.jw.common import JWSettings  # the J&W battery's gradient chunk size

    unknown = sorted(set(measures) - set(IMPORTANCE_MEASURES))
    if unknown:
        raise ValueError(f"unknown importance measure(s) {unknown}; choose from {list(IMPORTANCE_MEASURES)}")
    ids, mask = check_token_inputs(input_ids, attention_mask)
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
        out["gradient"] = per_batch("gradient", lambda i, m: in_row_chunks(
            lambda ii, mm: gradient_importance(model, ii, mm), i, m, JWSettings().gradient_token_budget))
    if "loo" in measures:
        with torch.inference_mode():
            out["loo"] = torch.nan_to_num(per_batch("loo", lambda i, m: leave_one_out(
                model, i, m, token_budget=4 * token_budget)), nan=0.0)
    if "ig" in measures or "ig_abs" in measures:
        start = time.perf_counter()
        ig = integrated_gradients(model, ids, mask, steps=ig_steps, baseline=ig_baseline, progress=progress)
        seconds["ig"] = time.perf_counter() - start
        out |= ig_scores(ig, measures)
    if "random" in measures:
        out["random"] = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return out, seconds


def ig_scores(ig, measures: Sequence[str]) -> dict:
    """What an integrated-gradients result gives :func:`importance_scores`: the signed ``ig`` and
    ``|ig|`` attributions (those in ``measures``) and its completeness gap (``_ig_completeness_gap``)."""
    out = {}
    if "ig" in measures:
        out["ig"] = ig.attributions
    if "ig_abs" in measures:
        out["ig_abs"] = ig.attributions.abs()
    out["_ig_completeness_gap"] = ig.completeness_gap
    return out


def _importance_correlations(scores: dict, attention_mask, predicted, num_classes: int) -> dict:
    """J&W Table 2-style Kendall τ (per predicted class) between every pair of the importance
    measures, IG included: how the rankings ERASER scores relate to one another."""
    mask = as_long_matrix(attention_mask, "attention_mask").bool()
    lengths = mask.sum(1).tolist()
    names = [n for n in ("attention", "gradient", "loo", "ig_abs", "ig") if n in scores]
    return pairwise_correlations({n: [row[:k].numpy() for row, k in zip(scores[n], lengths)] for n in names},
                                 predicted, num_classes)


def pairwise_correlations(ragged: dict, predicted, num_classes: int) -> dict:
    """Kendall τ summaries (:func:`hf_attn.batteries.jw.summary.correlation_summary`, per predicted
    class) of every pair of the measures in ``ragged`` {name: per-instance importance arrays}, in its
    order, as ``{"a~b": …}``; signed and absolute IG are not compared with each other."""
    from hf_attn.batteries.jw.summary import correlation_summary, jsonable, strip_arrays

    names = list(ragged)
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if {a, b} == {"ig", "ig_abs"}:
                continue
            summary = strip_arrays(correlation_summary(ragged[a], ragged[b], predicted, num_classes))
            out[f"{a}~{b}"] = jsonable(summary)
    return out


def erase_each_measure(scores: dict, measures: Sequence[str], fractions: Sequence[float], descriptions: dict,
                       seconds: dict, erase) -> tuple[dict, torch.Tensor | None]:
    """``erase(scores[name])`` (an :class:`hf_attn.methods.eraser.EraserResult`) summarised by
    :func:`summarize_eraser` for each measure, with its description; the time of each goes to
    ``seconds["eraser_<name>"]``. Returns ``(table, predicted class of the last result)``."""
    table, predicted = {}, None
    for name in measures:
        t0 = time.perf_counter()
        result = erase(scores[name])
        seconds[f"eraser_{name}"] = time.perf_counter() - t0
        predicted = result.predicted_class
        table[name] = summarize_eraser(result.comprehensiveness, result.sufficiency, fractions) | {
            "description": descriptions[name]}
    return table, predicted


def eraser_parameters(fractions: Sequence[float], ig_steps: int, ig_baseline: str, seed: int) -> dict:
    """The ``parameters`` of every ERASER table: the request and the rules it was computed by."""
    return {"fractions": list(fractions), "ig_steps": ig_steps, "ig_baseline": ig_baseline,
            "ig_rule": "trapezoid", "ig_target": "probability", "seed": seed,
            "k_rounding": "ceil(fraction * n), clipped to [1, n]",
            "ties": "earlier position first", "aopc": "mean over the bins"}


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
    table, predicted = erase_each_measure(
        scores, measures, fractions, MEASURE_DESCRIPTIONS, seconds,
        lambda importance: eraser_scores(model, input_ids, attention_mask, importance, fractions,
                                         token_budget=4 * token_budget, progress=progress))
    out = {"measures": table,
           "kendall_tau": _importance_correlations(scores, attention_mask, predicted, model.config.num_labels),
           "parameters": eraser_parameters(fractions, ig_steps, ig_baseline, seed),
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


__all__ = ["DEFAULT_FRACTIONS", "DEFAULT_IG_TOKEN_BUDGET", "DEFAULT_TOKEN_BUDGET", "EraserResult",
           "IntegratedGradientsResult", "aopc",
           "batched_probabilities", "eraser_scores", "eraser_scores_slow", "erasure_variants",
           "integrated_gradients", "integrated_gradients_importance", "length_batches",
           "rank_tokens", "summarize_eraser", "tokens_per_fraction", "IMPORTANCE_MEASURES",
           "importance_scores", "eraser_table", "format_eraser_table"]
