"""The W&P battery on a BERT-family classifier (folder or Hub id): §3.2 uniform attention, §3.3 seed
models, §3.4 diagnostic MLP; ``results.json`` and the figures in the output folder."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.wp.battery import divergence_summary, plot_seed_variance
from hf_attn.batteries.wp.transformer import (SEED_STATUS_NOT_RUN, TransformerWPSettings, diagnostic_mlp_section,
                                              encode_texts, find_seed_model_dirs, plot_uniform, seed_variance_section,
                                              settings_from_wp, split_forward, uniform_divergence, uniform_section)
from hf_attn.batteries.wp.transformer import plot_diagnostic_mlp as plot_transformer_diagnostic_mlp
from hf_attn.core.environment import environment_versions
from hf_attn.core.io import write_json_atomic
from hf_attn.core.measures import tvd


def _relative(path: str, start: str) -> str:
    """A path as written into results.json: relative to the output folder (no machine paths)."""
    if not os.path.exists(path):  # a Hub id
        return path
    return os.path.relpath(os.path.abspath(path), os.path.abspath(start))


def _transformer_data(model, settings: TransformerWPSettings, run: dict | None, texts, labels, task, label_names
                      ) -> tuple[list, np.ndarray, object, str, list]:
    """``(texts, labels, task, dataset, label_names)`` the battery runs on: the given texts and labels,
    else the split ``settings.split`` of the task (loaded when needed), the first ``max_instances``;
    labels checked against the model's classes."""
    dataset = run["dataset"] if run else settings.dataset
    if task is None and (texts is None or settings.diagnostic_mlp):
        from hf_attn.data.datasets import load_task

        task = load_task(dataset, text_column=settings.text_column, label_column=settings.label_column) \
            if not run else load_task(dataset)
    if task is not None:
        dataset = task.name
        label_names = label_names or list(task.label_names)
    if texts is None:
        data = task.splits[settings.split]
        texts, labels = list(data["text"]), list(data["label"])
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


def _transformer_seed_variance(base: dict, sequences, labels: np.ndarray, label_names: list, tokenizer,
                               max_length: int, settings: TransformerWPSettings, runs_dir: str, output_dir: str,
                               figures: dict) -> tuple[dict, list[dict]]:
    """W&P §3.3 on the fine-tuned seed models (given, or found in the runs folder): the section and one
    point per seed, the figure added to ``figures``; "not run" without seed models."""
    from hf_attn.adapters.transformer_attention import load_transformer_classifier

    seed_dirs = list(settings.seed_model_dirs) or find_seed_model_dirs(runs_dir, settings.num_seeds)
    if not seed_dirs:
        return ({"run": False, "status": SEED_STATUS_NOT_RUN,
                 "how": "fine-tune the base with other seeds (hf-attn train --base-model ... --seed S) and "
                        "pass the folders as seed_model_dirs, or put them in the runs folder as seed-S"}, [])
    seed_outputs = []
    for path in tqdm(seed_dirs, desc="wp: seed models", disable=not settings.progress):
        seed_model, seed_tokenizer = load_transformer_classifier(path)
        _same_vocabulary(tokenizer, seed_tokenizer, path)
        seed_adapter = settings.adapter(seed_model, tokenizer, max_length)
        seed_outputs.append(split_forward(seed_adapter, sequences, settings.batch_size, uniform=False))
        del seed_adapter
        del seed_model
    seed_section = seed_variance_section(base, seed_outputs, labels, [_relative(p, output_dir) for p in seed_dirs],
                                         settings.seed_statistic, label_names)
    arrays = seed_section.pop("_arrays")
    figures["seed_variance"] = "seed_variance.png"
    plot_seed_variance(os.path.join(output_dir, figures["seed_variance"]), arrays["values"], None,
                       arrays["max_attention"], labels, label_names, statistic=settings.seed_statistic,
                       num_seeds=len(seed_dirs))
    seed_points = [{k: p[k] for k in ("seed_model", "mean_jsd", "mean_tvd", "f1")} for p in seed_section["per_seed"]]
    return seed_section, seed_points


def _transformer_mlp(adapter, task, settings: TransformerWPSettings, runs_dir: str, max_length: int,
                     model_dir: str, output_dir: str, figures: dict) -> dict:
    """W&P §3.4 on the transformer (its figure added to ``figures``), or "not run"."""
    if not settings.diagnostic_mlp:
        return {"run": False, "status": "not run: diagnostic_mlp=False"}
    if task is None:
        raise ValueError("the diagnostic MLP needs the task's train/validation/test splits (task=...)")
    model_label = _relative(model_dir, output_dir)
    mlp_section = diagnostic_mlp_section(adapter, task, settings, runs_dir, max_length, model_label)
    figures["diagnostic_mlp"] = "diagnostic_mlp.png"
    plot_transformer_diagnostic_mlp(os.path.join(output_dir, figures["diagnostic_mlp"]), mlp_section)
    return mlp_section


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


def run_transformer_wp(model_dir: str, output_dir: str, settings: TransformerWPSettings | None = None,
                       texts=None, labels=None, task=None, label_names=None) -> dict:
    """The W&P battery (§3.2, §3.3, §3.4; see the module docstring) on the BERT-family classifier in
    ``model_dir`` (folder or Hub id). Data: ``texts``/``labels`` for §3.2/§3.3 when given, else the
    split ``settings.split`` of ``task`` (a :class:`hf_attn.data.datasets.TaskData`; default the
    folder's ``run.json`` dataset, else ``settings.dataset``), first ``max_instances``; §3.4 needs
    ``task`` (train/validation/test). Writes ``OUT/results.json`` (atomic; paths relative to
    ``OUT``) and the figures; returns the results dict."""
    from hf_attn.adapters.transformer_attention import load_transformer_classifier
    from hf_attn.training.transformer import read_transformer_run

    settings = settings or TransformerWPSettings()
    settings.validate()
    wall = time.perf_counter()
    model, tokenizer = load_transformer_classifier(model_dir)
    run = read_transformer_run(model_dir) if os.path.isdir(model_dir) else None
    max_length = int(run["settings"]["max_length"]) if run else int(min(tokenizer.model_max_length or 512, 512))
    adapter = settings.adapter(model, tokenizer, max_length)  # refuses a model it cannot intervene on
    texts, labels, task, dataset, label_names = _transformer_data(model, settings, run, texts, labels, task,
                                                                  label_names)
    os.makedirs(output_dir, exist_ok=True)
    runs_dir = settings.runs_dir or os.path.join(output_dir, "models")
    timing, figures = {}, {}

    # 1. §3.2 uniform
    started = time.perf_counter()
    sequences = encode_texts(tokenizer, texts, max_length,
                             keep="end" if getattr(adapter, "left_padding", False) else "start")
    base = split_forward(adapter, sequences, settings.batch_size, uniform=True,
                         every_layer=settings.uniform_every_layer, progress=settings.progress,
                         desc="wp: model and uniform variants")
    uniform = uniform_section(base, labels, settings.split)
    uniform_point = divergence_summary(uniform_divergence(base), tvd(torch.from_numpy(base["uniform"]),
                                                                     torch.from_numpy(base["probabilities"])).numpy())
    timing["uniform_seconds"] = round(time.perf_counter() - started, 1)
    # 2. §3.3 seed variance
    started = time.perf_counter()
    seed_section, seed_points = _transformer_seed_variance(base, sequences, labels, label_names, tokenizer,
                                                           max_length, settings, runs_dir, output_dir, figures)
    timing["seed_variance_seconds"] = round(time.perf_counter() - started, 1)
    # 3. §3.4 diagnostic MLP
    started = time.perf_counter()
    mlp_section = _transformer_mlp(adapter, task, settings, runs_dir, max_length, model_dir, output_dir, figures)
    timing["diagnostic_mlp_seconds"] = round(time.perf_counter() - started, 1)

    figures["uniform_attention"] = "uniform_attention.png"
    tvds = {name: tvd(torch.from_numpy(base[name]), torch.from_numpy(base["probabilities"])).numpy()
            for name in uniform["variants"]}
    plot_uniform(os.path.join(output_dir, figures["uniform_attention"]), uniform | {"_tvd": tvds},
                 f"W&P §3.2 on {model.config.model_type} ({settings.spec.describe()}): uniform attention")
    timing["wall_seconds"] = round(time.perf_counter() - wall, 1)

    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation (§3.2–3.4, on a transformer)",
        "model_dir": _relative(model_dir, output_dir), "runs_dir": _relative(runs_dir, output_dir),
        "dataset": dataset if not os.path.exists(str(dataset)) else _relative(dataset, output_dir),
        "split": settings.split, "num_instances": int(len(labels)), "label_names": label_names,
        **_transformer_description(model, adapter, settings, run, max_length, base),
        "base": uniform["base"],
        "uniform_baseline": uniform, "seed_variance": seed_section,
        "per_instance_adversary": {"run": False, "status": "not part of this battery on transformers: "
                                                           "hf-attn analyze DIR --battery jw"},
        "consistent_adversary": {"run": False, "status": "not run: W&P §4 fine-tunes new transformers against the base"},
        "diagnostic_mlp": mlp_section,
        "tradeoff_points": {"uniform": uniform_point, "seeds": seed_points},
        "figures": figures, "timing": timing,
        "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()
                    if k not in ("seed_model_dirs", "runs_dir")},
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    return results


def run_transformer(model_dir: str, output_dir: str, settings) -> dict:
    """``hf-attn analyze DIR --battery wp`` for a BERT-family folder or Hub id, dispatched by
    :func:`hf_attn.runs.wp.run` with its :class:`~hf_attn.batteries.wp.battery.WPSettings`
    (or given :class:`TransformerWPSettings`); prints a short JSON summary like the BiLSTM battery."""
    if not isinstance(settings, TransformerWPSettings):
        settings = settings_from_wp(settings)
    results = run_transformer_wp(model_dir, output_dir, settings)
    mlp = results["diagnostic_mlp"]
    print(json.dumps({"f1": round(results["base"]["f1"], 4),
                      "uniform_f1": round(results["uniform_baseline"]["uniform"]["f1"], 4),
                      "uniform_f1_gap": round(results["uniform_baseline"]["f1_gap"], 4),
                      "uniform_mean_tvd": round(results["uniform_baseline"]["mean_tvd"], 4),
                      "seed_variance": (results["seed_variance"]["summary"] if results["seed_variance"]["run"]
                                        else results["seed_variance"]["status"]),
                      "diagnostic_mlp_f1": ({g: round(v["test_f1"], 4) for g, v in mlp["guides"].items()}
                                            if "guides" in mlp else mlp["status"]),
                      "wall_seconds": results["timing"]["wall_seconds"]}, indent=2))
    return results


def _same_vocabulary(tokenizer, other, where: str) -> None:
    if other.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{where} has another vocabulary than the base model: attention would not line up")
