"""Training benchmark (issue 2): wall time and throughput of one SST training through
``transformers.Trainer`` next to a plain PyTorch loop over the same model, batches and optimiser.

    python scripts/benchmark_training.py [--encoder lstm] [--epochs 8] [--skip-plain]

Prints seconds, real (non-pad) tokens per second and the Trainer's overhead over the plain loop,
plus the test metrics of the Trainer run. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time

import numpy as np
import torch

from hf_attn.data import load_sst
from hf_attn.training import TrainSettings, build_model, classification_metrics, train
from hf_attn.tokenization import build_tokenizer


def plain_loop(settings: TrainSettings) -> dict:
    """The same model and optimiser trained by a hand-written loop with length-sorted batches
    (no evaluation, no checkpoints): the floor the Trainer run is compared with."""
    task = load_sst()
    tokenizer = build_tokenizer(list(task.splits["train"]["text"]))
    model, _ = build_model(settings, tokenizer, task)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate,
                                 weight_decay=settings.weight_decay, amsgrad=True)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", default="lstm", choices=["lstm", "cnn", "average"])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-plain", action="store_true")
    args = parser.parse_args()
    settings = TrainSettings(encoder=args.encoder, epochs=args.epochs, seed=args.seed)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; SST binary, "
          f"{args.encoder}+additive, GloVe-50d, {args.epochs} epochs, seed {args.seed}")
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
