"""Compare two ``report.json`` files of ``hf-attn reproduce`` finding by finding: every verdict and
measured value before and after, the findings whose verdict changed first, and the summary counts.

    python scripts/compare_reports.py OLD_REPORT_JSON NEW_REPORT_JSON --title TITLE --note TEXT --output OUT.md

Writes Markdown (atomically) and prints the counts. A finding is matched by its id and dataset;
one present on one side only is listed as added or removed."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter


def _key(finding: dict) -> tuple[str, str]:
    return finding["id"], finding.get("dataset") or ""


def _number(value) -> str:
    if isinstance(value, bool) or value is None:
        return "–" if value is None else str(value)
    if isinstance(value, (int, float)):
        return "–" if isinstance(value, float) and not math.isfinite(value) else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_number(v)}" for k, v in value.items()) + "}"
    return str(value)


def compare(old: dict, new: dict) -> dict:
    """``{"rows": [...], "changed": [...], "added": [...], "removed": [...], "counts": {...}}``."""
    before = {_key(f): f for f in old["findings"]}
    after = {_key(f): f for f in new["findings"]}
    rows = []
    for key in [k for k in after if k in before]:
        a, b = before[key], after[key]
        rows.append({"id": key[0], "dataset": key[1], "before": a["verdict"], "after": b["verdict"],
                     "measured_before": a.get("measured"), "measured_after": b.get("measured"),
                     "same_verdict": a["verdict"] == b["verdict"], "sentence_after": b.get("sentence", "")})
    return {"rows": rows, "changed": [r for r in rows if not r["same_verdict"]],
            "added": [k for k in after if k not in before], "removed": [k for k in before if k not in after],
            "counts": {"before": Counter(f["verdict"] for f in old["findings"]),
                       "after": Counter(f["verdict"] for f in new["findings"])}}


def markdown(result: dict, title: str, note: str) -> str:
    lines = [f"# {title}", "", note, ""]
    changed = result["changed"]
    lines.append(f"**{len(result['rows'])} findings compared; {len(changed)} verdict(s) changed.**")
    lines.append("")
    if changed:
        lines += ["## Verdicts that changed", "", "| finding | corpus | before | now | the finding now says |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['id']} | {r['dataset']} | {r['before']} | {r['after']} | {r['sentence_after']} |"
                  for r in changed]
        lines.append("")
    for name, keys in (("Added", result["added"]), ("Removed", result["removed"])):
        if keys:
            lines += [f"## {name}", ""] + [f"- {k[0]} ({k[1]})" for k in keys] + [""]
    lines += ["## Every finding", "", "| finding | corpus | verdict before | verdict now | measured before | measured now |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['dataset']} | {r['before']} | {r['after']} | {_number(r['measured_before'])} | "
              f"{_number(r['measured_after'])} |" for r in result["rows"]]
    counts = result["counts"]
    lines += ["", "Summary: before, " + ", ".join(f"{n} {v}" for v, n in sorted(counts["before"].items())) +
              "; now, " + ", ".join(f"{n} {v}" for v, n in sorted(counts["after"].items())) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--title", default="Verdicts before and after")
    parser.add_argument("--note", default="")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, ".")
    from hf_attn.core.io import read_json, write_text_atomic

    result = compare(read_json(args.old), read_json(args.new))
    write_text_atomic(args.output, markdown(result, args.title, args.note))
    print(json.dumps({"compared": len(result["rows"]), "changed": len(result["changed"]),
                      "added": len(result["added"]), "removed": len(result["removed"])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
