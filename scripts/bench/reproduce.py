#!/usr/bin/env python
"""Benchmark of the whole reproduction: wall time of ``hf-attn reproduce --datasets sst`` from scratch.

    python scripts/bench/reproduce.py [--output-dir runs/reproduce-bench] [--quick]
                                          [--seeds 3] [--output result.json]

Goal: the default ``--datasets sst`` finishes in under 60 minutes on 2 idle cores. It is
not one of ``scripts/bench/analyses.py``'s sections: those time one analysis on a trained model in
seconds, this one trains ~50 models and takes most of an hour, so it is run on purpose.

The output folder must not hold finished runs (a rerun reuses them and would time only the
report); ``--resume`` times whatever is left instead. Prints and writes the total wall time, the
per-stage times from ``OUT/stages.json`` beside the built-in estimates, the load average before and
after (a load above the CPU count means the timing is contended) and the number of models trained.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _count_runs(root: str) -> int:
    return sum("metrics.json" in files for _, _, files in os.walk(root)) if os.path.isdir(root) else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="runs/reproduce-bench")
    parser.add_argument("--quick", action="store_true", help="time the --quick smoke test instead")
    parser.add_argument("--seeds", type=int, default=None, help="T&Š grid seeds (default: reproduce's)")
    parser.add_argument("--wp-seeds", type=int, default=None, help="W&P seed models (default: reproduce's 8)")
    parser.add_argument("--resume", action="store_true", help="allow an output folder with finished runs")
    parser.add_argument("--threads", default="1",
                        help="torch threads: a number or auto (default 1: the machine is shared)")
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                        help="2: the W&P chain in a second process (see hf-attn reproduce --jobs)")
    parser.add_argument("--output", help="write the result as JSON here")
    args = parser.parse_args(argv)

    from hf_attn.reproduce import ReproducePlan, reproduce, stage_estimates

    runs_before = _count_runs(os.path.join(args.output_dir, "runs"))
    if runs_before and not args.resume:
        parser.error(f"{args.output_dir} already holds {runs_before} finished runs: a rerun reuses them; "
                     "use a fresh --output-dir or --resume")
    load_before = os.getloadavg()
    print(f"reproduce --datasets sst{' --quick' if args.quick else ''} → {args.output_dir}; load average "
          f"{load_before[0]:.1f} on {os.cpu_count()} CPUs (timings are contended if that exceeds the CPUs)",
          flush=True)
    start = time.perf_counter()
    report = reproduce(["sst"], args.output_dir, quick=args.quick, seeds=args.seeds, wp_seeds=args.wp_seeds,
                       progress=True, threads=args.threads if args.threads == "auto" else int(args.threads),
                       jobs=args.jobs)
    wall = time.perf_counter() - start
    load_after = os.getloadavg()
    plan = ReproducePlan.for_mode(args.quick, args.seeds, args.wp_seeds)
    estimates = stage_estimates(plan)
    result = {"benchmark": "reproduce --datasets sst" + (" --quick" if args.quick else ""),
              "wall_seconds": round(wall, 1), "wall_minutes": round(wall / 60, 2),
              "goal_minutes": 2 if args.quick else 60, "within_goal": wall / 60 <= (2 if args.quick else 60),
              "models_trained": _count_runs(os.path.join(args.output_dir, "runs")) - runs_before
                                + _count_runs(os.path.join(args.output_dir, "analysis")),
              "stages": {k: {"seconds": v["seconds_this_invocation"],
                             "estimate_seconds": estimates.get(k.split("/", 1)[1])}
                         for k, v in report["stages"].items()},
              "load_average_before": load_before, "load_average_after": load_after,
              "cpu_count": os.cpu_count(), "threads": args.threads, "jobs": args.jobs,
              "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
              "peak_rss_children_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20, 2),
              "plan": report["plan"]}
    print(f"{'stage':14s} {'minutes':>8s} {'estimate':>9s}")
    for key, row in result["stages"].items():
        print(f"{key:14s} {row['seconds'] / 60:8.1f} {(row['estimate_seconds'] or 0) / 60:9.1f}")
    print(f"total wall time {wall / 60:.1f} min (goal ≤ {result['goal_minutes']} min: "
          f"{'met' if result['within_goal'] else 'missed'}); load average before {load_before[0]:.1f}, "
          f"after {load_after[0]:.1f}", flush=True)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
