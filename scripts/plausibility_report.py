#!/usr/bin/env python
"""The report section "Faithful or plausible?" (:mod:`hf_attn.reporting.plausibility`): SST's human
rationales against every attribution method of five models.

    python scripts/plausibility_report.py --from-runs FOLDER   # FOLDER/<model>/results.json + FOLDER/<model>.metrics.json
    python scripts/plausibility_report.py                      # docs/plausibility/report.md + figures from the records
    python scripts/plausibility_report.py --check              # exit 1 when report.md differs from its records

``--from-runs`` reads each model's analysis folder ``FOLDER/<name>/results.json`` (``hf-attn analyze …
--battery faithfulness --faith-rationales sst_rationales``, the commands on the page) and its training
metrics ``FOLDER/<name>.metrics.json`` (the model folder's ``metrics.json`` / ``eval_results.json``) and
writes ``docs/plausibility/runs/<name>.json``. Bad arguments: one line, exit code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hf_attn.reporting import plausibility as section  # noqa: E402

DOCS = ROOT / "docs" / "plausibility"


def _from_runs(folder: Path) -> None:
    from hf_attn.core.io import write_json_atomic

    found = 0
    for model in section.MODELS:
        results = folder / model.name / "results.json"
        if not results.exists():
            print(f"no {results}: {model.name} left out")
            continue
        metrics_path = folder / f"{model.name}.metrics.json"
        metrics = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.exists() else {}
        if isinstance(metrics.get("test"), dict):  # a transformers run's eval_results.json: {"dev": …, "test": …}
            metrics = {f"test_{k}": v for k, v in metrics["test"].items()}
        record = section.strip_record(json.loads(results.read_text(encoding="utf-8")), model.name, metrics)
        write_json_atomic(str(DOCS / "runs" / f"{model.name}.json"), record, compact=True)
        found += 1
        print(f"wrote docs/plausibility/runs/{model.name}.json")
    if not found:
        raise SystemExit(f"{folder}: no analysis folder of {', '.join(m.name for m in section.MODELS)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-runs", help="a folder of analyses to copy the records from")
    parser.add_argument("--check", action="store_true", help="compare report.md with its records, write nothing")
    args = parser.parse_args(argv)
    if args.from_runs:
        if not os.path.isdir(args.from_runs):
            parser.error(f"--from-runs {args.from_runs}: no such folder")
        _from_runs(Path(args.from_runs))
    records = section.load_records(str(DOCS / "runs"))
    text = section.report_markdown(records)
    page = DOCS / "report.md"
    if args.check:
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            print("stale: docs/plausibility/report.md (run `python scripts/plausibility_report.py`)")
            return 1
        return 0
    from hf_attn.core.io import write_text_atomic

    write_text_atomic(str(page), text)
    for path in section.write_figures(records, str(DOCS / "figures")):
        print(f"wrote {os.path.relpath(path, ROOT)}")
    print("wrote docs/plausibility/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
