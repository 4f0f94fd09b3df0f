"""Publishing to the Hugging Face Hub (SPEC §8): trained runs as model repos with a generated model
card, `evaluate` modules as metric Spaces, and the Gradio explorer as a Space.

Every push first builds the exact folder that is uploaded (``build_*_folder``); ``--to-dir`` /
``--dry-run`` stop there. Uploads go through ``huggingface_hub`` (``HfApi.create_repo`` +
``HfApi.upload_folder``), so ``HF_ENDPOINT`` / ``HF_TOKEN`` behave as everywhere in the ecosystem.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO_ROOT = Path(__file__).resolve().parents[1]
CARDS_DIR = REPO_ROOT / "hub_cards"
SPACE_APP_DIR = REPO_ROOT / "spaces_app"
PACKAGE_DIR = Path(__file__).resolve().parent

# The only top-level files of a run folder that are uploaded (an allow-list: notes, keys, dotfiles, Trainer
# state such as the pickled training_args.bin, and anything else stay local): what save_pretrained writes
# for the model (weights, possibly sharded, config, the modelling files for trust_remote_code), the
# tokenizer files, and the run's metrics.json / run.json. README.md is generated, never copied.
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "generation_config.json", "modeling_hf_attn.py", "configuration_hf_attn.py",
               "modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "metrics.json",
               "run.json")
# Pickled weights: loading them can run arbitrary code, so a folder holding them is refused.
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*.bin")
EXCLUDED_DIRS = ("checkpoint-*", "runs", "__pycache__", ".*")
ANALYSIS_FILES = ("results.json", "*.png", "*.svg", "*.md", "*.csv")
# Files of an evaluate module folder / of the Space app folder that are uploaded (README.md is rewritten).
METRIC_FILES = ("*.py", "requirements.txt")
SPACE_FILES = ("*.py", "requirements.txt", "packages.txt", "*.css")
# What the vendored copy of hf_attn carries: its source and its package data (pyproject.toml).
VENDOR_DATA = {"data_files": ("*.gz", "*.txt", "*.csv", "*.tsv", "*.json", "*.jsonl"), "metrics": ("README.md",)}
# The sentence the packaged model is run on before anything is uploaded.
VERIFY_SENTENCE = "a gorgeous , witty , seductive movie ."
LOCAL_PATH = "<local path>"

SST_DESCRIPTION = ("The binary Stanford Sentiment Treebank (Socher et al. 2013) as used by Jain & Wallace "
                   "(2019): sentence-level positive/negative movie-review snippets, neutral sentences "
                   "removed, their train/dev/test split.")
PAPERS = ("arxiv:1902.10186", "arxiv:1908.04626", "arxiv:2004.14243")


class HubError(ValueError):
    """A folder cannot be published as asked (clear message for the CLI)."""


@dataclass
class AnalysisSummary:
    name: str  # battery / folder name, e.g. "jw"
    folder: Path
    summary: list[tuple[str, float]]  # flattened scalar results, "path.to.value" → value
    figures: list[str]  # paths in the repo, relative to its root


# --------------------------------------------------------------------------------------- helpers
def _matches(name: str, patterns) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _is_relative_to(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _checked_source(path: Path, root: Path, must_exist: bool = True) -> Path:
    """The real file behind ``path``; HubError if it is a symlink resolving outside ``root`` (a
    resolved folder): following it would publish a file from elsewhere on this machine."""
    real = path.resolve()
    if not _is_relative_to(real, root):
        raise HubError(f"{path} is a symlink to {real}, outside {root}: refusing to publish it "
                       "(copy the file into the folder if it really belongs to the upload)")
    if must_exist and not real.exists():
        raise HubError(f"{path} is a broken symlink (to {real})")
    return real


def _allowed_files(folder: Path, patterns, root: Path) -> list[tuple[Path, Path]]:
    """(entry, real file) for the top-level files of ``folder`` matching ``patterns``. Every symlinked
    file in the folder, allowed or not, must stay inside ``root``."""
    chosen = []
    for item in sorted(folder.iterdir()):
        allowed = _matches(item.name, patterns)
        if item.is_symlink() and not item.is_dir():
            real = _checked_source(item, root, must_exist=allowed)
        elif item.is_file():
            real = item
        else:
            continue
        if allowed:
            chosen.append((item, real))
    return chosen


# ------------------------------------------------------------------------------ local path scrubbing
_SEGMENT = r"[\w.@%+=~-]+"
_GENERIC_PATH = (rf"(?<![\w.~:/\\-])/{_SEGMENT}(?:/{_SEGMENT})+"  # /a/b...
                 rf"|(?<![\w.~/-])~(?:/{_SEGMENT})+"  # ~/a...
                 r"|(?<![\w])[A-Za-z]:\\[^\s\"'<>|]+")  # C:\a...


class _PathScrubber:
    """Replaces local absolute paths in text and JSON: a path inside the run folder becomes its path
    relative to the run folder ("." for the folder itself), any other absolute path ``<local path>``.
    Known local folders (the run and analysis folders, home, the temp and current folders) are matched
    literally, so their paths are caught even with spaces; other absolute paths by their shape."""

    def __init__(self, run_dir: Path, extra_roots=()):
        self.run_roots = sorted({os.path.abspath(run_dir), str(Path(run_dir).resolve())}, key=len, reverse=True)
        known = set(self.run_roots)
        for folder in (*extra_roots, Path.home(), tempfile.gettempdir(), os.getcwd()):
            known.update({os.path.abspath(folder), str(Path(folder).resolve())})
        known = sorted((k.rstrip("/\\") for k in known if len(k.strip("/\\")) >= 2), key=len, reverse=True)
        literal = "|".join(re.escape(k) for k in known)
        self.pattern = re.compile(
            (rf"(?<![\w.~-])(?:{literal})(?![\w.-])(?:/{_SEGMENT})*|" if literal else "") + _GENERIC_PATH)

    def _map(self, path: str) -> str:
        for root in self.run_roots:
            if path == root:
                return "."
            if path.startswith(root + os.sep):
                return PurePosixPath(*Path(path[len(root) + 1:]).parts).as_posix() or "."
        return LOCAL_PATH

    def _replace(self, match: re.Match) -> str:
        path = match.group(0)
        stripped = path.rstrip(".")  # "... in /a/b." ends a sentence
        return self._map(stripped.rstrip("/\\") or stripped) + path[len(stripped):]

    def text(self, text: str) -> str:
        return self.pattern.sub(self._replace, text)

    def value(self, value):
        if isinstance(value, str):
            if "\n" not in value and (os.path.isabs(value) or value.startswith("~/")
                                       or re.match(r"[A-Za-z]:\\", value)):
                return self._map(os.path.normpath(os.path.expanduser(value)) if value.startswith("~/")
                                 else value.rstrip("/\\") or value)
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def file(self, path: Path) -> None:
        """Scrub one file of the built folder in place (JSON structurally, other text as text)."""
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise HubError(f"{path.name} is not UTF-8 text, so it cannot be checked for local paths: "
                           "convert it or remove it") from err
        if path.suffix == ".json":
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = None
            if payload is not None:
                scrubbed = self.value(payload)
                if scrubbed != payload:
                    path.write_text(json.dumps(scrubbed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                return
        scrubbed = self.text(raw)
        if scrubbed != raw:
            path.write_text(scrubbed, encoding="utf-8")


# Text files of a built model folder that are scrubbed of local paths. tokenizer.json (the vocabulary,
# derived from the training texts only) and the modelling code are left byte-identical.
SCRUBBED_FILES = ("*.json", "*.md", "*.csv", "*.svg", "*.txt")
UNSCRUBBED_FILES = ("tokenizer.json", "model.safetensors.index.json")


def _format_number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.1f}"


SUMMARY_LEAVES = ("mean", "median", "fraction_significant", "fraction_feasible", "accuracy", "f1", "macro_f1",
                  "roc_auc", "value", "jsd", "tvd", "mutual_information")
SKIPPED_KEYS = ("versions", "environment", "settings", "parameters", "args", "config", "seconds", "published",
                "timings", "figures", "histogram", "bins")


def _flatten_scalars(payload, prefix: str = "", max_depth: int = 6) -> list[tuple[str, float]]:
    """Summary numbers of a results.json as ("a.b.c", value): numeric leaves named like a summary
    statistic (mean, median, fraction_significant, ...) or sitting directly in the summary; lists
    (per-instance arrays), timings, parameters and published reference values are skipped."""
    items: list[tuple[str, float]] = []
    if isinstance(payload, dict) and max_depth > 0:
        for key, value in payload.items():
            if str(key) in SKIPPED_KEYS or str(key).startswith(("num_", "length")):
                continue  # not results: sizes and settings
            items.extend(_flatten_scalars(value, f"{prefix}{key}.", max_depth - 1))
    elif isinstance(payload, (int, float)) and not isinstance(payload, bool) and math.isfinite(payload):
        path = prefix.rstrip(".")
        if "." not in path or path.rsplit(".", 1)[-1] in SUMMARY_LEAVES:
            items.append((path, float(payload)))
    return items


def find_analyses(run_dir: str | os.PathLike, extra_dirs=()) -> list[Path]:
    """Folders holding an analysis ``results.json``: inside the run folder (any depth up to 3, never
    in checkpoints) and the given extra folders."""
    run_dir = Path(run_dir)
    found: list[Path] = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = [d for d in dirs if not _matches(d, EXCLUDED_DIRS)]
        if len(Path(root).relative_to(run_dir).parts) > 3:
            dirs[:] = []
        if "results.json" in files and Path(root) != run_dir:
            found.append(Path(root))
    for extra in extra_dirs:
        extra = Path(extra)
        if not (extra / "results.json").is_file():
            raise HubError(f"analysis folder {extra} has no results.json")
        found.append(extra)
    unique: dict[Path, None] = {}
    for folder in found:
        unique.setdefault(folder.resolve(), None)
    return list(unique)


def summarise_analysis(folder: Path, repo_subdir: str) -> AnalysisSummary:
    results = _read_json(folder / "results.json")
    scalars = _flatten_scalars(results.get("summary", results))
    figures = sorted(p.name for p in folder.iterdir() if p.suffix in (".png", ".svg"))
    name = str(results.get("battery") or folder.name)
    return AnalysisSummary(name, folder, scalars, [f"{repo_subdir}/{f}" for f in figures])


# --------------------------------------------------------------------------------------- model repos
def _architecture_rows(config: dict, run: dict) -> list[tuple[str, str]]:
    model = run.get("model", {})
    rows = [("model type", config.get("model_type")),
            ("encoder", config.get("encoder")),
            ("attention", config.get("attention")),
            ("T&Š variant", config.get("variant")),
            ("embeddings", f"{model.get('embeddings', '?')} (d = {config.get('embedding_dim')})"),
            ("hidden size per direction", config.get("hidden_size")),
            ("labels", ", ".join(str(v) for v in (config.get("id2label") or {}).values())),
            ("parameters", model.get("parameters"))]
    return [(k, str(v)) for k, v in rows if v is not None]


def _eval_results(metrics: dict, task_name: str, dataset_type: str, dataset_name: str,
                  analyses: list[AnalysisSummary]):
    from huggingface_hub import EvalResult

    results = []
    for key, metric_type in (("test_accuracy", "accuracy"), ("test_f1", "f1"),
                             ("test_macro_f1", "f1"), ("test_roc_auc", "roc_auc")):
        if key in metrics and metrics[key] is not None:
            results.append(EvalResult(
                task_type="text-classification", task_name="Text Classification",
                dataset_type=dataset_type, dataset_name=dataset_name, dataset_split="test",
                metric_type=metric_type, metric_value=round(float(metrics[key]), 4),
                metric_name={"test_f1": "F1 (positive class)", "test_macro_f1": "macro F1"}.get(
                    key, metric_type.replace("_", "-").upper() if metric_type == "roc_auc" else "accuracy"),
                metric_config="macro" if key == "test_macro_f1" else None))
    for analysis in analyses:
        for key, value in analysis.summary:
            results.append(EvalResult(
                task_type="text-classification", task_name="Text Classification",
                dataset_type=dataset_type, dataset_name=dataset_name, dataset_split="test",
                metric_type=f"hf_attn/{analysis.name}", metric_config=key, metric_name=f"{analysis.name}: {key}",
                metric_value=round(value, 4)))
    return results


def build_model_card(folder: Path, repo_id: str, analyses: list[AnalysisSummary],
                     template_path: str | os.PathLike | None = None, license: str = "apache-2.0"):
    """The model card (``huggingface_hub.ModelCard``) of a run folder that is being published."""
    from huggingface_hub import ModelCard, ModelCardData

    config = _read_json(folder / "config.json")
    metrics = _read_json(folder / "metrics.json") if (folder / "metrics.json").exists() else {}
    run = _read_json(folder / "run.json") if (folder / "run.json").exists() else {}
    settings = run.get("settings", {})
    task = run.get("task") or settings.get("dataset") or "custom"
    is_sst = task in ("sst", "sst-small")
    dataset_type = "sst" if is_sst else str(task)
    dataset_name = "SST (binary, Jain & Wallace split)" if is_sst else str(task)
    model_name = repo_id.split("/")[-1]
    card_data = ModelCardData(
        model_name=model_name, library_name="transformers", license=license, language="en",
        pipeline_tag="text-classification", datasets=None,
        tags=["hf_attn", "attention", "interpretability", "text-classification",
              f"encoder-{config.get('encoder')}", f"attention-{config.get('attention')}",
              f"variant-{config.get('variant')}", *PAPERS],
        metrics=["accuracy", "f1", "roc_auc"],
        eval_results=_eval_results(metrics, task, dataset_type, dataset_name, analyses) or None)
    evaluation = []
    for name in ("accuracy", "f1", "macro_f1", "roc_auc"):
        if f"test_{name}" in metrics or f"dev_{name}" in metrics:
            evaluation.append((name, _format_number(metrics.get(f"test_{name}", "–")),
                               _format_number(metrics.get(f"dev_{name}", "–"))))
    keep = ("dataset", "encoder", "attention", "variant", "embeddings", "hidden_size", "num_layers",
            "epochs", "batch_size", "learning_rate", "weight_decay", "max_grad_norm", "class_balanced",
            "model_selection", "tying_delta", "mlm_probability", "mlm_weight", "min_count", "seed",
            "data_seed")
    training = [(k, str(settings[k])) for k in keep if k in settings]
    versions = ", ".join(f"{k} {v}" for k, v in (run.get("versions") or {}).items()) or "see run.json"
    return ModelCard.from_template(
        card_data, template_path=str(template_path or CARDS_DIR / "model_card.md"),
        repo_id=repo_id, model_name=model_name, model_type=config.get("model_type"),
        architecture=_architecture_rows(config, run),
        data_description=SST_DESCRIPTION if is_sst else f"Task `{task}` loaded with `hf_attn.data.load_task`.",
        split_sizes=list((run.get("split_sizes") or {}).items()),
        training_settings=training, train_seconds=metrics.get("train_seconds", "?"), versions=versions,
        evaluation=evaluation,
        analyses=[{"name": a.name, "summary": [(k, _format_number(v)) for k, v in a.summary],
                   "figures": a.figures} for a in analyses])


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _shape(size) -> str:
    return "[" + ", ".join(str(n) for n in size) + "]"


def verify_model_folder(folder: str | os.PathLike) -> None:
    """Load a packaged model folder exactly as a user would (``from_pretrained`` with the classes hf_attn
    registers, no ``trust_remote_code``; the tokenizer from its own files) and run one forward on a
    tokenized sentence. HubError (one line) if the folder does not load, if config.json and
    model.safetensors disagree (missing, unexpected or differently shaped weights) or if the forward fails."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from .configuration_hf_attn import AttnClassifierConfig
    from .configuration_hf_attn_pair import AttnPairClassifierConfig
    from .modeling_hf_attn import AttnClassifierForSequenceClassification
    from .modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    folder = Path(folder)
    model_type = _read_json(folder / "config.json").get("model_type")
    classes = {"hf_attn": (AttnClassifierConfig, AttnClassifierForSequenceClassification),
               "hf_attn_pair": (AttnPairClassifierConfig, AttnPairClassifierForSequenceClassification)}
    if model_type not in classes:
        raise HubError(f"config.json has model_type {model_type!r}; expected one of {sorted(classes)}")
    config_class, model_class = classes[model_type]
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # our own message replaces transformers' load report
    hf_logging.disable_progress_bar()
    try:
        try:
            config = config_class.from_pretrained(folder)
        except Exception as err:
            raise HubError(f"the packaged config.json does not load: {_one_line(err)}") from err
        try:
            model, info = model_class.from_pretrained(folder, config=config, output_loading_info=True,
                                                      ignore_mismatched_sizes=True)
        except Exception as err:
            raise HubError(f"the packaged model does not load (config.json and model.safetensors disagree?): "
                           f"{_one_line(err)}") from err
        problems = [f"{key}: weights {_shape(saved)} vs config {_shape(built)}"
                    for key, saved, built in sorted(info.get("mismatched_keys") or ())]
        problems += [f"{key} missing from the weights" for key in sorted(info.get("missing_keys") or ())]
        problems += [f"{key} in the weights but not in the model the config builds"
                     for key in sorted(info.get("unexpected_keys") or ())]
        problems += [_one_line(msg) for msg in info.get("error_msgs") or ()]
        if problems:
            shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if len(problems) > 4 else "")
            raise HubError(f"config.json and model.safetensors disagree: {shown}. Re-save the trained model "
                           "with save_pretrained instead of editing config.json")
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
            batch = tokenizer([VERIFY_SENTENCE], return_tensors="pt")
            inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
            if model_type == "hf_attn_pair":  # premise and hypothesis: the same sentence
                inputs.update(hypothesis_input_ids=batch["input_ids"],
                              hypothesis_attention_mask=batch["attention_mask"])
            with torch.no_grad():
                logits = model.eval()(**inputs).logits
        except Exception as err:
            raise HubError(f"the packaged model does not run on a tokenized sentence "
                           f"(tokenizer, config and weights disagree?): {_one_line(err)}") from err
        expected = (1, max(config.num_labels, 2))
        if tuple(logits.shape) != expected or not torch.isfinite(logits).all():
            raise HubError(f"the packaged model returns logits of shape {tuple(logits.shape)} "
                           f"(expected {expected}, finite) on a tokenized sentence")
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def build_model_folder(run_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                       analysis_dirs=(), template_path=None, license: str = "apache-2.0",
                       verify: bool = True) -> Path:
    """Write exactly the folder ``push_model`` uploads: model weights + config + modelling code
    (for ``trust_remote_code``) + tokenizer + metrics/run JSON + ``analysis/<name>/`` (results.json
    and figures of every analysis found) + the generated README.md model card.

    Only the files of ``MODEL_FILES`` (and ``ANALYSIS_FILES`` in analysis folders) are copied; a
    symlink resolving outside the run folder (or outside an ``analysis_dirs`` folder) is refused, as
    are pickled ``pytorch_model.bin`` weights; local absolute paths are scrubbed from every JSON /
    text file; and (``verify``) the packaged folder must load with ``from_pretrained`` and run."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not run_dir.is_dir():
        raise HubError(f"{run_dir} is not a folder")
    root = run_dir.resolve()
    config_path = run_dir / "config.json"
    if not config_path.is_file():
        raise HubError(f"{run_dir} is not a trained model folder (no config.json)")
    model_type = _read_json(_checked_source(config_path, root)).get("model_type", "")
    if not model_type.startswith("hf_attn"):
        raise HubError(f"{run_dir} holds a {model_type!r} model, not an hf_attn model")
    pickled = sorted(p.name for p in run_dir.iterdir() if _matches(p.name, PICKLED_WEIGHTS))
    if pickled:
        raise HubError(f"{run_dir} holds pickled weights ({', '.join(pickled)}), which can run arbitrary code "
                       "when loaded and are never published: re-save the model with safetensors "
                       "(from_pretrained(dir).save_pretrained(dir)) and delete them")
    if not (run_dir / "model.safetensors").exists() and not (run_dir / "model.safetensors.index.json").exists():
        raise HubError(f"{run_dir} has no model weights (model.safetensors); is the training finished?")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    copies = _allowed_files(run_dir, MODEL_FILES, root)
    required = {"hf_attn": ("modeling_hf_attn.py", "configuration_hf_attn.py", "tokenizer.json"),
                "hf_attn_pair": ("modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json")}
    for name in required.get(model_type, ()):
        if not any(item.name == name for item, _ in copies):
            raise HubError(f"{run_dir} lacks {name}; re-save it with save_pretrained")
    analysis_copies = []
    used_names: set[str] = set()
    for folder in find_analyses(run_dir, analysis_dirs):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.name)
        while name in used_names:
            name += "_"
        used_names.add(name)
        allowed_root = root if _is_relative_to(folder, root) else folder  # --analysis folders: themselves
        analysis_copies.append((name, folder, _allowed_files(folder, ANALYSIS_FILES, allowed_root)))
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        for item, real in copies:
            shutil.copy2(real, out_dir / item.name)
        for name, _, files in analysis_copies:
            target = out_dir / "analysis" / name
            target.mkdir(parents=True)
            for item, real in files:
                shutil.copy2(real, target / item.name)
        scrubber = _PathScrubber(run_dir, [folder for _, folder, _ in analysis_copies])
        for path in sorted(out_dir.rglob("*")):
            if path.is_file() and _matches(path.name, SCRUBBED_FILES) and not _matches(path.name, UNSCRUBBED_FILES):
                scrubber.file(path)
        if verify:
            verify_model_folder(out_dir)
        analyses = [summarise_analysis(out_dir / "analysis" / name, f"analysis/{name}")
                    for name, _, _ in analysis_copies]
        card = build_model_card(out_dir, repo_id, analyses, template_path, license)
        card.save(out_dir / "README.md")
        scrubber.file(out_dir / "README.md")
    except BaseException:  # no half-built folder is left behind (--to-dir)
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            for child in out_dir.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        raise
    return out_dir


def _api(token=None, endpoint=None):
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def _upload(folder: Path, repo_id: str, repo_type: str, private: bool, message: str, token=None,
            endpoint=None, space_sdk: str | None = None):
    api = _api(token, endpoint)
    url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, space_sdk=space_sdk)
    info = api.upload_folder(repo_id=url.repo_id, repo_type=repo_type, folder_path=str(folder),
                             commit_message=message)
    return info


def push_model(run_dir, repo_id: str, private: bool = False, analysis_dirs=(), token=None, endpoint=None,
               commit_message: str = "Upload hf_attn model"):
    """Create (or reuse) the model repo and upload the folder of ``build_model_folder``.
    Returns the ``CommitInfo``."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_model_folder(run_dir, Path(tmp) / "repo", repo_id, analysis_dirs)
        return _upload(folder, repo_id, "model", private, commit_message, token, endpoint)


# --------------------------------------------------------------------------------------- Spaces
def _space_metadata(title: str, emoji: str, description: str, tags: list[str], extra: dict | None = None) -> dict:
    from importlib.metadata import version

    meta = {"title": title, "emoji": emoji, "colorFrom": "blue", "colorTo": "red", "sdk": "gradio",
            "sdk_version": version("gradio"), "app_file": "app.py", "pinned": False,
            "license": "apache-2.0", "tags": tags, "short_description": description[:60]}
    meta.update(extra or {})
    return meta


def _vendor_package(out_dir: Path, package_dir: Path | None = None) -> None:
    """Copy the hf_attn package next to app.py: a Space installs only ``requirements.txt`` and hf_attn
    is not on PyPI, so the Space carries its own copy. Only what an installed hf_attn holds is copied
    (``*.py`` and the package data of ``VENDOR_DATA``), never ``__pycache__``, dotfiles or stray files;
    a symlink resolving outside the package is refused."""
    package_dir = Path(package_dir or PACKAGE_DIR)
    root = package_dir.resolve()
    for folder, dirs, files in os.walk(package_dir):
        folder = Path(folder)
        rel = folder.relative_to(package_dir)
        for name in list(dirs):
            if (folder / name).is_symlink():
                _checked_source(folder / name, root)
        dirs[:] = sorted(d for d in dirs if not _matches(d, ("__pycache__", ".*", "*.egg-info")))
        data_patterns = VENDOR_DATA.get(rel.parts[0], ()) if rel.parts else ()
        for name in sorted(files):
            if name.startswith("."):
                continue
            source, allowed = folder / name, _matches(name, ("*.py", *data_patterns))
            if source.is_symlink():
                source = _checked_source(source, root, must_exist=allowed)
            if allowed:
                target = out_dir / "hf_attn" / rel / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def _requirements(extra: tuple[str, ...] = ()) -> str:
    """Pinned runtime requirements of hf_attn (gradio itself is installed by the Space from
    ``sdk_version``)."""
    from importlib.metadata import requires

    lines = [r.split(";")[0].strip() for r in requires("hf_attn") or [] if "extra ==" not in r]
    lines = [r for r in lines if not r.lower().startswith("gradio")]
    return "\n".join([*lines, *extra]) + "\n"


def build_metric_space_folder(module_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                              vendor_package: bool = True) -> Path:
    """The folder of an ``evaluate`` module published as a metric Space: ``<name>.py``, ``app.py``
    (its own ``gr.Interface``), the metric card README.md with the Space/metric YAML merged in,
    requirements.txt and (by default) a vendored hf_attn so the Space's app can import it."""
    from huggingface_hub import RepoCard

    module_dir, out_dir = Path(module_dir), Path(out_dir)
    name = module_dir.name
    if not (module_dir / f"{name}.py").is_file():
        raise HubError(f"{module_dir} is not an evaluate module: {name}.py is missing "
                       "(the folder name must equal the script name)")
    if not (module_dir / "app.py").is_file():
        raise HubError(f"{module_dir} has no app.py (a metric Space needs its gr.Interface app)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    copies = _allowed_files(module_dir, METRIC_FILES, module_dir.resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    for item, real in copies:
        shutil.copy2(real, out_dir / item.name)
    title = name.replace("_", " ")
    meta = _space_metadata(title, "📏", f"hf_attn evaluate module {name}", ["evaluate", "metric", "hf_attn"])
    readme = module_dir / "README.md"
    if readme.is_file():
        card = RepoCard(readme.read_text(encoding="utf-8"), ignore_metadata_errors=True)
        existing = card.data.to_dict()
        for key, value in meta.items():  # the module's own card wins; Space keys fill the gaps
            if key == "tags":
                existing["tags"] = list(dict.fromkeys([*(existing.get("tags") or []), *value]))
            elif key in ("sdk", "app_file", "sdk_version"):
                existing[key] = value  # these must be right for the Space to start
            else:
                existing.setdefault(key, value)
        from huggingface_hub import CardData

        card.data = CardData(**existing)
        card.save(out_dir / "README.md")
    else:
        from huggingface_hub import CardData

        card = RepoCard.from_template(CardData(**meta), template_path=str(CARDS_DIR / "metric_card.md"),
                                      title=title, repo_id=repo_id)
        card.save(out_dir / "README.md")
    if not (out_dir / "requirements.txt").exists():
        (out_dir / "requirements.txt").write_text(_requirements(), encoding="utf-8")
    if vendor_package:
        _vendor_package(out_dir)
    return out_dir


def push_metric(module_dir, repo_id: str, private: bool = False, token=None, endpoint=None,
                commit_message: str = "Upload hf_attn evaluate module"):
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_metric_space_folder(module_dir, Path(tmp) / "repo", repo_id)
        return _upload(folder, repo_id, "space", private, commit_message, token, endpoint, space_sdk="gradio")


def render_space_card(default_model: str | None = None, title: str = "Is attention explanation?") -> str:
    """README.md of the explorer Space (``hub_cards/space_card.md``)."""
    from huggingface_hub import CardData, RepoCard

    meta = _space_metadata(title, "🔍", "Attention vs gradient, leave-one-out and adversaries",
                           ["hf_attn", "attention", "interpretability", "explainability"],
                           {"models": [default_model] if default_model and not Path(default_model).exists()
                            else None})
    meta = {k: v for k, v in meta.items() if v is not None}
    card = RepoCard.from_template(CardData(**meta), template_path=str(CARDS_DIR / "space_card.md"),
                                  title=title, default_model=default_model)
    return str(card)


def build_space_folder(out_dir: str | os.PathLike, default_model: str | None = None,
                       app_dir: str | os.PathLike = SPACE_APP_DIR, vendor_package: bool = True) -> Path:
    """The explorer Space: ``spaces_app/`` (app.py, requirements.txt) + README.md rendered from
    ``hub_cards/space_card.md`` + a vendored hf_attn + ``space_config.json`` naming the model the
    Space opens first (a Hub id; the Space's ``HF_ATTN_MODEL`` variable overrides it)."""
    app_dir, out_dir = Path(app_dir), Path(out_dir)
    if not (app_dir / "app.py").is_file():
        raise HubError(f"{app_dir} has no app.py")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    copies = _allowed_files(app_dir, SPACE_FILES, app_dir.resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    for item, real in copies:
        shutil.copy2(real, out_dir / item.name)
    (out_dir / "README.md").write_text(render_space_card(default_model), encoding="utf-8")
    if default_model:
        (out_dir / "space_config.json").write_text(json.dumps({"default_model": default_model}, indent=2) + "\n",
                                                   encoding="utf-8")
    if vendor_package:
        _vendor_package(out_dir)
    return out_dir


def push_space(repo_id: str, default_model: str | None = None, private: bool = False, token=None,
               endpoint=None, app_dir=SPACE_APP_DIR, commit_message: str = "Upload hf_attn explorer"):
    if default_model and (os.path.isabs(default_model) or default_model.startswith(("~", "./", "../"))):
        raise HubError("the Space's default model must be a Hub model id (USER/NAME), not a local path; "
                       "push the model first (hf-attn push) and pass its id")
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_space_folder(Path(tmp) / "repo", default_model, app_dir)
        return _upload(folder, repo_id, "space", private, commit_message, token, endpoint, space_sdk="gradio")


# --------------------------------------------------------------------------------------- CLI
def _check_repo_id(repo_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", repo_id):
        raise HubError(f"--repo-id must look like USER/NAME, got {repo_id!r}")
    return repo_id


def _finish(args, build, push) -> int:
    _check_repo_id(args.repo_id)
    if args.to_dir:
        folder = build(Path(args.to_dir))
        print(f"wrote {folder} (not uploaded)")
        return 0
    if args.dry_run:
        with tempfile.TemporaryDirectory(prefix="hf-attn-dry-run-") as tmp:
            folder = build(Path(tmp) / "repo")
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    print(f"{path.relative_to(folder)}\t{path.stat().st_size}")
        print("dry run: nothing uploaded")
        return 0
    info = push()
    print(info.commit_url)
    return 0


def _run_push(args) -> int:
    return _finish(args, lambda out: build_model_folder(args.run_dir, out, args.repo_id, args.analysis),
                   lambda: push_model(args.run_dir, args.repo_id, args.private, args.analysis))


def _run_push_metric(args) -> int:
    return _finish(args, lambda out: build_metric_space_folder(args.module_dir, out, args.repo_id),
                   lambda: push_metric(args.module_dir, args.repo_id, args.private))


def _run_push_space(args) -> int:
    return _finish(args, lambda out: build_space_folder(out, args.model),
                   lambda: push_space(args.repo_id, args.model, args.private))


def _common(p) -> None:
    p.add_argument("--repo-id", required=True, help="USER/NAME on the Hub (HF_ENDPOINT selects the Hub)")
    p.add_argument("--private", action="store_true")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--dry-run", action="store_true", help="list the files that would be uploaded")
    group.add_argument("--to-dir", help="write the folder that would be uploaded here instead")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("push", help="publish a trained run as a Hub model repo",
                              description="Upload a trained run (weights, tokenizer, modelling code for "
                                          "trust_remote_code, metrics, analyses) with a generated model card.")
    p.add_argument("run_dir")
    p.add_argument("--analysis", action="append", default=[],
                   help="an analysis output folder (with results.json) to include; folders inside "
                        "RUN_DIR are found automatically")
    _common(p)
    p.set_defaults(func=_run_push)

    p = subparsers.add_parser("push-metric", help="publish an evaluate module as a metric Space")
    p.add_argument("module_dir", help="hf_attn/metrics/<name>")
    _common(p)
    p.set_defaults(func=_run_push_metric)

    p = subparsers.add_parser("push-space", help="publish the Gradio attention explorer as a Space")
    p.add_argument("--model", help="Hub id of the model the Space opens first")
    _common(p)
    p.set_defaults(func=_run_push_space)


__all__ = ["build_model_folder", "build_model_card", "verify_model_folder", "push_model", "build_metric_space_folder",
           "push_metric", "build_space_folder", "push_space", "render_space_card", "find_analyses", "HubError"]
