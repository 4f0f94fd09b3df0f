"""Seconds of the no-gradient forwards (``adapter.logits``: deletions, erasures, the soft metrics'
draws) with the eager attention arithmetic and with transformers' fused kernel, by sequence width,
alternating in one process on one thread.

    python scripts/bench/attention_kernel.py [--model runs/minilm-sst] [--rounds 5] \
        [--widths 12 20 28 40 48 64 96 128 256 510] [--write docs/benchmarks/attention_kernel.json]

Per width: ``--tokens`` // width rows of distinct word pieces, each call ``adapter.logits`` as a user
calls it (the adapter's own chunking of the rows applies) with the kernel switched, the order of
the two kernels swapped every round, the median of ``--rounds`` calls of each after one warm-up,
and the largest logit difference between the two. The adapter runs its no-gradient forwards through the fused kernel at every width
once it has checked the kernel on the model (``TransformersProbe._check_fused``); this record is why.
"""

from __future__ import annotations

import argparse
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
    if args.rounds < 1 or args.tokens < 1 or min(args.widths) < 3:
        parser.error("--rounds and --tokens must be >= 1 and every width >= 3")
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer

    adapter = Explainer.from_pretrained(args.model, device="cpu").adapter
    if not adapter.fused:
        print(f"the fused kernel is off for this model: {adapter.fused_reason}", file=sys.stderr)
        return 2
    kernels = ("eager", "fused")
    tokenizer = adapter.tokenizer
    vocabulary = tokenizer.vocab_size
    first = [t for t in (tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id,)
             if t is not None]
    last = [t for t in (tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id,)
            if t is not None]
    rows_out = []
    for width in args.widths:
        count = max(1, args.tokens // width)
        middle = width - len(first) - len(last)
        ids = [first + [1000 + (7 * i + j) % (vocabulary - 1000) for j in range(middle)] + last for i in range(count)]
        batch = adapter.from_token_lists(ids)
        seconds, logits = {k: [] for k in kernels}, {}
        try:
            for round_ in range(args.rounds + 1):  # the first round warms up, untimed
                for name in (kernels if round_ % 2 else kernels[::-1]):
                    adapter.fused = name == "fused"
                    start = time.perf_counter()
                    out = adapter.logits(batch)
                    if round_:
                        seconds[name].append(time.perf_counter() - start)
                    logits[name] = out
        finally:
            adapter.fused = True
        eager, fused = (statistics.median(seconds[k]) for k in kernels)
        row = {"width": width, "rows": count, "eager_seconds": eager, "fused_seconds": fused,
               "speedup": eager / fused, "max_abs_logit_difference": float((logits["eager"] - logits["fused"]).abs().max())}
        rows_out.append(row)
        print(f"{width:4d} positions × {count:4d} rows: eager {eager:.3f} s, fused {fused:.3f} s, "
              f"{row['speedup']:.2f}×", flush=True)
    model = os.path.relpath(args.model)
    model = model if not model.startswith("..") else os.path.basename(os.path.normpath(args.model))  # no local paths
    command = ["scripts/bench/attention_kernel.py", "--model", model, "--rounds", str(args.rounds), "--tokens",
               str(args.tokens), "--widths", *map(str, args.widths)]
    record = {"command": " ".join(command), "model": os.path.basename(os.path.normpath(args.model)), "threads": 1, "rounds": args.rounds,
              "tokens_per_call": args.tokens, "rows": rows_out,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
              "date": date.today().isoformat()}
    from hf_attn.core.io import write_json_atomic

    write_json_atomic(args.write, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
