"""Fine-tune all-MiniLM-L6-v2 on binary SST with transformers.Trainer, then run the J&W battery on
it. Usage::

    HF_HUB_OFFLINE=1 python scripts/finetune_minilm.py --output-dir runs/minilm-sst \\
        --threads 2 --battery-instances 500

Skips training when ``OUTPUT_DIR/run.json`` already exists (``--retrain`` to redo it); the battery
goes to ``OUTPUT_DIR/jw`` (``--no-battery`` to skip). Weights stay outside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-model", default="minilm-l6")
    parser.add_argument("--output-dir", default="runs/minilm-sst")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=66)
    parser.add_argument("--freeze-layers", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--no-battery", action="store_true")
    parser.add_argument("--battery-instances", type=int, default=500, help="first N test sentences (0: all)")
    parser.add_argument("--battery-dir", default=None)
    parser.add_argument("--layer", type=int, default=-1)
    parser.add_argument("--heads", default="mean")
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.runs.jw import jw_battery_runner
    from hf_attn.training.transformer import (TransformerTrainSettings, read_transformer_run,
                                              train_transformer_classifier)

    run = None if args.retrain else read_transformer_run(args.output_dir)
    if run is None:
        settings = TransformerTrainSettings(base_model=args.base_model, epochs=args.epochs, batch_size=args.batch_size,
                                            learning_rate=args.learning_rate, max_length=args.max_length,
                                            freeze_layers=args.freeze_layers, seed=args.seed, num_threads=args.threads)
        run = train_transformer_classifier(output_dir=args.output_dir, settings=settings)
    print(json.dumps({"test": run["test"], "dev": run["dev"], "seconds": run["seconds"]}, indent=1), flush=True)
    if args.no_battery:
        return 0
    heads = args.heads if args.heads == "mean" else int(args.heads)
    settings = JWSettings(layer=args.layer, heads=heads, steps=args.steps, num_threads=args.threads)
    started = time.perf_counter()
    record = jw_battery_runner(args.output_dir, args.battery_dir or os.path.join(args.output_dir, "jw"),
                               settings=settings, max_instances=args.battery_instances or None)
    s = record["summary"]
    print(json.dumps({
        "instances": s["num_instances"], "accuracy": s.get("accuracy"),
        "tau_gradient": s["tau_gradient"]["overall"], "tau_loo": s["tau_loo"]["overall"],
        "tau_gradient_loo": s["tau_gradient_loo"]["overall"], "tau_rollout": s["tau_rollout"]["overall"],
        "permutation_median": s["permutation"]["overall"], "adversary": s["adversary"]["overall"],
        "per_layer": s["per_layer"], "seconds": s["seconds"], "wall": time.perf_counter() - started}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
