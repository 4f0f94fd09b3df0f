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
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def run_commit(commit: str, model_dir: str, length: int, output: str) -> None:
    """``commit``'s own long-sentence script on ``model_dir`` at ``length`` word pieces → ``output``."""
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "tree")
        _git("worktree", "add", "--detach", "-f", tree, commit)
        try:
            script = next(s for s in SCRIPTS if os.path.exists(os.path.join(tree, s)))
            env = {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false"}
            subprocess.run([sys.executable, script, "--model-dir", os.path.abspath(model_dir), "--lengths", str(length),
                            "--output", os.path.abspath(output)], cwd=tree, env=env, check=True)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default="runs/minilm-sst")
    parser.add_argument("--length", type=int, default=510)
    parser.add_argument("--commits", nargs="+", help="commits to run, the first the reference")
    parser.add_argument("--runs", nargs="+", metavar="COMMIT=PATH", help="combine these outputs instead of running")
    parser.add_argument("--write", default="docs/benchmarks/long_sentence_commits.json")
    args = parser.parse_args(argv)
    if bool(args.commits) == bool(args.runs):
        parser.error("give --commits (run them) or --runs (combine outputs already made), not both")
    if args.runs:
        bad = [r for r in args.runs if "=" not in r or not os.path.isfile(r.partition("=")[2])]
        if bad:
            parser.error(f"--runs: not COMMIT=PATH of an existing file: {bad[0]}")
        runs = [tuple(r.split("=", 1)) for r in args.runs]
    else:
        folder = tempfile.mkdtemp(prefix="long-sentence-")
        runs = []
        for commit in args.commits:
            output = os.path.join(folder, f"{_git('rev-parse', '--short', commit)}.json")
            run_commit(commit, args.model_dir, args.length, output)
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
                     "load_average": made["machine"]["load_average"], "date": made["date"]})
    # the command that runs them all (outputs combined with --runs were made by run_commit's command each)
    model = os.path.relpath(args.model_dir)
    model = model if not model.startswith("..") else os.path.basename(os.path.normpath(args.model_dir))  # no local paths
    command = ["scripts/bench/long_sentence_commits.py", "--model-dir", model,
               "--length", str(args.length), "--commits"] + [row["commit"] for row in rows]
    record = {"command": " ".join(command), "combined_from_runs": bool(args.runs),
              "model": os.path.basename(os.path.normpath(args.model_dir)), "tokens": args.length,
              "rows": combine(rows),  # each with its own run's date, load average and threads
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "combined": time.strftime("%Y-%m-%d")}
    from hf_attn.core.io import write_json_atomic

    write_json_atomic(args.write, record)
    for row in record["rows"]:
        print(f"{row['commit']}: {row['seconds']:.1f} s, {row['speedup_vs_first']:.2f}× the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
