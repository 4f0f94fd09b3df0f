#!/usr/bin/env python
"""Value zeroing through the public API with and without the variants of an instance sharing the
zeroed layer's work (``hf_attn.methods.value_zeroing.SharedZeroing``), alternating in one run.

    python scripts/bench/value_zeroing.py [--model minilm-l6] [--lengths 24 128 510] [--rounds 3] \
        [--write docs/benchmarks/value_zeroing.json]

Each length is one text of SST test sentences joined until the tokenizer gives at least N word
pieces, cut to N (``long_sentence.py``'s texts); the shortest length instead takes the first 16 SST
test sentences as they are, one batch. A base model named by its offline alias (the default, the
all-MiniLM-L6-v2 weights) gets a seeded classification head: seconds and agreement need no training. ``Explainer.attributions(texts, methods=("value_zeroing",))``
on one torch thread; "whole" turns the sharing off on the adapter (each variant's layer computed
whole, the earlier behaviour), nothing else differs. The record keeps the median seconds per variant,
their ratio, and the largest difference of the two variants' attributions, absolute and relative to
the largest attribution.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import date

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = ("shared", "whole")


def _texts(tokenizer, length: int, short: bool) -> list[str]:
    from hf_attn.data.tasks import load_sst
    from long_sentence import long_text  # scripts/bench/long_sentence.py, beside this script

    if short:
        return list(load_sst(binary=True).splits["test"]["text"][:16])
    return [long_text(tokenizer, length)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6", help="a transformers classifier folder or offline alias")
    parser.add_argument("--lengths", type=int, nargs="+", default=[24, 128, 510])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", default=None, help="save the record as JSON")
    args = parser.parse_args(argv)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from peers import checkout_commit  # scripts/bench/peers.py, beside this script

    if os.path.isdir(args.model) or "/" in args.model:  # a trained classifier
        explainer = Explainer.from_pretrained(args.model, device="cpu", max_length=None)
    else:  # an offline base model (e.g. minilm-l6): its classification head seeded (seconds need no training)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from hf_attn.models.pretrained import resolve_base_model

        torch.manual_seed(0)
        folder = resolve_base_model(args.model)
        model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2, attn_implementation="eager")
        explainer = Explainer(model, AutoTokenizer.from_pretrained(folder), device="cpu", max_length=None)
    adapter = explainer.adapter
    explainer.attributions(["a warm-up sentence"], methods=("value_zeroing",))  # the model's one-off check
    sharing = adapter._value_zeroing_sharing  # (shared?, why, the precision, device and replay it holds for)
    rows = []
    for length in args.lengths:
        texts = _texts(adapter.tokenizer, length, short=length == min(args.lengths))
        seconds = {v: [] for v in VARIANTS}
        values = {}
        for round_ in range(args.rounds):
            for variant in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
                adapter._value_zeroing_sharing = sharing if variant == "shared" else (False, "off for the benchmark")
                start = time.perf_counter()
                result = explainer.attributions(texts, methods=("value_zeroing",))
                seconds[variant].append(time.perf_counter() - start)
                values[variant] = np.concatenate([np.asarray(v, dtype=np.float64)
                                                  for v in result.values["value_zeroing"]])
                print(f"{length:4d} tokens {variant:6s} {seconds[variant][-1]:7.2f} s", flush=True)
        adapter._value_zeroing_sharing = sharing
        gap = float(np.abs(values["shared"] - values["whole"]).max())
        scale = float(np.abs(values["whole"]).max())
        median = {v: statistics.median(s) for v, s in seconds.items()}
        rows.append({"tokens": max(len(v) for v in result.values["value_zeroing"]), "texts": len(texts),
                     "seconds": median, "rounds_seconds": seconds,
                     "speedup_shared_over_whole": median["whole"] / median["shared"],
                     "max_abs_difference": gap, "max_difference_relative_to_largest": gap / scale})
    record = {"model": args.model, "method": "value_zeroing", "threads": 1, "rounds": args.rounds,
              "sharing_check": list(sharing[:2]), "rows": rows,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "load_average": list(os.getloadavg())},
              "commit": checkout_commit(), "date": date.today().isoformat()}
    print(json.dumps(rows, indent=1))
    if args.write:
        from hf_attn.core.io import write_json_atomic

        write_json_atomic(args.write, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
