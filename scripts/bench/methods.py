#!/usr/bin/env python
"""Baseline-vs-new benchmark of the J&W analyses at the papers' size.

Gradient importance, leave-one-out, permutations and the k-adversary of the J&W battery on the
whole SST test set (1821 sentences, as batched by the battery: length-sorted, token-bounded) for a
BiLSTM with H = 128 and 300-d embeddings (J&W's size; freshly initialised and seeded: the work does
not depend on the weights). A baseline copy of the package (``git archive COMMIT``) and this
checkout run ALTERNATELY, each in a fresh process with ``--threads`` torch threads, and the medians
of their seconds, the ratio and the load average around each run are printed and written as JSON.
The outputs of the two sides are compared (max |difference|), so a faster method that changed its
numbers shows up here.

    mkdir /tmp/baseline && git archive 9909fbe | tar -x -C /tmp/baseline
    python scripts/bench/methods.py --baseline /tmp/baseline [--threads 1] [--repeats 3]
                                        [--output docs/benchmarks/methods.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METHODS = ("forward", "gradient", "leave_one_out", "permutation", "adversary")

# Runs inside each side's process: times each analysis on the same batches, saves the outputs.
CHILD = r"""
import json, sys, time, resource, torch
torch.set_num_threads(int(sys.argv[1]))
out_path = sys.argv[2]
from hf_attn.core.batching import pad_batch
from hf_attn.data.tasks import load_sst
from hf_attn.data.tokenization import build_tokenizer
from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.methods.gradient import gradient_importance
from hf_attn.methods.leave_one_out import leave_one_out
from hf_attn.methods.permutation import permutation_tvd
from hf_attn.methods.adversary import adversarial_attention
data = load_sst()
tokenizer = build_tokenizer(list(data.splits["train"]["text"]))
torch.manual_seed(0)
config = AttnClassifierConfig(vocab_size=len(tokenizer), embedding_dim=300, hidden_size=128, encoder="lstm",
                              attention="additive", num_labels=2)
model = AttnClassifierForSequenceClassification(config).eval()
ids = [tokenizer(t)["input_ids"] for t in data.splits["test"]["text"]]
order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
batches, budget, start = [], 4096, 0
while start < len(order):  # length-sorted batches of at most `budget` padded tokens, as the battery
    end = start + 1
    while end < len(order) and (end + 1 - start) * len(ids[order[end]]) <= budget:
        end += 1
    batches.append(pad_batch([ids[i] for i in order[start:end]]))
    start = end
seconds, outputs = {}, {}
def timed(name, fn):
    t0 = time.perf_counter()
    outputs[name] = [fn(i, m) for i, m in batches]
    seconds[name] = time.perf_counter() - t0
with torch.no_grad():
    timed("forward", lambda i, m: model(input_ids=i, attention_mask=m).logits)
timed("gradient", lambda i, m: gradient_importance(model, i, m))
timed("leave_one_out", lambda i, m: leave_one_out(model, i, m))
with torch.no_grad():  # the states and attention the battery caches for the next two
    cached = [model(input_ids=i, attention_mask=m, output_hidden_states=True) for i, m in batches]
def with_cache(fn):  # reads the module-level iterator `states`, set before each use
    def run(i, m):
        out = next(states)
        return fn(out.hidden_states, out.attentions, m)
    return run
states = iter(cached)
timed("permutation", with_cache(lambda h, a, m: permutation_tvd(model, h, a, m, num_permutations=100,
                                                                generator=torch.Generator().manual_seed(0))))
states = iter(cached)
timed("adversary", with_cache(lambda h, a, m: adversarial_attention(model, h, a, m, seed=0).jsd))
torch.save(outputs, out_path + ".pt")
json.dump({"seconds": seconds, "tokens": sum(map(len, ids)), "sentences": len(ids),
           "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}, open(out_path, "w"))
"""


def run_side(side: str, package: str, threads: int, workdir: str, tag: str) -> dict:
    env = dict(os.environ, PYTHONPATH=package, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = os.path.join(workdir, f"{side}-{tag}.json")
    load_before = os.getloadavg()[0]
    subprocess.run([sys.executable, "-c", CHILD, str(threads), out], env=env, cwd=workdir, check=True)
    with open(out, encoding="utf-8") as f:
        result = json.load(f)
    result.update(side=side, load_before=load_before, load_after=os.getloadavg()[0], outputs=out + ".pt")
    return result


def max_difference(a_path: str, b_path: str) -> dict:
    import torch

    a, b = torch.load(a_path), torch.load(b_path)
    return {name: max(float((x - y).abs().nan_to_num().max()) for x, y in zip(a[name], b[name])) for name in a}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="/tmp/baseline", help="exported baseline package (PYTHONPATH)")
    parser.add_argument("--baseline-commit", default="9909fbe", help="recorded in the output")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="write the table and the raw runs as JSON here")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.baseline, "hf_attn")):
        parser.error(f"--baseline {args.baseline}: no hf_attn package there (git archive COMMIT | tar -x -C DIR)")
    runs = []
    with tempfile.TemporaryDirectory(prefix="hf-attn-methods-") as workdir:
        for r in range(args.repeats):
            sides = [("baseline", args.baseline), ("new", REPO)]
            for side, package in (sides if r % 2 == 0 else sides[::-1]):  # alternate who goes first
                runs.append(run_side(side, package, args.threads, workdir, str(r)))
                print(f"repeat {r} {side:8s} " + ", ".join(f"{k} {v:.2f}s" for k, v in runs[-1]["seconds"].items())
                      + f" (load {runs[-1]['load_before']:.1f}→{runs[-1]['load_after']:.1f})", flush=True)
        difference = max_difference(runs[0]["outputs"], runs[1]["outputs"])
    rows = []
    print(f"\nSST test ({runs[0]['sentences']} sentences, {runs[0]['tokens']} tokens), BiLSTM H = 128, 300-d, "
          f"{args.threads} thread(s), medians of {args.repeats}")
    print(f"{'analysis':15s}{'baseline s':>12s}{'new s':>10s}{'ratio':>9s}{'max |Δ| of outputs':>22s}")
    for name in METHODS:
        base = statistics.median(r["seconds"][name] for r in runs if r["side"] == "baseline")
        new = statistics.median(r["seconds"][name] for r in runs if r["side"] == "new")
        rows.append({"analysis": name, "baseline_seconds": base, "new_seconds": new, "ratio": base / new,
                     "max_abs_difference": difference[name]})
        print(f"{name:15s}{base:12.2f}{new:10.2f}{base / new:8.2f}×{difference[name]:22.2e}")
    peaks = {side: max(r["peak_rss_gb"] for r in runs if r["side"] == side) for side in ("baseline", "new")}
    print(f"peak RSS: baseline {peaks['baseline']:.2f} GB, new {peaks['new']:.2f} GB")
    if args.output:
        record = {"benchmark": "J&W analyses at the papers' size, baseline vs new (scripts/bench/methods.py)",
                  "date": datetime.date.today().isoformat(), "baseline_commit": args.baseline_commit,
                  "threads": args.threads, "repeats": args.repeats, "rows": rows, "peak_rss_gb": peaks,
                  "runs": [{k: v for k, v in r.items() if k != "outputs"} for r in runs],
                  "cpu_count": os.cpu_count()}
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
