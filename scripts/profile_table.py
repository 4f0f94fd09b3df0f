"""Where the faithfulness table's time goes, through the public API: ``Explainer.faithfulness`` with
the peers benchmark's table (gradient × input and integrated gradients on the logit, [PAD]
baseline × comprehensiveness, sufficiency and τ with leave-one-out) on SST test sentences, one
thread, under cProfile; at 50 nodes and at the completeness target.

    python scripts/profile_table.py --model runs/minilm-sst --sentences 100 --write docs/benchmarks/peers_api_profile.json

The record: per setting the wall seconds, the table's own cost per method (seconds, integrated
gradients' nodes and completeness), the seconds of each stage (the cumulative time of the table's
step functions) and the torch kernels that take most of the time (self time)."""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SETTINGS = {"methods": ("gradient_x_input", "integrated_gradients", "leave_one_out"),
            "metrics": ("comprehensiveness", "sufficiency", "tau_loo"), "fractions": (0.01, 0.05, 0.10, 0.20, 0.50),
            "gradient_target": "logit", "ig_baseline": "pad"}
NODES = {"equal_nodes": {"ig_steps": 50, "ig_target": None}, "completeness_target": {"ig_target": 0.01}}
STAGES = ("_method_scores", "run_methods", "_erasure_cells", "_cached_leave_one_out", "integrated_gradients_attribution",
          "gradient_x_input", "_table_inputs")


def profile(explainer, texts, nodes: dict) -> dict:
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    result = explainer.faithfulness(texts, **SETTINGS, **nodes)
    profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # (file, line, name) → (cc, nc, tt, ct, callers)
    stages = {}
    for (file, _, name), (_, _, _, cumulative, _) in stats.items():
        if name in STAGES and "hf_attn" in file:
            stages[name] = max(stages.get(name, 0.0), cumulative)
    kernels = sorted(((name, tt) for (file, _, name), (_, _, tt, _, _) in stats.items() if "~" in file or
                      file.startswith("<")), key=lambda x: -x[1])[:6]
    return {"seconds": wall, "cost": result.cost, "stages_seconds": stages,
            "top_self_seconds": [{"function": n, "seconds": s} for n, s in kernels]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a transformers classifier folder")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--write", required=True, help="the record (.json)")
    args = parser.parse_args(argv)
    import torch

    from hf_attn import Explainer
    from hf_attn.core.io import json_safe
    from hf_attn.data.tasks import load_sst

    torch.set_num_threads(1)
    texts = list(load_sst().splits["test"]["text"][:args.sentences])
    explainer = Explainer.from_pretrained(args.model, device="cpu")
    explainer.faithfulness(texts[:2], **SETTINGS, **NODES["equal_nodes"])  # warm-up
    record = {"what": __doc__.split("\n\n")[0], "model": os.path.basename(os.path.normpath(args.model)),
              "sentences": len(texts), "threads": 1, "load_average": os.getloadavg()[0],
              "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in SETTINGS.items()},
              "runs": {name: profile(explainer, texts, nodes) for name, nodes in NODES.items()}}
    Path(args.write).write_text(json.dumps(json_safe(record), indent=1, ensure_ascii=False))
    for name, run in record["runs"].items():
        print(name, round(run["seconds"], 1), {k: round(v, 1) for k, v in run["stages_seconds"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
