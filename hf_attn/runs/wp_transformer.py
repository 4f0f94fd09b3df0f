"""The other models the W&P battery compares a transformers classifier with (:class:`TransformerModels`,
used by :func:`hf_attn.runs.wp.run_wp`): nothing is retrained here — the seed models (§3.3) are given
or found in the runs folder, §3.2 is the test-time intervention on the model's explained row, the
guided MLPs of §3.4 read its word-piece embeddings, and §4 (fine-tuning new transformers against the
base) is not run."""

from __future__ import annotations

import os
from dataclasses import asdict

import numpy as np
import torch

from hf_attn.batteries.wp.battery import WPSettings, divergence_summary
from hf_attn.batteries.wp.transformer import (TransformerWPSettings, diagnostic_mlp_section, encode_texts,
                                              find_seed_model_dirs, settings_from_wp, uniform_divergence,
                                              uniform_section)
from hf_attn.batteries.wp.transformer import plot_diagnostic_mlp as plot_transformer_diagnostic_mlp
from hf_attn.core.measures import tvd


def _relative(path: str, start: str) -> str:
    """A path as written into results.json: relative to the output folder (no machine paths)."""
    if not os.path.exists(path):  # a Hub id
        return path
    return os.path.relpath(os.path.abspath(path), os.path.abspath(start))


def _transformer_data(model, settings: TransformerWPSettings, run: dict | None, texts, labels, task, label_names,
                      model_dir: str | None = None) -> tuple[list, np.ndarray, object, str, list]:
    """``(texts, labels, task, dataset, label_names)`` the battery runs on: the given texts and labels,
    else the split ``settings.split`` of the task (loaded when needed: a folder trained by hf-attn
    reloads its recorded data, path, columns, split seed and class names), the first
    ``max_instances``; labels checked against the model's classes."""
    dataset = run["dataset"] if run else settings.dataset
    if task is None and (texts is None or settings.diagnostic_mlp):
        if run:
            from hf_attn.batteries.data import recorded_task

            task = recorded_task(model_dir, run)
        else:
            from hf_attn.data.tasks import load_task

            task = load_task(dataset, text_column=settings.text_column, label_column=settings.label_column)
    if task is not None:
        dataset = task.name
        label_names = label_names or list(task.label_names)
    if texts is None:
        from hf_attn.batteries.data import model_class_ids, model_class_names

        data = task.splits[settings.split]
        names = model_class_names(model.config)
        # the data's labels as the model's class ids (an integer label is the model's id, a name is
        # matched to id2label), never renumbered by the data's sort order
        keys = [str(task.label_names[int(y)]) for y in data["label"]]
        texts = list(data["text"])
        labels = model_class_ids(keys, names, lambda row: f"{task.name} [{settings.split}] row {row}")
        label_names = names
    if labels is None:
        raise ValueError("the wp battery needs gold labels (F1 of the uniform variant)")
    if settings.max_instances:
        texts, labels = list(texts)[:settings.max_instances], list(labels)[:settings.max_instances]
    labels = np.asarray(labels, dtype=np.int64)
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    num_labels = model.config.num_labels
    label_names = list(label_names) if label_names else [str(i) for i in range(num_labels)]
    if labels.min() < 0 or labels.max() >= num_labels:
        raise ValueError(f"labels must be in [0, {num_labels}), got {sorted(set(labels.tolist()))}")
    return texts, labels, task, dataset, label_names


def _transformer_mlp(adapter, task, settings: TransformerWPSettings, runs_dir: str, max_length: int,
                     model_dir: str, output_dir: str) -> dict:
    """W&P §3.4 on the transformer, or "not run"."""
    if not settings.diagnostic_mlp:
        return {"run": False, "status": "not run: diagnostic_mlp=False"}
    if task is None:
        raise ValueError("the diagnostic MLP needs the task's train/validation/test splits (task=...)")
    return diagnostic_mlp_section(adapter, task, settings, runs_dir, max_length, _relative(model_dir, output_dir))


def _transformer_description(model, adapter, settings: TransformerWPSettings, run: dict | None, max_length: int,
                             base: dict) -> dict:
    """results.json's ``model`` and ``attention_spec``: what was explained, over which units."""
    content_counts = base["content"].sum(1)
    return {"model": {"encoder": "transformer", "architecture": type(model).__name__,
                      "model_type": model.config.model_type, "num_layers": adapter.num_layers,
                      "num_heads": adapter.num_heads, "attention": settings.spec.describe(),
                      "base_model": run["settings"]["base_model"] if run else None, "max_length": max_length},
            "attention_spec": {"layer": settings.layer, "heads": settings.heads, "query": adapter.query_rule,
                               "units": "word pieces; divergences over the content pieces ([CLS]/[SEP]/[UNK]/pads "
                                        "excluded), the explained row renormalised there",
                               "mean_content_pieces": float(content_counts.mean())}}


def _same_vocabulary(tokenizer, other, where: str) -> None:
    if other.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{where} has another vocabulary than the base model: attention would not line up")


class TransformerModels:
    """A transformers classifier (folder or Hub id) and the models W&P compare it with that exist:
    seed models given (``settings.seed_model_dirs``) or found in the runs folder (``seed-*``)."""

    def __init__(self, model_dir: str, output_dir: str, settings: WPSettings, task=None, texts=None, labels=None,
                 label_names=None):
        from hf_attn.adapters.transformer_attention import load_transformer_classifier
        from hf_attn.training.transformer import read_transformer_run

        self.model_dir, self.output_dir, self.settings = model_dir, output_dir, settings
        self.view = settings_from_wp(settings)  # the transformer sections' typed settings
        self.view.validate()
        self.model, self.tokenizer = load_transformer_classifier(model_dir)
        self.run = read_transformer_run(model_dir) if os.path.isdir(model_dir) else None
        self.max_length = (int(self.run["settings"]["max_length"]) if self.run
                           else int(min(self.tokenizer.model_max_length or 512, 512)))
        self.adapter = self.view.adapter(self.model, self.tokenizer, self.max_length)  # refuses what it cannot do
        self.texts, self.labels, self.task, self.dataset, self.label_names = _transformer_data(
            self.model, self.view, self.run, texts, labels, task, label_names, model_dir)
        self.runs_dir = settings.runs_dir or os.path.join(output_dir, "models")

    def name(self) -> str:
        return f"{self.model.config.model_type} ({self.view.spec.describe()})"

    def train_missing(self) -> None:
        """Nothing to train before the analyses: a transformer is not retrained here (the guided MLPs of
        §3.4 are trained by their section)."""

    def base(self):
        from hf_attn.runs.wp_sections import base_outputs

        keep = "end" if getattr(self.adapter, "left_padding", False) else "start"
        sequences = encode_texts(self.tokenizer, self.texts, self.max_length, keep=keep)
        return base_outputs(self.adapter, sequences, self.labels, self.label_names, self.settings.split,
                            self.dataset, self.settings, cache_dir=os.path.join(self.output_dir, "cache"))

    def uniform(self, base) -> tuple[dict, dict]:
        """W&P §3.2 as a test-time intervention (the model's explained row made uniform)."""
        section = uniform_section(base.outputs, base.labels, base.split)
        point = divergence_summary(uniform_divergence(base.outputs),
                                   tvd(torch.from_numpy(base.outputs["uniform"]),
                                       torch.from_numpy(base.probabilities)).numpy())
        return section, point

    def seed_models(self) -> list[tuple]:
        from hf_attn.adapters.transformer_attention import load_transformer_classifier

        dirs = list(self.settings.seed_model_dirs) or find_seed_model_dirs(self.runs_dir, self.settings.num_seeds)

        def load(path):
            model, tokenizer = load_transformer_classifier(path)
            _same_vocabulary(self.tokenizer, tokenizer, path)
            return self.view.adapter(model, self.tokenizer, self.max_length)

        return [(_relative(p, self.output_dir), lambda p=p: load(p)) for p in dirs]

    def consistent_adversary(self, base) -> tuple[list, dict]:
        return [], {"run": False, "status": "not run: W&P §4 fine-tunes new transformers against the base"}

    def diagnostic_mlp(self, base) -> dict:
        return _transformer_mlp(self.adapter, self.task, self.view, self.runs_dir, self.max_length, self.model_dir,
                                self.output_dir)

    def plot_mlp(self, path: str, section: dict) -> None:
        plot_transformer_diagnostic_mlp(path, section)

    def where(self) -> dict:
        dataset = self.dataset if not os.path.exists(str(self.dataset)) else _relative(self.dataset, self.output_dir)
        return {"model_dir": _relative(self.model_dir, self.output_dir),
                "runs_dir": _relative(self.runs_dir, self.output_dir), "dataset": dataset}

    def description(self, base) -> dict:
        return _transformer_description(self.model, self.adapter, self.view, self.run, self.max_length, base.outputs)

    def timing(self, analysis_seconds: float, wall: float) -> dict:
        import time

        return {"analysis_seconds": round(analysis_seconds, 1), "wall_seconds": round(time.perf_counter() - wall, 1)}

    def options(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.settings).items()
                if k not in ("seed_model_dirs", "runs_dir")}
