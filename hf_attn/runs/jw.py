"""``hf-attn analyze DIR --battery jw``: the Jain & Wallace battery on a model folder, written to
an output folder (``results.json``, ``instances.jsonl``, the figures; batches cached in ``OUT/cache``
so a killed run resumes): :func:`run`, through :func:`jw_battery_runner` for the papers' models and
any transformers classifier (folder or Hub id) alike, and :func:`run_pair` for sentence-pair (NLI, QA)
models. The computation itself is :mod:`hf_attn.batteries.jw`."""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import asdict, replace

import numpy as np
import torch

from hf_attn.batteries.data import is_transformer_model_dir, load_classifier, load_classifier_and_data
from hf_attn.batteries.jw.battery import check_papers_model_device, run_jw_battery
from hf_attn.batteries.jw.pair import (QA_EPS, PairJWInstances, is_pair_model_dir, load_pair_model_and_split, published_for,
                                       run_pair_jw_battery)
from hf_attn.batteries.jw.common import JWInstances, JWRunSettings, JWSettings, format_summary, instance_analysis_row
from hf_attn.core.arguments import check_count
from hf_attn.core.io import write_jsonl_atomic
from hf_attn.core.measure_names import JW_MEASURES
from hf_attn.core.settings_cli import add_settings_options, settings_from_namespace
from hf_attn.core.sharding import distributed_world_size, is_main_process
from hf_attn.runs import Battery, register_battery

LOGGER = logging.getLogger(__name__)


def report_summary(results: dict, output_dir: str, progress: bool) -> None:
    """The run's result summary (:func:`format_summary`): printed unless the run is quiet, and always
    in the output folder's ``hf-attn.log`` (the log records of the command go there)."""
    text = format_summary(results)
    LOGGER.info("jw: results in %s\n%s", output_dir, text, extra={"console": False})
    if progress:
        print(text)


def run(model_dir: str, output_dir: str, settings: JWRunSettings) -> dict:
    """``hf-attn analyze DIR --battery jw``: run the battery on ``settings.split`` and write
    ``OUT/results.json`` (every summary number, parameters, versions; atomic), ``OUT/instances.jsonl``
    (per-instance arrays) and the figures ``OUT/fig*.png``. Batches are cached in ``OUT/cache`` so
    a killed run resumes. The papers' models and any transformers classifier go through the one
    driver (:func:`jw_battery_runner`); sentence-pair (NLI, QA) models go to :func:`run_pair`."""
    check_count("max_instances (--jw-max-instances)", settings.max_instances)
    settings.algorithm.validate()
    if is_pair_model_dir(model_dir):
        _check_pair_settings(settings_from_jw(settings), settings)
        return run_pair(model_dir, output_dir, settings)
    return jw_battery_runner(model_dir, output_dir, settings=settings_from_jw(settings), dataset=settings.dataset,
                             split=settings.split, max_instances=settings.max_instances, progress=settings.progress,
                             text_column=settings.text_column, label_column=settings.label_column,
                             use_cache=settings.use_cache)


PREFIX = "jw"


def add_options(parser) -> None:
    """The ``--jw-*`` options of ``hf-attn analyze``, generated from :class:`JWRunSettings` and its
    :class:`JWSettings` (:func:`hf_attn.core.settings_cli.add_settings_options`; ``--split``,
    ``--seed``, ``--quiet``, ``--threads`` are the command's own)."""
    add_settings_options(parser, JWRunSettings, PREFIX, "jw battery (Jain & Wallace 2019 §4)",
                         "settings file section: jw")


def settings_from_args(args: argparse.Namespace) -> JWRunSettings:
    """The parsed ``hf-attn analyze`` namespace (the command's options and those of :func:`add_options`)
    → :class:`JWRunSettings`. Every attribute must be there (no fallbacks); ``eps_given``: whether
    ``--jw-eps`` (or the settings file's ``eps``) was given."""
    return settings_from_namespace(JWRunSettings, args, PREFIX, eps_given=args.jw_eps is not None)


def _pair_instance_rows(instances: PairJWInstances, tokenizer):
    for i in range(len(instances.attention)):
        yield {"index": i,
               "premise_tokens": tokenizer.convert_ids_to_tokens([int(t) for t in instances.input_ids[i]]),
               "hypothesis_tokens": tokenizer.convert_ids_to_tokens(
                   [int(t) for t in instances.hypothesis_ids[i]]),
               **instance_analysis_row(instances, i)}


def _check_pair_settings(algorithm: JWSettings, run: JWRunSettings) -> None:
    """A sentence-pair model has one attention distribution, on the CPU in float32, and its data is
    its run.json's: any other layer, head, device, precision or data option is refused with the reason."""
    check_papers_model_device(algorithm.device, algorithm.precision)
    if algorithm.layer not in (-1, 0) or algorithm.heads not in ("mean", 0):
        raise ValueError(f"--jw-layer {algorithm.layer} / --jw-heads {algorithm.heads}: a sentence-pair hf_attn "
                         "model has one attention distribution (one layer, one head)")
    given = [f for f in ("dataset", "text_column", "label_column") if getattr(run, f) is not None]
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')}: a sentence-pair hf_attn model is analysed on the "
                         "dataset of its run.json")


def run_pair(model_dir: str, output_dir: str, settings: JWRunSettings) -> dict:
    """The ``jw`` battery for pair models: ``OUT/results.json`` (summary with the published SNLI values
    beside it), ``OUT/instances.jsonl`` and the J&W figures (over premise tokens)."""
    from hf_attn.batteries.jw.figures import write_jw_figures
    from hf_attn.batteries.jw.summary import strip_arrays
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic
    from hf_attn.data.babi import GENERATED_NOTE, is_qa_task

    model, tokenizer, premises, hypotheses, labels, label_names, dataset = \
        load_pair_model_and_split(model_dir, settings.split)
    qa = is_qa_task(dataset)
    if qa and not settings.eps_given and settings.algorithm.eps == JWSettings.eps:  # J&W §4.2.2: ε = 0.05 on QA
        settings = replace(settings, algorithm=replace(settings.algorithm, eps=QA_EPS))
    limit = settings.max_instances
    if limit:
        premises, hypotheses, labels = premises[:limit], hypotheses[:limit], labels[:limit]
    os.makedirs(output_dir, exist_ok=True)
    cache_dir = os.path.join(output_dir, "cache") if settings.use_cache else None
    instances, summary = run_pair_jw_battery(model, tokenizer, premises, hypotheses, labels, settings.algorithm,
                                             progress=settings.progress, cache_dir=cache_dir)
    figures = write_jw_figures(instances, summary, output_dir, tokenizer, label_names,
                               model_name=f"{model.config.encoder}+{model.config.attention}, "
                                          f"{'passage' if qa else 'premise'}")
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"),
                       _pair_instance_rows(instances, tokenizer))
    results = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4 (NLI, QA: §3)",
        "measure_definitions": JW_MEASURES,  # which leave-one-out: the LOO-TVD
        "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": settings.split,
        "label_names": label_names, "pair": True,
        "attended": ("passage tokens; query = encoded question" if qa else
                     "premise tokens; query = encoded hypothesis"),
        **({"data": GENERATED_NOTE} if dataset.endswith("-generated") else {}),
        "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                  "variant": model.config.variant, "pair_decoder": model.config.pair_decoder},
        "parameters": asdict(settings.algorithm), "summary": strip_arrays(summary),
        "published": published_for(dataset),
        "figures": {name: os.path.basename(path) for name, path in figures.items()},
        "instances_file": "instances.jsonl", "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    if cache_dir:
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
    report_summary(results, output_dir, settings.progress)
    return results


def _instance_rows(instances: JWInstances, tokenizer):
    """``instances.jsonl``: one row per instance, its content tokens and every per-token array."""
    from hf_attn.adapters.transformer_attention import merge_word_pieces

    for i in range(len(instances.attention)):
        ids, words = instances.input_ids[i], instances.word_ids[i]
        row = {"index": i, "tokens": tokenizer.convert_ids_to_tokens([int(t) for t in ids]), "word_ids": words,
               **instance_analysis_row(instances, i),
               "word_attention": merge_word_pieces(instances.attention[i], words).tolist() if words else []}
        if instances.rollout is not None:
            row["rollout"] = instances.rollout[i].tolist()
        yield row


def _model_record(model, adapter, settings: JWSettings, run: dict | None) -> tuple[dict, dict | None]:
    """``(results.json's "model", its "attention_spec")``: the papers' encoder/attention/variant, or a
    transformer's architecture and which attention row is explained (None for the papers' models)."""
    config = model.config
    if config.model_type == "hf_attn":
        return {"encoder": config.encoder, "attention": config.attention, "variant": config.variant}, None
    described = adapter.describe()
    model_block = {"encoder": "transformer", "architecture": type(model).__name__, "model_type": config.model_type,
                   "attention": described["text"], "variant": "base", "num_layers": adapter.num_layers,
                   "num_heads": adapter.num_heads, "base_model": run["settings"]["base_model"] if run else None}
    spec = {"layer": settings.layer, "heads": settings.heads, "query": described["query"],
            "pooling": described["pooling"], "padding": described["padding"],
            "fast_path": described["fast_path_reason"] if described["fast_path"] else None,
            "layer_replay": described.get("layer_replay_reason") if described.get("layer_replay") else None,
            "units": "tokens (content only; special tokens keep their mass, are not ranked)",
            "rollout": "Abnar & Zuidema 2020 (½A + ½I, head mean, product over layers)"}
    return model_block, spec


def _figures(instances: JWInstances, summary: dict, output_dir: str, tokenizer, label_names, model_name: str,
             several_layers: bool, folder_name: str) -> dict:
    """J&W Figs 1–5 and, for a model with several layers, τ per layer; a figure that cannot be drawn is
    named with why (figures are extras)."""
    from hf_attn.batteries.jw.figures import per_layer_figure, write_jw_figures

    figures = {}
    if several_layers:
        figures["fig_tau_per_layer"] = per_layer_figure(summary, os.path.join(output_dir, "fig_tau_per_layer.png"),
                                                        f"{folder_name}: τ by layer")
    try:
        figures |= write_jw_figures(instances, summary, output_dir, tokenizer, label_names, model_name=model_name)
    except (ImportError, KeyError, ValueError) as error:  # recorded, and said in the log
        figures["error"] = f"J&W figures not written: {error}"
        LOGGER.warning("jw: %s", figures["error"])
    return figures


def jw_battery_runner(model_dir: str, output_dir: str, texts=None, labels=None, settings: JWSettings | None = None,
                      dataset: str | None = None, split: str = "test", max_instances: int | None = None,
                      label_names=None, progress: bool = True, text_column: str | None = None,
                      label_column: str | None = None, use_cache: bool = True) -> dict:
    """``hf-attn analyze DIR --battery jw`` for a model folder trained here (the papers' models or a
    fine-tuned transformer) or any transformers classifier (folder or Hub id): run the battery
    (:func:`hf_attn.batteries.jw.battery.run_jw_battery`) on ``texts`` (default: what
    :func:`hf_attn.batteries.data.load_classifier_and_data` finds: the folder's own data, or
    ``dataset`` / ``split`` / ``text_column`` / ``label_column``; the first ``max_instances``) and write ``OUT/results.json`` (atomic),
    ``OUT/instances.jsonl`` and the figures (J&W Figs 1–5 via
    :func:`hf_attn.batteries.jw.figures.write_jw_figures`, plus ``fig_tau_per_layer.png`` for a model
    with several layers). With ``use_cache`` finished batches are kept in ``OUT/cache`` until the
    results are written, so a killed run resumes; under ``accelerate launch`` the batches are split
    between the processes and the main process writes."""
    from hf_attn.batteries.jw.summary import PUBLISHED_SST, strip_arrays
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic
    from hf_attn.training.transformer import read_transformer_run

    settings = settings or JWSettings()
    if not is_transformer_model_dir(model_dir):
        check_papers_model_device(settings.device, settings.precision)
    if texts is None:
        model, tokenizer, texts, labels, label_names, dataset, split = load_classifier_and_data(
            model_dir, split, dataset, text_column, label_column, needed_by="the jw battery")
    else:
        model, tokenizer = load_classifier(model_dir)
    adapter = settings.adapter(model, tokenizer)  # refuses a model it cannot intervene on, with the reason
    own = model.config.model_type == "hf_attn"
    run = None if own or not os.path.isdir(model_dir) else read_transformer_run(model_dir)
    if labels is not None and not own:  # the data's classes must be the model's: counted, and matched by name
        from hf_attn.batteries.data import model_class_names
        from hf_attn.core.validation import align_labels

        model_names = model_class_names(model.config)
        labels, label_names = align_labels(labels, label_names or model_names, model_names)
    if max_instances:
        texts = texts[:max_instances]
        labels = None if labels is None else labels[:max_instances]
    os.makedirs(output_dir, exist_ok=True)
    cache_dir = os.path.join(output_dir, "cache") if use_cache else None
    described = adapter.describe()
    LOGGER.info("jw: %s (%s), %d texts of %s [%s]", model_dir, described["text"], len(texts), dataset, split,
                extra={"console": False})
    threads_used = settings.num_threads or torch.get_num_threads()
    started = time.perf_counter()
    instances, summary = run_jw_battery(adapter, texts, labels, settings, progress, cache_dir)
    LOGGER.info("jw: battery done in %.1f s", time.perf_counter() - started, extra={"console": False})
    if not is_main_process():  # `accelerate launch`: every process has all results; one writes
        return {"battery": "jw", "main_process": False}
    model_block, spec = _model_record(model, adapter, settings, run)
    name = (f"{model.config.encoder}+{model.config.attention}" if own
            else f"{model.config.model_type}, {described['text']}")
    figures = _figures(instances, summary, output_dir, tokenizer, label_names, name, adapter.num_layers > 1,
                       os.path.basename(os.path.normpath(model_dir)))
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"), _instance_rows(instances, tokenizer))
    record = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4",
        "measure_definitions": JW_MEASURES,  # which leave-one-out: the LOO-TVD
        "model_dir": os.path.abspath(model_dir) if os.path.isdir(model_dir) else model_dir,
        "dataset": dataset, "split": split, "label_names": label_names, "model": model_block,
        **({"attention_spec": spec} if spec else {}),
        "parameters": asdict(settings) | {"max_instances": max_instances, "device": described["device"],
                                          "precision": described["precision"],
                                          "weights_dtype": described.get("weights_dtype"),
                                          "num_threads": threads_used},
        "summary": strip_arrays(summary),
        "published": PUBLISHED_SST if dataset == "sst" else None,
        "figures": {n: (os.path.basename(p) if n != "error" else p) for n, p in figures.items()},
        "instances_file": "instances.jsonl", "processes": distributed_world_size(),
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), record)
    if cache_dir:  # finished: the per-batch cache is only needed to resume
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
    report_summary(record, output_dir, progress)
    return record


def settings_from_jw(run: JWRunSettings) -> JWSettings:
    """The command's typed settings (:class:`hf_attn.batteries.jw.common.JWRunSettings`, from
    ``hf-attn analyze --battery jw``) → the battery's :class:`JWSettings`: the algorithm parameters,
    budgets and threads, the attention chosen by ``--jw-layer`` / ``--jw-heads``, the device and the
    precision. Every flag reaches the battery (a papers' model refuses a layer, head, device or
    precision it does not have, with the reason)."""
    heads = run.transformer_heads
    given = {"layer": run.transformer_layer, "heads": heads if heads == "mean" else int(heads),
             "device": run.device, "precision": run.precision}
    chosen = {}
    for name, value in given.items():  # one value per field: the run's flag, or the algorithm's own
        default = JWSettings.__dataclass_fields__[name].default
        own = getattr(run.algorithm, name)
        if own != default and value != default and own != value:
            raise ValueError(f"{name}: the run settings say {value!r} but its algorithm settings say {own!r}; "
                             "set one of them")
        chosen[name] = value if value != default else own
    return replace(run.algorithm, **chosen)


register_battery(Battery("jw", settings_class=JWRunSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run, prefix=PREFIX))
