"""The SST sections beyond the papers: the faithfulness tables and the opt-in BERT-family section
(a fine-tuned transformer's J&W numbers beside the BiLSTM's); no published value exists for either."""

from __future__ import annotations

from hf_attn.reporting.findings import _f
from hf_attn.reproduce.plan import ReproducePlan
from hf_attn.reporting.markdown import _Figures, paths_of

# The opt-in BERT-family section (--bert-family): in every SST report, with its numbers or "not run".
BERT_FAMILY_HEADER = "BERT-family: a fine-tuned transformer beside the BiLSTM (new measurement)"

# The faithfulness table (SST): the BiLSTM's, and the BERT-family model's when --bert-family ran.
FAITHFULNESS_HEADER = "Faithfulness table: attribution methods × faithfulness metrics (beyond the papers)"


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
            + (f" {'refined (nested)' if settings.get('ig_rule') == 'gauss-kronrod' else 'doubled'} per sentence "
               f"towards a completeness gap within {100 * settings['ig_target']:g} % "
               f"(at most {settings.get('ig_max_steps')} nodes; the misses are counted below)"
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
         "transformer layers, saliency, gradient × input, integrated gradients, leave-one-out as the LOO-drop "
         "ŷ_c(x) − ŷ_c(x₋t) (Li et al. 2016 §3; not the J&W section's LOO-TVD), a random floor; "
         "docs/faithfulness.md has each paper and equation). Columns: ERASER comprehensiveness ↑ and sufficiency ↓ "
         "(DeYoung et al. 2020), Soft-NC / Soft-NS ↑ (Zhao & Aletras 2023), normalised AOPC ↑ / ↓ (Edin et al. 2024), "
         "Kendall τ with the LOO-drop ↑ (`tau_loo`) and the mean τ with the other methods; each cell the mean over "
         "sentences with its 95 % Student-t interval; then seconds and peak memory per sentence of the method "
         "itself. The optional captum methods are not run here (the report does not depend on an optional extra). No "
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
    LOO-TVD than the BiLSTM's, how permutation-sensitive and how easy an adversary is (from the numbers)."""
    def overall(res, key, stat="mean"):
        return _get_num((res or {}).get("summary") or {}, key, "overall", stat)

    clauses = []
    for key, what in (("tau_gradient", "gradient importance"), ("tau_loo", "leave-one-out (LOO-TVD)")):
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
    BiLSTM's — τ(attention, gradient / LOO-TVD), τ(gradient, LOO-TVD), permutation, ε-max JSD, which layer and
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
             "detached; leave-one-out (LOO-TVD, TVD(ŷ(x₋t), ŷ(x)), J&W §4.1) deletes one word piece; "
             "permutations and adversaries replace the row through the attention-interface override. The BiLSTM's "
             "is its additive attention over words. Instances: the "
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
    for key, label in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO-TVD)"),
                       ("tau_gradient_loo", "τ(gradient, LOO-TVD)")):
        P.append(f"| {label}: mean ± std (share p < 0.05) | {_overall_tau(lstm, key)} | {_overall_tau(bert, key)} | "
                 "new measurement |")
    P.append(f"| permutation: median over instances of the median Δŷ (TVD) | {_permutation_cell(lstm)} | "
             f"{_permutation_cell(bert)} | new measurement |")
    P.append(f"| adversary: mean ε-max JSD | {_adversary_cell(lstm)} | {_adversary_cell(bert)} | new measurement |")
    for key, label in (("tau_rollout_gradient", "τ(attention rollout, gradient)"),
                       ("tau_rollout_loo", "τ(attention rollout, LOO-TVD)")):
        if key in bert["summary"]:
            P.append(f"| {label} | – (no rollout for a BiLSTM) | {_overall_tau(bert, key)} | new measurement |")
    wp_cells = _bert_wp_cells(data, block.get("wp"))
    if wp_cells:
        P.append(f"| W&P §3.2: test F1 with trained → uniform attention | {wp_cells[0]} | {wp_cells[1]} | "
                 "new measurement |")
    layers = bert["summary"].get("per_layer") or []
    if layers:
        P.append("\nPer layer (the `[CLS]` row of each layer, mean over heads): mean τ with gradient / LOO-TVD.\n")
        P.append("| layer | τ(attention, gradient) | τ(attention, LOO-TVD) |\n|---|---|---|")
        for row in layers:
            P.append(f"| {row['layer']} | {_f(row.get('tau_gradient'), 2)} | {_f(row.get('tau_loo'), 2)} |")
    sentence = _bert_comparison(lstm, bert)
    if sentence:
        P.append("\n" + sentence + "\n")
    P.append(figs.add(paths_of(data)["jw_bert"], "fig_tau_per_layer.png",
                      "τ of each layer's [CLS] attention with gradient and LOO-TVD (BERT-family model)"))
    return P
