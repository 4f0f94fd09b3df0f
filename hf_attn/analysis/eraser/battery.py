"""The ERASER table: ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020,
§4) of every per-token importance measure of one model on one split — attention, gradient,
leave-one-out (J&W), integrated gradients (Sundararajan et al. 2017) and a random floor — plus the
Kendall τ between the measures; ``hf-attn eraser DIR --output-dir OUT`` writes results.json,
eraser.md and eraser.png.

The methods themselves are :mod:`hf_attn.methods.eraser` and
:mod:`hf_attn.methods.integrated_gradients` (their names stay importable from here).

Shapes: N instances, T tokens (right-padded), K fraction bins.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import torch

from hf_attn.core.arguments import check_count, finite_float, positive_int
from hf_attn.core.batching import in_row_chunks, length_batches
from hf_attn.core.io import save_figure_atomic, write_text_atomic
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
    from hf_attn.analysis.jw.common import JWSettings  # the J&W battery's gradient chunk size

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
    """Kendall τ summaries (:func:`hf_attn.analysis.jw.summary.correlation_summary`, per predicted
    class) of every pair of the measures in ``ragged`` {name: per-instance importance arrays}, in its
    order, as ``{"a~b": …}``; signed and absolute IG are not compared with each other."""
    from hf_attn.analysis.jw.summary import correlation_summary, jsonable, strip_arrays

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


def run_eraser(model_dir: str, output_dir: str, split: str = "test",
               measures: Sequence[str] | None = None, fractions: Sequence[float] = DEFAULT_FRACTIONS,
               *, ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0, token_budget: int = 16384,
               max_instances: int | None = None, progress: bool = True, **transformer_options) -> dict:
    """ERASER table of a model folder written by ``hf-attn train`` on ``split``: writes
    ``OUT/results.json`` (atomic), ``OUT/eraser.md`` and ``OUT/eraser.png``; returns the results.
    A finished ``OUT/results.json`` with the same parameters is returned as is. ``measures`` None:
    every measure of the model kind.

    A BERT-family classifier (a folder with a BERT-family ``config.json``, trained here or not, or a
    Hub id) goes to :func:`hf_attn.analysis.eraser.transformer.run_transformer_eraser`, which also
    takes ``transformer_options`` (``dataset``, ``text_column``, ``label_column``, ``layer``,
    ``heads``)."""
    import json

    from hf_attn.analysis.jw.transformer import is_transformer_model_dir

    check_count("max_instances (--max-instances)", max_instances)
    check_count("ig_steps (--ig-steps)", ig_steps, allow_none=False)
    check_count("token_budget (--token-budget)", token_budget, allow_none=False)
    if is_transformer_model_dir(model_dir):  # any transformers classifier, through its adapter
        from hf_attn.analysis.eraser.transformer import run_transformer_eraser

        return run_transformer_eraser(model_dir, output_dir, split, measures, fractions, ig_steps=ig_steps,
                                      ig_baseline=ig_baseline, seed=seed, token_budget=token_budget,
                                      max_instances=max_instances, progress=progress, **transformer_options)
    given = {k: v for k, v in transformer_options.items() if v is not None and k in ("dataset", "text_column",
                                                                                   "label_column")}
    if given:
        raise ValueError(f"{model_dir}: --{next(iter(given)).replace('_', '-')} is for BERT-family classifiers; "
                         "an hf_attn model is analysed on the dataset of its run.json")
    measures = IMPORTANCE_MEASURES if measures is None else measures

    from hf_attn.analysis.jw.battery import load_model_and_split
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic

    path = os.path.join(output_dir, "results.json")
    params = {"split": split, "measures": list(measures), "fractions": list(fractions), "ig_steps": ig_steps,
              "ig_baseline": ig_baseline, "seed": seed, "max_instances": max_instances}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == params:
            return previous
    model, tokenizer, texts, labels, label_names, dataset = load_model_and_split(model_dir, split)
    if max_instances is not None:
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
    from hf_attn.analysis.eraser.transformer import TRANSFORMER_MEASURES

    p.add_argument("model_dir", help="an hf_attn model folder, or a BERT-family classifier (folder or Hub id)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--measures", nargs="+", default=None,
                   choices=list(dict.fromkeys([*IMPORTANCE_MEASURES, *TRANSFORMER_MEASURES])),
                   help="default: every measure of the model kind (BERT-family models add rollout)")
    p.add_argument("--fractions", nargs="+", type=finite_float(0, strictly_above=True), default=list(DEFAULT_FRACTIONS))
    p.add_argument("--ig-steps", type=positive_int, default=50)
    p.add_argument("--ig-baseline", choices=["zero", "pad"], default="zero")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--token-budget", type=positive_int, default=16384)
    p.add_argument("--max-instances", type=positive_int, default=None, help="only the first N instances")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --output-dir holds (another analysis, or this one with other settings)")
    g = p.add_argument_group("transformers classifiers")
    g.add_argument("--dataset", default=None,
                   help="the data to analyse for a model without run.json (trained elsewhere, a Hub id): sst, "
                        "a CSV/JSON(L) file (analysed whole) or folder, or a Hub dataset id")
    g.add_argument("--text-column", default=None, help="the text column of --dataset (default: text)")
    g.add_argument("--label-column", default=None, help="the label column of --dataset (default: label)")
    g.add_argument("--layer", type=int, default=-1, help="the layer whose [CLS] attention is explained (-1: last)")
    g.add_argument("--heads", default="mean", help="'mean' (average the heads) or one head's index")
    g.add_argument("--device", default="auto",
                   help="auto | cpu | cuda | cuda:N | mps (the papers' models run on the CPU)")
    g.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="forward precision (the papers' models run in float32)")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    from hf_attn.analysis.folder import claimed_output_folder
    from hf_attn.core.io import exclusive_output_folder

    heads = args.heads.strip().lower()
    if heads != "mean" and not heads.isdigit():
        raise ValueError(f"--heads must be 'mean' or a head index, got {args.heads!r}")
    from hf_attn.analysis.jw.transformer import is_transformer_model_dir

    options = {"dataset": args.dataset, "text_column": args.text_column, "label_column": args.label_column}
    if is_transformer_model_dir(args.model_dir):
        options |= {"layer": args.layer, "heads": heads, "device": args.device, "precision": args.precision}
    else:
        from hf_attn.analysis.jw.battery import check_papers_model_device

        check_papers_model_device(args.device, args.precision)
    settings = {"split": args.split, "measures": args.measures, "fractions": args.fractions,
                "ig_steps": args.ig_steps, "ig_baseline": args.ig_baseline, "seed": args.seed,
                "token_budget": args.token_budget, "max_instances": args.max_instances, **options}
    with exclusive_output_folder(args.output_dir), \
            claimed_output_folder(args.output_dir, "eraser", args.model_dir, settings, args.overwrite):
        run_eraser(args.model_dir, args.output_dir, args.split, args.measures, args.fractions,
                   ig_steps=args.ig_steps, ig_baseline=args.ig_baseline, seed=args.seed,
                   token_budget=args.token_budget, max_instances=args.max_instances, progress=not args.quiet,
                   **options)
    return 0


__all__ = ["DEFAULT_FRACTIONS", "DEFAULT_IG_TOKEN_BUDGET", "DEFAULT_TOKEN_BUDGET", "EraserResult",
           "IntegratedGradientsResult", "aopc",
           "batched_probabilities", "eraser_scores", "eraser_scores_slow", "erasure_variants",
           "integrated_gradients", "integrated_gradients_importance", "length_batches",
           "rank_tokens", "summarize_eraser", "tokens_per_fraction", "IMPORTANCE_MEASURES",
           "importance_scores", "eraser_table", "format_eraser_table", "run_eraser"]
