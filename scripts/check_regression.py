"""Same numbers, no slower: ``hf-attn analyze RUN --battery jw`` with this checkout against an
earlier commit, on the same trained model, alternating, one torch thread each.

    python scripts/check_regression.py --baseline <commit> --run runs/sst-lstm [--rounds 2]

The baseline is exported with ``git archive`` into a scratch folder and run with that folder first
on ``PYTHONPATH`` (so its package, not this one, is imported); the model is trained by this checkout
when ``--run`` does not exist. Prints, per round, the wall seconds of each side, then the max |Δ| of
every numeric field of ``instances.jsonl`` and of ``results.json``'s summary, the median time ratio
and writes the record to ``--record`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _numbers(value, prefix=""):
    """Flatten a JSON value to {path: float} (numbers only)."""
    out = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("seconds", "versions", "model_dir", "figures"):
                continue
            out |= _numbers(v, f"{prefix}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out |= _numbers(v, f"{prefix}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)
    return out


def _analyze(source: str, run: str, out: str) -> float:
    env = dict(os.environ, PYTHONPATH=source, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hf_attn.cli", "analyze", run, "--battery", "jw", "--output-dir", out,
                    "--quiet", "--threads", "1", "--jw-no-cache"], check=True, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the earlier commit")
    parser.add_argument("--run", required=True, help="a trained run folder (trained here when missing)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--record", default=None, help="write the record here (JSON)")
    args = parser.parse_args()
    run = os.path.abspath(args.run)
    if not os.path.isdir(run):
        subprocess.run([sys.executable, "-m", "hf_attn.cli", "train", "--dataset", "sst", "--output-dir", run,
                        "--threads", "1", "--quiet"], check=True, env=dict(os.environ, PYTHONPATH=ROOT))
    scratch = tempfile.mkdtemp(prefix="hf-attn-baseline-")
    archive = subprocess.run(["git", "-C", ROOT, "archive", args.baseline], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
    sides = {"baseline": scratch, "new": ROOT}
    seconds: dict[str, list[float]] = {"baseline": [], "new": []}
    outputs = {}
    for r in range(args.rounds):
        for name in (("baseline", "new") if r % 2 == 0 else ("new", "baseline")):
            out = os.path.join(scratch, f"out-{name}-{r}")
            seconds[name].append(_analyze(sides[name], run, out))
            outputs[name] = out
            print(f"round {r + 1}: {name:8s} {seconds[name][-1]:7.2f} s", flush=True)
    load = os.getloadavg()
    deltas = {}
    for filename in ("instances.jsonl", "results.json"):
        values = {}
        for name, out in outputs.items():
            with open(os.path.join(out, filename), encoding="utf-8") as f:
                data = [json.loads(line) for line in f] if filename.endswith("jsonl") else json.load(f)["summary"]
            values[name] = _numbers(data)
        shared = set(values["baseline"]) & set(values["new"])
        missing = set(values["baseline"]) ^ set(values["new"])
        diffs = [abs(values["baseline"][k] - values["new"][k]) for k in shared
                 if values["baseline"][k] == values["baseline"][k] and values["new"][k] == values["new"][k]]
        deltas[filename] = {"fields": len(shared), "max_abs_delta": max(diffs) if diffs else 0.0,
                            "fields_only_on_one_side": len(missing)}
        print(f"{filename}: {len(shared)} numeric fields, max |Δ| = {deltas[filename]['max_abs_delta']:.3g}, "
              f"{len(missing)} only on one side")
    ratio = statistics.median(seconds["baseline"]) / statistics.median(seconds["new"])
    print(f"median wall: baseline {statistics.median(seconds['baseline']):.2f} s, new "
          f"{statistics.median(seconds['new']):.2f} s, ratio {ratio:.2f}× (load average {load[0]:.1f})")
    record = {"baseline": args.baseline, "seconds": seconds, "ratio": ratio, "deltas": deltas,
              "load_average_end": load[0], "command": "hf-attn analyze RUN --battery jw --threads 1 --jw-no-cache"}
    if args.record:
        with open(args.record, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
