"""Every attribution method on a CUDA device against the same model on the CPU, in float32 and
bfloat16, with speed and memory per method, at MiniLM and SmolLM2 size.

Two steps, because a GPU machine may have neither the packaged weights nor the network:

1. ``python scripts/gpu_check.py --prepare ASSETS [--trained minilm=runs/minilm-sst]`` (where
   hf_attn[bert,decoder] is installed) writes, per model, its ``config.json`` and tokenizer and the
   sentences (the first ``--sentences`` texts of the bundled SST test split); with ``--trained``, a
   trained classifier's weights too, in float16 and with only the embedding rows the sentences use
   (:func:`trimmed_weights`: small enough to travel).
2. ``python scripts/gpu_check.py --assets ASSETS --out RECORD.json`` on the CUDA machine builds each
   model at its real architecture and size (MiniLM-L6: a 6-layer BERT of hidden 384; SmolLM2-135M:
   a 30-layer Llama of hidden 576 with grouped-query attention) with the trained weights where they
   travelled and seeded random weights otherwise, runs :meth:`hf_attn.Explainer.attributions` per
   method on the CPU in float32 (the reference), then on the GPU in float32 and in bfloat16, and
   writes the record.

Per method and precision the record holds the largest difference from the CPU scores relative to
their scale (max |Δ| / max |CPU|), the Pearson correlation over all tokens, the median per-sentence
Kendall τ, the share of token pairs the CPU tells apart (by over 1 % of the scale) that the device
orders alike, the seconds (the faster of two calls after a warm-up) and the peak GPU memory.
Integrated gradients run at a fixed node count here (``ig_target=None``): a completeness target lets each side pick its own
count, which would compare different quadratures. The tolerances are stated in
:data:`TOLERANCES` and a method passes when every one of its measures is inside them; the script
exits 1 when a method fails, 0 otherwise. Without CUDA it refuses (exit 2) unless ``--device cpu``
is given, which runs the whole comparison CPU against CPU (a smoke test of the script itself).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODELS = {"minilm": "minilm-l6", "smollm2": "smollm2-135m"}
# float32 on a GPU differs from the CPU only by summation order (fused kernels, TF32 off);
# bfloat16 keeps 8 bits of mantissa, so only the ranking and the overall shape are held to account
TOLERANCES = {
    "float32": {"relative_max_abs": 1e-3, "pearson_min": 0.9999, "pair_agreement_min": 0.999},
    "bfloat16": {"relative_max_abs": 0.25, "pearson_min": 0.9, "pair_agreement_min": 0.95},
}
# pairs of tokens whose CPU scores differ by more than this share of the method's scale must keep
# their order on the device; closer pairs are ordered by rounding (random decoders score tokens alike)
RESOLVABLE = 0.01
WEIGHTS = "trimmed.safetensors"
EMBEDDING_SUFFIXES = ("word_embeddings.weight", "embed_tokens.weight")
# captum's Kernel SHAP draws its coalitions from torch's generator on the model's device, so its
# GPU draws are not its CPU draws: its scores are compared on their correlation only
DEVICE_RANDOM = {"kernel_shap"}


class ArgumentError(ValueError):
    pass


def sst_test_sentences(count: int) -> list[str]:
    """The first ``count`` sentences of the bundled SST test split (the tree's leaves, joined)."""
    path = ROOT / "hf_attn" / "data" / "sst" / "test.txt.gz"
    texts = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            texts.append(" ".join(re.findall(r"\(\d ([^()]+)\)", line)))
            if len(texts) == count:
                break
    return texts


def prepare(assets: Path, count: int, trained: dict[str, str]) -> None:
    """Configs, tokenizers and sentences into ``assets`` (module docstring, step 1); for a model
    named in ``trained`` (key → a trained classifier's folder), its weights as well, trimmed by
    :func:`trimmed_weights`."""
    from transformers import AutoConfig, AutoTokenizer

    from hf_attn.models.pretrained import resolve_base_model

    assets.mkdir(parents=True, exist_ok=True)
    texts = sst_test_sentences(count)
    for key, alias in MODELS.items():
        folder = trained.get(key) or resolve_base_model(alias)
        config = AutoConfig.from_pretrained(folder)
        config.num_labels = 2
        config.save_pretrained(assets / key)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.save_pretrained(assets / key)
        if key in trained:
            trimmed_weights(Path(folder), tokenizer, texts, assets / key / WEIGHTS)
    (assets / "sentences.json").write_text(json.dumps(texts, indent=1))
    print(f"wrote {assets}: {', '.join(MODELS)} configs and tokenizers, {count} sentences, trained weights for "
          f"{sorted(trained) or 'none'}")


def trimmed_weights(folder: Path, tokenizer, texts: list[str], out: Path) -> None:
    """A trained classifier's weights small enough to travel: float16, and of the word-embedding
    matrix only the rows of the ids the sentences (and the special tokens) use, with their ids.
    On those sentences the model computes what the float16-rounded model computes; both the CPU
    reference and the GPU runs use the same rounded weights."""
    import torch
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    ids = {i for row in tokenizer(texts)["input_ids"] for i in row} | set(tokenizer.all_special_ids)
    ids = torch.tensor(sorted(ids))
    kept = {}
    for name, tensor in state.items():
        if name.endswith(EMBEDDING_SUFFIXES):
            kept[name] = tensor[ids].half()
            kept[name + ".rows"] = ids
        else:
            kept[name] = tensor.half() if tensor.is_floating_point() else tensor
    save_file(kept, str(out))


def build(folder: Path, seed: int):
    """The classifier of ``folder``'s config with seeded random weights, and its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from hf_attn.adapters.interface import ATTN_IMPLEMENTATION, register

    register()
    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if config.pad_token_id is None and tokenizer.pad_token_id is not None:
        config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation=ATTN_IMPLEMENTATION)
    if (folder / WEIGHTS).is_file():
        load_trimmed(model, folder / WEIGHTS)
    return model.eval(), tokenizer


def load_trimmed(model, path: Path) -> None:
    """The weights :func:`trimmed_weights` wrote, into ``model`` (float32); word-embedding rows the
    sentences never use are zero."""
    import torch
    from safetensors.torch import load_file

    saved = load_file(str(path))
    state = model.state_dict()
    for name in list(state):
        if name.endswith(EMBEDDING_SUFFIXES):
            full = torch.zeros_like(state[name])
            full[saved.pop(name + ".rows")] = saved.pop(name).float()
            saved[name] = full
    missing = set(state) - set(saved)
    if missing - {n for n in missing if n.endswith("position_ids")}:
        raise ValueError(f"{path}: weights missing for {sorted(missing)[:5]}")
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in saved.items()}, strict=False)


def compare(reference: list[list[float]], other: list[list[float]]) -> dict:
    """The measures of one method's scores against the CPU's (module docstring)."""
    from scipy.stats import kendalltau

    a = np.concatenate([np.asarray(r, dtype=np.float64) for r in reference])
    b = np.concatenate([np.asarray(r, dtype=np.float64) for r in other])
    scale = float(np.abs(a).max()) or 1.0
    finite = bool(np.isfinite(b).all())
    taus, agree, pairs = [], 0, 0
    for r, o in zip(reference, other):
        r, o = np.asarray(r, dtype=np.float64), np.asarray(o, dtype=np.float64)
        if len(r) > 1 and np.ptp(r) > 0 and np.ptp(o) > 0:
            taus.append(kendalltau(r, o).statistic)
        # the pairs of tokens the CPU tells apart by more than rounding: does the device order them alike?
        dr, do = r[:, None] - r[None, :], o[:, None] - o[None, :]
        apart = np.triu(np.abs(dr) > RESOLVABLE * scale, 1)
        pairs += int(apart.sum())
        agree += int((np.sign(dr) == np.sign(do))[apart].sum())
    pearson = float(np.corrcoef(a, b)[0, 1]) if np.ptp(a) > 0 and np.ptp(b) > 0 else float("nan")
    return {"max_abs": float(np.abs(a - b).max()), "relative_max_abs": float(np.abs(a - b).max()) / scale,
            "pearson": pearson, "kendall_median": float(np.median(taus)) if taus else float("nan"),
            "pair_agreement": agree / pairs if pairs else float("nan"), "pairs": pairs,
            "finite": finite}


def within(measures: dict, precision: str, method: str) -> tuple[bool, list[str]]:
    """Whether ``measures`` meet :data:`TOLERANCES`; the names of those that do not."""
    tol = TOLERANCES[precision]
    failed = []
    if not measures["finite"]:
        failed.append("finite")
    if method not in DEVICE_RANDOM and not measures["relative_max_abs"] <= tol["relative_max_abs"]:
        failed.append("relative_max_abs")
    if not measures["pearson"] >= tol["pearson_min"]:
        failed.append("pearson")
    if method not in DEVICE_RANDOM and measures["pairs"] and not measures["pair_agreement"] >= tol["pair_agreement_min"]:
        failed.append("pair_agreement")
    return not failed, failed


def timed_attributions(explainer, texts, method: str, device: str, settings: dict, repeats: int = 2):
    """``(values, seconds, peak_bytes, skipped)`` of one method: the fastest of ``repeats`` calls
    after one warm-up call on two texts; the peak GPU memory of the last call."""
    import torch

    explainer.attributions(texts[:2], methods=[method], **settings)
    cuda = device.startswith("cuda")
    best = float("inf")
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        result = explainer.attributions(texts, methods=[method], **settings)
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
        if method in result.skipped:
            break
    peak = int(torch.cuda.max_memory_allocated()) if cuda else None
    if method in result.skipped:
        return None, best, peak, result.skipped[method]
    return result.values[method], best, peak, None


def check_model(key: str, assets: Path, texts: list[str], device: str, methods, settings: dict, seed: int) -> dict:
    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import METHODS

    model, tokenizer = build(assets / key, seed)
    params = sum(p.numel() for p in model.parameters())
    chosen = [m for m in METHODS if m != "random"] if methods is None else methods
    cpu = Explainer(model, tokenizer, device="cpu")
    rows = {}
    for method in chosen:
        values, seconds, _, skipped = timed_attributions(cpu, texts, method, "cpu", settings)
        rows[method] = {"cpu": {"seconds": round(seconds, 3)}} if skipped is None else {"skipped": skipped}
        if skipped is None:
            rows[method]["_reference"] = values
        print(f"  {key} {method:22s} cpu   {seconds:8.2f} s" + (f" (skipped: {skipped})" if skipped else ""),
              flush=True)
    for precision in ("float32", "bfloat16"):
        built, _ = build(assets / key, seed)
        gpu = Explainer(built, tokenizer, device=device, precision=precision)
        for method in chosen:
            row = rows[method]
            if "skipped" in row:
                continue
            values, seconds, peak, skipped = timed_attributions(gpu, texts, method, device, settings)
            if skipped is not None:
                row[precision] = {"skipped": skipped, "passed": False, "failed": ["skipped"]}
                continue
            measures = compare(row["_reference"], values)
            passed, failed = within(measures, precision, method)
            row[precision] = {"seconds": round(seconds, 3),
                              "speedup_vs_cpu": round(row["cpu"]["seconds"] / seconds, 2) if seconds else None,
                              "peak_gpu_mb": round(peak / 2 ** 20, 1) if peak is not None else None,
                              **{k: (round(v, 8) if isinstance(v, float) else v) for k, v in measures.items()},
                              "passed": passed, "failed": failed}
            print(f"  {key} {method:22s} {precision:8s} {seconds:8.2f} s  rel {measures['relative_max_abs']:.2e}  "
                  f"r {measures['pearson']:.5f}  τ {measures['kendall_median']:.3f}  "
                  f"pairs {measures['pair_agreement']:.4f}  "
                  f"{'ok' if passed else 'FAIL ' + ','.join(failed)}", flush=True)
        del gpu, built
    for row in rows.values():
        row.pop("_reference", None)
    weights = ("trained on SST, float16-rounded (only the sentences' embedding rows travel)"
               if (assets / key / WEIGHTS).is_file() else "random (seeded) at the checkpoint's config")
    return {"model": MODELS[key], "weights": weights, "architecture": type(model).__name__, "parameters": params,
            "layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size,
            "heads": model.config.num_attention_heads, "methods": rows}


def summarise(models: list[dict]) -> dict:
    """The worst case over every model and method, per precision."""
    summary = {}
    for precision in ("float32", "bfloat16"):
        cells = [(m["model"], name, row[precision]) for m in models for name, row in m["methods"].items()
                 if isinstance(row.get(precision), dict) and "relative_max_abs" in row[precision]]
        if not cells:
            continue
        worst = max(cells, key=lambda c: c[2]["relative_max_abs"])
        pairs = [c[2]["pair_agreement"] for c in cells if c[2]["pairs"]]
        summary[precision] = {"worst_relative_max_abs": worst[2]["relative_max_abs"],
                              "worst_relative_max_abs_percent": round(100 * worst[2]["relative_max_abs"], 4),
                              "worst_at": f"{worst[0]}/{worst[1]}",
                              "min_pair_agreement": min(pairs) if pairs else None,
                              "min_pearson": min(c[2]["pearson"] for c in cells)}
    return summary


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", metavar="ASSETS", help="write configs, tokenizers and sentences, then stop")
    parser.add_argument("--trained", action="append", default=[], metavar="KEY=FOLDER",
                        help="with --prepare: a trained classifier's folder whose weights travel (trimmed)")
    parser.add_argument("--assets", metavar="ASSETS", help="the folder --prepare wrote")
    parser.add_argument("--out", metavar="RECORD", help="the record (JSON) to write")
    parser.add_argument("--sentences", type=int, default=32, help="SST test sentences (default 32)")
    parser.add_argument("--models", default="minilm,smollm2", help="comma-separated: minilm, smollm2")
    parser.add_argument("--methods", default=None, help="comma-separated method names (default: all but random)")
    parser.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu (cpu: a smoke test of the script)")
    parser.add_argument("--ig-steps", type=int, default=32, help="integrated-gradients nodes (fixed)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.sentences < 2:
        parser.error("--sentences must be at least 2")
    if args.prepare is None and (args.assets is None or args.out is None):
        parser.error("give --prepare ASSETS, or --assets ASSETS and --out RECORD")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        parser.error(f"--models: unknown {unknown}; choose from {list(MODELS)}")
    args.models = models
    trained = dict(item.split("=", 1) for item in args.trained if "=" in item)
    if len(trained) != len(args.trained) or set(trained) - set(MODELS):
        parser.error(f"--trained takes KEY=FOLDER with KEY in {list(MODELS)}, got {args.trained}")
    args.trained = trained
    if args.methods is not None:
        from hf_attn.batteries.faithfulness import METHODS

        args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        bad = [m for m in args.methods if m not in METHODS]
        if bad or not args.methods:
            parser.error(f"--methods: unknown {bad}; choose from {list(METHODS)}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.prepare:
        prepare(Path(args.prepare), args.sentences, args.trained)
        return 0
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (run it where torch.cuda.is_available(), or --device cpu "
              "for a smoke test)", file=sys.stderr)
        return 2
    import warnings

    warnings.filterwarnings("ignore", message="Minimum element in feature mask is not 0")  # captum, per call
    assets = Path(args.assets)
    texts = json.loads((assets / "sentences.json").read_text())[:args.sentences]
    settings = {"ig_steps": args.ig_steps, "ig_target": None}
    torch.set_num_threads(os.cpu_count() or 1)
    started = time.perf_counter()
    models = []
    for key in args.models:
        print(f"{key}:", flush=True)
        models.append(check_model(key, assets, texts, args.device, args.methods, settings, args.seed))
    import transformers

    failures = [f"{m['model']}/{name}/{p}" for m in models for name, row in m["methods"].items()
                for p in ("float32", "bfloat16") if p in row and not row[p]["passed"]]
    record = {
        "what": __doc__.split("\n\n")[0],
        "device": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu",
        "cpu": platform.processor() or platform.machine(), "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "sentences": len(texts), "words": sum(len(t.split()) for t in texts), "settings": settings, "seed": args.seed,
        "weights": {m["model"]: m["weights"] for m in models},
        "tolerances": TOLERANCES, "compared_on_correlation_only": sorted(DEVICE_RANDOM),
        "models": models, "summary": summarise(models), "failures": failures, "seconds": round(time.perf_counter() - started, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False))
    os.replace(tmp, out)
    print(f"wrote {out}: {len(failures)} failure(s) in {record['seconds']} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
