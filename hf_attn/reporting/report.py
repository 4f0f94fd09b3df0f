"""Writing a reproduction's report: ``OUT/REPORT.md``, ``OUT/report.json`` and ``OUT/figures``
(:func:`write_report`), opening with the coverage of the papers' experiments
(:mod:`~hf_attn.reporting.coverage`), one function per table of a dataset's section (:func:`dataset_section`),
each corpus section opening with its comparability banner and cells not run, SNLI in its own section
(:mod:`~hf_attn.reporting.comparability`), and the Markdown verdict table (:func:`format_findings_table`).

The tables' Markdown comes from :mod:`~hf_attn.reporting.paper_sections` (the papers' tables and
ERASER) and :mod:`~hf_attn.reporting.beyond_sections` (the faithfulness tables, the BERT-family
section), their cells and figures from :mod:`~hf_attn.reporting.markdown`.

Both files are written without machine paths (``ReproductionLayout.public``): paths inside the output
folder relative to it, any other ``<local path>``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict

from hf_attn.core.io import write_text_atomic
from hf_attn.reproduce.collect import collect, read_json
from hf_attn.reporting.across_section import across_section, summary_lines
from hf_attn.reporting.comparability import with_comparability, with_records
from hf_attn.reporting.coverage import with_coverage
from hf_attn.reporting.findings import TOLERANCE, VERDICTS, findings_of_report
from hf_attn.reproduce.layout import ReproductionLayout
from hf_attn.reproduce.plan import STAGE_TITLES, ReproducePlan
from hf_attn.reporting.markdown import _Figures, _finding_lines, format_findings_table
from hf_attn.reporting.markdown import _verdict_lines  # noqa: F401 (re-exported)
from hf_attn.reporting.paper_sections import (TABLE_HEADERS, _eraser_section, _jw_correlations,
                                              _jw_permutation_adversary, _jw_qa, _jw_snli, _ts_sections,
                                              _wp_sections)
from hf_attn.reporting.beyond_sections import _bert_family_section, _faithfulness_section
from hf_attn.reporting.beyond_sections import BERT_FAMILY_HEADER, FAITHFULNESS_HEADER  # noqa: F401 (re-exported)


def dataset_section(data: dict, findings: list[dict], out_dir: str, figures: list, plan: ReproducePlan) -> str:
    """The Markdown of one dataset: J&W, W&P, T&Š and ERASER tables with their findings; the figures
    are copied into ``out_dir/figures`` and listed in ``figures``."""
    figs = _Figures(data["dataset"], out_dir, figures)
    P = [f"\n# Dataset: {data['dataset']}\n"]
    if plan.quick:
        P.append("> **--quick smoke test**: small random subsets of the real data and one epoch — the numbers "
                 "below exercise the pipeline and are **not** a reproduction.\n")
    elif plan.subset_sizes:
        train, dev, test = plan.subset_sizes
        P.append(f"> **A seeded subset of {data['dataset']}** (this corpus's plan on a 2-core machine; "
                 "`--full-corpora` trains on all of it): "
                 f"{train} train / {dev} dev / {test} test rows drawn from its splits (seed 0), W&P "
                 f"{plan.wp_seeds} seed models and λ ∈ {{{', '.join(f'{x:g}' for x in plan.wp_lambdas)}}}, "
                 f"consistent adversaries at most {plan.wp_adversary_max_epochs} epochs, T&Š {plan.ts_seeds} "
                 f"seeds, J&W battery on {plan.jw_max_instances} test rows. Verdicts below are graded on "
                 "this subset with its own seed spread.\n")
    P += _jw_correlations(data, findings, figs)
    P += _jw_permutation_adversary(data, findings, figs)
    if data["dataset"] == "sst":
        P += _jw_snli(data, plan, findings)
        P += _jw_qa(data, plan)
    P += _wp_sections(data, findings, figs)
    P += _ts_sections(data, findings, figs, plan)
    P += _eraser_section(data, findings, figs)
    if data["dataset"] == "sst":
        P += _bert_family_section(data, figs, plan)
        P += _faithfulness_section(data, figs, plan)
    return "\n".join(P) + "\n"


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
            "holds or a precondition of the experiment fails; undecided = measured, but no check could decide (every "
            "tolerance too wide, or the value within its tolerance of the claimed threshold; the sentence says "
            "which); not measured = the numbers the claim needs were not produced (the sentence says why); new "
            "measurement = the paper states the claim but publishes nothing to grade against; extension = the "
            "paper ran no such test, so the numbers extend it and cannot reproduce it.")


def _summary_line(findings: list[dict]) -> str:
    counts = {v: sum(f["verdict"] == v for f in findings) for v in VERDICTS}
    return "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + "."


# Findings added to the rules after a report was written, and the text the writer of that time printed
# where the finding now goes (REPORT.md's section keeps its tables; the finding takes that text's place).
ADDED_AT = {
    "TS-7": "Not graded: T&Š call these results 'far from conclusive' and say they 'should be taken with a grain "
            "of salt'.\n",
}


def regraded_report_md(text: str, old: list[dict], new: list[dict]) -> str:
    """``REPORT.md`` ``text`` with the verdicts of findings ``old`` replaced by ``new`` (e.g.
    :func:`hf_attn.reporting.findings.regrade` of its report.json), each part rendered by the functions
    that write it (:func:`_finding_lines`, :func:`_summary_line`, :func:`_how_paragraph`,
    :func:`format_findings_table`); the rest of the report (tables, figures, setup) is kept as it is. A
    finding of ``new`` that ``old`` lacks (a rule added since) takes the place of its :data:`ADDED_AT`
    text. Raises ValueError when a part of ``old`` is not in ``text``, or a new finding has no place."""
    def swap(text, before, after):
        if text.count(before) != 1:
            raise ValueError(f"not exactly once in REPORT.md: {before[:80]!r}")
        return text.replace(before, after)

    before = {(f.get("dataset"), f["id"]): f for f in old}
    after = [(f.get("dataset"), f["id"]) for f in new]
    if [k for k in after if k in before] != list(before):
        raise ValueError("the regraded findings are not the report's findings")
    for n in new:
        o = before.get((n.get("dataset"), n["id"]))
        if o is not None:
            text = swap(text, "\n".join(_finding_lines(o)) + "\n", "\n".join(_finding_lines(n)) + "\n")
        elif n["id"] in ADDED_AT:
            text = swap(text, ADDED_AT[n["id"]], "\n".join(_finding_lines(n)) + "\n")
        else:
            raise ValueError(f"{n.get('dataset')} {n['id']} is new to the rules and has no place in REPORT.md")
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
                           + (" --quick " + " ".join(plan.quick_datasets) if getattr(plan, "quick_datasets", ())
                              else "")
                           + (" --bert-family" if plan.bert_family is not None else "")), "",
            "## Summary", "",
            _summary_line(findings), "",
            *summary_lines(findings),
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
    order = list(STAGE_TITLES)  # each corpus's stages in the order they run, the corpora in the report's order

    def rank(key: str):
        dataset, _, stage = key.partition("/")
        return (datasets.index(dataset) if dataset in datasets else len(datasets),
                order.index(stage) if stage in order else len(order))
    for key, st in sorted(stages.items(), key=lambda item: rank(item[0])):
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

    from hf_attn.reproduce.machine import machine_info

    layout = ReproductionLayout(output_dir)
    figures: list[str] = []
    shutil.rmtree(layout.figures, ignore_errors=True)  # generated: copied afresh
    collected = {ds: collect(all_paths[ds]) for ds in datasets}
    all_findings = findings_of_report(collected)
    per_dataset, sections = {}, []
    for ds, data in collected.items():
        findings = [f for f in all_findings if f["dataset"] == ds]
        sections.append(dataset_section(data, findings, output_dir, figures, plan.for_dataset(ds)))
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
    report = with_records(report)  # each corpus's comparability record (hf_attn.reporting.comparability)
    body = with_coverage("\n".join(_report_head(datasets, plan, all_findings, stages, total, machine, machine_start)),
                         report)
    across = across_section(per_dataset, all_findings)
    body += "\n" + (across + "\n" if across else "") + "".join(sections)
    body += (f"\n# {TABLE_HEADERS[11]}\n\nEach finding: the sentence of the paper it tests (verbatim), the rule "
             "derived from it, the tolerance and the verdict (the checks and numbers are in the sections above).\n\n")
    body += format_findings_table(all_findings)
    body = with_comparability(body, report)  # the banners, the cells not run, SNLI in its own section
    report = layout.public(report)
    write_json_atomic(layout.report_json, report)
    write_text_atomic(layout.report_md, layout.public(body))
    return report
