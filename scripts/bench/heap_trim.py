"""Peak RSS and seconds of integrated gradients through the public API with and without the C heap
trim after its passes (``hf_attn.core.batching.release_freed_memory``), alternating in one run.

    python scripts/bench/heap_trim.py [--model runs/minilm-sst] [--sentences 100] [--rounds 2] \
        [--write docs/benchmarks/heap_trim.json]

The two integrated-gradients rows of ``scripts/bench/peers.py`` (50 Gauss–Legendre nodes; the
completeness target with the nested rule), each in a fresh worker process on one thread that reads
the SST test sentences from a job file, loads the model, and reports the method's seconds and the
process's peak RSS (``ru_maxrss``) before and after. "untrimmed" sets
``RESIDENT_GROWTH_KEPT`` so high that no trim happens (the earlier behaviour); nothing else differs,
and the attributions of the two variants are compared exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date

ROWS = {"integrated_gradients": {"ig_steps": 50, "ig_target": None},
        "integrated_gradients_target": {"ig_target": 0.01, "ig_rule": "gauss-kronrod"}}
VARIANTS = ("trimmed", "untrimmed")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker(job_path: str) -> int:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from hf_attn.core import batching

    if job["variant"] == "untrimmed":
        batching.RESIDENT_GROWTH_KEPT = 2**62
    explainer = Explainer.from_pretrained(job["model"], device="cpu")
    loaded = _peak_mb()
    start = time.perf_counter()
    with torch.inference_mode(False):
        result = explainer.attributions(job["texts"], methods=("integrated_gradients",), **ROWS[job["row"]])
    seconds = time.perf_counter() - start
    with open(job["output"], "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "rss_mb": _peak_mb(), "rss_after_load_mb": loaded,
                   "values": result.values["integrated_gradients"]}, f)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/minilm-sst", help="a transformers classifier folder")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", default=None, help="save the record as JSON")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if not os.path.isdir(args.model):
        parser.error(f"--model {args.model!r}: no such folder (hf-attn train --dataset sst --base-model minilm-l6)")
    from hf_attn.data.tasks import load_sst
    from peers import checkout_commit  # scripts/bench/peers.py, beside this script

    texts = list(load_sst().splits["test"]["text"][:args.sentences])
    cells = {row: {v: [] for v in VARIANTS} for row in ROWS}
    values = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for row in ROWS:
                for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
                    job = os.path.join(folder, "job.json")
                    output = os.path.join(folder, "out.json")
                    with open(job, "w", encoding="utf-8") as f:
                        json.dump({"model": args.model, "texts": texts, "row": row, "variant": variant,
                                   "output": output}, f)
                    subprocess.run([sys.executable, __file__, "--worker", job], env=env, check=True)
                    with open(output, encoding="utf-8") as f:
                        out = json.load(f)
                    values.setdefault((row, round_), {})[variant] = out.pop("values")
                    cells[row][variant].append(out)
                    load.append(os.getloadavg()[0])
                    print(f"{row:28s} {variant:9s} {out['seconds']:7.1f} s {out['rss_mb']:6.0f} MB "
                          f"(after loading {out['rss_after_load_mb']:.0f} MB)", flush=True)
    summary = {}
    for row, by_variant in cells.items():
        same = all(values[row, r]["trimmed"] == values[row, r]["untrimmed"] for r in range(args.rounds))
        summary[row] = {v: {"seconds": statistics.median(c["seconds"] for c in cs),
                            "rss_mb": max(c["rss_mb"] for c in cs),
                            "growth_mb": max(c["rss_mb"] - c["rss_after_load_mb"] for c in cs)}
                        for v, cs in by_variant.items()}
        summary[row]["identical_attributions"] = same  # in every round
        summary[row]["seconds_ratio_trimmed_to_untrimmed"] = (summary[row]["trimmed"]["seconds"]
                                                             / summary[row]["untrimmed"]["seconds"])
    record = {"model": os.path.basename(os.path.normpath(args.model)), "sentences": args.sentences,
              "rounds": args.rounds, "threads": 1, "rows": ROWS, "summary": summary, "cells": cells,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "load_average_median": statistics.median(load)},
              "commit": checkout_commit(), "date": date.today().isoformat()}
    print(json.dumps(summary, indent=1))
    if args.write:
        tmp = args.write + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
