#!/usr/bin/env python
"""Score attributions made by captum with hf_attn's evaluate modules, on the same model.

    python scripts/score_captum_attributions.py MODEL_DIR [--dataset sst] [--instances 50]
                                                [--output OUT.json] [--threads 1]

captum (the optional extra ``hf_attn[captum]``) computes Kernel SHAP and integrated gradients on
the model's embeddings (:mod:`hf_attn.methods.captum_attributions`); hf_attn computes
the leave-one-out drop, LOO-drop ŷ_c(x) − ŷ_c(x₋t) (:mod:`hf_attn.methods.deletion`). Then, through ``evaluate.load`` of the module
folders (as a user of captum would, from the Hub):

- ``attribution_agreement``: Kendall τ-b / top-k agreement of each captum attribution with
  the LOO-drop;
- ``eraser_faithfulness``: ERASER comprehensiveness / sufficiency AOPC of each captum attribution
  (the deletions scored by :func:`hf_attn.batteries.faithfulness.erasure_scores`).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--split", default="test")
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--shap-samples", type=int, default=64)
    parser.add_argument("--output", default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import evaluate
    import torch

    torch.set_num_threads(args.threads)
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.data import load_analysis_data
    from hf_attn.batteries.faithfulness import erasure_scores
    from hf_attn.methods.captum_attributions import captum_attribution
    from hf_attn.methods.deletion import leave_one_out_deletion
    from hf_attn.adapters.transformer_attention import load_transformer_classifier

    texts, _, _, name = load_analysis_data(args.model_dir, args.dataset, args.split)
    texts = list(texts)[: args.instances]
    model, tokenizer = load_transformer_classifier(args.model_dir)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(texts)
    content = [batch.content[i][batch.attention_mask[i].bool()].numpy() for i in range(len(texts))]

    def per_text(scores):
        return [scores[i][batch.attention_mask[i].bool()].detach().double().numpy()[content[i]].tolist()
                for i in range(len(texts))]

    start = time.perf_counter()
    made = {"captum_kernel_shap": per_text(captum_attribution(adapter, batch, "kernel_shap", args.shap_samples)),
            "captum_integrated_gradients": per_text(captum_attribution(adapter, batch, "integrated_gradients"))}
    seconds = time.perf_counter() - start
    loo = per_text(leave_one_out_deletion(adapter, batch))
    agreement = evaluate.load(str(ROOT / "hf_attn" / "metrics" / "attribution_agreement"))
    eraser = evaluate.load(str(ROOT / "hf_attn" / "metrics" / "eraser_faithfulness"))
    out = {"model_dir": os.path.abspath(args.model_dir), "dataset": name, "split": args.split,
           "instances": len(texts), "captum_seconds": seconds, "scores": {}}
    for method, attributions in made.items():
        drops = erasure_scores(adapter, texts, attributions)
        out["scores"][method] = {
            "attribution_agreement_with_loo": agreement.compute(attributions=attributions, references=loo),
            "eraser_faithfulness": eraser.compute(comprehensiveness=drops["comprehensiveness"].tolist(),
                                                  sufficiency=drops["sufficiency"].tolist())}
    text = json.dumps(out, indent=2)
    if args.output:
        from hf_attn.core.io import write_text_atomic
        write_text_atomic(args.output, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
