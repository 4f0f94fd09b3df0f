"""``hf-attn eraser DIR --output-dir OUT``: the ERASER table of a model folder (or Hub id), written to
an output folder (``results.json``, ``eraser.md``, ``eraser.png``; a finished request is returned as
is). The table itself is :mod:`hf_attn.batteries.eraser` (a BERT-family classifier:
:mod:`hf_attn.batteries.eraser.transformer`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from hf_attn.adapters import AttentionSpec, adapter_for
from hf_attn.batteries.eraser.battery import (IMPORTANCE_MEASURES, eraser_table, format_eraser_table,
                                              write_eraser_figure)
from hf_attn.batteries.eraser.transformer import (DEFAULT_TOKEN_BUDGET, TRANSFORMER_MEASURES, encode,
                                                  transformer_eraser_table)
from hf_attn.core.arguments import check_count
from hf_attn.core.io import write_text_atomic
from hf_attn.methods.eraser import DEFAULT_FRACTIONS


def run_eraser(model_dir: str, output_dir: str, split: str = "test",
               measures: Sequence[str] | None = None, fractions: Sequence[float] = DEFAULT_FRACTIONS,
               *, ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0, token_budget: int = 16384,
               max_instances: int | None = None, progress: bool = True, **transformer_options) -> dict:
    """ERASER table of a model folder written by ``hf-attn train`` on ``split``: writes
    ``OUT/results.json`` (atomic), ``OUT/eraser.md`` and ``OUT/eraser.png``; returns the results.
    A finished ``OUT/results.json`` with the same parameters is returned as is. ``measures`` None:
    every measure of the model kind.

    A BERT-family classifier (a folder with a BERT-family ``config.json``, trained here or not, or a
    Hub id) goes to :func:`hf_attn.batteries.eraser.transformer.run_transformer_eraser`, which also
    takes ``transformer_options`` (``dataset``, ``text_column``, ``label_column``, ``layer``,
    ``heads``)."""
    import json

    from hf_attn.batteries.jw.transformer import is_transformer_model_dir

    check_count("max_instances (--max-instances)", max_instances)
    check_count("ig_steps (--ig-steps)", ig_steps, allow_none=False)
    check_count("token_budget (--token-budget)", token_budget, allow_none=False)
    if is_transformer_model_dir(model_dir):  # any transformers classifier, through its adapter
            return run_transformer_eraser(model_dir, output_dir, split, measures, fractions, ig_steps=ig_steps,
                                      ig_baseline=ig_baseline, seed=seed, token_budget=token_budget,
                                      max_instances=max_instances, progress=progress, **transformer_options)
    given = {k: v for k, v in transformer_options.items() if v is not None and k in ("dataset", "text_column",
                                                                                   "label_column")}
    if given:
        raise ValueError(f"{model_dir}: --{next(iter(given)).replace('_', '-')} is for BERT-family classifiers; "
                         "an hf_attn model is analysed on the dataset of its run.json")
    measures = IMPORTANCE_MEASURES if measures is None else measures

    from hf_attn.batteries.jw.battery import load_model_and_split
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic

    path = os.path.join(output_dir, "results.json")
    params = {"split": split, "measures": list(measures), "fractions": list(fractions), "ig_steps": ig_steps,
              "ig_baseline": ig_baseline, "seed": seed, "max_instances": max_instances}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == params:
            return previous
    model, tokenizer, texts, labels, label_names, dataset = load_model_and_split(model_dir, split)
    if max_instances is not None:
        texts = texts[:max_instances]
    max_length = int(getattr(model.config, "max_tokens", 512))
    from hf_attn.adapters.contract import tokenize_texts
    from hf_attn.core.batching import pad_batch

    ids, mask = pad_batch(tokenize_texts(tokenizer, list(texts), max_length)[0], int(model.config.pad_token_id or 0))
    results = eraser_table(model, ids, mask, measures, fractions,
                           ig_steps=ig_steps, ig_baseline=ig_baseline, seed=seed,
                           token_budget=token_budget, progress=progress)
    results = {"analysis": "eraser", "paper": "DeYoung et al. 2020, ERASER, §4; Sundararajan et al. 2017 (IG)",
               "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": split,
               "num_instances": len(texts),
               "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                         "variant": model.config.variant},
               "request": params, **results, "versions": environment_versions()}
    os.makedirs(output_dir, exist_ok=True)
    table = format_eraser_table(results)
    write_text_atomic(os.path.join(output_dir, "eraser.md"),
                      f"ERASER on {dataset} {split} ({len(texts)} instances), {model_dir}\n\n{table}\n")
    name = f"{model.config.encoder}+{model.config.attention} ({model.config.variant})"
    results["figure"] = os.path.basename(write_eraser_figure(
        results, os.path.join(output_dir, "eraser.png"), f"ERASER, {dataset} {split}, {name}"))
    write_json_atomic(path, results)
    if progress:
        print(table)
    return results


def run_transformer_eraser(model_dir: str, output_dir: str, split: str = "test",
                           measures: Sequence[str] | None = None,
                           fractions: Sequence[float] = DEFAULT_FRACTIONS, *, ig_steps: int = 50,
                           ig_baseline: str = "zero", seed: int = 0, token_budget: int = DEFAULT_TOKEN_BUDGET,
                           max_instances: int | None = None, progress: bool = True, dataset: str | None = None,
                           text_column: str | None = None, label_column: str | None = None,
                           layer: int = -1, heads: str | int = "mean", max_length: int = 512,
                           device: str = "auto", precision: str = "float32") -> dict:
    """``hf-attn eraser DIR`` for a BERT-family classifier (dispatched by
    :func:`run_eraser`): the data of
    :func:`hf_attn.batteries.jw.transformer.load_analysis_data` (the folder's run.json, or
    ``dataset`` with ``text_column`` / ``label_column``; a single file whole), the first
    ``max_instances``; writes ``OUT/results.json`` (the BiLSTM eraser command's keys; atomic),
    ``OUT/eraser.md`` and ``OUT/eraser.png``. A finished ``OUT/results.json`` with the same
    request is returned as is."""
    import json

    from hf_attn.batteries.jw.transformer import analysis_split, load_analysis_data
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic, write_text_atomic
    from hf_attn.adapters.transformer_attention import load_transformer_classifier

    measures = list(measures or TRANSFORMER_MEASURES)
    heads = heads if heads == "mean" else int(heads)
    spec = AttentionSpec(layer=layer, heads=heads)
    path = os.path.join(output_dir, "results.json")
    params = {"split": split, "measures": measures, "fractions": list(fractions), "ig_steps": ig_steps,
              "ig_baseline": ig_baseline, "seed": seed, "max_instances": max_instances, "dataset": dataset,
              "text_column": text_column, "label_column": label_column, "layer": layer, "heads": heads,
              "precision": precision}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == params:
            return previous
    texts, labels, label_names, name = load_analysis_data(model_dir, dataset, split, text_column, label_column)
    recorded_split = analysis_split(dataset, split)
    if max_instances:
        texts, labels = texts[:max_instances], labels[:max_instances]
    model, tokenizer = load_transformer_classifier(model_dir)
    limit = min(max_length, int(getattr(model.config, "max_position_embeddings", max_length)))
    adapter = adapter_for(model, tokenizer, layer=layer, heads=heads, device=device, precision=precision,
                          token_budget=token_budget, max_length=limit)
    ids, mask, units = encode(tokenizer, texts, adapter.max_length or limit,
                              keep="end" if getattr(adapter, "left_padding", False) else "start")
    empty = ~units.any(1)
    if bool(empty.any()):  # nothing to rank (e.g. a text of special tokens only): left out, counted
        keep = ~empty
        ids, mask, units = ids[keep], mask[keep], units[keep]
        labels = [label for label, k in zip(labels, keep.tolist()) if k]
    width = int(mask.sum(1).max())
    ids, mask, units = ids[:, :width], mask[:, :width], units[:, :width]
    table = transformer_eraser_table(adapter, ids, mask, units, measures, fractions, ig_steps=ig_steps,
                                     ig_baseline=ig_baseline, seed=seed, token_budget=token_budget,
                                     progress=progress)
    with torch.no_grad():
        from hf_attn.methods.eraser import batched_probabilities

        predicted = batched_probabilities(model, ids.to(adapter.device), mask.to(adapter.device),
                                          4 * token_budget).argmax(-1).cpu().numpy()
    accuracy = float((predicted == np.asarray(labels)).mean()) if labels else None
    local = os.path.isdir(model_dir)
    results = {"analysis": "eraser", "paper": "DeYoung et al. 2020, ERASER, §4; Sundararajan et al. 2017 (IG)",
               "model_dir": os.path.abspath(model_dir) if local else model_dir, "dataset": name,
               "split": recorded_split, "num_instances": int(len(ids)), "skipped_without_pieces": int(empty.sum()),
               "label_names": label_names, "accuracy": accuracy,
               "model": {"encoder": "transformer", "attention": spec.describe(), "variant": "base",
                         "architecture": type(model).__name__, "model_type": model.config.model_type,
                         "num_layers": adapter.num_layers, "num_heads": adapter.num_heads},
               "units": {"name": "word pieces", "mean_per_instance": float(units.sum(1).double().mean()),
                         "max_length": limit},
               "request": params, **table, "versions": environment_versions()}
    os.makedirs(output_dir, exist_ok=True)
    text = format_eraser_table(results)
    write_text_atomic(os.path.join(output_dir, "eraser.md"),
                      f"ERASER on {name} {recorded_split} ({len(ids)} instances, word pieces), {model_dir}; "
                      f"attention = {spec.describe()}\n\n{text}\n")
    title = f"ERASER, {name} {recorded_split}, {model.config.model_type} ({spec.describe()})"
    results["figure"] = os.path.basename(write_eraser_figure(results, os.path.join(output_dir, "eraser.png"), title))
    write_json_atomic(path, results)
    if progress:
        print(text)
    return results
