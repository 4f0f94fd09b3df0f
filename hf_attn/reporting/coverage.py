"""Coverage: every experiment (table, figure, analysis) of the three papers, and what a report did
with it.

:data:`EXPERIMENTS` is the registry, one :class:`Experiment` per table / figure / analysis of
Jain & Wallace 2019 (J&W), Wiegreffe & Pinter 2019 (W&P) and Tutek & Šnajder 2020 (T&Š), plus the
ERASER table the report adds beyond them: the paper and its table or figure, what it measures, the
papers' corpora, the ids of :data:`~hf_attn.reporting.findings.FINDINGS` that grade it, where it runs
here and, when it has no graded verdict, why. :func:`coverage_rows` joins the registry with the
verdicts of one ``report.json`` (dict) and gives each experiment one status (:data:`STATUSES`):

* graded here — a finding of it has a graded verdict in the report (the corpora are listed);
* run, ungraded — it runs, but nothing in it could be graded (the reason says why);
* not run in this report — it runs here, but this report was made without it (the reason says how);
* not possible here — its data cannot be had offline (the reason says which).

:func:`coverage_section` renders the Markdown the report opens with; :func:`with_coverage` writes it
into an existing ``REPORT.md`` text (``scripts/report_coverage.py`` does so for a saved report).
"""

from __future__ import annotations

from dataclasses import dataclass

from hf_attn.reporting.findings import FINDINGS
from hf_attn.reporting.findings.checks import UNGRADED_VERDICTS

GRADED, UNGRADED, NOT_RUN, IMPOSSIBLE = ("graded here", "run, ungraded", "not run in this report",
                                         "not possible here")
STATUSES = (GRADED, UNGRADED, NOT_RUN, IMPOSSIBLE)
# verdicts that grade nothing: no check could be graded, or the paper states nothing to grade against
HEADING = "## Coverage: the papers' experiments"
DATASETS_DOC = "docs/reproduction/datasets.md (`scripts/dataset_table.py`)"
MIMIC = "MIMIC-III (Diabetes, Anemia) is credentialed data, not obtainable offline"


@dataclass(frozen=True)
class Experiment:
    """One table, figure or analysis of a paper.

    ``where``: where it runs here ("" = not possible here, then ``reason`` says why); ``reason``: why
    it has no graded verdict; ``present``: the dotted path in a report's ``results[dataset]`` that holds
    its numbers when the pipeline ran it; ``plan``: (plan field, value) the report's plan must have
    for it to run; ``run_with``: how to run it when a report was made without it."""

    paper: str
    item: str
    measures: str
    corpora: str
    findings: tuple[str, ...] = ()
    where: str = ""
    reason: str = ""
    present: str | None = None
    plan: tuple[str, object] | None = None
    run_with: str = ""


def _jw() -> tuple[Experiment, ...]:
    """J&W: Tables 1–2, Figs. 1–8, appendix E; the QA and NLI corpora (J&W §3)."""
    classification = "SST, IMDB, AG News, ADR Tweets, 20News, Diabetes, Anemia"
    table2 = "Table 2's corpora"
    sections = "REPORT.md: J&W Table 1–2"
    return (
        Experiment("J&W", "Table 1 (data)", "vocabulary size, average length, train / test size per class",
                   "all ten corpora", where=DATASETS_DOC,
                   reason="statistics of the corpora, no claim to grade: ours beside J&W's"),
        Experiment("J&W", "Table 1 (test performance)", "BiLSTM + additive test F1", classification, ("JW-1",),
                   where=sections),
        Experiment("J&W", "Table 2, §4.1", "Kendall τ of attention with gradients (BiLSTM, Average) and with "
                   "leave-one-out (BiLSTM) per predicted class, fraction with p < 0.05", classification,
                   ("JW-2", "JW-3", "JW-5"), where=sections),
        Experiment("J&W", "§4.1, appendix C (across corpora)", "statements on the corpora taken together: "
                   "correlations around or below 0.5 in most corpora, significance not consistently established, "
                   "the Average encoder's ~0.375 LOO gain and the gradient–LOO gaps on average", classification,
                   ("JWX-1", "JWX-2", "JWX-3", "JWX-4"), where="REPORT.md: Across corpora",
                   run_with="two corpora or more (--datasets sst agnews imdb)"),
        Experiment("J&W", "§4, Table 1 caption (other encoders)", "test F1, Table 2's τ and the adversaries "
                   "for the CNN and Average encoders and for scaled dot-product attention", classification,
                   ("JW-9", "JW-10"),
                   where=sections + " (CNN + additive / dot, BiLSTM + dot, Average + dot rows)"),
        Experiment("J&W", "Fig. 1, appendix E", "one instance's attention beside an adversarial attention with "
                   "the same prediction", "SST, IMDB, 20News, ADR Tweets", where="REPORT.md: J&W §4.2 (figure)",
                   reason="illustrations of single instances: nothing to grade", present="jw.lstm"),
        Experiment("J&W", "Fig. 2", "histograms of τ(attention, gradient) per predicted class",
                   table2, where=sections + " (figure)",
                   reason="the distribution behind Table 2: its means and significant fractions are graded "
                   "in JW-2", present="jw.lstm"),
        Experiment("J&W", "Fig. 3, §4.2.1", "median output change (TVD) under 100 random permutations of the "
                   "attention, against max attention", table2, ("JW-7",),
                   where="REPORT.md: J&W §4.2"),
        Experiment("J&W", "Fig. 4, §4.2.2", "ε-max JSD of adversarial attentions whose prediction stays within ε",
                   table2, ("JW-8",), where="REPORT.md: J&W §4.2"),
        Experiment("J&W", "Fig. 5", "ε-max JSD against max attention", table2,
                   where="REPORT.md: J&W §4.2 (figure)", reason="J&W read a weak negative trend off density "
                   "plots and give no number to grade against", present="jw.lstm"),
        Experiment("J&W", "Figs. 6–7, appendix C", "τ(gradient, LOO) minus τ(attention, LOO) and minus "
                   "τ(attention, gradient), BiLSTM", table2, ("JW-4",), where=sections),
        Experiment("J&W", "Fig. 8, appendix C", "τ(attention, LOO) of the Average encoder minus the BiLSTM's",
                   table2, ("JW-6",), where=sections),
        *_jw_other_corpora(),
    )


def _jw_other_corpora() -> tuple[Experiment, ...]:
    """J&W Tables 1–2 and Figs. 2–5 on the NLI and QA corpora and the corpora not available offline."""
    battery = "Table 1's performance, Table 2's τ, the permutations and adversaries"
    return (
        Experiment("J&W", "Tables 1–2, Figs. 2–5 (SNLI)", battery + " of premise attention given the hypothesis",
                   "SNLI", ("JWS-1", "JWS-2", "JWS-3", "JWS-4"), where="REPORT.md: J&W SNLI", present="jw.snli.results",
                   run_with="set HF_ATTN_SNLI_DIR to the offline SNLI copy"),
        Experiment("J&W", "Tables 1–2, Figs. 2–5 (bAbI)", battery + " of passage attention given the question "
                   "(ε = 0.05)", "bAbI tasks 1–3", where="REPORT.md: J&W QA (bAbI, generated); docs/reproduction/babi.md",
                   present="jw.qa", reason="generated bAbI-style data (the released files are not available "
                   "offline), one seed: not J&W's data, so not graded",
                   run_with="the default plan (qa_tasks)"),
        Experiment("J&W", "Tables 1–2, Figs. 2–5 (CNN QA)", battery + " of passage attention given the question",
                   "CNN (Hermann et al. 2015)", reason="the CNN questions are not obtainable offline (the "
                   "`cnn-qa` loader reads a local copy)"),
        Experiment("J&W", "Tables 1–2, Figs. 2–5 (ADR Tweets, 20News)", battery, "ADR Tweets, 20 Newsgroups",
                   reason="neither corpus is available offline"),
        Experiment("J&W", "Tables 1–2, Figs. 2–5 (MIMIC)", battery, "Diabetes, Anemia", reason=MIMIC),
    )


def _wp() -> tuple[Experiment, ...]:
    """W&P: Tables 1–3, Figs. 3–5 (§3.2–§4)."""
    kept = "Diabetes, Anemia, IMDB, SST"
    return (
        Experiment("W&P", "Table 1 (data)", "the corpora and their statistics (J&W's splits)",
                   "Diabetes, Anemia, IMDB, SST, AG News, 20News", where=DATASETS_DOC,
                   reason="statistics of the corpora, no claim; W&P's table is not in our copy of the paper "
                   "(an excerpt), their corpora are J&W's: J&W Table 1 stands beside ours"),
        Experiment("W&P", "Table 2, §3.2", "test F1 of the base model and of the same model with frozen uniform "
                   "attention", "Diabetes, Anemia, IMDB, SST, AG News, 20News", ("WP-1",),
                   where="REPORT.md: W&P §3.2"),
        Experiment("W&P", "Fig. 3, §3.3", "JSD of 8 seed models' attention from the base against max attention, "
                   "beside J&W's per-instance adversary", "SST, Diabetes and W&P's other kept corpora", ("WP-2",),
                   where="REPORT.md: W&P §3.3"),
        Experiment("W&P", "Table 3, Fig. 4, §3.4", "positive-class F1 of a diagnostic MLP guided by UNIFORM, "
                   "TRAINED MLP, BASE LSTM and ADVERSARY attention", "Diabetes, Anemia, SST", ("WP-3", "WP-4"),
                   where="REPORT.md: W&P Table 3"),
        Experiment("W&P", "§4, Fig. 5", "model-consistent adversary (L = TVD − λ·KL) over λ: JSD–TVD trade-off "
                   "beside seeds, uniform and J&W's adversary", kept, ("WP-5",), where="REPORT.md: W&P §4"),
        Experiment("W&P", "Fig. 3, Table 3, §4 (MIMIC)", "the same tests on the clinical corpora",
                   "Diabetes, Anemia", reason=MIMIC),
    )


def _ts() -> tuple[Experiment, ...]:
    """T&Š: Tables 1–6, Figs. 1–7, appendix C."""
    corpora = "SST, AG News, 20News, IMDB, Anemia"
    table6 = "fragility grid (Table 1) with a {}-layer BiLSTM, additive attention"
    return (
        Experiment("T&Š", "Table 1, §4.1", "F1 with trained attention and its drop with uniform / permuted "
                   "attention; base, concat, tying, MLM × additive, dot", corpora, ("TS-1", "TS-2a", "TS-2d"),
                   where="REPORT.md: T&Š Table 1"),
        Experiment("T&Š", "Table 2, §4.2", "mutual information between embeddings and hidden states "
                   "(most frequent / sampled words, k = 1000)", corpora, ("TS-3",), where="REPORT.md: T&Š Table 2"),
        Experiment("T&Š", "Table 3, §5", "mean per-token prediction probability of correctly classified "
                   "instances", corpora, ("TS-4",), where="REPORT.md: T&Š Table 3"),
        Experiment("T&Š", "Fig. 1, §4.3", "model-consistent adversary (Eq. 6) against the base and the MLM "
                   "model: JSD against TVD", corpora + ", Diabetes", ("TS-5",), where="REPORT.md: T&Š Fig. 1"),
        Experiment("T&Š", "§4.3, §6 (per-instance attacks)", "J&W's per-instance adversary on the T&Š grid: "
                   "ε-max JSD of the regularised models against the base's", "SST (an addition here)",
                   ("TS-6",), where="REPORT.md: T&Š Fig. 1",
                   reason="T&Š ran no per-instance adversary: the checks are an extension, not a reproduction"),
        Experiment("T&Š", "Fig. 2, Figs. 3–7 (appendix D)", "per-token prediction probability along one "
                   "sentence, base against regularised", "SST", where="REPORT.md: T&Š Table 3 (figure)",
                   reason="illustrations of single sentences: the report draws one", present="ts"),
        Experiment("T&Š", "Table 4 (appendix A)", "hyperparameters", "–", where="REPORT.md: T&Š (grid line)",
                   reason="settings, not results: d = 50, H = 25 here (T&Š: 300, 150); δ and η chosen on the dev "
                   "set from T&Š's ranges (the T&Š section's selection table)", present="ts_grid"),
        Experiment("T&Š", "Table 5 (appendix A)", "average instance length and vocabulary size",
                   corpora + ", Diabetes", where=DATASETS_DOC,
                   reason="statistics of the corpora, no claim to grade: ours beside T&Š's"),
        Experiment("T&Š", "Table 6, 2 layers (appendix B)", table6.format(2), "SST, AG News, 20News, IMDB",
                   where="REPORT.md: T&Š Table 6", present="ts_layers.2", plan=("ts_multilayer_layers", 2),
                   reason="the table at one depth; T&Š's statement across depths is graded in TS-7",
                   run_with="the default plan (ts_multilayer_layers = (2, 3))"),
        Experiment("T&Š", "Table 6, 3 layers (appendix B)", table6.format(3), "SST, AG News, 20News, IMDB",
                   where="REPORT.md: T&Š Table 6", present="ts_layers.3", plan=("ts_multilayer_layers", 3),
                   reason="the table at one depth; T&Š's statement across depths is graded in TS-7",
                   run_with="the default plan (ts_multilayer_layers = (2, 3))"),
        Experiment("T&Š", "Table 6 across depths (appendix B)", "the base model's F1 change with uniform / "
                   "permuted attention at 1, 2 and 3 layers (T&Š: it becomes more robust the more layers)",
                   "SST, AG News, 20News, IMDB", ("TS-7",), where="REPORT.md: T&Š Table 6", present="ts_layers",
                   reason="no TS-7 verdict: it needs the base cell at two depths or more, each with a seed spread",
                   run_with="the default plan (ts_multilayer_layers = (2, 3))"),
        Experiment("T&Š", "appendix C", "dot-product attention collapses to uniform unless its query starts "
                   "from N(0, 1)", "all", where="REPORT.md: T&Š Table 1 (dot rows)", present="ts_grid",
                   reason="the N(0, 1) query is the models' default; TS-2d checks that the base's dot attention "
                   "is not ≈ uniform"),
        Experiment("T&Š", "Tables 1–3, Fig. 1 (20News, MIMIC)", "the same tests on these corpora",
                   "20News, Diabetes, Anemia", reason="20 Newsgroups is not available offline; " + MIMIC),
    )


def _beyond() -> tuple[Experiment, ...]:
    """Beyond the papers: ERASER (DeYoung et al. 2020 §4) on the T&Š models."""
    return (Experiment("beyond", "ERASER (DeYoung et al. 2020)", "comprehensiveness and sufficiency AOPC of "
                       "attention, gradient, LOO and integrated gradients on the T&Š models", "SST",
                       ("ER-<cell>",), where="REPORT.md: ERASER faithfulness",
                       reason="none of the three papers ran ERASER: an extension, not graded"),)


EXPERIMENTS: tuple[Experiment, ...] = (*_jw(), *_wp(), *_ts(), *_beyond())


def finding_key(finding_id: str) -> str:
    """The :data:`FINDINGS` id a report's finding comes from ("ER-base-additive" → "ER-<cell>")."""
    for key, _ in FINDINGS:
        if key == finding_id or ("<" in key and finding_id.startswith(key.split("<")[0])):
            return key
    return finding_id


def _verdicts(exp: Experiment, report: dict) -> list[dict]:
    return [f for f in report.get("findings") or [] if finding_key(f["id"]) in exp.findings]


def _ran(exp: Experiment, report: dict, verdicts: list[dict]) -> bool:
    """Whether the report holds the experiment: a verdict of it, its numbers, its plan setting."""
    if exp.plan:
        value = (report.get("plan") or {}).get(exp.plan[0])
        if not (value == exp.plan[1] or isinstance(value, (list, tuple)) and exp.plan[1] in value):
            return False
    if exp.present:
        return any(_lookup(report["results"].get(ds) or {}, exp.present) for ds in report.get("datasets") or [])
    return bool(verdicts) or not exp.findings


def _lookup(data: dict, path: str):
    for key in path.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _verdict_text(verdicts: list[dict]) -> str:
    """"sst: JW-2 not reproduced, JW-3 reproduced" (ungraded ones with their graded checks)."""
    by_dataset: dict[str, list[str]] = {}
    for f in verdicts:
        graded = f.get("graded")
        checks = f" ({graded[0]} of {graded[1]} checks graded)" if graded and f["verdict"] == "not measured" else ""
        by_dataset.setdefault(f.get("dataset", "?"), []).append(f"{f['id']} {f['verdict']}{checks}")
    return "; ".join(f"{ds}: {', '.join(items)}" for ds, items in by_dataset.items())


def status(exp: Experiment, report: dict) -> tuple[str, str]:
    """(status, what the report holds of it or why not) of one experiment in ``report``."""
    if not exp.where:
        return IMPOSSIBLE, exp.reason
    verdicts = _verdicts(exp, report)
    if any(f["verdict"] not in UNGRADED_VERDICTS for f in verdicts):
        return GRADED, f"{exp.where} — {_verdict_text(verdicts)}"
    if not _ran(exp, report, verdicts):
        return NOT_RUN, "; ".join(p for p in (_missing(exp), exp.reason) if p)
    new = "no published value to grade against" if any(f["verdict"] == "new measurement" for f in verdicts) else ""
    why = "; ".join(p for p in (_verdict_text(verdicts), exp.reason or new) if p)
    return UNGRADED, f"{exp.where} — {why}"


def _missing(exp: Experiment) -> str:
    """What a report made without the experiment lacks, or what running it needs."""
    if exp.run_with:
        return f"needs {exp.run_with}"
    if exp.findings:
        return f"no verdict of {', '.join(exp.findings)} in this report"
    return "its numbers are not in this report"


def coverage_rows(report: dict) -> list[dict]:
    """One row per experiment of :data:`EXPERIMENTS`, in registry order, with its status in ``report``."""
    rows = []
    for exp in EXPERIMENTS:
        state, detail = status(exp, report)
        rows.append({"paper": exp.paper, "item": exp.item, "measures": exp.measures, "corpora": exp.corpora,
                     "findings": list(exp.findings), "status": state, "detail": detail})
    return rows


def coverage_counts(rows: list[dict]) -> dict[str, int]:
    """How many experiments have each status (every status listed, in :data:`STATUSES` order)."""
    return {s: sum(r["status"] == s for r in rows) for s in STATUSES}


def coverage_section(report: dict) -> str:
    """The report's opening section: the coverage table of ``report`` (Markdown, deterministic)."""
    rows = coverage_rows(report)
    counts = ", ".join(f"{n} {s}" for s, n in coverage_counts(rows).items())
    lines = [HEADING, "",
             "Every table, figure and analysis of J&W, W&P and T&Š (and the ERASER table beyond them), and what "
             "this report did with it: graded here (the corpora and the verdicts of its findings), run but "
             "ungraded (why), not run in this report (what it needs) or not possible here (why). Written from "
             "the registry `hf_attn.reporting.coverage.EXPERIMENTS` and this report's findings. The corpora, "
             f"beside J&W Table 1 and T&Š Table 5: {DATASETS_DOC}.", "",
             f"Experiments: {counts}.", "",
             "| paper | experiment | what it measures | the papers' corpora | status | here |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['paper']} | {r['item']} | {r['measures']} | {r['corpora']} | {r['status']} | {r['detail']} |"
              for r in rows]
    return "\n".join(lines) + "\n\n## How this report was made\n\n"


def with_coverage(text: str, report: dict) -> str:
    """``REPORT.md`` ``text`` with its coverage section, between the title and the "Generated by"
    paragraph, written afresh from ``report`` (replacing one already there)."""
    start = text.index("\n") + 1
    end = text.index("Generated by `")
    return text[:start] + "\n" + coverage_section(report) + text[end:]
