"""The analyses published with a model: the folders found beside it (each checked to be an analysis
of this model) and each battery's results.json summarised for the model card, a few rows beside the
published values and one sentence generated from the numbers."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hf_attn.core.published import JW_GRADIENT_LOO_GAP, JW_PUBLISHED, TS_PUBLISHED_EXTRA, TS_SST
from hf_attn.hub.files import (ANALYSIS_FILES, EXCLUDED_DIRS, HubError, _allowed_files, _is_relative_to, _matches,
                               _read_json)


def _format_number(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.1f}"


def _num(value) -> float | None:
    """A finite number, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _get(payload, *keys):
    for key in keys:
        if not isinstance(payload, dict) or key not in payload:
            return None
        payload = payload[key]
    return payload


def _values(values, digits: int = 2) -> str:
    return " / ".join(_format_number(v, digits) for v in values)


def _range(values, digits: int = 2) -> str:
    """J&W's per-class values as one number or a range: 0.34–0.36."""
    values = [v for v in (_num(v) for v in values) if v is not None]
    if not values:
        return "–"
    low, high = min(values), max(values)
    return _format_number(low, digits) if round(low, digits) == round(high, digits) else \
        f"{_format_number(low, digits)}–{_format_number(high, digits)}"


def _percent(value) -> str:
    return "–" if _num(value) is None else f"{100 * value:.0f} %"


def _relative(measured: float, published: list, tolerance: float = 0.05) -> str:
    """How a measured value sits against the range of published ones: 'within 0.05 of',
    '0.12 below', '0.08 above'."""
    values = [v for v in (_num(v) for v in published) if v is not None]
    low, high = min(values), max(values)
    if low - tolerance <= measured <= high + tolerance:
        return f"within {tolerance:.2f} of"
    return f"{low - measured:.2f} below" if measured < low else f"{measured - high:.2f} above"


NEW_MEASUREMENT = "new measurement"
ENCODER_NAMES = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average"}


@dataclass
class AnalysisSummary:
    """One analysis folder as the model card shows it: a few rows beside the published values, and a
    sentence generated from the numbers."""

    name: str  # battery / folder name, e.g. "jw"
    folder: Path
    title: str
    setup: str  # one line: what was measured, on what
    columns: list[str]  # value columns after "quantity"
    rows: list[list[str]]  # [quantity, value per column]
    sentence: str  # the interpretation, generated from the numbers
    figures: list[str]  # paths in the repo, relative to its root (embedded)
    more_figures: list[str]  # further figures (linked)
    results_path: str  # the full results in the repo


def _class_names(results: dict, per_class: dict) -> list[str]:
    names = results.get("label_names") or []
    out = []
    for key in per_class:
        index = int(key) if str(key).isdigit() else None
        out.append(str(names[index]) if index is not None and index < len(names) else str(key))
    return out


def _jw_published(results: dict) -> tuple[dict | None, str]:
    """J&W's Table 2 values for this model's setup (encoder, additive attention, base model, dataset):
    the ``published`` block of results.json, else hf_attn.reproduce.pipeline's table for IMDB / AG News."""
    model = results.get("model") or {}
    encoder = model.get("encoder", "lstm")
    if model.get("attention", "additive") != "additive" or model.get("variant", "base") != "base":
        return None, ""
    dataset = str(results.get("dataset") or "")
    published = results.get("published")
    if not isinstance(published, dict) or encoder not in published:
        published = None
        table = JW_PUBLISHED.get(dataset)
        if table and encoder == "lstm":
            published = {"tau_gradient": {"mean": table.get("tau_gradient")}, "tau_loo": {"mean": table.get("tau_loo")}}
        elif table and encoder == "average" and table.get("tau_gradient_average"):
            published = {"tau_gradient": {"mean": table["tau_gradient_average"]}}
        if published is None:
            return None, ""
    else:
        published = published[encoder]
    names = {"sst": "SST", "imdb": "IMDB", "agnews": "AG News", "snli": "SNLI"}
    return published, f"J&W 2019 Table 2 ({ENCODER_NAMES.get(encoder, encoder)}, {names.get(dataset, dataset)})"


def _tau_cell(block: dict | None) -> str:
    if not block or _num(block.get("mean")) is None:
        return "–"
    text = _format_number(block["mean"], 2)
    if _num(block.get("std")) is not None:
        text += f" ± {block['std']:.2f}"
    if _num(block.get("fraction_significant")) is not None:
        text += f", {_percent(block['fraction_significant'])}"
    return text


def _published_tau_cell(published: dict | None, key: str, count: int) -> str:
    block = (published or {}).get(key) or {}
    means = block.get("mean")
    if not isinstance(means, list) or len(means) != count:
        return NEW_MEASUREMENT
    cells = []
    for i, mean in enumerate(means):
        cell = {"mean": mean}
        for stat in ("std", "fraction_significant"):
            if isinstance(block.get(stat), list) and len(block[stat]) == count:
                cell[stat] = block[stat][i]
        cells.append(_tau_cell(cell))
    return " / ".join(cells)


def _jw_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    s = results["summary"]
    per_class = s["tau_gradient"]["per_class"]
    classes = list(per_class)
    names = _class_names(results, per_class)
    published, source = _jw_published(results)
    columns = [f"this model: {n}" for n in names] + [f"{source}: {' / '.join(names)}" if source else "published"]
    eps = _get(s, "adversary", "eps")

    def per(key, render):
        return [render(_get(s, key, "per_class", c)) for c in classes]

    rows = [["τ(attention, gradient): mean ± std, share with p < 0.05", *per("tau_gradient", _tau_cell),
             _published_tau_cell(published, "tau_gradient", len(classes))],
            ["τ(attention, LOO-TVD)", *per("tau_loo", _tau_cell),
             _published_tau_cell(published, "tau_loo", len(classes))]]
    if "tau_gradient_loo" in s:
        rows.append(["τ(gradient, LOO-TVD)", *per("tau_gradient_loo", _tau_cell), NEW_MEASUREMENT])
    if "permutation" in s:
        rows.append(["permuted attention: median over instances of the median output change Δŷ (TVD)",
                     *per("permutation", lambda b: _format_number((b or {}).get("median"), 3)), NEW_MEASUREMENT])
    if "adversary" in s:
        rows.append([f"adversarial attention (output TVD ≤ ε = {eps}): mean ε-max JSD (share feasible)",
                     *per("adversary", lambda b: f"{_format_number((b or {}).get('mean'), 3)} "
                                                 f"({_percent((b or {}).get('fraction_feasible'))})"),
                     NEW_MEASUREMENT])
    n = _format_number(s.get("num_instances"))
    setup = (f"{n} {results.get('split', 'test')} instances, grouped by predicted class; Kendall τ between the "
             "attention weights and gradient / leave-one-out importance per instance (J&W §4.1; leave-one-out "
             "as LOO-TVD, TVD(ŷ(x₋t), ŷ(x)), the output distribution's change without the token), random "
             "permutations (§4.2.1) and adversarial attention (§4.2.2).")
    model = results.get("model") or {}
    if model.get("encoder") == "transformer" and model.get("attention"):
        setup += (f" The attention explained: {model['attention']} (over word pieces; {model.get('num_layers')} "
                  f"layers, {model.get('num_heads')} heads); no paper reports these numbers for a transformer.")
    if source:
        setup += (f" Published values: {source}, models with 300-d embeddings trained on the full data, so "
                  "expect differences of a few hundredths.")
    # the interpretation, from the overall numbers
    g, l = _num(_get(s, "tau_gradient", "overall", "mean")), _num(_get(s, "tau_loo", "overall", "mean"))
    gl = _num(_get(s, "tau_gradient_loo", "overall", "mean"))
    clauses = []
    if g is not None and l is not None:
        pg, pl = _get(published, "tau_gradient", "mean"), _get(published, "tau_loo", "mean")
        text = (f"Attention agrees with gradient importance at mean τ = {g:.2f}"
                + (f" (J&W: {_range(pg)})" if pg else "") + f" and with leave-one-out (LOO-TVD) at τ = {l:.2f}"
                + (f" (J&W: {_range(pl)})" if pl else ""))
        if pg and pl:
            rel_g, rel_l = _relative(g, pg), _relative(l, pl)
            text += (f", both {rel_g} J&W's" if rel_g == rel_l and rel_g.startswith("within")
                     else f" (gradient: {rel_g} J&W's; LOO-TVD: {rel_l})")
        if gl is not None:
            gap = gl - max(g, l)
            lstm_gap = JW_GRADIENT_LOO_GAP if published and (results.get("model") or {}).get(
                "encoder", "lstm") == "lstm" else None
            text += f"; gradient and LOO-TVD agree with each other at τ = {gl:.2f}, "
            if gap > 0:
                text += (f"{gap:.2f} higher" + (f" (J&W: {_range(lstm_gap)} higher)" if lstm_gap else "")
                         + ", so attention is a weaker guide to which tokens matter than those two are to each other")
            else:
                text += "no higher, so attention ranks tokens as consistently with them as they do with each other"
        clauses.append(text)
    perm = _num(_get(s, "permutation", "overall", "median"))
    if perm is not None:
        clauses.append(f"shuffling the attention changes the output distribution by a median TVD of {perm:.3f}")
    adv, feasible = _num(_get(s, "adversary", "overall", "mean")), _num(_get(s, "adversary", "overall",
                                                                              "fraction_feasible"))
    if adv is not None and feasible is not None:
        clauses.append(f"for {_percent(feasible)} of instances an attention distribution at mean JSD {adv:.2f} "
                       f"(of at most ln 2 ≈ 0.69) from the model's own changes the output by at most ε = {eps}")
    sentence = ("; ".join(clauses) + ".") if clauses else ""
    return setup, columns, rows, sentence[:1].upper() + sentence[1:]


def _wp_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    rows, clauses = [], []
    uniform = results.get("uniform_baseline") or {}
    base_f1, uni_f1 = _num(_get(uniform, "base", "f1")), _num(_get(uniform, "uniform", "f1"))
    if base_f1 is not None and uni_f1 is not None:
        rows.append(["test F1 with trained vs uniform attention (§3.2)",
                     f"{base_f1:.3f} vs {uni_f1:.3f}", NEW_MEASUREMENT])
        clauses.append(f"frozen uniform attention scores {base_f1 - uni_f1:.3f} F1 below the trained attention "
                       if base_f1 >= uni_f1 else
                       f"frozen uniform attention scores {uni_f1 - base_f1:.3f} F1 above the trained attention ")
    seed = _get(results, "seed_variance", "summary") or {}
    statistic = _get(results, "seed_variance", "statistic") or "max"
    seed_jsd = _num(seed.get(f"mean_{statistic}_jsd"))
    if seed_jsd is not None:
        seeds = len(_get(results, "seed_variance", "seeds") or [])
        rows.append([f"attention of {seeds} other random seeds: mean over instances of the {statistic} JSD (§3.3)",
                     f"{seed_jsd:.3f}", NEW_MEASUREMENT])
    guide_lambda = _get(results, "consistent_adversary", "guide_lambda")
    for row in _get(results, "consistent_adversary", "rows") or []:
        if row.get("lambda") == guide_lambda and _num(row.get("mean_jsd")) is not None:
            rows.append([f"model-consistent adversary (λ = {guide_lambda:g}): mean JSD to this model's attention, "
                         "test F1 (§4)", f"{row['mean_jsd']:.3f}, {_format_number(row.get('f1'), 3)}",
                         NEW_MEASUREMENT])
    guides = _get(results, "diagnostic_mlp", "guides") or {}
    order = [g for g in ("uniform", "trained", "base", "adversary") if _num(_get(guides, g, "test_f1")) is not None]
    if order:
        published = [_num(_get(guides, g, "published_sst_f1")) for g in order]
        rows.append([f"diagnostic MLP test F1 guided by {' / '.join(order)} attention (Table 3)",
                     _values([guides[g]["test_f1"] for g in order], 3),
                     _values(published, 3) if all(p is not None for p in published) else NEW_MEASUREMENT])
        if "base" in guides and "uniform" in guides:
            b, u = guides["base"]["test_f1"], guides["uniform"]["test_f1"]
            text = (f"an MLP guided by this model's attention reaches F1 {b:.3f} against {u:.3f} with uniform weights"
                    + (f" and {guides['adversary']['test_f1']:.3f} with the adversary's" if "adversary" in guides
                       else ""))
            pb, pu = _num(_get(guides, "base", "published_sst_f1")), _num(_get(guides, "uniform", "published_sst_f1"))
            better = b > u
            text += (", so the attention carries task information beyond uniform weights" if better else
                     ", so the attention carries no task information beyond uniform weights")
            if pb is not None and pu is not None:
                text += ", as W&P found" if better == (pb > pu) else ", unlike W&P's finding"
                text += f" (W&P: {pb:.3f} vs {pu:.3f})"
            clauses.append(text)
    epochs = _get(results, "options", "epochs")
    setup = (f"{_format_number(results.get('num_instances'))} {results.get('split', 'test')} instances; helper models "
             f"(uniform, {len(_get(results, 'seed_variance', 'seeds') or [])} other seeds, adversaries, MLPs)"
             + (f" trained {epochs} epoch{'s' if epochs != 1 else ''} each" if isinstance(epochs, int) else "")
             + ". Published values: W&P Table 3 (SST); the other rows are new measurements (W&P's Table 2 is not "
               "in hf_attn's copy of the paper, §3.3 and §4 are figures).")
    sentence = "; ".join(c.strip() for c in clauses)
    sentence = (sentence[:1].upper() + sentence[1:] + ".") if sentence else ""
    has_published = any(row[-1] != NEW_MEASUREMENT for row in rows)
    return setup, ["this model", "W&P 2019 (SST)" if has_published else "published"], rows, sentence


def _ts_published(results: dict) -> dict:
    dataset = str(results.get("dataset") or "")
    return TS_SST if dataset == "sst" else TS_PUBLISHED_EXTRA.get(dataset) or {}


def _ts_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    model = results.get("model") or {}
    variant, attention = model.get("variant", "base"), model.get("attention", "additive")
    table = _ts_published(results) if model.get("encoder", "lstm") == "lstm" else {}
    suffix = "" if attention == "additive" else "_dot"
    fragility = (table.get(f"fragility{suffix}") or {}).get(variant)
    token_probability = (table.get(f"token_probability{suffix}") or {}).get(variant)
    mi = [(table.get(f"mi_{m}") or {}).get(variant) if attention == "additive" else None for m in ("MF", "RS")]
    f = results.get("fragility") or {}
    rows, clauses = [], []
    pub = (lambda i: (f"{fragility[i]:.1f}" if i == 0 else f"{fragility[i]:+.1f}") if fragility else NEW_MEASUREMENT)
    if _num(f.get("f1_trained")) is not None:
        rows.append(["test F1 (%) with the trained attention (Table 1)", f"{f['f1_trained']:.1f}", pub(0)])
        for key, label, i in (("delta_uniform", "uniform", 1), ("delta_permuted", "randomly permuted", 2)):
            if _num(f.get(key)) is not None:
                rows.append([f"ΔF1 (points) with {label} attention", f"{f[key]:+.1f}", pub(i)])
        du, dp = _num(f.get("delta_uniform")), _num(f.get("delta_permuted"))
        if du is not None and dp is not None:
            text = (f"replacing the attention by uniform weights changes F1 by {du:+.1f} points and permuting it "
                    f"by {dp:+.1f}")
            if fragility:
                text += f" (T&Š, {variant}: {fragility[1]:+.1f} and {fragility[2]:+.1f})"
                drop, published_drop = min(du, dp), min(fragility[1], fragility[2])
                text += (", so this model's predictions depend less on its attention than T&Š's models' did"
                         if drop > published_drop else ", so this model's predictions depend on its attention at "
                                                       "least as much as T&Š's models' did")
            clauses.append(text)
    p = _num(_get(results, "token_probability", "token_probability"))
    if p is not None:
        rows.append(["per-token prediction probability p̂ of the predicted class (Table 3; lower = more faithful)",
                     f"{p:.3f}", _format_number(token_probability, 3) if token_probability else NEW_MEASUREMENT])
        clauses.append(f"each token on its own predicts the label with mean probability {p:.3f}"
                       + (f" (T&Š: {token_probability:.3f})" if token_probability else ""))
    mf, rs = (_num(_get(results, "mutual_information", m, "mi")) for m in ("MF", "RS"))
    if mf is not None and rs is not None:
        k = _get(results, "mutual_information", "MF", "n_clusters")
        words = _get(results, "mutual_information", "MF", "types")
        rows.append([f"MI(e_t; h_t) in nats, most frequent / random words ({words} words, k = {k} clusters; Table 2)",
                     f"{mf:.3f} / {rs:.3f}",
                     f"{mi[0]:.3f} / {mi[1]:.3f} (1000 words, k = 1000)" if all(mi) else NEW_MEASUREMENT])
    adv = _num(_get(results, "jw_adversary", "mean_eps_max_jsd"))
    if adv is not None:
        rows.append([f"J&W adversary on {_get(results, 'jw_adversary', 'instances')} instances: mean ε-max JSD",
                     f"{adv:.3f}", NEW_MEASUREMENT])
    setup = (f"{_format_number(results.get('instances') or f.get('instances'))} {results.get('split', 'test')} "
             "instances; "
             f"this model is T&Š's `{variant}` variant with {attention} attention. Published values: T&Š 2020 "
             "Tables 1–3 (300-d embeddings, mean of 5 runs).")
    sentence = "; ".join(clauses)
    return setup, ["this model", f"T&Š 2020 ({variant}, {attention})"], rows, \
        (sentence[:1].upper() + sentence[1:] + ".") if sentence else ""


def _eraser_summary(results: dict) -> tuple[str, list[str], list[list[str]], str]:
    measures = {name: row for name, row in (results.get("measures") or {}).items()
                if _num(row.get("comprehensiveness_aopc")) is not None}
    rows = [[f"{'loo (LOO-TVD)' if name == 'loo' else name}: comprehensiveness ↑ / sufficiency ↓ AOPC",
             f"{row['comprehensiveness_aopc']:.3f} / {_format_number(row.get('sufficiency_aopc'), 3)}",
             NEW_MEASUREMENT] for name, row in measures.items()]
    sentence = ""
    if "attention" in measures and len(measures) > 1:
        ranked = sorted(measures, key=lambda m: -measures[m]["comprehensiveness_aopc"])
        att = measures["attention"]["comprehensiveness_aopc"]
        sentence = (f"Removing the tokens attention ranks highest lowers the predicted class's probability by "
                    f"{att:.3f} on average (comprehensiveness AOPC), rank {ranked.index('attention') + 1} of "
                    f"{len(ranked)} measures (best: {ranked[0]}, {measures[ranked[0]]['comprehensiveness_aopc']:.3f})")
        if "random" in measures:
            floor = measures["random"]["comprehensiveness_aopc"]
            sentence += (f", {'above' if att > floor else 'not above'} the random floor of {floor:.3f}")
        sentence += "."
    setup = (f"ERASER (DeYoung et al. 2020) on {_format_number(results.get('num_instances'))} "
             f"{results.get('split', 'test')} "
             "instances: the papers report no ERASER numbers for these models."
             + (" loo is J&W's LOO-TVD, TVD(ŷ(x₋t), ŷ(x)) (§4.1)." if "loo" in measures else ""))
    return setup, ["this model", "published"], rows, sentence


BATTERIES = {"jw": ("Jain & Wallace (2019): attention vs other importance measures", _jw_summary),
             "wp": ("Wiegreffe & Pinter (2019): attention as a learned, usable signal", _wp_summary),
             "ts": ("Tutek & Šnajder (2020): fragility and faithfulness of attention", _ts_summary),
             "eraser": ("ERASER faithfulness of importance rankings", _eraser_summary)}
PREFERRED_FIGURES = ("fig2_tau_gradient.png", "fig4_eps_max_jsd.png", "diagnostic_mlp.png", "seed_variance.png",
                     "fragility.png", "token_probability.png", "eraser.png")


def find_analyses(run_dir: str | os.PathLike, extra_dirs=()) -> list[Path]:
    """Folders holding an analysis ``results.json``: inside the run folder (any depth up to 3, never
    in checkpoints) and the given extra folders."""
    run_dir = Path(run_dir)
    found: list[Path] = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = [d for d in dirs if not _matches(d, EXCLUDED_DIRS)]
        if len(Path(root).relative_to(run_dir).parts) > 3:
            dirs[:] = []
        if "results.json" in files and Path(root) != run_dir:
            found.append(Path(root))
    for extra in extra_dirs:
        extra = Path(extra)
        if not (extra / "results.json").is_file():
            raise HubError(f"analysis folder {extra} has no results.json")
        found.append(extra)
    unique: dict[Path, None] = {}
    for folder in found:
        unique.setdefault(folder.resolve(), None)
    return list(unique)


def summarise_analysis(folder: Path, repo_subdir: str) -> AnalysisSummary:
    """A results.json of a battery (jw, wp, ts, eraser) as a few rows beside the published values and one
    generated sentence; an unknown or unreadable file gets a pointer to itself."""
    results = _read_json(folder / "results.json")
    name = str(results.get("battery") or results.get("analysis") or folder.name)
    figures = sorted(p.name for p in folder.iterdir() if p.suffix in (".png", ".svg"))
    shown = [f for f in PREFERRED_FIGURES if f in figures][:2] or figures[:2]
    title, summarise = BATTERIES.get(name, (f"Analysis `{name}`", None))
    setup, columns, rows, sentence = "", [], [], ""
    if summarise is not None:
        try:
            setup, columns, rows, sentence = summarise(results)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError):
            setup, columns, rows, sentence = "", [], [], ""
    if not rows:
        setup = (f"This card does not summarise `{repo_subdir}/results.json` "
                 f"({'an unexpected layout' if summarise else 'an unknown analysis'}); see the file.")
    return AnalysisSummary(name, folder, title, setup, columns, rows, sentence,
                           [f"{repo_subdir}/{f}" for f in shown],
                           [f"{repo_subdir}/{f}" for f in figures if f not in shown], f"{repo_subdir}/results.json")


# What `hf-attn analyze` records in every output folder: the battery, the settings and the model
# analysed (its weights' checksum).
ANALYSIS_RECORD = ".hf_attn-analysis.json"


def check_analysis_belongs(run_dir: Path, folder: Path, required: bool) -> None:
    """:class:`HubError` (one line) unless the analysis in ``folder`` was computed on the model of
    ``run_dir``: its record's weights checksum must be the run's (``model.safetensors``, or
    ``config.json`` for sharded weights). ``required``: a folder given with ``--analysis`` must have the
    record (a folder inside the run without one is an older analysis of the same folder)."""
    from hf_attn.core.io import file_sha256

    record_path = folder / ANALYSIS_RECORD
    if not record_path.is_file():
        if required:
            raise HubError(f"analysis folder {folder.name} has no {ANALYSIS_RECORD}, so nothing shows it analysed "
                           "this model; rerun hf-attn analyze on this model into it")
        return
    model = _read_json(record_path).get("model") or {}
    for name in ("model.safetensors", "config.json"):
        if name in model and (run_dir / name).is_file():
            own = file_sha256(str(run_dir / name))
            if model[name] != own:
                raise HubError(f"analysis folder {folder.name} was computed on another model (its {name} checksum "
                               f"{str(model[name])[:12]}… is not this model's {own[:12]}…); publish only analyses of "
                               "this model")
            return
    if required:
        raise HubError(f"analysis folder {folder.name}: {ANALYSIS_RECORD} records no weights checksum of the model "
                       "it analysed")


def _analysis_copies(run_dir: Path, root: Path, analysis_dirs) -> list[tuple[str, Path, list]]:
    """``(name in the repo, folder, allowed files)`` of every analysis folder to publish, each checked
    to be an analysis of this model (:func:`check_analysis_belongs`)."""
    copies = []
    used_names: set[str] = set()
    extra = {Path(d).resolve() for d in analysis_dirs}
    for folder in find_analyses(run_dir, analysis_dirs):
        check_analysis_belongs(run_dir, folder, required=folder in extra and not _is_relative_to(folder, root))
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.name)
        while name in used_names:
            name += "_"
        used_names.add(name)
        allowed_root = root if _is_relative_to(folder, root) else folder  # --analysis folders: themselves
        copies.append((name, folder, _allowed_files(folder, ANALYSIS_FILES, allowed_root)))
    return copies
