#!/usr/bin/env python
"""The faithfulness table on one long sentence at several commits, one after another on the same
machine and day, so that the speed-ups are ratios of one session's seconds, never of two days'.

    python scripts/bench/long_sentence_commits.py --model-dir runs/minilm-sst --length 510 \\
        --commits 3f0b7de a99b5a1 HEAD --write docs/benchmarks/long_sentence_commits.json

Per commit: a git worktree of it in a temporary folder and that commit's own long-sentence script
(``scripts/bench/long_sentence.py``, or ``scripts/benchmark_long_sentence.py`` before the scripts
moved) run on the given model with that worktree first on ``PYTHONPATH``, one torch thread. With
``--runs`` the per-commit outputs of runs made that way already (``COMMIT=PATH``) are combined
instead of run again (each run's output path is printed as it completes, so that a session cut
short resumes that way). The record keeps each commit's row (with its own run's date and load) and
each one's speed-up against the first commit (its seconds over theirs), whole and per stage. Old
commits run against today's installed dependencies.

The goal (``--goal``, default 3: the last commit that many times as fast as the first) is in the
record with whether it is met and, when the last commit's run counted its FLOPs (``--count-flops``,
passed to the last commit's script: one more untimed pass of the table), what bounds it: the rate
that many times would need at the FLOPs the code computes, against the machine's measured matmul
peak (:func:`stage_flops.rate_bound`), and each stage's GFLOP, seconds and rate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # stage_flops.py, run as a script or loaded by path
SCRIPTS = ("scripts/bench/long_sentence.py", "scripts/benchmark_long_sentence.py")
STAGES = ("naopc_seconds", "soft_seconds")


def _refuse(message: str):
    """One line on standard error, exit code 2."""
    print(f"long_sentence_commits.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        _refuse(f"git {' '.join(args)}: {' '.join(done.stderr.split()) or f'exit status {done.returncode}'}")
    return done.stdout.strip()


def script_of(commit: str, count_flops: bool = False) -> str:
    """``commit``'s long-sentence script (refused when it has none, or, with ``count_flops``, when it
    cannot count FLOPs: checked before any run)."""
    listed = set(_git("ls-tree", "-r", "--name-only", commit, "--", *SCRIPTS).splitlines())
    script = next((s for s in SCRIPTS if s in listed), None)
    if script is None:
        _refuse(f"{commit}: no long-sentence script ({' or '.join(SCRIPTS)})")
    if count_flops and "--count-flops" not in _git("show", f"{commit}:{script}"):
        _refuse(f"--count-flops: {commit}'s {script} cannot count FLOPs (it has no --count-flops)")
    return script


def run_commit(commit: str, model_dir: str, length: int, output: str, count_flops: bool = False) -> None:
    """``commit``'s own long-sentence script on ``model_dir`` at ``length`` word pieces → ``output``;
    ``count_flops``: with its ``--count-flops`` pass (:func:`script_of` refuses a script without it)."""
    script = script_of(commit, count_flops)
    extra = ["--count-flops"] if count_flops else []
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "tree")
        _git("worktree", "add", "--detach", "-f", tree, commit)
        try:
            env = {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false"}
            subprocess.run([sys.executable, script, "--model-dir", os.path.abspath(model_dir), "--lengths", str(length),
                            "--output", os.path.abspath(output), *extra], cwd=tree, env=env, check=True)
        finally:
            _git("worktree", "remove", "--force", tree)


def combine(rows: list[dict]) -> list[dict]:
    """Each row with its speed-up against the first (the first's seconds over its own)."""
    first = rows[0]
    for row in rows:
        row["speedup_vs_first"] = first["seconds"] / row["seconds"]
        for stage in STAGES:
            row[f"{stage.removesuffix('_seconds')}_speedup_vs_first"] = first[stage] / row[stage]
        row["methods_speedup_vs_first"] = {m: first["methods_seconds"][m] / s
                                           for m, s in row["methods_seconds"].items()
                                           if first["methods_seconds"].get(m) and s > 0.01}
    return rows


def stage_rates(row: dict, peak: float) -> list[dict]:
    """Per stage of ``row`` that has both a GFLOP count and seconds (the methods, NAOPC, soft): its
    GFLOP, seconds, achieved GFLOP/s and that rate's share of ``peak``, the largest first."""
    seconds = dict(row.get("methods_seconds", {}))
    seconds |= {stage.removesuffix("_seconds"): row[stage] for stage in STAGES if stage in row}
    out = [{"stage": stage, "gflop": gflop, "seconds": seconds[stage], "gflops": gflop / seconds[stage],
            "share_of_peak": gflop / seconds[stage] / peak}
           for stage, gflop in row.get("gflop", {}).items() if seconds.get(stage, 0) > 0.01]
    return sorted(out, key=lambda r: -r["seconds"])


def goal(rows: list[dict], at_least: float) -> dict:
    """The last row ``at_least`` × as fast as the first: its value, whether it is met, the seconds it
    would take, and, when the last row counted its FLOPs and the machine's peak, what bounds it."""
    first, last = rows[0], rows[-1]
    out = {"goal": f"the last commit ({last['commit']}) ≥ {at_least:g}× the first ({first['commit']})",
           "value": first["seconds"] / last["seconds"], "met": first["seconds"] / last["seconds"] >= at_least,
           "needed_seconds": first["seconds"] / at_least}
    peak = (last.get("peak") or {}).get("gflops")
    if "gflop_total" in last and peak:
        from stage_flops import rate_bound

        out |= {"gflop": last["gflop_total"], "seconds_at_peak": last["gflop_total"] / peak, "peak_gflops": peak,
                "stages": stage_rates(last, peak)}
        if not out["met"]:
            out["bound"] = rate_bound(last["gflop_total"], last["seconds"], first["seconds"], first["commit"], at_least,
                                      peak, who=last["commit"])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default="runs/minilm-sst")
    parser.add_argument("--length", type=int, default=510)
    parser.add_argument("--commits", nargs="+", help="commits to run, the first the reference")
    parser.add_argument("--runs", nargs="+", metavar="COMMIT=PATH", help="combine these outputs instead of running")
    parser.add_argument("--write", default="docs/benchmarks/long_sentence_commits.json")
    parser.add_argument("--goal", type=float, default=3.0, help="the speed-up asked of the last commit")
    parser.add_argument("--count-flops", action="store_true",
                        help="the last commit's run also counts each stage's FLOPs (one more untimed pass)")
    args = parser.parse_args(argv)
    if not (args.goal > 0 and math.isfinite(args.goal)):
        parser.error(f"--goal must be a positive, finite speed-up, got {args.goal:g}")
    if bool(args.commits) == bool(args.runs):
        parser.error("give --commits (run them) or --runs (combine outputs already made), not both")
    if args.runs and args.count_flops:
        parser.error("--count-flops runs the last commit again; with --runs the outputs are combined as they are")
    if args.count_flops:
        script_of(args.commits[-1], count_flops=True)  # refused before the first run, not after an hour of them
    if args.runs:
        bad = [r for r in args.runs if "=" not in r or not os.path.isfile(r.partition("=")[2])]
        if bad:
            parser.error(f"--runs: not COMMIT=PATH of an existing file: {bad[0]}")
        runs = [tuple(r.split("=", 1)) for r in args.runs]
    else:
        folder = tempfile.mkdtemp(prefix="long-sentence-")
        runs = []
        for number, commit in enumerate(args.commits, 1):
            output = os.path.join(folder, f"{_git('rev-parse', '--short', commit)}.json")
            run_commit(commit, args.model_dir, args.length, output, args.count_flops and number == len(args.commits))
            print(f"{commit}: {output}", flush=True)
            runs.append((commit, output))
    rows = []
    for commit, path in runs:
        resolved = _git("rev-parse", "--short", commit)
        with open(path, encoding="utf-8") as f:
            made = json.load(f)
        found = [r for r in made.get("rows", []) if r.get("tokens") == args.length]
        if len(found) != 1:
            _refuse(f"{path}: no single row of {args.length} tokens (it holds "
                    f"{[r.get('tokens') for r in made.get('rows', [])]})")
        rows.append({"commit": resolved, **found[0], "threads": made.get("threads"),
                     "load_average": made["machine"]["load_average"], "date": made["date"]}
                    | ({"peak": made["peak"]} if "peak" in made else {}))
    # the command that runs them all (outputs combined with --runs were made by run_commit's command each)
    model = os.path.relpath(args.model_dir)
    model = model if not model.startswith("..") else os.path.basename(os.path.normpath(args.model_dir))  # no local paths
    command = ["scripts/bench/long_sentence_commits.py", "--model-dir", model,
               "--length", str(args.length), "--goal", f"{args.goal:g}", "--commits"] + [row["commit"] for row in rows]
    command += ["--count-flops"] if "gflop_total" in rows[-1] else []
    record = {"command": " ".join(command), "combined_from_runs": bool(args.runs),
              "model": os.path.basename(os.path.normpath(args.model_dir)), "tokens": args.length,
              "rows": combine(rows),  # each with its own run's date, load average and threads
              "goal": goal(rows, args.goal),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "combined": time.strftime("%Y-%m-%d")}
    from hf_attn.core.io import write_json_atomic

    write_json_atomic(args.write, record)
    for row in record["rows"]:
        print(f"{row['commit']}: {row['seconds']:.1f} s, {row['speedup_vs_first']:.2f}× the first")
    print(f"goal {record['goal']['goal']}: {'met' if record['goal']['met'] else 'not met'}"
          + (f" ({record['goal']['bound']})" if "bound" in record["goal"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
