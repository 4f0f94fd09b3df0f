#!/usr/bin/env python
"""Write the comparability banners, the cells not run and the SNLI section into a saved reproduction
report, without its run folders.

    python scripts/report_comparability.py                 # docs/reproduction/REPORT.md + report.json
    python scripts/report_comparability.py OUT             # OUT/REPORT.md + OUT/report.json
    python scripts/report_comparability.py --check         # exit 1 when either is stale

``hf-attn reproduce`` opens every corpus section of the reports it writes with a comparability banner
and the list of the papers' cells it did not run, and gives SNLI its own section
(:mod:`hf_attn.reporting.comparability`); a report written before that gets them from this script:
the records are computed from its own ``report.json`` and the corpora record
(``docs/reproduction/datasets.json``), stored in ``report.json`` (``results[dataset]["comparability"]``,
``results["sst"]["jw"]["snli"]["comparability"]``) and rendered into ``REPORT.md``. Nothing else
changes: the verdicts, tables and findings stay as they are (``regraded_report_md`` still applies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hf_attn.core.io import write_json_atomic, write_text_atomic  # noqa: E402
from hf_attn.reporting.comparability import with_comparability, with_records  # noqa: E402


def updated(folder: str) -> tuple[dict, dict, str, str]:
    """(report.json as it is, with its records; REPORT.md as it is, with its banners and SNLI section)."""
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(folder, "REPORT.md"), encoding="utf-8") as f:
        text = f.read()
    new = with_records(report)
    return report, new, text, with_comparability(text, new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default=os.path.join(ROOT, "docs", "reproduction"))
    parser.add_argument("--check", action="store_true",
                        help="only say whether report.json and REPORT.md are up to date")
    args = parser.parse_args(argv)
    report, new, before, after = updated(args.folder)
    stale = report != new or before != after
    if args.check:
        print("stale: run scripts/report_comparability.py" if stale else "up to date")
        return int(stale)
    write_json_atomic(os.path.join(args.folder, "report.json"), new)
    write_text_atomic(os.path.join(args.folder, "REPORT.md"), after)
    print(f"wrote the comparability records and sections of {os.path.relpath(args.folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
