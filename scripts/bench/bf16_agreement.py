#!/usr/bin/env python
"""How far each attribution method moves when the same model runs in bfloat16 instead of float32.

    python scripts/bench/bf16_agreement.py --tiny llama bert --output docs/benchmarks/bf16_agreement.json
    python scripts/bench/bf16_agreement.py --model PATH --device-map auto --sentences 32 --output RECORD

Each model is loaded twice with ``Explainer.from_pretrained`` — ``precision="float32"`` and
``precision="bfloat16"`` (the weights themselves in bfloat16, as a model larger than one device is
loaded) — with the same ``--device-map`` / ``--max-memory`` / ``--offload-folder`` when given, and
``Explainer.attributions`` runs every method on the same sentences in both. Per method the record
holds the measures of ``scripts/gpu_check.py``'s ``compare`` (bfloat16 against float32):
``max_abs``, ``relative_max_abs`` (over the method's float32 scale, its largest absolute score),
``pearson``, ``kendall_median`` and ``pair_agreement`` (the token pairs float32 tells apart by more
than 1 % of the scale that keep their order), and whether it is within :data:`BOUNDS` (``"tiny"``
for ``--tiny``, ``"model"`` for ``--model``). Integrated
gradients runs a fixed node count (``ig_target=None``), Kernel SHAP a fixed seed.

``--tiny NAME``: the tiny random classifiers of the test suite (``tests/architectures.py``: hidden
16–32, 3 layers, large initial weights so attention is peaky), saved to a temporary folder, with its
five sentences; ``--model``: any folder or Hub id, with ``--sentences`` SST test sentences
(``docs/benchmarks/sst-test-200.jsonl``). The script exits 1 when a method is outside its bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT, ROOT / "scripts"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# bfloat16 keeps 8 bits of mantissa: a method is held to the share of its scale it may move, to the
# correlation of its scores and to the ranking of the tokens float32 tells apart. "model": the GPU
# check's bfloat16 tolerances, for real-size models; "tiny": the test suite's tiny random models,
# built peaky on purpose (initial weights of scale 0.5), where rounding a large logit before a
# sharp softmax moves a score by more — the test holds them to these (tests/test_device_map.py)
BOUNDS = {"model": {"relative_max_abs": 0.25, "pearson_min": 0.9, "pair_agreement_min": 0.95},
          "tiny": {"relative_max_abs": 0.75, "pearson_min": 0.95, "pair_agreement_min": 0.85}}
SETTINGS = {"ig_steps": 16, "ig_target": None, "shap_samples": 64, "seed": 0}


def tiny_folder(name: str, folder: Path) -> tuple[str, list[str]]:
    """The test suite's tiny random ``name`` classifier (3 layers) saved in ``folder``, and its sentences."""
    sys.path.insert(0, str(ROOT / "tests"))
    from architectures import TEXTS, tiny_classifier

    model, tokenizer = tiny_classifier(name, layers=3)
    target = folder / name
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return str(target), list(TEXTS)


def sst_sentences(count: int) -> list[str]:
    lines = (ROOT / "docs" / "benchmarks" / "sst-test-200.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines[:count]]


def agreement(path: str, texts: list[str], placement: dict, methods=None, bounds: dict = BOUNDS["model"]) -> dict:
    """Per method, the measures of bfloat16 against float32 (module docstring) and ``within``."""
    from gpu_check import compare

    from hf_attn import Explainer

    scores = {}
    for precision in ("float32", "bfloat16"):
        explainer = Explainer.from_pretrained(path, precision=precision, **placement)
        result = explainer.attributions(texts, methods=methods, **SETTINGS)
        scores[precision] = (result.values, result.skipped, explainer.describe())
    reference, skipped, described = scores["float32"]
    out = {"described": {k: described.get(k) for k in ("model_type", "num_layers", "num_heads", "device",
                                                       "device_map", "fast_path")},
           "skipped": skipped, "methods": {}}
    for method, values in reference.items():
        other = scores["bfloat16"][0].get(method)
        if other is None:
            out["methods"][method] = {"skipped_in_bfloat16": scores["bfloat16"][1].get(method)}
            continue
        measures = compare(values, other)
        measures["within"] = bool(measures["finite"] and measures["relative_max_abs"] <= bounds["relative_max_abs"]
                                  and measures["pearson"] >= bounds["pearson_min"]
                                  and not (measures["pairs"] and measures["pair_agreement"]
                                           < bounds["pair_agreement_min"]))
        out["methods"][method] = measures
    return out


def summarise(models: dict) -> dict:
    rows = [(name, method, m) for name, record in models.items() for method, m in record["methods"].items()
            if "relative_max_abs" in m]
    worst = max(rows, key=lambda r: r[2]["relative_max_abs"])
    paired = [r for r in rows if r[2]["pairs"]]
    least = min(paired, key=lambda r: r[2]["pair_agreement"]) if paired else None
    return {"worst_relative_max_abs": worst[2]["relative_max_abs"], "worst_method": f"{worst[0]}:{worst[1]}",
            "min_pair_agreement": least[2]["pair_agreement"] if least else None,
            "min_pair_agreement_method": f"{least[0]}:{least[1]}" if least else None,
            "all_within": all(r[2]["within"] for r in rows)}


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", nargs="*", default=[], help="tiny random classifiers of the test suite (llama, bert, …)")
    parser.add_argument("--model", action="append", default=[], help="a classifier folder or Hub id (repeatable)")
    parser.add_argument("--sentences", type=int, default=16, help="SST test sentences for --model (default 16)")
    parser.add_argument("--device-map", default=None, help="'auto', or a JSON dict {module: device}")
    parser.add_argument("--max-memory", default=None, help='a JSON dict {device: size}, e.g. {"0": "20GiB"}')
    parser.add_argument("--offload-folder", default=None, help="a folder for the weights the map puts on 'disk'")
    parser.add_argument("--methods", nargs="*", default=None, help="default: every method but the random floor")
    parser.add_argument("--output", required=True, help="the JSON record")
    args = parser.parse_args(argv)
    if not args.tiny and not args.model:
        parser.error("give --tiny NAME ... or --model PATH")
    if args.sentences < 1:
        parser.error("--sentences must be ≥ 1")
    return args


def _json_or_text(value):
    if value is None or not value.strip().startswith("{"):
        return value
    loaded = json.loads(value)
    return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in loaded.items()}


def main(argv=None) -> int:
    import torch

    args = parse(argv)
    placement = {k: v for k, v in (("device_map", _json_or_text(args.device_map)),
                                   ("max_memory", _json_or_text(args.max_memory)),
                                   ("offload_folder", args.offload_folder)) if v is not None}
    start = time.perf_counter()
    models = {}
    with tempfile.TemporaryDirectory() as folder:
        jobs = [(f"tiny-{name}",) + tiny_folder(name, Path(folder)) + ("tiny",) for name in args.tiny]
        jobs += [(Path(path).name or path, path, sst_sentences(args.sentences), "model") for path in args.model]
        for name, path, texts, kind in jobs:
            models[name] = agreement(path, texts, placement, args.methods, BOUNDS[kind]) | {
                "sentences": len(texts), "bounds": kind}
    record = {"command": "python scripts/bench/bf16_agreement.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "bounds": BOUNDS, "settings": SETTINGS, "placement": {k: str(v) for k, v in placement.items()},
              "machine": {"platform": platform.platform(), "torch": torch.__version__, "threads": torch.get_num_threads()},
              "seconds": round(time.perf_counter() - start, 1), "models": models, "summary": summarise(models)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, model in models.items():
        for method, m in model["methods"].items():
            if "relative_max_abs" in m:
                print(f"{name:14s} {method:22s} max|Δ| {m['max_abs']:.3g} ({100 * m['relative_max_abs']:.2f} % of "
                      f"the scale), pairs kept {m['pair_agreement']:.4f}{'' if m['within'] else '  OUT OF BOUNDS'}")
    return 0 if record["summary"]["all_within"] else 1


if __name__ == "__main__":
    sys.exit(main())
