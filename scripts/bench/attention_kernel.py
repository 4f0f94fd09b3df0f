"""Seconds of the no-gradient forwards (``adapter.logits``: deletions, erasures, the soft metrics'
draws) with the eager attention arithmetic and with transformers' fused kernel, by sequence width,
alternating in one process on one thread.

    python scripts/bench/attention_kernel.py [--model runs/minilm-sst] [--rounds 5] \
        [--widths 12 20 28 40 48 64 96 128 256 510] [--write docs/benchmarks/attention_kernel.json]

Per width: token_budget // width rows of distinct word pieces (the adapter's CPU chunking applies),
the median of ``--rounds`` calls of each kernel after one warm-up, and the largest logit difference
between the two. The adapter runs its no-gradient forwards through the fused kernel at every width
once it has checked the kernel on the model (``TransformersProbe._check_fused``); this record is why.
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="runs/minilm-sst")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--widths", type=int, nargs="+", default=[12, 20, 28, 40, 48, 64, 96, 128, 256, 510])
    parser.add_argument("--tokens", type=int, default=4096, help="padded tokens per call")
    parser.add_argument("--write", default="docs/benchmarks/attention_kernel.json")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from hf_attn.adapters.interface import Intervention

    adapter = Explainer.from_pretrained(args.model, device="cpu").adapter
    if not adapter.fused:
        print(f"the fused kernel is off for this model: {adapter.fused_reason}", file=sys.stderr)
        return 2
    kernels = {"eager": None, "fused": Intervention(fused=True)}
    vocabulary = adapter.tokenizer.vocab_size
    rows_out = []
    for width in args.widths:
        count = max(1, args.tokens // width)
        ids = [[adapter.tokenizer.cls_token_id] + [1000 + (7 * i + j) % (vocabulary - 1000) for j in range(width - 2)]
               + [adapter.tokenizer.sep_token_id] for i in range(count)]
        batch = adapter.from_token_lists(ids)
        seconds, logits = {k: [] for k in kernels}, {}
        with torch.no_grad():
            for round_ in range(args.rounds + 1):  # the first round warms up, untimed
                for name, intervention in kernels.items():
                    start = time.perf_counter()
                    out = adapter._model_call(batch.input_ids, batch.attention_mask, None, intervention,
                                              prune=True).logits
                    if round_:
                        seconds[name].append(time.perf_counter() - start)
                    logits[name] = out
        eager, fused = (statistics.median(seconds[k]) for k in kernels)
        row = {"width": width, "rows": count, "eager_seconds": eager, "fused_seconds": fused,
               "speedup": eager / fused, "max_abs_logit_difference": float((logits["eager"] - logits["fused"]).abs().max())}
        rows_out.append(row)
        print(f"{width:4d} positions × {count:4d} rows: eager {eager:.3f} s, fused {fused:.3f} s, "
              f"{row['speedup']:.2f}×", flush=True)
    record = {"command": " ".join(["scripts/bench/attention_kernel.py"] + list(argv if argv is not None else sys.argv[1:])),
              "model": os.path.basename(os.path.normpath(args.model)), "threads": 1, "rounds": args.rounds,
              "tokens_per_call": args.tokens, "rows": rows_out,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
              "date": date.today().isoformat()}
    tmp = args.write + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
