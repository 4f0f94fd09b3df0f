"""The report's view across corpora: J&W Table 2's rows side by side (ours beside J&W's, per corpus),
J&W's statements about the corpora taken together (:mod:`~hf_attn.reporting.findings.across`), the
verdict of every finding per corpus, and the findings whose verdict differs between corpora (also
listed in the report's summary)."""

from __future__ import annotations

from hf_attn.core.published import JW_PUBLISHED
from hf_attn.reporting.findings import ACROSS, _f
from hf_attn.reporting.findings.checks import UNGRADED_VERDICTS
from hf_attn.reporting.markdown import _verdict_lines

HEADING = "## Across corpora"


def _pair(ours, theirs, digits=2) -> str:
    """"ours / J&W" of a per-class pair: "0.41, 0.44 (J&W 0.34, 0.36)"."""
    mine = ", ".join(_f(v, digits) for v in ours) if ours else "–"
    pub = ", ".join(f"{v:.{digits}f}" for v in theirs) if theirs else "–"
    return f"{mine} ({pub})"


def _per_class(summary: dict | None, key: str, field: str = "mean") -> list | None:
    if not summary or key not in summary:
        return None
    blocks = summary[key]["per_class"]
    return [blocks[c].get(field) for c in sorted(blocks, key=int)]


def table2_rows(per_dataset: dict) -> list[str]:
    """J&W Table 2's rows, one per corpus: ours per predicted class, J&W's in brackets."""
    lines = ["| corpus | BiLSTM test F1 | τ(α, g) BiLSTM | significant | τ(α, g) Average | τ(α, LOO-TVD) BiLSTM | "
             "significant |", "|---|---|---|---|---|---|---|"]
    for ds, data in per_dataset.items():
        jw = (data.get("jw") or {})
        lstm = (jw.get("lstm") or {}).get("summary")
        average = (jw.get("average") or {}).get("summary")
        pub = JW_PUBLISHED.get(ds, {})
        base = (data.get("models") or {}).get("jw_wp_base") or {}
        f1 = f"{_f(base.get('test_f1'))} ({pub['test_f1']:.2f})" if pub else _f(base.get("test_f1"))
        lines.append(f"| {ds} | {f1} | {_pair(_per_class(lstm, 'tau_gradient'), pub.get('tau_gradient'))} | "
                     f"{_pair(_per_class(lstm, 'tau_gradient', 'fraction_significant'), pub.get('tau_gradient_sig'))} | "
                     f"{_pair(_per_class(average, 'tau_gradient'), pub.get('tau_gradient_average'))} | "
                     f"{_pair(_per_class(lstm, 'tau_loo'), pub.get('tau_loo'))} | "
                     f"{_pair(_per_class(lstm, 'tau_loo', 'fraction_significant'), pub.get('tau_loo_sig'))} |")
    return lines


def verdicts_by_corpus(findings: list[dict]) -> dict[str, dict[str, str]]:
    """{finding id: {corpus: verdict}} of the per-corpus findings, in report order."""
    table: dict[str, dict[str, str]] = {}
    for f in findings:
        if f.get("dataset") != ACROSS:
            table.setdefault(f["id"], {})[f["dataset"]] = f["verdict"]
    return table


UNGRADED = UNGRADED_VERDICTS  # no verdict to compare: nothing graded, nothing published, or no such test


def differing_verdicts(findings: list[dict]) -> list[str]:
    """"JW-2: sst not reproduced, agnews reproduced" for every finding graded on two corpora or more whose
    graded verdicts differ (a corpus where it is not measured or a new measurement is shown, not compared)."""
    out = []
    for fid, verdicts in verdicts_by_corpus(findings).items():
        graded = {v for v in verdicts.values() if v not in UNGRADED}
        if sum(v not in UNGRADED for v in verdicts.values()) > 1 and len(graded) > 1:
            out.append(f"{fid}: " + ", ".join(f"{ds} {v}" for ds, v in verdicts.items()))
    return out


def summary_lines(findings: list[dict]) -> list[str]:
    """The summary's lines on corpora: which findings' verdicts differ between corpora (none when one corpus)."""
    corpora = list(dict.fromkeys(f["dataset"] for f in findings if f.get("dataset") != ACROSS))
    if len(corpora) < 2:
        return []
    differ = differing_verdicts(findings)
    if not differ:
        return [f"Every finding graded on more than one of {', '.join(corpora)} has the same verdict on each.", ""]
    return [f"Findings whose verdict differs between corpora ({', '.join(corpora)}):", "",
            *[f"- {line}" for line in differ], ""]


def across_section(per_dataset: dict, findings: list[dict]) -> str:
    """The Markdown section (empty with one corpus)."""
    if len(per_dataset) < 2:
        return ""
    corpora = list(per_dataset)
    P = [HEADING, "",
         f"J&W state several of their results for the corpora taken together. The corpora of this report: "
         f"{', '.join(corpora)} (each with its own plan: see its section).", "",
         "### J&W Table 2, side by side", "",
         "Per predicted class (class 0, class 1), ours with J&W's Table 2 in brackets.", "",
         *table2_rows(per_dataset), ""]
    across = [f for f in findings if f.get("dataset") == ACROSS]
    if across:
        P += ["### J&W's statements across corpora", "", _verdict_lines(across, [f["id"] for f in across]).strip(), ""]
    by_id = verdicts_by_corpus(findings)
    P += ["### Every verdict per corpus", "", "| finding | " + " | ".join(corpora) + " |",
          "|---|" + "---|" * len(corpora)]
    for fid, verdicts in by_id.items():
        P.append(f"| {fid} | " + " | ".join(verdicts.get(ds, "–") for ds in corpora) + " |")
    return "\n".join(P) + "\n"
