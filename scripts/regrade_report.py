#!/usr/bin/env python
"""Re-grade a saved reproduction report in place, without its run folders.

    python scripts/regrade_report.py                      # docs/reproduction
    python scripts/regrade_report.py OUT                  # OUT/report.json and OUT/REPORT.md
    python scripts/regrade_report.py --check              # exit 1 when a verdict is stale

Every finding is computed afresh from the numbers ``report.json`` holds
(:func:`hf_attn.reporting.findings.regrade`, the current verdict rules); ``report.json`` gets the new
findings (the whole list and each corpus's), and ``REPORT.md`` its verdicts, summary line, verdict
table and legend (:func:`hf_attn.reporting.report.regraded_report_md`), its coverage section
(:func:`hf_attn.reporting.coverage.with_coverage`), and each faithfulness table's printed summary and
the section's description re-printed from the numbers report.json holds (the labels of the current
code: the leave-one-out row is the LOO-drop, not J&W's LOO-TVD). No measured number changes. Both files are written
atomically. ``scripts/compare_reports.py OLD NEW`` lists what moved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hf_attn.core.io import json_safe, write_json_atomic, write_text_atomic  # noqa: E402
from hf_attn.reporting.coverage import with_coverage  # noqa: E402
from hf_attn.reporting.findings import regrade  # noqa: E402
from hf_attn.reporting.report import regraded_report_md  # noqa: E402


def _swap_block(text: str, start: str, end: str, new: str) -> str:
    """``text`` with the one block from ``start`` up to (not including) the next ``end`` replaced."""
    if text.count(start) != 1:
        raise ValueError(f"not exactly once in REPORT.md: {start[:80]!r}")
    i = text.index(start)
    j = text.index(end, i)
    return text[:i] + new + text[j:]


def refreshed_faithfulness(text: str, report: dict) -> str:
    """REPORT.md's faithfulness section with its description and each table's summary printed by the
    current code (:func:`hf_attn.reporting.beyond_sections._faithfulness_section`,
    :meth:`FaithfulnessResult.summary`) from report.json's numbers; figures and headings kept."""
    from hf_attn.batteries.faithfulness import FaithfulnessResult
    from hf_attn.reporting.beyond_sections import FAITHFULNESS_HEADER, _faithfulness_section
    from hf_attn.reproduce.plan import ReproducePlan

    if f"## {FAITHFULNESS_HEADER}" not in text:
        return text
    data = report["results"]["sst"]
    plan = ReproducePlan.from_record(report["plan"])

    class NoFigures:  # the figures are already in the report's folder
        def add(self, *args, **kwargs):
            return ""

    description = next(line for line in _faithfulness_section({**data, "paths": {"faith_lstm": "", "faith_bert": ""}},
                                                              NoFigures(), plan) if line.startswith("Rows: "))
    text = _swap_block(text, "Rows: attribution methods", "\n", description.rstrip("\n"))
    for label, result in (("J&W BiLSTM + additive", data.get("faithfulness")),
                          ("MiniLM (the BERT-family", (data.get("bert_family") or {}).get("faithfulness"))):
        if not result:
            continue
        heading = text.index(f"### {label}")
        start = text.index("| method | comprehensiveness", heading)
        end = text.index("\n![Faithfulness table", start)
        text = text[:start] + FaithfulnessResult.from_payload(result).summary() + "\n" + text[end:]
    return text


def regraded(folder: str) -> tuple[dict, dict, str, str]:
    """(report.json as it is, re-graded; REPORT.md as it is, re-graded)."""
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(folder, "REPORT.md"), encoding="utf-8") as f:
        text = f.read()
    findings = json_safe(regrade(report))  # as report.json stores them (tuples as lists, NaN as null)
    new = json.loads(json.dumps(report))
    new["findings"] = findings
    for ds in new["datasets"]:
        new["results"][ds]["findings"] = [f for f in findings if f.get("dataset") == ds]
    after = with_coverage(regraded_report_md(text, report["findings"], findings), new)
    return report, new, text, refreshed_faithfulness(after, new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default=os.path.join(ROOT, "docs", "reproduction"))
    parser.add_argument("--check", action="store_true", help="only say whether the verdicts are up to date")
    args = parser.parse_args(argv)
    report, new, before, after = regraded(args.folder)
    stale = report["findings"] != new["findings"] or before != after
    if args.check:
        print("stale: run scripts/regrade_report.py" if stale else "up to date")
        return int(stale)
    write_json_atomic(os.path.join(args.folder, "report.json"), new)
    write_text_atomic(os.path.join(args.folder, "REPORT.md"), after)
    print(f"re-graded {os.path.relpath(args.folder)}: {len(new['findings'])} findings "
          f"({len(new['findings']) - len(report['findings'])} new)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
