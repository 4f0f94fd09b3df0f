"""Training benchmark: wall time and throughput of one SST training through
``transformers.Trainer`` next to a plain PyTorch loop over the same model, batches and optimiser;
or (``--compare sparse|bf16``) the papers' exact training against ``--sparse-embedding-updates`` or
``--bf16``.

    python scripts/bench/training.py [--encoder lstm] [--epochs 8] [--skip-plain]
                                         [--embeddings random --embedding-dim 300]
    python scripts/bench/training.py --compare sparse --embeddings random --embedding-dim 300 \
                                         --seeds 0 1 2 [--output docs/benchmarks/sparse_embedding_updates.json]
    python scripts/bench/training.py --compare bf16 --embeddings random --embedding-dim 300 \
                                         --seeds 0 1 2 [--output docs/benchmarks/bf16_training.json]

Prints seconds, real (non-pad) tokens per second and the Trainer's overhead over the plain loop,
plus the test metrics of the Trainer run; with ``--compare``, per seed the test accuracy /
ROC-AUC and training seconds of both, and their means ± standard deviations. Run it on an
otherwise idle machine (or with ``--threads 1`` on a shared one; timings are then only comparable
within one run).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time

import numpy as np
import torch

from hf_attn.data.tasks import load_sst
from hf_attn.training.engine import TrainSettings, build_model, classification_metrics, jw_adam, train
from hf_attn.data.tokenization import build_tokenizer


def plain_loop(settings: TrainSettings) -> dict:
    """The same model and optimiser trained by a hand-written loop with length-sorted batches
    (no evaluation, no checkpoints): the floor the Trainer run is compared with."""
    task = load_sst()
    tokenizer = build_tokenizer(list(task.splits["train"]["text"]))
    model, _ = build_model(settings, tokenizer, task)
    optimizer = jw_adam(model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    ids = tokenizer(list(task.splits["train"]["text"]))["input_ids"]
    labels = torch.tensor(task.splits["train"]["label"])
    rng = np.random.default_rng(settings.seed)
    tokens = 0
    start = time.perf_counter()
    for _ in range(settings.epochs):
        noisy_lengths = np.array([len(x) for x in ids]) + rng.uniform(0, 2, len(ids))
        order = np.argsort(noisy_lengths)
        batches = [order[i:i + settings.batch_size] for i in range(0, len(order), settings.batch_size)]
        model.train()
        for b in rng.permutation(len(batches)):
            rows = batches[b]
            width = max(len(ids[i]) for i in rows)
            x = torch.zeros(len(rows), width, dtype=torch.long)
            mask = torch.zeros(len(rows), width, dtype=torch.long)
            for j, i in enumerate(rows):
                x[j, :len(ids[i])] = torch.tensor(ids[i])
                mask[j, :len(ids[i])] = 1
            loss = model(input_ids=x, attention_mask=mask, labels=labels[rows]).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
            optimizer.step()
            tokens += int(mask.sum())
    seconds = time.perf_counter() - start
    model.eval()
    enc = tokenizer(list(task.splits["test"]["text"]), padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1).numpy()
    test = classification_metrics(probs, np.asarray(task.splits["test"]["label"]))
    return {"seconds": seconds, "tokens_per_second": tokens / seconds, "test_accuracy": test["accuracy"],
            "test_roc_auc": test["roc_auc"]}


OPTIONS = {"sparse": {"sparse_embedding_updates": True}, "bf16": {"bf16": True}}  # --compare: not the papers'


def compare_option(args, option: str) -> None:
    """The papers' exact float32 training against an option that changes the arithmetic
    (``sparse``: lazy embedding rows; ``bf16``: bfloat16 autocast), seed by seed."""
    import statistics

    rows = []
    key = "optimizer" if option == "sparse" else "variant"  # (the sparse record's field name)
    for seed in args.seeds:
        for changed in (False, True):
            settings = TrainSettings(encoder=args.encoder, epochs=args.epochs, seed=seed,
                                     embeddings=args.embeddings, embedding_dim=args.embedding_dim,
                                     **(OPTIONS[option] if changed else {}))
            with tempfile.TemporaryDirectory() as out:
                start = time.perf_counter()
                metrics = train(settings, out, progress=False)
                job = time.perf_counter() - start
            row = {"seed": seed, key: option if changed else "exact", "job_seconds": round(job, 2),
                   **{k: metrics[k] for k in ("train_seconds", "test_accuracy", "test_roc_auc",
                                              "dev_roc_auc", "best_checkpoint")}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for name in ("exact", option):
        part = [r for r in rows if r[key] == name]
        summary[name] = {metric: {"mean": statistics.mean(r[metric] for r in part),
                                  "std": statistics.stdev(r[metric] for r in part) if len(part) > 1 else 0.0}
                         for metric in ("test_accuracy", "test_roc_auc", "train_seconds")}
        print(f"{name:6s} " + "  ".join(f"{m} {v['mean']:.4f} ± {v['std']:.4f}" for m, v in summary[name].items()))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"settings": {"encoder": args.encoder, "epochs": args.epochs, "embeddings": args.embeddings,
                                    "embedding_dim": args.embedding_dim, "seeds": args.seeds, "compared": option,
                                    "threads": torch.get_num_threads(), "torch": torch.__version__,
                                    "runs_alternate": "exact then option, seed by seed, one process"},
                       "runs": rows, "summary": summary}, f, indent=1)
        print(f"written: {args.output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="lstm", choices=["lstm", "cnn", "average"])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="--compare-sparse seeds")
    parser.add_argument("--embeddings", default="glove-6b-50d", choices=["glove-6b-50d", "random"])
    parser.add_argument("--embedding-dim", type=int, default=300, help="d for --embeddings random")
    parser.add_argument("--compare", choices=sorted(OPTIONS),
                        help="exact training vs --sparse-embedding-updates (sparse) or --bf16 over --seeds")
    parser.add_argument("--compare-sparse", action="store_true", help="the same as --compare sparse")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--output", help="--compare: write the runs and summary as JSON here")
    parser.add_argument("--skip-plain", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.compare or args.compare_sparse:
        compare_option(args, args.compare or "sparse")
        return
    settings = TrainSettings(encoder=args.encoder, epochs=args.epochs, seed=args.seed,
                             embeddings=args.embeddings, embedding_dim=args.embedding_dim)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; SST binary, "
          f"{args.encoder}+additive, {args.embeddings} (d = {settings.embedding_dim if args.embeddings == 'random' else 50}), "
          f"{args.epochs} epochs, seed {args.seed}")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        metrics = train(settings, out, progress=False)
        total = time.perf_counter() - start
    print(f"Trainer: train {metrics['train_seconds']:.1f} s (whole job incl. data, eval, saving "
          f"{total:.1f} s), {metrics['train_tokens_per_second']:.0f} tokens/s; test acc "
          f"{metrics['test_accuracy']:.3f}, ROC-AUC {metrics['test_roc_auc']:.3f}")
    result = {"trainer": metrics | {"job_seconds": total}}
    if not args.skip_plain:
        plain = plain_loop(settings)
        print(f"plain loop: {plain['seconds']:.1f} s, {plain['tokens_per_second']:.0f} tokens/s "
              f"(test acc {plain['test_accuracy']:.3f}, ROC-AUC {plain['test_roc_auc']:.3f}); "
              f"Trainer / plain = {metrics['train_seconds'] / plain['seconds']:.2f}")
        result["plain_loop"] = plain
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB")
    print(json.dumps(result, indent=2, default=float))


if __name__ == "__main__":
    main()
