"""Tutek & Šnajder battery on folders: ``hf-attn analyze DIR --battery ts --output-dir OUT``
(:func:`run_battery`: ``results.json``, ``per_instance.json``, ``token_probability.png``) and a whole
trained grid (``hf-attn ts-report GRID``: :func:`analyze_grid`, :func:`summarize_grid` — mean ± std
over seeds into ``summary.json``, ``tables.md`` and figures — and the model-consistent adversaries of
:func:`train_consistent_adversaries`). The computation itself is :mod:`hf_attn.batteries.ts`."""

from __future__ import annotations

import json
import logging
import math
import os
import time

import numpy as np

from hf_attn.batteries.ts.battery import (PUBLISHED_SST, SPLITS, VARIANT_ORDER, WORD_SET_METHODS, TSSettings, analyze_model,
                                          format_ts_summary, load_run, pick_example, plot_token_probabilities,
                                          token_probability_curve)
from hf_attn.core.settings_cli import add_settings_options, settings_from_namespace
from hf_attn.core.io import save_figure_atomic, write_text_atomic
from hf_attn.runs import Battery, register_battery

logger = logging.getLogger(__name__)


def run_battery(model_dir: str, output_dir: str, settings: TSSettings | None = None) -> dict:
    """``hf-attn analyze DIR --battery ts``: writes ``results.json``, ``per_instance.json`` and
    ``token_probability.png`` into ``output_dir``. ``settings``: :class:`TSSettings` (None: its
    defaults). The per-instance measures run batch by batch, each finished batch cached in
    ``OUT/cache`` until the results are written (a killed run resumes); under ``accelerate launch``
    the batches are split between the processes, the main process alone runs the MI and writes."""
    import hashlib
    import shutil
    from dataclasses import asdict, replace

    from hf_attn.batteries.jw.common import weights_checksum
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic
    from hf_attn.core.sharding import cache_key, is_main_process

    if settings is None:
        settings = TSSettings()
    elif not isinstance(settings, TSSettings):
        raise TypeError(f"settings must be TSSettings, got {type(settings).__name__}")
    settings.validate()
    split = settings.split
    model, tokenizer, task = load_run(model_dir, split)
    start = time.perf_counter()
    cache_dir = os.path.join(output_dir, "cache")
    texts = "\x00".join(task.splits[split]["text"]).encode()
    key = cache_key("ts", asdict(settings) | {"progress": None}, weights_checksum(model),
                    hashlib.sha256(texts).hexdigest())
    main = is_main_process()
    results = analyze_model(model, tokenizer, task, settings if main else replace(settings, mi=False),
                            cache_dir=cache_dir, key=key)
    if not main:  # `accelerate launch`: every process has the per-instance measures; one writes
        return {"battery": "ts", "main_process": False}
    per_instance = results.pop("per_instance")
    config = model.config
    results.update({
        "battery": "ts", "model_dir": os.path.abspath(model_dir), "dataset": task.name,
        "model": {"encoder": config.encoder, "attention": config.attention, "variant": config.variant,
                  "embedding_dim": config.embedding_dim, "hidden_size": config.hidden_size,
                  "tying_delta": config.tying_delta, "mlm_weight": config.mlm_weight},
        "seconds": round(time.perf_counter() - start, 2), "versions": environment_versions()})
    os.makedirs(output_dir, exist_ok=True)
    example_split = "validation" if "validation" in task.splits else split
    example = pick_example(task, example_split)
    text = task.splits[example_split]["text"][example]
    curve = token_probability_curve(model, tokenizer, text)
    name = f"{config.variant}-{config.attention}"
    plot_token_probabilities({name: curve}, os.path.join(output_dir, "token_probability.png"),
                             class_index=min(1, len(task.label_names) - 1),
                             class_name=task.label_names[min(1, len(task.label_names) - 1)])
    results["figures"] = ["token_probability.png"]
    results["example"] = {"split": example_split, "index": int(example), "text": text}
    write_json_atomic(os.path.join(output_dir, "per_instance.json"), per_instance)
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    shutil.rmtree(cache_dir, ignore_errors=True)  # finished: the batches are only needed to resume
    if settings.progress:
        print(format_ts_summary(results))
    return results


def _mean_std(values) -> dict:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1
            else 0.0, "n": len(values)}


def analyze_grid(grid_dir: str, output_dir: str, seed: int = 0, mi_attentions=("additive",),
                 mi_seeds=None, mi_variants=("base", "residual", "tying", "mlm"),
                 adversary: bool = True, adversary_limit: int | None = 500,
                 permutation_draws: int = 10, progress: bool = True) -> dict:
    """Run the ts battery on every finished run of a ``train-grid`` folder (skipping runs whose
    ``OUT/<cell>/seed<k>/results.json`` exists), then aggregate into ``OUT/summary.json``,
    ``OUT/tables.md`` and figures. MI is computed for ``mi_variants`` × ``mi_attentions`` ×
    ``mi_seeds`` (``None`` = all seeds) only: it is the slow part (T&Š Table 2 is additive only
    and has no concat column)."""
    from tqdm.auto import tqdm

    run_dirs = sorted(os.path.dirname(os.path.relpath(os.path.join(root, "metrics.json"), grid_dir))
                      for root, _, files in os.walk(grid_dir) if "metrics.json" in files)
    if not run_dirs:
        raise FileNotFoundError(f"no finished runs (metrics.json) under {grid_dir}")
    for relative in tqdm(run_dirs, desc="ts battery", unit="run", disable=not progress):
        out = os.path.join(output_dir, relative)
        if os.path.exists(os.path.join(out, "results.json")):
            continue
        with open(os.path.join(grid_dir, relative, "run.json"), encoding="utf-8") as f:
            trained_as = json.load(f)["settings"]
        want_mi = (trained_as["variant"] in mi_variants and trained_as["attention"] in mi_attentions
                   and (mi_seeds is None or trained_as["seed"] in mi_seeds))
        settings = TSSettings(split="test", seed=seed, progress=False, permutation_draws=permutation_draws,
                              mi=want_mi, adversary=adversary, adversary_limit=adversary_limit)
        run_battery(os.path.join(grid_dir, relative), out, settings)
    return summarize_grid(grid_dir, output_dir)


# where the model-consistent adversaries of each objective live under the T&Š output folder
ADVERSARY_ROOTS = {"kl": "wp-adversary", "jsd": "ts-adversary"}


def train_consistent_adversaries(grid_dir: str, output_dir: str,
                                 cells=("base-additive", "mlm-additive", "tying-additive"),
                                 lambdas=(0.001, 0.01), seed: int = 0, progress: bool = True,
                                 divergence: str = "kl") -> list[dict]:
    """Model-consistent adversary (``hf_attn.training.wp.train_consistent_adversary``) against the
    seed-``seed`` model of each cell, for each λ. ``divergence="kl"`` (default): W&P §4,
    L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b), into ``output_dir/wp-adversary/<cell>-seed<k>/adversary-lambda-<λ>``;
    ``divergence="jsd"``: T&Š Eq. 6 (the objective of their Fig. 1), L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b),
    into ``output_dir/ts-adversary/…``. Finished runs are skipped. T&Š §4.3 / Fig. 1: the MLM model's
    adversary should pay a larger TVD for the same JSD than the base model's. Returns
    ``[{"cell", "seed", "lambda", "divergence", "mean_jsd", "mean_tvd", "test_f1"}]``."""
    from hf_attn.training import wp as wpt

    if divergence not in ADVERSARY_ROOTS:
        raise ValueError(f"divergence must be one of {sorted(ADVERSARY_ROOTS)}, got {divergence!r}")
    rows = []
    for cell in cells:
        base_dir = os.path.join(grid_dir, cell, f"seed{seed}")
        if not os.path.exists(os.path.join(base_dir, "metrics.json")):
            logger.warning("no finished %s seed %d: skipping its model-consistent adversary", cell, seed)
            continue
        runs_dir = os.path.join(output_dir, ADVERSARY_ROOTS[divergence], f"{cell}-seed{seed}")
        for lam in lambdas:
            metrics = wpt.train_consistent_adversary(base_dir, wpt.adversary_run_dir(runs_dir, lam),
                                                     lam, progress=progress, divergence=divergence)
            rows.append({"cell": cell, "seed": seed, "lambda": lam, "divergence": divergence,
                         "mean_jsd": metrics["mean_jsd_to_base"], "mean_tvd": metrics["mean_tvd_to_base"],
                         "test_f1": metrics["test_f1"]})
    return rows


def _collect_consistent_adversaries(output_dir: str) -> list[dict]:
    """Every finished model-consistent adversary under ``output_dir`` (both objectives), each row
    with its ``divergence`` ("kl": W&P, "jsd": T&Š Eq. 6)."""
    rows = []
    for divergence, folder in ADVERSARY_ROOTS.items():
        root = os.path.join(output_dir, folder)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            cell, _, seed = name.rpartition("-seed")
            for sub in sorted(os.listdir(os.path.join(root, name))):
                path = os.path.join(root, name, sub, "metrics.json")
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as f:
                        m = json.load(f)
                    rows.append({"cell": cell, "seed": int(seed), "lambda": m["lambda"],
                                 "divergence": m.get("divergence", divergence),
                                 "mean_jsd": m["mean_jsd_to_base"], "mean_tvd": m["mean_tvd_to_base"],
                                 "test_f1": m["test_f1"]})
    return rows


def _collect(output_dir: str) -> list[dict]:
    rows = []
    for root, _, files in os.walk(output_dir):
        if "results.json" in files and os.path.basename(root).startswith("seed"):
            with open(os.path.join(root, "results.json"), encoding="utf-8") as f:
                r = json.load(f)
            m = r["model"]
            rows.append({"variant": m["variant"], "attention": m["attention"],
                         "seed": int(os.path.basename(root)[4:]), "dir": root, "results": r})
    return rows


def _regulariser_text(rows: list[dict]) -> str:
    """"tying δ = 10, MLM η = 1", per attention where the cells' values differ (model selection)."""
    parts = []
    for variant, key, name in (("tying", "tying_delta", "tying δ"), ("mlm", "mlm_weight", "MLM η")):
        values = {r["attention"]: r["results"]["model"].get(key) for r in rows if r["variant"] == variant}
        if len(set(values.values())) == 1:
            parts.append(f"{name} = {next(iter(values.values())):g}")
        elif values:
            parts.append(f"{name} = " + ", ".join(f"{v:g} ({a})" for a, v in sorted(values.items())))
    return ", ".join(parts) or "no regularised variant"


def summarize_grid(grid_dir: str, output_dir: str) -> dict:
    """Mean ± std over seeds per (variant, attention) of every T&Š measure; tables + figures."""
    from hf_attn.core.io import write_json_atomic

    rows = _collect(output_dir)
    if not rows:
        raise FileNotFoundError(f"no ts results under {output_dir}")
    first = rows[0]["results"]["model"]
    cells = {}
    for key in sorted({(r["variant"], r["attention"]) for r in rows},
                      key=lambda k: (VARIANT_ORDER.index(k[0]), k[1])):
        group = [r["results"] for r in rows if (r["variant"], r["attention"]) == key]
        cell = {"seeds": sorted(r["seed"] for r in rows if (r["variant"], r["attention"]) == key)}
        for name in ("f1_trained", "delta_uniform", "delta_permuted"):
            cell[name] = _mean_std([g["fragility"][name] for g in group])
        cell["token_probability"] = _mean_std([g["token_probability"]["token_probability"]
                                               for g in group])
        for method in WORD_SET_METHODS:
            cell[f"mi_{method}"] = _mean_std([g["mutual_information"][method]["mi"] for g in group
                                              if "mutual_information" in g])
        adv = [g["jw_adversary"] for g in group if g.get("jw_adversary", {}).get("status") == "ok"]
        cell["jw_mean_jsd"] = _mean_std([a["mean_jsd"] for a in adv])
        cell["jw_mean_tvd"] = _mean_std([a["mean_tvd"] for a in adv])
        cell["jw_mean_eps_max_jsd"] = _mean_std([a["mean_eps_max_jsd"] for a in adv])
        cells[f"{key[0]}-{key[1]}"] = cell
    grid_json = os.path.join(grid_dir, "grid.json")
    grid_info = {}
    if os.path.exists(grid_json):
        with open(grid_json, encoding="utf-8") as f:
            g = json.load(f)
        walls = [r.get("trained_wall_seconds", r["wall_seconds"] if r["status"] == "trained" else None)
                 for r in g["runs"]]
        walls = [w for w in walls if w is not None]
        grid_info = {"runs_recorded": len(g["runs"]), "trained_runs": len(walls),
                     "trained_wall_seconds": round(sum(walls), 1),
                     "seconds_per_trained_run": round(sum(walls) / len(walls), 1) if walls else None}
    setup = (f"BiLSTM, {rows[0]['results']['dataset']}, embeddings d = {first['embedding_dim']} "
             f"({'GloVe-6B-50d' if first['embedding_dim'] == 50 else 'see run.json'}), "
             f"H = {first['hidden_size']} for every variant (2H = d), "
             f"{_regulariser_text(rows)}; test split; mean ± std over seeds")
    summary = {"setup": setup, "cells": cells, "grid": grid_info,
               "wp_consistent_adversary": _collect_consistent_adversaries(output_dir),
               "published_sst_additive": PUBLISHED_SST}
    write_json_atomic(os.path.join(output_dir, "summary.json"), summary)
    write_text_atomic(os.path.join(output_dir, "tables.md"), format_tables(summary))
    _plot_fragility(cells, os.path.join(output_dir, "fragility.png"), setup)
    _plot_adversary(rows, os.path.join(output_dir, "jw_adversary_jsd_tvd.png"))
    if summary["wp_consistent_adversary"]:
        _plot_consistent(summary["wp_consistent_adversary"],
                         os.path.join(output_dir, "wp_adversary_jsd_tvd.png"))
    _plot_example(grid_dir, rows, os.path.join(output_dir, "token_probability_base_vs_regularised.png"))
    return summary


def _fmt(stat: dict, digits: int = 1) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    if stat["n"] == 1:
        return f"{stat['mean']:.{digits}f} (n=1)"
    return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f} (n={stat['n']})"


def format_tables(summary: dict) -> str:
    """Markdown tables beside T&Š's published SST numbers."""
    cells, pub = summary["cells"], summary["published_sst_additive"]
    lines = [f"Setup: {summary['setup']}.", "",
             "### Fragility (T&Š Table 1): F1 % with trained α, ΔF1 with uniform / permuted α", "",
             "| variant | attention | F1 Tr. | Δ Un. | Δ Pm. | T&Š SST (Tr. / Un. / Pm.) |",
             "|---|---|---|---|---|---|"]
    for name, c in cells.items():
        variant, attention = name.split("-")
        ref = pub["fragility" if attention == "additive" else "fragility_dot"].get(variant)
        lines.append(f"| {variant} | {attention} | {_fmt(c['f1_trained'])} | {_fmt(c['delta_uniform'])} | "
                     f"{_fmt(c['delta_permuted'])} | {' / '.join(map(str, ref)) if ref else '–'} |")
    lines += ["", "### Mutual information e_t ↔ h_t, nats (T&Š Table 2)", "",
              "| variant | attention | MF | RS | T&Š SST MF / RS |", "|---|---|---|---|---|"]
    for name, c in cells.items():
        if c["mi_MF"]["n"] or c["mi_RS"]["n"]:
            variant, attention = name.split("-")
            ref = (f"{pub['mi_MF'][variant]} / {pub['mi_RS'][variant]}"
                   if variant in pub["mi_MF"] and attention == "additive" else "–")
            lines.append(f"| {variant} | {attention} | {_fmt(c['mi_MF'], 3)} | {_fmt(c['mi_RS'], 3)} | {ref} |")
    lines += ["", "### Per-token prediction probability (T&Š Table 3; lower = more faithful at equal F1)", "",
              "| variant | attention | p̂ | T&Š SST |", "|---|---|---|---|"]
    for name, c in cells.items():
        variant, attention = name.split("-")
        ref = pub["token_probability" if attention == "additive" else "token_probability_dot"].get(variant, "–")
        lines.append(f"| {variant} | {attention} | {_fmt(c['token_probability'], 3)} | {ref} |")
    lines += ["", "### J&W adversary (k = 5, λ = 500, ε = 0.01; first 500 test instances)", "",
              "| variant | attention | mean JSD(α_adv, α) | mean TVD(ŷ_adv, ŷ) | mean ε-max JSD |",
              "|---|---|---|---|---|"]
    for name, c in cells.items():
        variant, attention = name.split("-")
        lines.append(f"| {variant} | {attention} | {_fmt(c['jw_mean_jsd'], 3)} | "
                     f"{_fmt(c['jw_mean_tvd'], 4)} | {_fmt(c['jw_mean_eps_max_jsd'], 3)} |")
    if summary.get("wp_consistent_adversary"):
        lines += ["", "### Model-consistent adversary (test; T&Š Fig. 1: L = TVD − λ·JSD, T&Š Eq. 6; "
                      "W&P: L = TVD − λ·KL)", "",
                  "| base model | objective | λ | mean JSD(α_a, α_b) | mean TVD(ŷ_a, ŷ_b) | adversary F1 |",
                  "|---|---|---|---|---|---|"]
        for r in summary["wp_consistent_adversary"]:
            objective = "TVD − λ·JSD" if r.get("divergence", "kl") == "jsd" else "TVD − λ·KL"
            lines.append(f"| {r['cell']} seed {r['seed']} | {objective} | {r['lambda']:g} | {r['mean_jsd']:.3f} | "
                         f"{r['mean_tvd']:.4f} | {100 * r['test_f1']:.1f} |")
    if summary.get("grid"):
        g = summary["grid"]
        lines += ["", f"Grid training: {g['trained_runs']} runs trained in "
                      f"{g['trained_wall_seconds'] / 60:.1f} min wall "
                      f"({g['seconds_per_trained_run']} s per run, one at a time, shared CPU)."]
    return "\n".join(lines) + "\n"


def _plot_fragility(cells: dict, path: str, setup: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(cells)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names) + 2), 3.8))
    for offset, key, colour, label in ((-0.2, "delta_uniform", "tab:blue", "uniform α"),
                                       (0.2, "delta_permuted", "tab:orange", "permuted α")):
        means = [cells[n][key]["mean"] for n in names]
        stds = [cells[n][key]["std"] for n in names]
        ax.bar(x + offset, means, 0.4, yerr=stds, color=colour, label=label, capsize=3)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("Δ F1 (points) vs trained α")
    ax.set_title("Fragility of attention (T&Š Table 1)", fontsize=10)
    fig.text(0.01, 0.01, setup, fontsize=6)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_figure_atomic(fig, path, dpi=120)
    plt.close(fig)


def _plot_adversary(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip(VARIANT_ORDER, ["tab:red", "tab:grey", "tab:blue", "tab:green", "tab:purple"]))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    seen = set()
    for r in rows:
        adv = r["results"].get("jw_adversary", {})
        if adv.get("status") != "ok":
            continue
        label = f"{r['variant']}" if r["variant"] not in seen else None
        seen.add(r["variant"])
        ax.scatter(adv["mean_jsd"], adv["mean_tvd"], color=colours[r["variant"]],
                   marker="o" if r["attention"] == "additive" else "^", label=label)
    ax.set_xlabel("mean JSD(α_adv, α)")
    ax.set_ylabel("mean TVD(ŷ_adv, ŷ)")
    ax.set_title("J&W adversary per model (○ additive, △ dot) — T&Š Fig. 1", fontsize=9)
    if seen:
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=120)
    plt.close(fig)


def _plot_consistent(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip(VARIANT_ORDER, ["tab:red", "tab:grey", "tab:blue", "tab:green", "tab:purple"]))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    objective = {"jsd": "TVD − λ·JSD (T&Š Eq. 6)", "kl": "TVD − λ·KL (W&P)"}
    for cell, divergence in dict.fromkeys((r["cell"], r.get("divergence", "kl")) for r in rows):
        points = sorted((r for r in rows if r["cell"] == cell and r.get("divergence", "kl") == divergence),
                        key=lambda r: r["lambda"])
        variant = cell.split("-")[0]
        ax.plot([p["mean_jsd"] for p in points], [p["mean_tvd"] for p in points],
                "o--" if divergence == "jsd" else "s:", color=colours.get(variant, "black"),
                label=f"{cell}, {objective[divergence]}")
        for p in points:
            ax.annotate(f"λ={p['lambda']:g}", (p["mean_jsd"], p["mean_tvd"]), fontsize=7)
    ax.set_xlabel("mean JSD(α_adversary, α_model)")
    ax.set_ylabel("mean TVD(ŷ_adversary, ŷ_model)")
    ax.set_title("Model-consistent adversary — T&Š Fig. 1", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=120)
    plt.close(fig)


def _plot_example(grid_dir: str, rows: list[dict], path: str, attention: str = "additive") -> None:
    """T&Š Fig. 2: one validation sentence, base vs the regularised variants (lowest seed)."""
    from hf_attn.models.loading import load_model_folder

    chosen = {}
    for r in sorted(rows, key=lambda r: r["seed"]):
        if r["attention"] == attention and r["variant"] in ("base", "tying", "mlm", "residual"):
            chosen.setdefault(r["variant"], r)
    if "base" not in chosen or len(chosen) < 2:
        return
    example = chosen["base"]["results"]["example"]
    curves = {}
    for variant in VARIANT_ORDER:
        if variant in chosen:
            model_dir = chosen[variant]["results"]["model_dir"]
            model, tokenizer = load_model_folder(model_dir, "hf_attn")
            curves[f"{variant} (seed {chosen[variant]['seed']})"] = token_probability_curve(
                model, tokenizer, example["text"])
    plot_token_probabilities(curves, path, title=f"Per-token P(positive), SST {example['split']} "
                             f"#{example['index']} ({attention}); dotted: model P — T&Š Fig. 2")


PREFIX = "ts"


def add_options(parser) -> None:
    """The ``--ts-*`` options of ``hf-attn analyze``, generated from :class:`TSSettings`
    (:func:`hf_attn.core.settings_cli.add_settings_options`)."""
    add_settings_options(parser, TSSettings, PREFIX, "ts battery (Tutek & Šnajder)", "settings file section: ts")


def settings_from_args(args) -> TSSettings:
    """The parsed ``hf-attn analyze`` namespace → :class:`TSSettings`."""
    return settings_from_namespace(TSSettings, args, PREFIX)


register_battery(Battery("ts", settings_class=TSSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run_battery, prefix=PREFIX))
