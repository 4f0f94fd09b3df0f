"""What the batched-vs-loop benchmarks share: the context a section reads, peak memory, and the
driver that loads the model and SST test split and runs the chosen sections.

A section is a function ``section(context) -> dict`` (one result row). ``analyses.py`` (the J&W
sections, plus ``faithfulness.py``'s) and ``faithfulness.py`` (ERASER and integrated gradients
only) both call :func:`main` with their own ``SECTIONS``; neither imports the driver from the other.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Context:
    """What a section reads: the model and tokenizer, ``encoded`` (the split's token id lists, N of
    them), ``loop_rows`` (int array of the rows the per-instance loops run on) and the token budget
    of one batched forward."""

    model: object
    tokenizer: object
    encoded: list  # token id lists of the split
    loop_rows: np.ndarray  # instances the per-instance loops run on
    token_budget: int = 16384
    results: dict = field(default_factory=dict)


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MB (Linux reports ``ru_maxrss`` in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(sections: dict[str, Callable[[Context], dict]], argv=None, description: str | None = None) -> int:
    """Parse the options, load ``--model-dir`` and the SST test split, run the chosen ``sections``
    (all of them by default) in order → exit status: 0 when every row's ``agree`` holds, else 1."""
    import torch

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default="runs/sst-lstm-additive")
    parser.add_argument("--sections", nargs="*", default=list(sections), choices=list(sections))
    parser.add_argument("--loop-instances", type=int, default=200,
                        help="instances the per-instance loops run on (random, seeded)")
    parser.add_argument("--token-budget", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--output", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers import PreTrainedTokenizerFast

    from hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.data.tasks import load_sst

    model = AttnClassifierForSequenceClassification.from_pretrained(args.model_dir).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model_dir)
    texts = list(load_sst().splits["test"]["text"])
    encoded = tokenizer(texts)["input_ids"]
    rows = np.random.default_rng(0).choice(len(encoded), size=min(args.loop_instances, len(encoded)),
                                           replace=False)
    ctx = Context(model, tokenizer, encoded, rows, args.token_budget)
    load = os.getloadavg()
    print(f"{args.model_dir}: {len(encoded)} SST test sentences, {sum(map(len, encoded))} tokens; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{load[0]:.1f} on {os.cpu_count()} CPUs (timings are contended if that exceeds the CPUs)",
          flush=True)
    out = []
    for name in args.sections:
        out.append(sections[name](ctx))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"rows": out, "load_average": load}, f, indent=2)
    return 0 if all(r.get("agree", True) for r in out) else 1
