"""The ERASER table (DeYoung et al. 2020, §4): comprehensiveness / sufficiency / AOPC of every
per-token importance measure of one model on one split, plus the Kendall τ between the measures,
for any classifier the engine accepts — the papers' BiLSTM/CNN/Average models and transformers —
through its adapter (:mod:`hf_attn.adapters`); ``hf-attn eraser DIR --output-dir OUT``
(:mod:`hf_attn.runs.eraser`) writes results.json, eraser.md and eraser.png.

The measures (:data:`MEASURES`), each a method of :mod:`hf_attn.methods` over the adapter (an adapter
over the papers' models takes each method's exact model-level shortcut):

- ``attention``: the explained attention row (:class:`hf_attn.adapters.AttentionSpec`: the papers'
  models' α; for a transformer by default the last layer's row its head reads, mean over heads;
  Jain & Wallace 2019 §2);
- ``rollout``: that row of attention rollout (Abnar & Zuidema 2020, §3): models with several
  attention layers only (with one, rollout is α itself);
- ``gradient``: |Σ_d ∂ŷ_c/∂e_t,d · e_t,d| on the token embeddings with the explained attention
  detached (J&W Alg. 1; :func:`hf_attn.methods.gradient.attention_fixed_gradient`);
- ``loo``: LOO-TVD, TVD(ŷ(x₋t), ŷ(x)) with token t deleted (J&W §4.1;
  :func:`hf_attn.methods.leave_one_out.deletion_importance`; not the faithfulness table's LOO-drop,
  :mod:`hf_attn.core.measure_names`);
- ``ig`` / ``ig_abs``: integrated gradients (Sundararajan et al. 2017, "Axiomatic Attribution for
  Deep Networks", Eq. 1) of ŷ_c on the units' token embeddings, signed / absolute
  (:func:`integrated_gradients_units`);
- ``random``: seeded uniform scores (the floor).

What is ranked and removed is :mod:`hf_attn.batteries.eraser.units` (the text's tokens, never the
tokenizer's added specials; removal deletes, then re-frames). **Integrated gradients**: only the
units' word embeddings move along the path; the specials' embeddings and the position and
token-type embeddings (added inside the model, after ``inputs_embeds``) stay: x' = the same text with
each unit's embedding replaced by the baseline, zero (``"zero"``) or the ``[PAD]`` embedding
(``"pad"``). The path integral is a Riemann sum over ``steps`` intervals (trapezoid; the nodes of
:mod:`hf_attn.methods.integrated_gradients`), all path points of a group of instances in one
forward and backward.

Shapes: N instances, T tokens (right-padded), K fraction bins.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np
import torch

from hf_attn.batteries.eraser.shards import CORRELATED, DEFAULT_SHARD_INSTANCES, eraser_shards, merge_shards
from hf_attn.batteries.eraser.units import (DEFAULT_GRADIENT_TOKEN_BUDGET, DEFAULT_TOKEN_BUDGET, encode,
                                            framed_eraser_scores)
from hf_attn.core.batching import length_batches
from hf_attn.core.io import save_figure_atomic
from hf_attn.core.measure_names import LOO_TVD, LOO_TVD_DEFINITION
from hf_attn.methods.eraser import (DEFAULT_FRACTIONS, EraserResult, aopc, batched_probabilities, eraser_scores,
                                    eraser_scores_slow, erasure_variants, rank_tokens, summarize_eraser,
                                    tokens_per_fraction)
from hf_attn.methods.ig_baselines import check_baseline
from hf_attn.methods.one_token import reasons_count
from hf_attn.methods.integrated_gradients import (DEFAULT_IG_TOKEN_BUDGET, IntegratedGradientsResult,
                                                  integrated_gradients, integrated_gradients_importance)

MEASURES = ("attention", "rollout", "gradient", "loo", "ig", "ig_abs", "random")
MEASURE_DESCRIPTIONS = {
    "attention": "the explained attention row (J&W §2; for transformers the layer and heads of attention_spec)",
    "rollout": "the explained row of attention rollout (Abnar & Zuidema 2020)",
    "gradient": "|∇ŷ_c · e_t| on the token embeddings, explained attention detached (J&W Alg. 1)",
    "loo": "LOO-TVD: leave-one-out TVD(ŷ(x₋t), ŷ(x)), one token deleted (J&W §4.1, Alg. 1)",
    "ig": "integrated gradients on the token embeddings, signed (Sundararajan et al. 2017; toward c ranks first)",
    "ig_abs": "|integrated gradients|",
    "random": "uniform random scores (the floor)",
}
# the printed name of a measure where its key alone could be read as another measure
MEASURE_LABELS = {"loo": f"loo ({LOO_TVD})"}


def measures_for(adapter) -> tuple[str, ...]:
    """The measures that apply to the adapter's model: every one of :data:`MEASURES`, rollout only
    for a model with several attention layers."""
    return tuple(m for m in MEASURES if m != "rollout" or adapter.num_layers > 1)


def checked_measures(adapter, measures: Sequence[str] | None) -> tuple[str, ...]:
    """``measures`` (None: :func:`measures_for` the adapter), each one that applies to the model, else a
    ValueError naming it and why."""
    if measures is None:
        return measures_for(adapter)
    unknown = sorted(set(measures) - set(MEASURES))
    if unknown:
        raise ValueError(f"unknown importance measure(s) {unknown}; choose from {list(MEASURES)}")
    if "rollout" in measures and adapter.num_layers == 1:
        raise ValueError("rollout: this model has one attention layer, whose rollout is its attention itself; "
                         f"choose from {list(measures_for(adapter))}")
    return tuple(measures)


def encode_for(adapter, texts, max_length: int | None = None):
    """Texts → ``(input_ids (N, T), attention_mask (N, T), units (N, T) bool)`` right-padded for
    :func:`eraser_table`, cut to ``max_length`` tokens (default and at most the adapter's limit) keeping
    the end the model's head reads."""
    from hf_attn.batteries.jw.common import TRANSFORMER_MAX_LENGTH

    limits = [v for v in (max_length, adapter.max_length) if v is not None]
    keep = "end" if getattr(adapter, "left_padding", False) else "start"
    return encode(adapter.tokenizer, texts, min(limits) if limits else TRANSFORMER_MAX_LENGTH, keep=keep)


# ----------------------------------------------------------------------------------------------
# integrated gradients on the token embeddings (the units' only)


_RULES = {"trapezoid": "trapezoid", "right": "riemann-right"}  # this command's rule names → the method's


def _adapter_batch(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor):
    """Right-padded rows → the adapter's :class:`~hf_attn.adapters.Batch` (its padding side), with
    ``content`` = the units."""
    lengths = attention_mask.sum(1).tolist()
    rows = [input_ids[i, :n].tolist() for i, n in enumerate(lengths)]
    words = [[j if u else None for j, u in enumerate(units[i, :n].tolist())] for i, n in enumerate(lengths)]
    return adapter.from_token_lists(rows, word_ids=words)


def _right_aligned(values: torch.Tensor, batch, width: int) -> torch.Tensor:
    """``(B, T')`` values on the adapter's positions → ``(B, width)`` on the right-padded rows."""
    out = torch.zeros((len(batch), width), dtype=torch.float64)
    real = batch.attention_mask.bool()
    for i in range(len(batch)):
        row = values[i][real[i]].detach().double().cpu()
        out[i, :len(row)] = row
    return out


def integrated_gradients_units(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                     units: torch.Tensor, *, steps: int = 50, baseline: str = "zero",
                                     rule: str = "trapezoid", target: str = "probability",
                                     token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET,
                                     progress: bool = False) -> IntegratedGradientsResult:
    """Integrated gradients (Sundararajan et al. 2017, Eq. 1) of a classifier (through its adapter)
    w.r.t. the token embeddings of the ``units`` (right-padded rows ``(B, T)``):

    IG_t = Σ_d (e_t − b)_d · Σ_j w_j ∂f(x' + a_j (x − x'))/∂e_t,d,

    x the token embeddings of the row, x' the same with every unit's embedding replaced by the
    baseline b (``"zero"``: 0; ``"pad"``: the pad token's embedding; ``"mean"``: the mean input
    embedding, :mod:`hf_attn.methods.ig_baselines`); special tokens and pads keep
    their embeddings, and position / token-type embeddings are added by the model as usual. f =
    ``target`` of the class c predicted for x (``"probability"`` ŷ_c, as ERASER ranks for;
    ``"logit"``), a_j, w_j the ``rule``'s nodes (``_path_points`` of
    :mod:`hf_attn.methods.integrated_gradients`). The model's own function (no attention detached),
    the setting in which completeness holds: Σ_t IG_t = f(x) − f(x') up to quadrature error,
    returned as ``completeness_gap``.

    Batched: instances in length-sorted groups of at most ``token_budget`` padded tokens counting
    every path point, all path points of a group in one forward + backward (split only if one
    instance's points exceed the budget), on the adapter's device. Returns
    :class:`hf_attn.methods.integrated_gradients.IntegratedGradientsResult` (``(B, T)`` signed
    attributions on the right-padded rows, 0 outside the units)."""
    check_baseline(baseline)  # the one list of baselines (zero, pad, mean), as the method it calls
    if target not in ("probability", "logit"):
        raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution

    lengths = attention_mask.sum(1).cpu().numpy()
    attributions = torch.zeros(input_ids.shape, dtype=torch.float64)
    f_input = torch.empty(len(lengths), dtype=torch.float64)
    f_base = torch.empty(len(lengths), dtype=torch.float64)
    chosen = torch.empty(len(lengths), dtype=torch.long)
    groups = length_batches(lengths, token_budget, rows_per_item=steps + 1)
    if progress:
        from tqdm.auto import tqdm
        groups = tqdm(groups, desc="integrated gradients", unit="batch")
    for group in groups:
        index = torch.from_numpy(group)
        batch = _adapter_batch(adapter, input_ids[index], attention_mask[index], units[index])
        result = integrated_gradients_attribution(adapter, batch, steps=steps, rule=_RULES[rule], target=target,
                                                  baseline=baseline, token_budget=token_budget)
        attributions[index] = _right_aligned(result.attributions.double(), batch, input_ids.shape[1])
        f_input[index], f_base[index] = result.target_input.double(), result.target_baseline.double()
        chosen[index] = result.target_class
    gap = attributions.sum(1) - (f_input - f_base)
    return IntegratedGradientsResult(attributions, gap, f_input, f_base, chosen)


# ----------------------------------------------------------------------------------------------
# every importance measure, and the table


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
                       seconds: dict, erase, undefined: dict | None = None, emptied=None
                       ) -> tuple[dict, torch.Tensor | None]:
    """``erase(scores[name])`` (an :class:`hf_attn.methods.eraser.EraserResult`) summarised by
    :func:`summarize_defined` for each measure, with its description; the time of each goes to
    ``seconds["eraser_<name>"]``. Returns ``(table, predicted class of the last result)``.

    Undefined rows never fail the table (:mod:`hf_attn.methods.one_token`): ``undefined[name]``, per
    instance why the measure's scores are undefined there (None: defined), leaves that instance out of
    both of its columns; ``emptied``, ``(mask (N, K), reason)``, marks the bins that remove every token
    of a text whose model has no empty input, leaving its comprehensiveness out. Both are counted
    with their reasons."""
    table, predicted = {}, None
    for name in measures:
        importance = scores[name]
        why = list((undefined or {}).get(name) or [None] * len(importance))
        if any(why):  # the ranking of the other rows is unaffected; these rows are masked out below
            importance = torch.nan_to_num(importance, nan=0.0, posinf=0.0, neginf=0.0)
        t0 = time.perf_counter()
        result = erase(importance)
        seconds[f"eraser_{name}"] = time.perf_counter() - t0
        predicted = result.predicted_class
        table[name] = measure_column(name, result.comprehensiveness, result.sufficiency, why, emptied, fractions,
                                     descriptions[name])
    return table, predicted


def measure_column(name: str, comprehensiveness, sufficiency, why: Sequence, emptied, fractions: Sequence[float],
                   description: str) -> dict:
    """One measure's row of the table (:func:`summarize_defined` + its description) from its per-instance
    comprehensiveness / sufficiency ``(N, K)``: the instances ``why`` names (undefined scores) are left
    out of both columns, the ``emptied`` bins (``(mask (N, K), reason)`` or None) out of comprehensiveness."""
    comp, suff = np.array(comprehensiveness, dtype=float), np.array(sufficiency, dtype=float)
    reasons = [None if r is None else f"{name}: {r}" for r in why]
    comp_reasons, suff_reasons = list(reasons), list(reasons)
    for i, reason in enumerate(reasons):
        if reason is not None:
            comp[i], suff[i] = np.nan, np.nan
    if emptied is not None:
        mask, reason = emptied
        mask = np.asarray(mask, dtype=bool)
        comp[mask] = np.nan
        for i in np.flatnonzero(mask.any(1)):
            comp_reasons[i] = comp_reasons[i] or reason
    return summarize_defined(comp, suff, fractions, {"comprehensiveness": comp_reasons,
                                                     "sufficiency": suff_reasons}) | {"description": description}


def summarize_defined(comprehensiveness, sufficiency, fractions: Sequence[float], reasons: dict | None = None) -> dict:
    """:func:`summarize_eraser` over the instances where each column is defined (finite in every bin):
    the same keys (a column defined nowhere has ``None`` for its AOPC, standard error and bins) with
    ``num_instances`` every instance; when an instance is left out, also ``<column>_n`` (the
    instances each column's aggregates cover), ``undefined`` and ``undefined_reasons`` (per column
    the instances left out and why; ``reasons``: column → per instance reason or None)."""
    comp = np.asarray(comprehensiveness, dtype=float)
    suff = np.asarray(sufficiency, dtype=float)
    out: dict = {"fractions": [float(f) for f in fractions]}
    undefined, why = {}, {}
    for name, values in (("comprehensiveness", comp), ("sufficiency", suff)):
        defined = np.isfinite(values).all(1) if values.ndim == 2 else np.zeros(len(values), bool)
        if defined.any():
            part = summarize_eraser(values[defined], values[defined], fractions)
            out |= {f"{name}_aopc": part[f"{name}_aopc"], f"{name}_aopc_stderr": part[f"{name}_aopc_stderr"],
                    name: part[name]}
        else:
            out |= {f"{name}_aopc": None, f"{name}_aopc_stderr": None, name: [None] * len(out["fractions"])}
        out[f"{name}_n"] = int(defined.sum())
        undefined[name] = int((~defined).sum())
        given = (reasons or {}).get(name) or [None] * len(values)
        why[name] = reasons_count((given[i] or "the column is NaN or inf for this instance")
                                  for i in np.flatnonzero(~defined))
    out["num_instances"] = int(len(comp))
    if any(undefined.values()):  # only then: a table with every instance defined keeps its keys
        out |= {"comprehensiveness_n": out.pop("comprehensiveness_n"), "sufficiency_n": out.pop("sufficiency_n"),
                "undefined": undefined, "undefined_reasons": why}
    else:
        out.pop("comprehensiveness_n"), out.pop("sufficiency_n")
    return out


def eraser_parameters(fractions: Sequence[float], ig_steps: int, ig_baseline: str, seed: int) -> dict:
    """The ``parameters`` of every ERASER table: the request and the rules it was computed by."""
    return {"fractions": list(fractions), "ig_steps": ig_steps, "ig_baseline": ig_baseline,
            "ig_rule": "trapezoid", "ig_target": "probability", "seed": seed,
            "k_rounding": "ceil(fraction * n), clipped to [1, n]",
            "ties": "earlier position first", "aopc": "mean over the bins"}




def importance_scores(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                      measures: Sequence[str] | None = None, *, ig_steps: int = 50, ig_baseline: str = "zero",
                      seed: int = 0, token_budget: int = DEFAULT_TOKEN_BUDGET,
                      gradient_token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET,
                      progress: bool = False) -> tuple[dict, dict]:
    """``({measure: (N, T) float64}, {measure: seconds})``: the per-position importances of
    ``measures`` (default :func:`measures_for` the adapter) on the tokenized right-padded rows, computed
    through ``adapter`` by the methods of :mod:`hf_attn.methods`; only the ``units`` are ranked
    later. Each measure runs over length-sorted batches within a token budget (forward-only
    measures ``token_budget``, gradient and IG ``gradient_token_budget``); IG also stores its
    completeness gaps (``"_ig_completeness_gap"``, ``(N,)``)."""
    from hf_attn.methods.gradient import attention_fixed_gradient
    from hf_attn.methods.leave_one_out import deletion_importance

    measures = checked_measures(adapter, measures)
    lengths = attention_mask.sum(1).numpy()
    out: dict[str, torch.Tensor] = {}
    seconds: dict[str, float] = {}

    def per_batch(names, fn, budget):
        start = time.perf_counter()
        results = {n: torch.zeros(input_ids.shape, dtype=torch.float64) for n in names}
        for rows in length_batches(lengths, budget):
            index = torch.from_numpy(rows)
            batch = _adapter_batch(adapter, input_ids[index], attention_mask[index], units[index])
            for n, v in zip(names, fn(batch)):
                results[n][index] = _right_aligned(v, batch, input_ids.shape[1])
        seconds[names[0]] = time.perf_counter() - start
        return results

    def attention_and_rollout(batch):
        forward = adapter.forward(batch)
        return forward.attention, forward.rollout

    if "attention" in measures or "rollout" in measures:
        both = per_batch(["attention", "rollout"], attention_and_rollout, token_budget)
        out |= {n: v for n, v in both.items() if n in measures}
    if "gradient" in measures:
        out |= per_batch(["gradient"], lambda b: [attention_fixed_gradient(adapter, b)], gradient_token_budget)
    if "loo" in measures:
        out |= per_batch(["loo"], lambda b: [deletion_importance(adapter, b, token_budget=token_budget)],
                         max(1, token_budget // 8))
    if "ig" in measures or "ig_abs" in measures:
        start = time.perf_counter()
        ig = integrated_gradients_units(adapter, input_ids, attention_mask, units, steps=ig_steps,
                                        baseline=ig_baseline, token_budget=gradient_token_budget, progress=progress)
        seconds["ig"] = time.perf_counter() - start
        out |= ig_scores(ig, measures)
        out["_ig_difference"] = ig.target_input - ig.target_baseline
    if "random" in measures:
        out["random"] = torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(seed),
                                   dtype=torch.float64)
    return out, seconds


def _undefined_rows(adapter, scores: dict, measures, attention_mask: torch.Tensor, units: torch.Tensor,
                    fractions) -> tuple[dict, tuple | None]:
    """Per measure, per instance why its importance is undefined (only measures with such rows), and
    ``(mask (N, K), reason)`` of the comprehensiveness bins that remove every unit of a text without
    specials on a model with no empty input (None when there are none): :mod:`hf_attn.methods.one_token`."""
    from hf_attn.methods.one_token import empty_input_refusal, undefined_rows

    real = attention_mask.bool()
    contents = [units[i][real[i]].numpy() for i in range(len(units))]
    undefined = {}
    for name in measures:
        rows = [scores[name][i][real[i]].numpy() for i in range(len(units))]
        why = undefined_rows(adapter, name, rows, contents)
        if any(why):
            undefined[name] = why
    refusal = empty_input_refusal(adapter)
    if refusal is None:
        return undefined, None
    sizes = units.sum(1).numpy()
    framed = (real & ~units).any(1).numpy()
    mask = (tokens_per_fraction(sizes, fractions) == sizes[:, None]) & ~framed[:, None]
    return undefined, ((mask, refusal) if mask.any() else None)


def shard_rows(adapter, ids, mask, units, indices: np.ndarray, measures: Sequence[str], fractions, random_rows,
           *, ig_steps: int, ig_baseline: str, token_budget: int, gradient_token_budget: int) -> dict:
    """One shard's per-instance results (the fields :func:`hf_attn.batteries.eraser.shards.merge_shards`
    reads), its rows cut to the shard's width."""
    index = torch.from_numpy(np.asarray(indices, dtype=np.int64))
    width = int(mask[index].sum(1).max())
    i, m, u = ids[index, :width], mask[index, :width], units[index, :width]
    scores, seconds = importance_scores(adapter, i, m, u, [n for n in measures if n != "random"], ig_steps=ig_steps,
                                        ig_baseline=ig_baseline, token_budget=token_budget,
                                        gradient_token_budget=gradient_token_budget)
    if "random" in measures:
        scores["random"] = random_rows[index, :width]
    undefined, emptied = _undefined_rows(adapter, scores, measures, m, u, fractions)
    out: dict = {}
    predicted = None
    for name in measures:
        importance = scores[name]
        if name in undefined:
            importance = torch.nan_to_num(importance, nan=0.0, posinf=0.0, neginf=0.0)
            scores[name] = importance
        t0 = time.perf_counter()
        result = framed_eraser_scores(adapter.model, i, m, u, importance, fractions, token_budget=4 * token_budget)
        seconds[f"eraser_{name}"] = time.perf_counter() - t0
        out[f"comprehensiveness__{name}"] = np.asarray(result.comprehensiveness, dtype=float)
        out[f"sufficiency__{name}"] = np.asarray(result.sufficiency, dtype=float)
        predicted = result.predicted_class
    out["predicted"] = np.asarray(predicted)
    keep = u.numpy()
    for name in (n for n in CORRELATED if n in scores):  # the rows the Kendall τ compares, over the units
        out[f"rows__{name}"] = [row[k] for row, k in zip(scores[name].numpy(), keep)]
    for name in ("_ig_completeness_gap", "_ig_difference"):
        if name in scores:
            out[name.strip("_")] = scores[name].double().numpy()
    info = {"undefined": undefined, "seconds": seconds,
            "emptied": None if emptied is None else {"mask": np.asarray(emptied[0], bool).tolist(), "reason": emptied[1]}}
    return out | {"info": np.asarray(json.dumps(info))}


def eraser_table(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                 measures: Sequence[str] | None = None, fractions: Sequence[float] = DEFAULT_FRACTIONS, *,
                 ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0, token_budget: int = DEFAULT_TOKEN_BUDGET,
                 gradient_token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET, progress: bool = False,
                 shard_instances: int | None = None, cache_dir: str | None = None, key: str | None = None,
                 accelerator="auto") -> dict:
    """ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020 §4) of each importance
    measure (default :func:`measures_for` the adapter) for any classifier the engine accepts, through
    its adapter, on tokenized right-padded rows (:func:`hf_attn.batteries.eraser.units.encode`, or
    :func:`encode_for`): the question the three papers left open — is attention a worse explanation
    than gradients by a measure other than rank correlation?

    The per-instance work runs shard by shard (:mod:`hf_attn.batteries.eraser.shards`: ``shard_instances``
    instances each, default 256; under ``accelerate launch`` split between the processes and gathered
    on every one; with ``cache_dir`` and ``key`` each finished shard is kept so a rerun resumes), the
    summaries once over all instances: the same values for any number of processes.

    Returns a JSON-able dict: ``measures`` {name: :func:`summarize_eraser` output + description},
    ``kendall_tau`` between the measures, ``parameters`` (the request and the rules), ``attention_spec``,
    ``seconds`` per step, ``ig_completeness`` (mean / max |Σ IG − (f(x) − f(x'))|), ``processes`` and
    ``sharding`` (the shards each process computed)."""
    start = time.perf_counter()
    measures = checked_measures(adapter, measures)
    model, spec = adapter.model, adapter.spec
    shards, results, sharding = eraser_shards(
        shard_rows, adapter, input_ids, attention_mask, units, measures, fractions, ig_steps=ig_steps, ig_baseline=ig_baseline,
        seed=seed, token_budget=token_budget, gradient_token_budget=gradient_token_budget,
        shard_instances=DEFAULT_SHARD_INSTANCES if shard_instances is None else shard_instances,
        cache_dir=cache_dir, key=key, accelerator=accelerator, progress=progress)
    merged = merge_shards(shards, results, measures, len(input_ids))
    seconds = merged["seconds"]
    table = {}
    for name in measures:
        why = merged["undefined"].get(name) or [None] * len(input_ids)
        table[name] = measure_column(name, merged["comprehensiveness"][name], merged["sufficiency"][name], why,
                                     merged["emptied"], fractions, MEASURE_DESCRIPTIONS[name])
    out = {"measures": table,
           "kendall_tau": pairwise_correlations(merged["rows"], merged["predicted"], model.config.num_labels),
           "parameters": {**eraser_parameters(fractions, ig_steps, ig_baseline, seed),
                          "units": "tokens of the text (word pieces for transformers; tokenizer-added "
                                   "specials excluded)",
                          "removal": "units deleted, the rest re-framed by the same specials ([CLS] kept [SEP]); "
                                     "nothing left: the specials alone, or one [PAD] for a model without specials",
                          "ig_path": "the units' token embeddings only; specials, positions, token types fixed"},
           "attention_spec": {"layer": spec.layer, "heads": spec.heads, "query": adapter.query_rule,
                              "description": spec.describe()},
           "seconds": seconds | {"total": time.perf_counter() - start},
           "processes": sharding["processes"], "sharding": sharding}
    if "ig_completeness_gap" in merged:
        gap = torch.from_numpy(merged["ig_completeness_gap"]).abs()
        difference = torch.from_numpy(merged["ig_difference"]).abs()
        out["ig_completeness"] = {"mean_abs_gap": float(gap.mean()), "max_abs_gap": float(gap.max()),
                                  "mean_abs_difference": float(difference.mean()),
                                  "note": "|Σ_t IG_t − (ŷ_c(x) − ŷ_c(x'))| per instance; difference = "
                                          "|ŷ_c(x) − ŷ_c(x')|"}
    return out


def format_eraser_table(results: dict) -> str:
    """Markdown table of :func:`eraser_table` results (AOPC ± standard error, per-bin values); the
    instances a column leaves out (undefined) are listed under it with their reasons."""
    fractions = results["parameters"]["fractions"]
    bins = " / ".join(f"{round(100 * f)}%" for f in fractions)
    lines = [f"| importance | comprehensiveness AOPC ↑ | sufficiency AOPC ↓ | comprehensiveness {bins} | sufficiency {bins} |",
             "|---|---|---|---|---|"]

    def number(value) -> str:
        return "—" if value is None else f"{value:.3f}"

    notes = []
    for name, row in results["measures"].items():
        lines.append(f"| {MEASURE_LABELS.get(name, name)} | {number(row['comprehensiveness_aopc'])} ± "
                     f"{number(row['comprehensiveness_aopc_stderr'])} "
                     f"| {number(row['sufficiency_aopc'])} ± {number(row['sufficiency_aopc_stderr'])} "
                     f"| {' / '.join(number(v) for v in row['comprehensiveness'])} "
                     f"| {' / '.join(number(v) for v in row['sufficiency'])} |")
        for column, reasons in (row.get("undefined_reasons") or {}).items():
            notes += [f"- {MEASURE_LABELS.get(name, name)} {column}: {count} instance(s) undefined, left out: {reason}"
                      for reason, count in reasons.items()]
    if notes:
        lines += ["", "Undefined instances (left out of the column's AOPC and counted):", *notes]
    lines += ["", f"± is the standard error of the mean over the {results.get('num_instances', 'N')} instances "
              "(standard deviation / √N), not a standard deviation; AOPC = mean over the bins (DeYoung et al. "
              "2020, §4)."]
    if "loo" in results["measures"]:
        lines.append(f"{LOO_TVD_DEFINITION}.")
    return "\n".join(lines)


def write_eraser_figure(results: dict, path: str, title: str = "") -> str:
    """Comprehensiveness and sufficiency against the fraction of tokens, one line per measure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = [100 * f for f in results["parameters"]["fractions"]]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharex=True)
    for name, row in results["measures"].items():
        for ax, key in ((axes[0], "comprehensiveness"), (axes[1], "sufficiency")):
            ax.plot(fractions, [np.nan if v is None else v for v in row[key]], marker="o",
                    label=MEASURE_LABELS.get(name, name))
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
           "IntegratedGradientsResult", "MEASURES", "MEASURE_DESCRIPTIONS", "aopc", "batched_probabilities",
           "checked_measures", "encode_for", "eraser_scores", "eraser_scores_slow", "eraser_table",
           "erasure_variants", "format_eraser_table", "importance_scores", "integrated_gradients",
           "integrated_gradients_importance", "integrated_gradients_units", "length_batches", "measures_for",
           "rank_tokens", "summarize_defined", "summarize_eraser", "tokens_per_fraction", "write_eraser_figure"]
