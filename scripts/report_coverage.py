#!/usr/bin/env python
"""Write the coverage section into a saved reproduction report, without its run folders.

    python scripts/report_coverage.py                      # docs/reproduction/REPORT.md
    python scripts/report_coverage.py OUT                  # OUT/REPORT.md from OUT/report.json
    python scripts/report_coverage.py --check              # exit 1 when REPORT.md's section is stale

``hf-attn reproduce`` opens every report it writes with the coverage of the papers' experiments
(:func:`hf_attn.reporting.coverage.with_coverage`); a report written before that, or one whose
registry of experiments changed since, gets the section from this script: the same function, joined
with the findings of the report's own ``report.json``. Nothing else in ``REPORT.md`` changes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hf_attn.reporting.coverage import with_coverage  # noqa: E402


def updated(folder: str) -> tuple[str, str]:
    """(REPORT.md as it is, REPORT.md with its coverage section written from report.json)."""
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(folder, "REPORT.md"), encoding="utf-8") as f:
        text = f.read()
    return text, with_coverage(text, report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default=os.path.join(ROOT, "docs", "reproduction"))
    parser.add_argument("--check", action="store_true", help="only say whether the section is up to date")
    args = parser.parse_args(argv)
    before, after = updated(args.folder)
    if args.check:
        print("up to date" if before == after else "stale: run scripts/report_coverage.py")
        return int(before != after)
    path = os.path.join(args.folder, "REPORT.md")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(after)
    os.replace(path + ".tmp", path)
    print(f"wrote the coverage section of {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
