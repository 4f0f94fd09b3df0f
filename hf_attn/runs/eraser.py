"""``hf-attn eraser DIR --output-dir OUT``: the ERASER table of a model folder (or Hub id), written to
an output folder (``results.json``, ``eraser.md``, ``eraser.png``; a finished request is returned as
is). The table itself is :func:`hf_attn.batteries.eraser.battery.eraser_table`, one driver for the
papers' models and any transformers classifier, through the model's adapter."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from hf_attn.adapters import adapter_for
from hf_attn.batteries.eraser.battery import MEASURES, checked_measures, encode_for, eraser_table, format_eraser_table
from hf_attn.batteries.eraser.battery import write_eraser_figure
from hf_attn.batteries.eraser.units import DEFAULT_TOKEN_BUDGET
from hf_attn.batteries.jw.common import DEVICE_OPTION, PRECISION_OPTION, heads_option
from hf_attn.core.arguments import check_count, count, finite_float, positive_int, seed_int
from hf_attn.core.settings_cli import data_option, option
from hf_attn.methods.eraser import DEFAULT_FRACTIONS


@dataclass(frozen=True)
class EraserRunSettings:
    """What ``hf-attn eraser`` computes (:func:`run_eraser`'s settings); each field that is an option
    carries its flag, type and help (``hf-attn eraser``'s options are generated from them,
    :mod:`hf_attn.core.settings_cli`)."""

    split: str = field(default="test", metadata=option("the split analysed", flag="--split",
                                                        choices=("train", "validation", "test")))
    measures: tuple[str, ...] | None = field(default=None, metadata=option(
        "the importance measures ranked", flag="--measures", choices=tuple(MEASURES), nargs="+",
        convert=lambda value, flag: None if value is None else tuple(value),
        default_text="every measure that applies to the model (rollout: models with several attention layers)"))
    fractions: tuple[float, ...] = field(default=tuple(DEFAULT_FRACTIONS), metadata=option(
        "the fractions of tokens removed (AOPC's bins)", flag="--fractions", nargs="+",
        type=finite_float(0, strictly_above=True)))
    ig_steps: int = field(default=50, metadata=option("integrated gradients' steps", flag="--ig-steps",
                                                      type=count(1, limit="ig_nodes")))
    ig_baseline: str = field(default="zero", metadata=option(
        "the text's embeddings start from 0, the pad token's or the mean input embedding", flag="--ig-baseline",
        choices=("zero", "pad", "mean")))
    seed: int = field(default=0, metadata=option("the random ranking's draws", flag="--seed", type=seed_int))
    token_budget: int = field(default=DEFAULT_TOKEN_BUDGET, metadata=option(
        "padded tokens per batch", flag="--token-budget", type=count(1, limit="token_budget")))
    max_instances: int | None = field(default=None, metadata=option("only the first N instances",
                                                                     flag="--max-instances", type=positive_int))
    shard_instances: int = field(default=256, metadata=option(
        "instances per shard: the table's per-instance work is computed shard by shard, the shards split between "
        "the processes of `accelerate launch` and cached in OUT/cache for resuming (the same results for any "
        "number of processes)", flag="--shard-instances", type=count(1, limit="tokens")))
    dataset: str | None = field(default=None, metadata=data_option("dataset"))
    text_column: str | None = field(default=None, metadata=data_option("text_column"))
    label_column: str | None = field(default=None, metadata=data_option("label_column"))
    layer: int = field(default=-1, metadata=option("transformers models: the layer whose [CLS] attention is "
                                                   "explained (-1: the last)", flag="--layer", type=int))
    heads: str = field(default="mean", metadata=option(
        "transformers models: 'mean' (average the heads) or one head's index", flag="--heads",
        convert=heads_option))
    device: str = field(default="auto", metadata=DEVICE_OPTION)
    precision: str = field(default="float32", metadata=PRECISION_OPTION)


def _model_block(model, adapter, spec_text: str) -> dict:
    config = model.config
    if config.model_type == "hf_attn":
        return {"encoder": config.encoder, "attention": config.attention, "variant": config.variant}
    return {"encoder": "transformer", "attention": spec_text, "variant": "base",
            "architecture": type(model).__name__, "model_type": config.model_type,
            "num_layers": adapter.num_layers, "num_heads": adapter.num_heads}


def run_eraser(model_dir: str, output_dir: str, split: str = "test",
               measures: Sequence[str] | None = None, fractions: Sequence[float] = DEFAULT_FRACTIONS,
               *, ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0,
               token_budget: int = DEFAULT_TOKEN_BUDGET, max_instances: int | None = None, progress: bool = True,
               dataset: str | None = None, text_column: str | None = None, label_column: str | None = None,
               layer: int = -1, heads: str | int = "mean", max_length: int | None = None, device: str = "auto",
               precision: str = "float32", shard_instances: int = 256) -> dict:
    """ERASER table of a model folder written by ``hf-attn train`` (on its own dataset's ``split``) or
    of any transformers classifier (folder or Hub id: the data of
    :func:`hf_attn.batteries.data.load_analysis_data`, the folder's run.json or ``dataset`` with
    ``text_column`` / ``label_column``; a single file whole), the first ``max_instances``: writes
    ``OUT/results.json`` (atomic), ``OUT/eraser.md`` and ``OUT/eraser.png``; returns the results. A
    finished ``OUT/results.json`` with the same request is returned as is. ``measures`` None: every
    measure that applies to the model (rollout only with several attention layers). ``layer`` /
    ``heads`` / ``device`` / ``precision``: the adapter's (the papers' models have one layer and head
    and run on the CPU in float32; anything else is refused with the reason). ``max_length``: tokens
    kept per text (None: the papers' models' own limit; a transformer's, at most 512).

    The per-instance work runs in shards of ``shard_instances`` instances, each cached in ``OUT/cache``
    until the table is written (a killed run resumes); under ``accelerate launch`` the shards are split
    between the processes and the main process writes (the same values as one process)."""
    import hashlib
    import json
    import shutil

    from hf_attn.batteries.data import is_transformer_model_dir, load_classifier_and_data
    from hf_attn.batteries.jw.common import weights_checksum
    from hf_attn.core.sharding import cache_key, is_main_process
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic, write_text_atomic

    check_count("max_instances (--max-instances)", max_instances)
    check_count("ig_steps (--ig-steps)", ig_steps, allow_none=False, limit="ig_nodes")
    check_count("token_budget (--token-budget)", token_budget, allow_none=False, limit="token_budget")
    check_count("shard_instances (--shard-instances)", shard_instances, allow_none=False, limit="tokens")
    own = not is_transformer_model_dir(model_dir)
    if own:  # refused before a finished request is returned
        from hf_attn.batteries.jw.battery import check_papers_model_device

        check_papers_model_device(device, precision)
    heads = heads if heads == "mean" else int(heads)
    if max_length is None and not own:
        from hf_attn.batteries.jw.common import TRANSFORMER_MAX_LENGTH

        max_length = TRANSFORMER_MAX_LENGTH
    path = os.path.join(output_dir, "results.json")
    params = {"split": split, "measures": None if measures is None else list(measures), "fractions": list(fractions),
              "ig_steps": ig_steps, "ig_baseline": ig_baseline, "seed": seed, "max_instances": max_instances,
              "dataset": dataset, "text_column": text_column, "label_column": label_column, "layer": layer,
              "heads": heads, "precision": precision, "max_length": max_length, "token_budget": token_budget}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("request") == params:
            return previous
    model, tokenizer, texts, labels, label_names, name, recorded_split = load_classifier_and_data(
        model_dir, split, dataset, text_column, label_column, needed_by="hf-attn eraser")
    if max_instances:
        texts, labels = texts[:max_instances], labels[:max_instances]
    adapter = adapter_for(model, tokenizer, layer=layer, heads=heads, device=device, precision=precision,
                          token_budget=token_budget, max_length=max_length)
    measures = checked_measures(adapter, measures)
    ids, mask, units = encode_for(adapter, texts)
    empty = ~units.any(1)
    if bool(empty.any()):  # nothing to rank (e.g. a text of special tokens only): left out, counted
        keep = ~empty
        ids, mask, units = ids[keep], mask[keep], units[keep]
        labels = [label for label, k in zip(labels, keep.tolist()) if k]
    width = int(mask.sum(1).max())
    ids, mask, units = ids[:, :width], mask[:, :width], units[:, :width]
    cache_dir = os.path.join(output_dir, "cache")
    tokens = hashlib.sha256(ids.numpy().tobytes() + mask.numpy().tobytes() + units.numpy().tobytes()).hexdigest()
    key = cache_key("eraser", params, list(measures), weights_checksum(model), list(ids.shape), tokens,
                    adapter.describe()["precision"])
    table = eraser_table(adapter, ids, mask, units, measures, fractions, ig_steps=ig_steps, ig_baseline=ig_baseline,
                         seed=seed, token_budget=token_budget, progress=progress, shard_instances=shard_instances,
                         cache_dir=cache_dir, key=key)
    if not is_main_process():  # `accelerate launch`: every process has the whole table; one writes
        return {"analysis": "eraser", "main_process": False}
    with torch.no_grad():
        from hf_attn.methods.eraser import batched_probabilities

        predicted = batched_probabilities(model, ids.to(adapter.device), mask.to(adapter.device),
                                          4 * token_budget).argmax(-1).cpu().numpy()
    accuracy = float((predicted == np.asarray(labels)).mean()) if labels else None
    spec_text = adapter.spec.describe()
    results = {"analysis": "eraser", "paper": "DeYoung et al. 2020, ERASER, §4; Sundararajan et al. 2017 (IG)",
               "model_dir": os.path.abspath(model_dir) if os.path.isdir(model_dir) else model_dir, "dataset": name,
               "split": recorded_split, "num_instances": int(len(ids)), "skipped_without_tokens": int(empty.sum()),
               "label_names": label_names, "accuracy": accuracy, "model": _model_block(model, adapter, spec_text),
               "units": {"name": "tokens" if own else "word pieces",
                         "mean_per_instance": float(units.sum(1).double().mean()), "max_length": adapter.max_length},
               "request": params, "precision": adapter.describe()["precision"],
               "weights_dtype": adapter.describe().get("weights_dtype"), **table, "versions": environment_versions()}
    os.makedirs(output_dir, exist_ok=True)
    text = format_eraser_table(results)
    described = (f"{model.config.encoder}+{model.config.attention} ({model.config.variant})" if own
                 else f"{model.config.model_type} ({spec_text})")
    write_text_atomic(os.path.join(output_dir, "eraser.md"),
                      f"ERASER on {name} {recorded_split} ({len(ids)} instances, {results['units']['name']}), "
                      f"{model_dir}; {described}\n\n{text}\n")
    title = f"ERASER, {name} {recorded_split}, {described}"
    results["figure"] = os.path.basename(write_eraser_figure(results, os.path.join(output_dir, "eraser.png"), title))
    write_json_atomic(path, results)
    shutil.rmtree(cache_dir, ignore_errors=True)  # finished: the shards are only needed to resume
    if progress:
        print(text)
    return results
