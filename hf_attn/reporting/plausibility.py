"""Faithful or plausible? The report section on SST's human rationales: the faithfulness tables with
plausibility columns (``hf-attn analyze … --battery faithfulness --faith-rationales sst_rationales``)
of the J&W BiLSTM, T&Š's base / tying / MLM BiLSTMs and a fine-tuned MiniLM, made from their
committed records (``docs/plausibility/runs/*.json``) alone: which methods are faithful, which
plausible, which both, and whether T&Š's regularisers, which make attention more faithful, make it
more or less plausible — each answer only as far as a paired Wilcoxon test carries it.
``scripts/plausibility_report.py`` writes the records, the page and its figures."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from hf_attn.core import faithfulness as fm

ANALYSED_METRICS = "comprehensiveness,sufficiency,tau_loo,agreement,auprc,token_f1,iou_f1"
KEPT_PER_INSTANCE = ("comprehensiveness", "sufficiency", "auprc", "token_f1", "iou_f1")


@dataclass(frozen=True)
class ReportModel:
    """One model of the section: its record's ``name``, its ``label`` and how it was trained."""

    name: str
    label: str
    train: str
    sentences: int

    def analyze_command(self) -> str:
        return (f"hf-attn analyze runs/{self.name} --battery faithfulness --faith-rationales sst_rationales "
                f"--faith-naopc-beam 0 --faith-metrics {ANALYSED_METRICS} --faith-max-instances {self.sentences} "
                f"--output-dir analyses/{self.name}")


MODELS = (
    ReportModel("sst-lstm", "J&W BiLSTM + additive attention (H = 128)",
                "hf-attn train --dataset sst --output-dir runs/sst-lstm", 1821),
    ReportModel("ts-base", "T&Š BiLSTM, base (H = 25)",
                "hf-attn train --dataset sst --variant base --hidden-size 25 --output-dir runs/ts-base", 1821),
    ReportModel("ts-tying", "T&Š BiLSTM, tying (δ = 10)",
                "hf-attn train --dataset sst --variant tying --tying-delta 10 --output-dir runs/ts-tying", 1821),
    ReportModel("ts-mlm", "T&Š BiLSTM, MLM (η = 1)",
                "hf-attn train --dataset sst --variant mlm --mlm-weight 1 --output-dir runs/ts-mlm", 1821),
    ReportModel("minilm-sst", "all-MiniLM-L6-v2 fine-tuned on SST",
                "hf-attn train --dataset sst --base-model minilm-l6 --output-dir runs/minilm-sst", 500),
)
VARIANTS = (("ts-tying", "tying"), ("ts-mlm", "MLM"))  # against ts-base


def strip_record(payload: dict, name: str, model_metrics: dict) -> dict:
    """A battery's ``results.json`` as the section keeps it: the per-sentence values of the columns it
    tests (:data:`KEPT_PER_INSTANCE`), the texts to pair models on, the model's test metrics; the
    model folder named ``runs/<name>`` (no local path)."""
    kept = {k: v for k, v in payload.items() if k not in ("per_instance", "undefined")}
    kept["per_instance"] = {m: {k: v for k, v in d.items() if k in KEPT_PER_INSTANCE}
                            for m, d in payload.get("per_instance", {}).items()}
    kept["model"] = dict(payload.get("model", {})) | {"name": f"runs/{name}", "model_dir": f"runs/{name}"}
    kept["model_metrics"] = {k: v for k, v in model_metrics.items() if k.startswith(("test_", "eval_"))}
    return kept


def load_records(folder: str) -> dict:
    """``{name: record}`` of the :data:`MODELS` whose record is in ``folder``."""
    out = {}
    for model in MODELS:
        path = os.path.join(folder, f"{model.name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out[model.name] = json.load(f)
    return out


def _result(record: dict):
    from hf_attn.batteries.faithfulness import FaithfulnessResult

    return FaithfulnessResult.from_payload(record)


def _accuracy(record: dict) -> float:
    metrics = record.get("model_metrics", {})
    return float(metrics.get("test_accuracy", metrics.get("eval_accuracy", math.nan)))


def paired_models(a: dict, b: dict, method: str, metric: str) -> dict:
    """``method``'s ``metric`` in model record ``b`` against ``a`` over the sentences both analysed
    (the same texts, in the same order, the shorter list's): the means, their difference b − a, the
    paired Wilcoxon test and the ``better`` of the two when p < 0.05 (None otherwise)."""
    n = min(len(a["texts"]), len(b["texts"]))
    if a["texts"][:n] != b["texts"][:n]:
        raise ValueError("the two records analysed different texts: their sentences cannot be paired")
    x = np.asarray(a["per_instance"][method][metric][:n], dtype=float)
    y = np.asarray(b["per_instance"][method][metric][:n], dtype=float)
    test = fm.paired_test(y, x)
    both = np.isfinite(x) & np.isfinite(y)
    difference = float((y[both] - x[both]).mean())
    from hf_attn.batteries.faithfulness.settings import HIGHER_IS_BETTER

    better = None
    if math.isfinite(test["p"]) and test["p"] < 0.05 and difference != 0:
        better = "b" if (difference > 0) == HIGHER_IS_BETTER[metric] else "a"
    return {"n": int(both.sum()), "a": float(x[both].mean()), "b": float(y[both].mean()), "difference": difference,
            "p": float(test["p"]), "better": better}


def _reason(text: str, method: str = "") -> str:
    """A skipped method's reason without its exception's name or a leading ``<method>: ``, to its
    first clause."""
    text = str(text)
    for _ in range(2):
        head, sep, rest = text.partition(": ")
        if sep and (head.endswith("Error") or head == method):
            text = rest
    return text.split(";")[0].split(": ")[0].strip()


def _below(row: dict) -> str:
    """``" (below the floor on AUPRC)"`` etc. for the axes where the test puts a method below random."""
    names = {"plausible": "AUPRC", "faithful": "comprehensiveness"}
    below = [names[a] for a in row.get("below", [])]
    return f" (below the floor on {' and '.join(below)})" if below else ""


def _p(p: float) -> str:
    return "–" if not math.isfinite(p) else f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def _cell(cell: dict | None, digits: int = 3) -> str:
    if not cell or not math.isfinite(cell.get("mean", math.nan)):
        return "–"
    if not math.isfinite(cell.get("low", math.nan)):
        return f"{cell['mean']:.{digits}f}"
    return f"{cell['mean']:.{digits}f} [{cell['low']:.{digits}f}, {cell['high']:.{digits}f}]"


def attention_table(records: dict) -> list[str]:
    """One row per model: accuracy and attention on both axes, its quadrant, and the methods ranked
    first on each axis."""
    lines = ["| model | sentences | test accuracy (whole split) | attention comprehensiveness ↑ | attention AUPRC ↑ | random AUPRC "
             "| attention is | most plausible (AUPRC) | most comprehensive |", "|---" * 9 + "|"]
    for model in MODELS:
        if model.name not in records:
            continue
        record, result = records[model.name], _result(records[model.name])
        axes = result.two_axes()
        plausible = [m for m in result.ranking("auprc") if m != "random"]
        faithful = [m for m in result.ranking("comprehensiveness") if m != "random"]
        lines.append(f"| {model.label} | {result.num_instances} | {_accuracy(record):.3f} | "
                     f"{_cell(result.table['attention'].get('comprehensiveness'))} | "
                     f"{_cell(result.table['attention'].get('auprc'))} | "
                     f"{result.table['random']['auprc']['mean']:.3f} | {axes['attention']['quadrant']} | "
                     f"{plausible[0]} | {faithful[0]} |")
    return lines


def variant_lines(records: dict) -> list[str]:
    """T&Š's question on both axes: attention in the tying and MLM models against the base model,
    paired over the same sentences."""
    if "ts-base" not in records:
        return ["T&Š's base model was not analysed: no comparison."]
    lines = ["| variant | attention comprehensiveness: base → variant (p) | attention AUPRC: base → variant (p) "
             "| attention token F1: base → variant (p) |", "|---|---|---|---|"]
    sentences = []
    for name, label in VARIANTS:
        if name not in records:
            continue
        cells, verdict = [], {}
        for metric in ("comprehensiveness", "auprc", "token_f1"):
            t = paired_models(records["ts-base"], records[name], "attention", metric)
            cells.append(f"{t['a']:.3f} → {t['b']:.3f} ({_p(t['p'])})")
            verdict[metric] = t
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        words = {"comprehensiveness": ("more faithful", "less faithful", "no more faithful (no significant change)"),
                 "auprc": ("more plausible", "less plausible", "no more or less plausible (no significant change)")}
        said = []
        for metric, (up, down, same) in words.items():
            t = verdict[metric]
            said.append(same if t["better"] is None else up if t["better"] == "b" else down)
        sentences += [f"{label[0].upper() + label[1:]} made attention {said[0]} by comprehensiveness and {said[1]} "
                      f"by AUPRC ({verdict['auprc']['n']} paired sentences, Wilcoxon, p < 0.05).", ""]
    return lines + [""] + sentences[:-1]


def method_table(result) -> list[str]:
    """Every method of one model on both axes, with the paired tests against the random floor."""
    axes = result.two_axes()
    eraser = result.metric_details.get("plausibility", {}).get("eraser", {})
    lines = ["| method | comprehensiveness ↑ | p vs random | sufficiency ↓ | AUPRC ↑ | p vs random | token F1 ↑ | "
             "IOU F1 ↑ (per text) | IOU F1 (ERASER macro) | quadrant |", "|---" * 10 + "|"]
    for method in result.methods:
        t = result.table[method]
        row = axes.get(method, {})
        lines.append(f"| {method} | {_cell(t.get('comprehensiveness'))} | {_p(row.get('faithful_p', math.nan))} | "
                     f"{_cell(t.get('sufficiency'))} | {_cell(t.get('auprc'))} | "
                     f"{_p(row.get('plausible_p', math.nan))} | {_cell(t.get('token_f1'))} | "
                     f"{_cell(t.get('iou_f1'))} | {eraser.get(method, {}).get('iou_f1', math.nan):.3f} | "
                     f"{row.get('quadrant', 'the floor')}{_below(row)} |")
    return lines


def report_markdown(records: dict, figures: str = "figures") -> str:
    """The section's page from the records (module docstring); figures named relative to the page."""
    if not records:
        raise ValueError("no plausibility records: run scripts/plausibility_report.py --from-runs first")
    first = _result(next(iter(records.values())))
    details = first.metric_details["plausibility"]
    P = ["<!-- generated by scripts/plausibility_report.py from docs/plausibility/runs/*.json -->",
         "# Faithful or plausible? Attention against SST's human rationales", "",
         "Two axes on one table: **faithfulness** (ERASER comprehensiveness ↑ and sufficiency ↓: does deleting the "
         "words a method ranks high change the prediction?) and **plausibility** (ERASER's AUPRC ↑, token F1 ↑ and "
         "IOU F1 ↑ of the method's word scores against the human rationale: does it point at the words people point "
         "at?). Rationales: `hf_attn.datasets.load(\"sst_rationales\")`, SST's phrase labels turned into a 0/1 mark "
         "per word by Carton, Rathore & Tan (2020)'s procedure ([plausibility.md](../plausibility.md)). A word's "
         "score is the sum of its tokens'. Token and IOU F1 use each sentence's top int(k × words) words, with k = "
         f"{details['k_fraction']:.3f}, the train split's mean share of marked words, as ERASER fixes k per data "
         "set. Every method is tested against the random floor (uniform scores seeded by each sentence) by a paired "
         "Wilcoxon test over the sentences, p < 0.05: *faithful* = comprehensiveness above the floor, *plausible* = "
         "AUPRC above the floor. These rationales mark every word of every non-neutral explanatory phrase "
         f"({100 * details['marked_share']:.0f} % of a sentence's words on average), so the random floor's AUPRC is "
         "near 0.5, not near 0. Signed methods (gradient × input, integrated gradients, leave-one-out, Kernel SHAP, "
         "DeepLift) are ranked by their signed scores, as the faithfulness columns rank them: a word that pushes "
         "against the prediction ranks low even where the rationale, which marks phrases of either sentiment, marks "
         "it. Each method is tested against the floor on each axis apart (no correction for the number of tests; "
         "most p values below are far from 0.05).", "",
         "## Attention in each model", ""]
    P += attention_table(records)
    P += ["", "## Does making attention faithful make it more or less plausible?", "",
          "Tutek & Šnajder (2020) tie the BiLSTM's hidden states to its inputs (tying) or add a masked-language-model "
          "loss (MLM) so that attention becomes a more faithful explanation. Here each variant's attention is set "
          "against the base model's on both axes, over the same test sentences (paired Wilcoxon on the per-sentence "
          "values; base and variants share the hidden size and the seed). Faithfulness here is ERASER's "
          "comprehensiveness, not T&Š's own measures (the `ts` battery and the reproduction report compute those), "
          "and each model is one seed.", ""]
    P += variant_lines(records)
    P += ["", "## Every method on both axes", ""]
    for model in MODELS:
        if model.name not in records:
            continue
        result = _result(records[model.name])
        P += [f"### {model.label}", "",
              f"The first {result.num_instances} SST test sentences; test accuracy on the whole test split "
              f"{_accuracy(records[model.name]):.3f}. Skipped: "
              + ("; ".join(f"{m} ({_reason(r, m)})" for m, r in result.skipped.items()) or "none") + ".", ""]
        P += method_table(result)
        P += ["", result.plausibility_sentence().strip(), "",
              f"![faithfulness against plausibility, {model.label}]({figures}/{model.name}.png)", ""]
    P += ["## How it was made", "",
          "The models were trained and analysed with these commands (seed 0); "
          "`python scripts/plausibility_report.py --from-runs FOLDER` copies each analysis's `results.json` into "
          "`docs/plausibility/runs/` (the per-sentence values of the tested columns kept), and "
          "`python scripts/plausibility_report.py` re-makes this page and its figures from those records alone.", "",
          "```"]
    for model in MODELS:
        if model.name in records:
            P += [model.train, model.analyze_command()]
    P += ["```", ""]
    return "\n".join(P)


def write_figures(records: dict, folder: str) -> list[str]:
    """Each model's faithfulness-against-plausibility figure (``FaithfulnessResult.plot_axes``)."""
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    written = []
    for name, record in records.items():
        path = os.path.join(folder, f"{name}.png")
        fig = _result(record).plot_axes(path)
        plt.close(fig)
        written.append(path)
    return written


__all__ = ["MODELS", "ReportModel", "load_records", "paired_models", "report_markdown", "strip_record",
           "write_figures"]
