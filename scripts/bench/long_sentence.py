#!/usr/bin/env python
"""The faithfulness table on one long sentence: seconds per stage at growing lengths.

    python scripts/bench/long_sentence.py --model-dir runs/minilm-sst \\
        --lengths 64 128 256 510 --output docs/benchmarks/long_sentence.json

One text of SST test sentences joined until the tokenizer gives at least N word pieces, cut to N
(the model's limit respected); the whole default table (every method but the optional captum ones,
every metric) on that one sentence, one torch thread. The NAOPC bounds are exact up to
``naopc_exact_max`` tokens, beam-searched up to ``naopc_beam_max`` and beyond that the extremes of
the table's own orderings, so the table's cost stays near that of the methods themselves; the
record says which bound method each length used and the seconds of the NAOPC columns.

``--count-flops`` runs the table a second time, untimed, under :class:`stage_flops.StageFlops`: each
row then holds the GFLOP every stage computed (``gflop``, their sum ``gflop_total``) and the
record the machine's measured matmul peak on one thread (``peak``), so that the seconds can be
read against the FLOPs they pay for.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # stage_flops.py, run as a script or loaded by path


def long_text(tokenizer, length: int) -> str:
    from hf_attn.data.tasks import load_sst

    words: list[str] = []
    for sentence in load_sst(binary=True).splits["test"]["text"]:
        words += sentence.split()
        if len(tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]) >= length:
            break
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][:length]
    return tokenizer.decode(ids)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 510])
    parser.add_argument("--output", default="docs/benchmarks/long_sentence.json")
    parser.add_argument("--count-flops", action="store_true",
                        help="run each table again, untimed, counting the GFLOP of every stage")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import DEFAULT_METHODS, FaithfulnessSettings, run_faithfulness

    explainer = Explainer.from_pretrained(args.model_dir, device="cpu")
    methods = tuple(m for m in DEFAULT_METHODS if m not in ("kernel_shap", "deeplift"))
    rows = []
    for length in args.lengths:
        text = long_text(explainer.adapter.tokenizer, length)
        start = time.perf_counter()
        result = run_faithfulness(explainer.adapter, [text], FaithfulnessSettings(methods=methods))
        seconds = time.perf_counter() - start
        tokens = int(result.content[0].sum())
        row = {"tokens": tokens, "seconds": seconds,
               "naopc_seconds": result.metric_details["naopc"]["seconds"],
               "naopc_bounds": result.metric_details["naopc"]["bound_method"][0],
               "soft_seconds": result.metric_details["soft"]["seconds"],
               "soft_draws": result.metric_details["soft"]["draws_max"],  # per sentence and method: the most
               "methods_seconds": {m: c["seconds"] for m, c in result.cost.items()},
               "ig_steps": result.cost.get("integrated_gradients", {}).get("ig_steps_max")}
        if args.count_flops:
            from stage_flops import StageFlops, table_stage

            with StageFlops(table_stage) as counter:
                run_faithfulness(explainer.adapter, [text], FaithfulnessSettings(methods=methods))
            row["gflop"] = counter.gflop()
            row["gflop_total"] = sum(row["gflop"].values())
        rows.append(row)
        print(f"{tokens:4d} tokens: {seconds:7.1f} s (NAOPC {row['naopc_seconds']:.1f} s, {row['naopc_bounds']}; "
              f"soft {row['soft_seconds']:.1f} s)", flush=True)
    record = {"model": os.path.basename(os.path.normpath(args.model_dir)), "threads": 1, "rows": rows,
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
              "date": time.strftime("%Y-%m-%d")}
    if args.count_flops:
        from stage_flops import matmul_peak

        record["peak"] = matmul_peak(1)
    from hf_attn.core.io import write_json_atomic

    write_json_atomic(args.output, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
