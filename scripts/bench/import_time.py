#!/usr/bin/env python
"""What ``import hf_attn`` costs against ``import torch, transformers``, and what it loads.

    python scripts/bench/import_time.py [--rounds 7] [--baseline DIR] [--output docs/benchmarks/import_time.json]

Each round runs, in fresh interpreters with one thread (``OMP_NUM_THREADS=1``), one after the other
so that a shared machine's load falls on all of them alike: ``import torch, transformers``;
``import hf_attn``; ``import hf_attn`` followed by the Auto classes (``from transformers import
AutoConfig, AutoModelForSequenceClassification``, what a user who loads a folder imports); with
``--baseline DIR`` (an older copy of the package: ``mkdir /tmp/base && git archive COMMIT | tar -x -C
/tmp/base``, run through ``PYTHONPATH``) the baseline's ``import hf_attn``; and ``hf-attn train`` on an
empty CSV (a refused command: the time to its one-line error), with this checkout and the baseline.
Per row: the median CPU seconds (user + system of the child, ``wait4``) and wall seconds; the
ratios are of medians of CPU time against ``import torch, transformers`` of the same rounds.
Beside them: the modules ``import hf_attn`` loads (the heavy libraries among them, their count) and
the load average before and after, with the machine's name and CPU count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("torch", "transformers", "gradio", "matplotlib", "datasets", "evaluate", "scipy", "captum", "pandas",
         "sklearn", "numpy", "huggingface_hub", "safetensors", "accelerate")
CLI = ("import sys\nsys.argv = ['hf-attn', 'train', '--dataset', {csv!r}, '--output-dir', {out!r}, '--quiet']\n"
       "from hf_attn.cli import main\nsys.exit(main())")


def timed(code: str, path: str, cwd: str) -> tuple[float, float, int]:
    """``python -c code`` in ``cwd`` (not a checkout: the interpreter puts it first on sys.path) with
    ``path`` first on PYTHONPATH → (CPU seconds of the child, wall seconds, exit code)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=path,
               TOKENIZERS_PARALLELISM="false", GRADIO_ANALYTICS_ENABLED="False")
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, child.returncode


def loaded_modules(path: str, cwd: str) -> list[str]:
    code = "import json, sys\nimport hf_attn\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd,
                          env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=path))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", default=None, help="an older copy of the package (git archive COMMIT)")
    parser.add_argument("--baseline-name", default=None, help="what the baseline is (e.g. its commit)")
    parser.add_argument("--output", default=os.path.join(REPO, "docs", "benchmarks", "import_time.json"))
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="import-time-")
    empty = os.path.join(work, "empty.csv")
    open(empty, "w").close()
    rows = {"torch_transformers": ("import torch, transformers", REPO),
            "hf_attn": ("import hf_attn", REPO),
            "hf_attn_and_auto_classes": ("import hf_attn\nfrom transformers import AutoConfig, "
                                         "AutoModelForSequenceClassification", REPO),
            "cli_refusal_empty_csv": (CLI.format(csv=empty, out=os.path.join(work, "o")), REPO)}
    if args.baseline:
        rows["baseline_hf_attn"] = ("import hf_attn", args.baseline)
        rows["baseline_cli_refusal_empty_csv"] = (CLI.format(csv=empty, out=os.path.join(work, "b")), args.baseline)
    load_before = os.getloadavg()
    runs: dict[str, list] = {name: [] for name in rows}
    for round_ in range(args.rounds):
        for name, (code, path) in rows.items():  # alternating: each round runs every row once
            cpu, wall, code_ = timed(code, path, work)
            runs[name].append({"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "exit": code_})
        print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
            f"{n} {runs[n][-1]['cpu_s']:.2f}s" for n in rows), flush=True)
    load_after = os.getloadavg()
    medians = {name: {"cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 3),
                      "wall_s": round(statistics.median(r["wall_s"] for r in rs), 3),
                      "exit_codes": sorted({r["exit"] for r in rs})} for name, rs in runs.items()}
    base = medians["torch_transformers"]["cpu_s"]
    per_round = [r["cpu_s"] / t["cpu_s"] for r, t in zip(runs["hf_attn"], runs["torch_transformers"])]
    modules = loaded_modules(REPO, work)
    if args.baseline:
        baseline_modules = loaded_modules(args.baseline, work)
    tops = sorted({m.split(".")[0] for m in modules})
    record = {
        "what": "CPU seconds (user + system, wait4) of fresh interpreters, one thread, the rows alternating "
                "round by round; ratios: median CPU time over the median of `import torch, transformers`",
        "date": datetime.date.today().isoformat(),
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "shared": True, "load_average_before": [round(v, 2) for v in load_before],
                    "load_average_after": [round(v, 2) for v in load_after],
                    "note": "a machine shared with other jobs: absolute seconds vary with its load; the ratios "
                            "are of rows measured back to back in the same rounds"},
        "rounds": args.rounds,
        "medians": medians,
        "ratio_cpu": {name: round(m["cpu_s"] / base, 3) for name, m in medians.items()},
        "ratio_cpu_hf_attn_per_round": [round(r, 3) for r in per_round],
        "import_hf_attn_loads": {"modules": len(modules), "top_level_packages": tops,
                                 "heavy_libraries": sorted(set(HEAVY) & set(tops)),
                                 "hf_attn_modules": [m for m in modules if m.startswith("hf_attn")]},
        "baseline": args.baseline_name or args.baseline,
        "baseline_import_hf_attn_loads": None if not args.baseline else {
            "modules": len(baseline_modules),
            "heavy_libraries": sorted(set(HEAVY) & {m.split(".")[0] for m in baseline_modules})},
        "runs": runs,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(json.dumps({"medians": medians, "ratio_cpu": record["ratio_cpu"],
                      "heavy_libraries": record["import_hf_attn_loads"]["heavy_libraries"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
