"""Throughput of the whole faithfulness table and of the J&W battery on a CUDA device: sentences per
second at MiniLM and SmolLM2 size in float32 and bfloat16, each beside the fraction of the device's
FLOP floor it reaches.

Uses the assets of ``scripts/gpu_check.py --prepare ASSETS --sentences 100`` (configs, tokenizers,
sentences; trained weights where they travelled, seeded random weights otherwise)::

    python scripts/gpu_throughput.py --assets ASSETS --out RECORD.json [--budget 240]

Per model and precision, through the public API as a user calls it (:meth:`hf_attn.Explainer.faithfulness`
with its default settings, :meth:`hf_attn.Explainer.jw` with its defaults), after a warm-up call on
four sentences: the wall seconds of one call over all the sentences, sentences per second and the
peak GPU memory. The FLOP floor: the floating-point operations the call executes, counted by
``torch.utils.flop_counter.FlopCounterMode`` (matrix products and attention; element-wise work is
not counted, so the fraction is an upper bound of the useful share) on the first ``--count``
sentences and scaled to all of them, divided by the device's measured peak for that precision (an
8192³ matrix product timed at the start: float32 without TF32, as the table runs, and bfloat16).
The fraction is that floor over the measured seconds.

``--budget`` bounds the whole script's seconds: a configuration whose estimated cost (from the ones
before it) would not fit is left out and named in the record. The record is rewritten after every
configuration, so a run stopped from outside keeps what it measured. ``--device cpu`` runs the same
on the CPU (a smoke test of the script)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_check import MODELS, build  # noqa: E402

PRECISIONS = ("float32", "bfloat16")
BATTERIES = ("faithfulness", "jw")


def measured_peak(device: str, precision: str, size: int = 8192, repeats: int = 10) -> float:
    """FLOP/s of a ``size``³ matrix product in ``precision`` on ``device`` (the mean of ``repeats``
    timed products after three warm-ups); float32 with TF32 off, as the batteries run."""
    import torch

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[precision]
    if not device.startswith("cuda"):
        size, repeats = 1024, 3
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * size ** 3 * repeats / (time.perf_counter() - start)


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def call(explainer, battery: str, texts: list[str]):
    return explainer.faithfulness(texts) if battery == "faithfulness" else explainer.jw(texts)


def counted_flops(explainer, battery: str, texts: list[str]) -> tuple[float | None, str | None]:
    """The FLOPs of one call, summed over every operator PyTorch's FLOP counter has a formula for
    (``torch.utils.flop_counter``'s registry: matrix products, convolutions, attention kernels). The
    counter's own ``FlopCounterMode`` tracks modules with backward hooks that ``torch.autograd.grad``
    refuses, so the registry is read by a plain dispatch mode."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Counter(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                Counter.total += int(formula(*args, **kwargs, out_val=out))
            return out

    try:
        with Counter():
            call(explainer, battery, texts)
        return float(Counter.total), None
    except Exception as error:  # the count is reported as missing, with its reason
        return None, f"{type(error).__name__}: {error}"


def one(key: str, assets: Path, texts: list[str], device: str, precision: str, battery: str, count: int,
        peak: float, seed: int) -> dict:
    import torch

    from hf_attn import Explainer

    model, tokenizer = build(assets / key, seed)
    explainer = Explainer(model, tokenizer, device=device, precision=precision)
    call(explainer, battery, texts[:4])  # warm-up: kernels, allocator
    sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    call(explainer, battery, texts)
    sync(device)
    seconds = time.perf_counter() - start
    peak_mb = torch.cuda.max_memory_allocated() / 2 ** 20 if device.startswith("cuda") else None
    flops, why = counted_flops(explainer, battery, texts[:count])
    row = {"model": key, "battery": battery, "precision": precision, "sentences": len(texts),
           "seconds": round(seconds, 3), "sentences_per_second": round(len(texts) / seconds, 3),
           "peak_gpu_mb": None if peak_mb is None else round(peak_mb, 1),
           "parameters": sum(p.numel() for p in model.parameters())}
    if flops is None:
        row["flops"] = None
        row["flops_missing"] = why
    else:
        total = flops * len(texts) / count
        row.update({"flops_counted_on": count, "flops": total, "floor_seconds": round(total / peak, 4),
                    "fraction_of_floor": round(total / peak / seconds, 5)})
    return row


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", required=True, help="the folder gpu_check.py --prepare wrote")
    parser.add_argument("--out", required=True, help="the record (JSON) to write")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--count", type=int, default=16, help="sentences the FLOP count runs on")
    parser.add_argument("--models", default="minilm,smollm2")
    parser.add_argument("--batteries", default=",".join(BATTERIES))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds for the whole script")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    models = args.models.split(",")
    batteries = args.batteries.split(",")
    bad = [m for m in models if m not in MODELS] + [b for b in batteries if b not in BATTERIES]
    if bad or args.sentences < 4 or not 1 <= args.count <= args.sentences:
        parser.exit(2, f"gpu_throughput: error: unknown {bad} or --sentences < 4 or --count outside "
                       f"[1, --sentences]\n")
    return args, models, batteries


def main(argv=None) -> int:
    import torch
    import transformers

    args, models, batteries = parse(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_throughput: error: no CUDA device (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    began = time.perf_counter()
    assets = Path(args.assets)
    texts = json.loads((assets / "sentences.json").read_text())[:args.sentences]
    if len(texts) < args.sentences:
        print(f"gpu_throughput: error: {assets / 'sentences.json'} holds {len(texts)} sentences, "
              f"fewer than --sentences {args.sentences}", file=sys.stderr)
        return 2
    peaks = {p: measured_peak(args.device, p) for p in PRECISIONS}
    record = {"what": __doc__.split("\n\n")[0].replace("\n", " "),
              "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor(),
              "torch": torch.__version__, "transformers": transformers.__version__,
              "cpu_threads": torch.get_num_threads(), "sentences": len(texts),
              "words": sum(len(t.split()) for t in texts), "settings": "each battery's defaults",
              "measured_peak_flops": {p: round(v) for p, v in peaks.items()}, "rows": [], "left_out": []}
    out = Path(args.out)

    def write():
        record["seconds"] = round(time.perf_counter() - began, 1)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, out)

    spent = []
    for key in models:
        for battery in batteries:
            for precision in PRECISIONS:
                left = args.budget - (time.perf_counter() - began)
                # a configuration of the same model costs about what the slowest one before it cost
                estimate = max((t for k, t in spent if k == key), default=0.0)
                name = f"{key}/{battery}/{precision}"
                if estimate > left:
                    record["left_out"].append(f"{name}: about {estimate:.0f} s estimated, {left:.0f} s left")
                    print(f"left out {name}", flush=True)
                    write()
                    continue
                start = time.perf_counter()
                try:
                    row = one(key, assets, texts, args.device, precision, battery, args.count, peaks[precision],
                              args.seed)
                except Exception as error:
                    row = {"model": key, "battery": battery, "precision": precision,
                           "error": f"{type(error).__name__}: {error}"}
                spent.append((key, time.perf_counter() - start))
                record["rows"].append(row)
                print(json.dumps(row), flush=True)
                write()
    write()
    return 0 if all("error" not in r for r in record["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
