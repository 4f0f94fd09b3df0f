#!/usr/bin/env python
"""How many integrated-gradients nodes a model needs: the completeness gap of IG at several node
counts on the same sentences.

    python scripts/ig_completeness.py [--model runs/minilm-sst] [--sentences 50] [--nodes 16 32 50]
        [--target probability|logit] [--baseline zero|pad|mean] [--write docs/benchmarks/ig_completeness.json]

Completeness (Sundararajan et al. 2017, §3): Σ_t IG_t = f(x) − f(x') for the exact integral, so the
gap Σ_t IG_t − (f(x) − f(x')) measures the quadrature's error (Gauss–Legendre nodes, the rule of
``hf_attn.methods.adapter_integrated_gradients``). Per node count it prints the mean and largest
|gap|, the mean |f(x) − f(x')| and the share of sentences whose |gap| is within 1 % of their own
|f(x) − f(x')| (the share the faithfulness table reports), on the first ``--sentences`` SST test
sentences, one torch thread. Bad arguments: one line naming the argument, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/minilm-sst", help="a transformers classifier folder")
    parser.add_argument("--sentences", type=int, default=50, help="the first N SST test sentences")
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 32, 50], help="node counts to compare")
    parser.add_argument("--target", choices=["probability", "logit"], default="probability")
    parser.add_argument("--baseline", choices=["zero", "pad", "mean"], default="zero")
    parser.add_argument("--write", default=None, help="save the record as JSON")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"--model must be a transformers model folder (with config.json), got {args.model!r}")
    if not 1 <= args.sentences <= 1821:
        parser.error(f"--sentences must be in [1, 1821] (the SST test split), got {args.sentences}")
    if any(n < 1 for n in args.nodes):
        parser.error(f"--nodes must be positive integers, got {args.nodes}")
    if args.write is not None and not args.write.endswith(".json"):
        parser.error(f"--write must name a .json file, got {args.write!r}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from hf_attn import Explainer
    from hf_attn.data.tasks import load_sst
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution
    from hf_attn.methods.integrated_gradients import completeness_summary

    torch.set_num_threads(1)
    texts = list(load_sst().splits["test"]["text"][:args.sentences])
    adapter = Explainer.from_pretrained(args.model, device="cpu").adapter
    rows = []
    for nodes in args.nodes:
        results, start = [], time.perf_counter()
        for begin in range(0, len(texts), 8):
            results.append(integrated_gradients_attribution(adapter, adapter.encode(texts[begin:begin + 8]), nodes,
                                                            target=args.target, baseline=args.baseline))
        seconds = time.perf_counter() - start
        largest = max(float(r.completeness_gap.abs().max()) for r in results)
        row = {"nodes": nodes, "seconds": seconds, **completeness_summary(results), "completeness_gap_max_abs": largest}
        rows.append(row)
        print(f"{nodes:4d} nodes: mean |gap| {row['completeness_gap_mean_abs']:.2e}, max {largest:.2e}, "
              f"mean |f(x) − f(x')| {row['output_difference_mean_abs']:.3f}, within 1 % on "
              f"{100 * row['completeness_within_1pct_share']:.0f} % of the sentences ({seconds:.1f} s)", flush=True)
    if args.write:
        record = {"command": "scripts/ig_completeness.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  "model": os.path.basename(os.path.normpath(args.model)), "sentences": len(texts),
                  "target": args.target, "baseline": args.baseline, "rule": "gauss-legendre", "rows": rows}
        Path(args.write).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
