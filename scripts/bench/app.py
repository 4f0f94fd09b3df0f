#!/usr/bin/env python
"""Latency of one explorer request (prediction + attention, gradient, leave-one-out, 100
permutations, the 5-adversary J&W search with 500 steps, per-token probabilities and the rendered
heatmap + plot), as the app runs it (one torch thread). Goal: < 2 s for a 20-token sentence.

    python scripts/bench/app.py --model runs/sst-lstm-additive [--repeats 5] [--threads 1]
"""
import argparse
import json
import statistics
import time

import torch

from hf_attn.app.space import explain_sentence, load_model
from hf_attn.explanation.render import heatmap_html, permutation_figure

SENTENCE_20 = ("the film is a charming , funny and often touching portrait of a family that never quite "
               "works out .")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/sst-lstm-additive")
    parser.add_argument("--text", default=SENTENCE_20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(args.model)
    explain_sentence(model, tokenizer, args.text)  # warm-up
    totals, parts = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        explanation = explain_sentence(model, tokenizer, args.text)
        heatmap_html(explanation)
        permutation_figure(explanation).savefig(__import__("io").BytesIO(), format="webp")
        totals.append(time.perf_counter() - start)
        parts.append(explanation.seconds)
    print(json.dumps({"tokens": len(explanation.tokens), "threads": args.threads,
                      "median_seconds": statistics.median(totals), "min_seconds": min(totals),
                      "max_seconds": max(totals),
                      "median_parts": {k: statistics.median(p[k] for p in parts) for k in parts[0]}}, indent=2))


if __name__ == "__main__":
    main()
