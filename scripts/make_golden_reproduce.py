"""Make the golden file of ``hf-attn reproduce --datasets sst --quick`` (tests/data/golden/reproduce_quick_sst.json).

The golden file holds every deterministic value of a quick run's report.json, flattened to
``{"results/sst/jw/lstm/summary/tau_gradient/overall/mean": 0.41, ...}``: numbers, strings (verdicts and
verdict sentences included), booleans and nulls. Left out (they differ between two runs on the same
machine, or between machines): timings (any key with "seconds", "wall", "minutes", "tokens_per_second",
"this_run", "this_invocation"), memory peaks ("peak_mb"), the machine (``machine_start`` / ``machine_end``: CPU, load average,
threads, platform), versions, the stage records (``stages``), thread / process counts, and paths.
tests/test_reproduce.py::test_quick_report_matches_golden flattens a new quick run the same way
(:func:`flatten_report`) and compares (:func:`compare_flat`).

Regenerate it only deliberately (a change that is meant to move the numbers), from a quick run made
with one thread::

    OMP_NUM_THREADS=1 hf-attn reproduce --datasets sst --quick --output-dir runs/golden --threads 1
    python scripts/make_golden_reproduce.py runs/golden/report.json

or let this script make the run (``--run``, into a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden", "reproduce_quick_sst.json")
COMMAND = "hf-attn reproduce --datasets sst --quick --threads 1 (OMP_NUM_THREADS=1)"

# whole subtrees that describe the machine, the run's timing or how its work was split between
# processes (sharding; W&P's adversary_shard_instances, a setting recorded after the golden file was made),
# not its results
EXCLUDED_KEYS = {"machine_start", "machine_end", "stages", "versions", "timing", "seconds", "processes", "sharding",
                 "adversary_shard_instances", "num_threads", "torch_threads", "load_average_1_5_15", "platform", "cpu",
                 "cpu_count"}
# any key containing one of these is a time, a speed or a memory peak (the faithfulness table's MB per sentence)
EXCLUDED_PARTS = re.compile(r"seconds|wall|minutes|tokens_per_second|this_run|this_invocation|peak_mb")
# keys holding a path (relative to the output folder since the restructure, absolute before)
PATH_KEYS = {"dir", "model_dir", "runs_dir", "data", "data_path", "output_dir", "instances_file"}


def _excluded(key: str) -> bool:
    return key in EXCLUDED_KEYS or key in PATH_KEYS or bool(EXCLUDED_PARTS.search(key))


def flatten_report(report: dict) -> dict:
    """``{"a/b/0/c": value}`` for every deterministic leaf of a report.json (see the module docstring)."""
    flat = {}

    def walk(value, path):
        if isinstance(value, dict):
            for k, v in value.items():
                if not _excluded(str(k)):
                    walk(v, f"{path}/{k}" if path else str(k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}/{i}")
        else:
            flat[path] = value

    walk(report, "")
    return flat


def _same(golden, new, rel: float, abs_: float) -> bool:
    if isinstance(golden, bool) or isinstance(new, bool) or golden is None or new is None:
        return golden is new or golden == new and type(golden) is type(new)
    if isinstance(golden, (int, float)) and isinstance(new, (int, float)):
        if math.isnan(golden) or math.isnan(new):
            return math.isnan(golden) and math.isnan(new)
        return abs(golden - new) <= max(rel * max(abs(golden), abs(new)), abs_)
    return golden == new


def compare_flat(golden: dict, new: dict, rel: float = 1e-4, abs_: float = 1e-6) -> list[str]:
    """The differences between two flattened reports, as readable lines (numbers within ``rel`` /
    ``abs_``, everything else exactly); [] when they agree."""
    diffs = []
    for key, value in golden.items():
        if key not in new:
            diffs.append(f"{key}: missing (golden {value!r})")
        elif not _same(value, new[key], rel, abs_):
            diffs.append(f"{key}: golden {value!r}, now {new[key]!r}")
    diffs += [f"{key}: not in the golden file (now {new[key]!r})" for key in new if key not in golden]
    return diffs


def write_golden(report_path: str, golden_path: str = GOLDEN) -> dict:
    with open(report_path, encoding="utf-8") as f:
        flat = flatten_report(json.load(f))
    os.makedirs(os.path.dirname(golden_path), exist_ok=True)
    payload = {"made_by": "scripts/make_golden_reproduce.py", "command": COMMAND,
               "excluded": "timings, machine, versions, stage records, thread/process counts, paths "
                           "(see scripts/make_golden_reproduce.py)",
               "values": flat}
    with open(golden_path, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1, ensure_ascii=False, allow_nan=True)
        f.write("\n")
    return payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", nargs="?", help="report.json of a quick run (omit with --run)")
    parser.add_argument("--run", action="store_true", help="make the quick run first (one thread)")
    parser.add_argument("--golden", default=GOLDEN, help="the golden file to write")
    args = parser.parse_args(argv)
    if args.run:
        sys.path.insert(0, ROOT)
        from hf_attn.reproduce import reproduce

        out = tempfile.mkdtemp(prefix="golden-reproduce-")
        reproduce(["sst"], out, quick=True, progress=False, threads=1)
        args.report = os.path.join(out, "report.json")
    if not args.report:
        parser.error("give a report.json or --run")
    payload = write_golden(args.report, args.golden)
    print(f"wrote {os.path.relpath(args.golden)}: {len(payload['values'])} values from {os.path.basename(args.report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
