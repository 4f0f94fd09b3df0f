#!/usr/bin/env python
"""How the J&W battery's time grows with sentence length: seconds per analysis at
T = 25, 50, 100, 200, 400 tokens, at the papers' size (BiLSTM, H = 128, 300-d embeddings, additive
attention, a 20k-word vocabulary).

    python scripts/bench/length_scaling.py [--lengths 25 50 100 200 400] [--tokens 12800]
                                               [--threads 1] [--steps 500] [--output result.json]

Timing does not depend on what the weights learned, so the model is freshly initialised (seeded) and
each length gets random sentences of exactly T words, as many as make ``--tokens`` tokens in total:
the same amount of text at every length, so a flat column means cost linear in the tokens and a
doubling column means O(T²) (leave-one-out deletes each of T tokens and reruns the rest). Prints a
table (seconds, and microseconds per token) and writes it as JSON; the peak RSS is the process's
after the last length. Run it alone on the machine: timings of parallel jobs are meaningless.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ANALYSES = ("forward", "gradient", "leave_one_out", "permutation", "adversary")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[25, 50, 100, 200, 400])
    parser.add_argument("--tokens", type=int, default=12800, help="tokens per length (instances = tokens // T)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=500, help="adversary steps (J&W: 500)")
    parser.add_argument("--vocab", type=int, default=20000)
    parser.add_argument("--output", help="write the result as JSON here")
    args = parser.parse_args(argv)

    from hf_attn.batteries.jw.battery import JWSettings, run_jw_battery
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    torch.set_num_threads(args.threads)
    words = [f"w{i}" for i in range(args.vocab)]
    tokenizer = build_tokenizer([" ".join(words)], max_length=max(args.lengths) + 2)
    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=len(tokenizer), embedding_dim=300, hidden_size=128, encoder="lstm",
                                  attention="additive", num_labels=2, max_tokens=max(args.lengths) + 2)
    model = AttnClassifierForSequenceClassification(config).eval()
    rng = np.random.default_rng(0)
    rows = []
    print(f"J&W battery, BiLSTM H = 128, 300-d, {args.tokens} tokens per length, {args.threads} thread(s), "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for length in args.lengths:
        count = max(1, args.tokens // length)
        texts = [" ".join(rng.choice(words, size=length)) for _ in range(count)]
        start = time.perf_counter()
        settings = JWSettings(steps=args.steps)
        _, summary = run_jw_battery(settings.adapter(model, tokenizer), texts, settings=settings, progress=False)
        wall = time.perf_counter() - start
        seconds = {k: summary["seconds"].get(k, 0.0) for k in ANALYSES}
        rows.append({"length": length, "instances": count, "tokens": count * length, "wall_seconds": wall,
                     "seconds": seconds})
        print(f"T = {length:4d}: {count:4d} sentences, " + ", ".join(f"{k} {v:.2f}s" for k, v in seconds.items())
              + f"; total {wall:.1f}s", flush=True)
    print("\nmicroseconds per token (flat: linear in the tokens; doubling with T: quadratic)")
    print("    T " + "".join(f"{k:>15s}" for k in ANALYSES))
    for row in rows:
        print(f"{row['length']:5d} " + "".join(f"{1e6 * row['seconds'][k] / row['tokens']:15.1f}" for k in ANALYSES))
    result = {"benchmark": "J&W battery time vs sentence length", "rows": rows, "threads": args.threads,
              "adversary_steps": args.steps, "tokens_per_length": args.tokens,
              "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
              "load_average_after": os.getloadavg(), "cpu_count": os.cpu_count(),
              "torch": torch.__version__, "python": platform.python_version()}
    print(f"peak RSS {result['peak_rss_gb']} GB")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
