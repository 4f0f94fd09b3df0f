#!/usr/bin/env python
"""Nested (Gauss–Kronrod) against doubled (Gauss–Legendre) integrated gradients: gradients per
sentence to reach the faithfulness table's completeness target, and the error at equal gradients.

    python scripts/bench/ig_nested.py --models runs/sst-lstm runs/minilm-sst --sentences 200 \\
        --output docs/benchmarks/ig_nested.json

On the first ``--sentences`` SST test sentences of each model (batches of 8, one torch thread), the
table's integrated gradients (:class:`hf_attn.batteries.faithfulness.methods._IntegratedGradients`,
its default settings: 16 nodes to start, target |gap| ≤ 1 % of |f(x) − f(x')|, at most 256 nodes,
f = ŷ_c, zero baseline) with ``ig_rule="gauss-legendre"`` (16, then 32, 64, … from scratch) and
``"gauss-kronrod"`` (16, then the 33-point Kronrod rule reusing the 16, then 64, 128, … from
scratch): the gradients evaluated per sentence (each a forward + backward of one path point,
counted by a wrapper around the adapter, and checked against the rule's own count), the share
meeting the target and the mean |gap|. At equal gradients, on every sentence: G16, G32 (32 new
gradients) and K33 (G16's 16 reused + 17 new). The machine is shared: only the counts are meaningful,
so no seconds are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _summary(gaps, differences, target: float = 0.01) -> dict:
    import numpy as np

    gaps, differences = np.abs(np.asarray(gaps)), np.abs(np.asarray(differences))
    return {"gap_mean_abs": float(gaps.mean()), "gap_median_abs": float(np.median(gaps)),
            "within_target_share": float(np.mean(gaps <= np.maximum(target * differences, 1e-9)))}


def measure(model_dir: str, count: int, batch_size: int = 8) -> dict:
    import numpy as np

    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import FaithfulnessSettings
    from hf_attn.batteries.faithfulness.methods import _IntegratedGradients
    from hf_attn.data.tasks import load_sst
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution, kronrod_refinement

    texts = list(load_sst().splits["test"]["text"][:count])
    adapter = Explainer.from_pretrained(model_dir, device="cpu").adapter
    counts = []
    original = adapter.logits_from_embeddings

    def counted(batch, embeddings, *args, **kwargs):  # path points only: they carry a gradient
        if embeddings.requires_grad:
            counts.append(len(embeddings))
        return original(batch, embeddings, *args, **kwargs)

    adapter.logits_from_embeddings = counted
    batches = [adapter.encode(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
    record = {"model": os.path.basename(os.path.normpath(model_dir)), "sentences": len(texts), "adaptive": {},
              "equal_gradients": {}}
    for rule in ("gauss-legendre", "gauss-kronrod"):
        method = _IntegratedGradients(FaithfulnessSettings(methods=("integrated_gradients",), ig_rule=rule))
        counts.clear()
        for batch in batches:
            method(adapter, batch)
        evaluated = np.concatenate(method.evaluated)
        if sum(counts) != int(evaluated.sum()):
            raise RuntimeError(f"{rule}: {sum(counts)} gradients counted, the rule says {int(evaluated.sum())}")
        nodes = np.concatenate(method.steps)
        gaps, differences = np.concatenate(method.gaps), np.concatenate(method.differences)
        refined = nodes > 16
        record["adaptive"][rule] = {
            "gradients_per_sentence_mean": float(evaluated.mean()), "gradients_total": int(evaluated.sum()),
            "gradients_per_refined_sentence_mean": float(evaluated[refined].mean()) if refined.any() else None,
            "refined_share": float(refined.mean()), "final_nodes_max": int(nodes.max()),
            **_summary(gaps, differences)}
        print(rule, record["adaptive"][rule], flush=True)
    fixed = {"G16": ([], []), "K33": ([], []), "G32": ([], [])}
    for batch in batches:
        g16 = integrated_gradients_attribution(adapter, batch, 16, node_contributions=True)
        k33 = kronrod_refinement(adapter, batch, g16.node_contributions)
        g32 = integrated_gradients_attribution(adapter, batch, 32)
        for name, result in (("G16", g16), ("K33", k33), ("G32", g32)):
            fixed[name][0].append(result.completeness_gap.double().numpy())
            fixed[name][1].append((result.target_input - result.target_baseline).double().numpy())
    new = {"G16": 16, "K33": 17, "G32": 32}
    for name, (gaps, differences) in fixed.items():
        record["equal_gradients"][name] = {"gradients_per_sentence": new[name] + (16 if name == "K33" else 0),
                                           "new_gradients_after_g16": new[name] if name != "G16" else 0,
                                           **_summary(np.concatenate(gaps), np.concatenate(differences))}
        print(name, record["equal_gradients"][name], flush=True)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["runs/sst-lstm", "runs/minilm-sst"],
                        help="model folders (runs/sst-lstm: hf-attn train --dataset sst --output-dir runs/sst-lstm)")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--output", default=None, help="write the record here (JSON)")
    args = parser.parse_args(argv)
    if not 1 <= args.sentences <= 1821:
        parser.error(f"--sentences must be in [1, 1821] (the SST test split), got {args.sentences}")
    for model in args.models:
        if not os.path.isfile(os.path.join(model, "config.json")):
            parser.error(f"--models must be model folders (with config.json), got {model!r}")
    import torch

    torch.set_num_threads(1)
    record = {"command": "scripts/bench/ig_nested.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "note": "shared machine: only gradient counts are meaningful, no seconds recorded",
              "settings": {"ig_steps": 16, "ig_target": 0.01, "ig_max_steps": 256, "gradient_target": "probability",
                           "ig_baseline": "zero"},
              "models": [measure(model, args.sentences) for model in args.models]}
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
