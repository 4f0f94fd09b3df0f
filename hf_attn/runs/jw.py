"""``hf-attn analyze DIR --battery jw``: the Jain & Wallace battery on a model folder, written to
an output folder (``results.json``, ``instances.jsonl``, the figures; batches cached in ``OUT/cache``
so a killed run resumes). The computation itself is :mod:`hf_attn.batteries.jw`."""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict

import torch

from hf_attn.batteries.jw.battery import check_papers_model_device, load_model_and_split, run_jw_battery
from hf_attn.batteries.jw.common import (JWInstances, JWRunSettings, JWSettings, add_data_options, format_summary,
                                         heads_option, instance_analysis_row)
from hf_attn.core.arguments import check_count, finite_float, non_negative_int, positive_int
from hf_attn.core.io import write_jsonl_atomic
from hf_attn.runs import Battery, register_battery


def _instance_rows(instances: JWInstances, tokenizer):
    for i in range(len(instances.attention)):
        yield {"index": i, "tokens": tokenizer.convert_ids_to_tokens([int(t) for t in instances.input_ids[i]]),
               **instance_analysis_row(instances, i)}


def run(model_dir: str, output_dir: str, settings: JWRunSettings) -> dict:
    """``hf-attn analyze DIR --battery jw``: run the battery on ``settings.split`` and write
    ``OUT/results.json`` (every summary number, parameters, versions; atomic), ``OUT/instances.jsonl``
    (per-instance arrays) and the figures ``OUT/fig*.png``. Batches are cached in ``OUT/cache`` so
    a killed run resumes. Sentence-pair (NLI) models go to :mod:`hf_attn.batteries.jw.pair` (premise attention)."""
    from hf_attn.batteries.jw.pair import is_pair_model_dir, run_pair

    check_count("max_instances (--jw-max-instances)", settings.max_instances)
    settings.algorithm.validate()
    if is_pair_model_dir(model_dir):
        return run_pair(model_dir, output_dir, settings)
    from hf_attn.batteries.jw.transformer import is_transformer_model_dir, run_transformer

    if is_transformer_model_dir(model_dir):  # any transformers classifier, through its adapter
        return run_transformer(model_dir, output_dir, settings)
    check_papers_model_device(settings.device, settings.precision)
    from hf_attn.batteries.jw.figures import write_jw_figures
    from hf_attn.batteries.jw.summary import PUBLISHED_SST, strip_arrays
    from hf_attn.core.sharding import distributed_world_size, is_main_process
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic

    model, tokenizer, texts, labels, label_names, dataset = load_model_and_split(model_dir, settings.split)
    if settings.max_instances is not None:
        texts, labels = texts[:settings.max_instances], labels[:settings.max_instances]
    os.makedirs(output_dir, exist_ok=True)
    cache_dir = os.path.join(output_dir, "cache") if settings.use_cache else None
    # the torch threads the battery ran with: its own override, else the command's --threads (in effect)
    threads_used = settings.algorithm.num_threads or torch.get_num_threads()
    instances, summary = run_jw_battery(model, tokenizer, texts, labels, settings.algorithm,
                                        progress=settings.progress, cache_dir=cache_dir)
    if not is_main_process():  # `accelerate launch`: every process has all results; one writes
        return {"battery": "jw", "main_process": False}
    figures = write_jw_figures(instances, summary, output_dir, tokenizer, label_names,
                               model_name=f"{model.config.encoder}+{model.config.attention}")
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"), _instance_rows(instances, tokenizer))
    results = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4",
        "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": settings.split,
        "label_names": label_names,
        "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                  "variant": model.config.variant},
        "parameters": asdict(settings.algorithm) | {"num_threads": threads_used}, "summary": strip_arrays(summary),
        "published": PUBLISHED_SST if dataset == "sst" else None,
        "figures": {name: os.path.basename(path) for name, path in figures.items()},
        "instances_file": "instances.jsonl", "processes": distributed_world_size(),
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    if cache_dir:  # finished: the per-batch cache is only needed to resume
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
    if settings.progress:
        print(format_summary(results))
    return results


def add_options(parser) -> None:
    """The ``--jw-*`` flags of ``hf-attn analyze``; every default is the :class:`JWRunSettings` /
    :class:`JWSettings` default (``--split``, ``--seed``, ``--quiet`` are the command's own)."""
    run_defaults = JWRunSettings()
    defaults = run_defaults.algorithm
    g = parser.add_argument_group("jw battery (Jain & Wallace 2019 §4)")
    g.add_argument("--jw-permutations", type=positive_int, default=defaults.num_permutations,
                   help="permutations per instance (Alg. 2)")
    g.add_argument("--jw-adversaries", type=positive_int, default=defaults.k, help="k adversaries per instance (Alg. 3)")
    g.add_argument("--jw-lambda", type=finite_float(0), default=defaults.lam, help="λ of the relaxed Eq. 1")
    g.add_argument("--jw-eps", type=finite_float(0), default=defaults.eps, help="ε: allowed TVD of an adversary's output")
    g.add_argument("--jw-steps", type=non_negative_int, default=defaults.steps, help="Adam steps of the adversary search")
    g.add_argument("--jw-lr", type=finite_float(0, strictly_above=True), default=defaults.lr, help="Adam learning rate of the adversary search")
    g.add_argument("--jw-token-budget", type=positive_int, default=defaults.token_budget, help="padded tokens per batch")
    g.add_argument("--jw-gradient-token-budget", type=positive_int, default=defaults.gradient_token_budget,
                   help="padded tokens per gradient forward + backward")
    g.add_argument("--jw-loo-token-budget", type=positive_int, default=defaults.loo_token_budget,
                   help="padded tokens per chunk of leave-one-out deletions")
    g.add_argument("--jw-tie-tolerance", type=finite_float(0), default=defaults.tie_tolerance,
                   help="importances within this absolute distance count as tied in Kendall τ "
                        "(float32 noise; 0: rank the raw values)")
    g.add_argument("--jw-threads", type=positive_int, default=defaults.num_threads,
                   help="torch threads (1 is much faster on an oversubscribed CPU)")
    g.add_argument("--jw-max-instances", type=positive_int, default=run_defaults.max_instances,
                   help="only the first N instances")
    g.add_argument("--jw-no-cache", action="store_true", default=not run_defaults.use_cache,
                   help="do not cache batches for resuming")
    g.add_argument("--jw-layer", type=int, default=run_defaults.transformer_layer,
                   help="transformers models: the layer whose attention is explained (-1: the last)")
    g.add_argument("--jw-heads", default=run_defaults.transformer_heads,
                   help="transformers models: 'mean' (average the heads) or one head's index")
    g.add_argument("--device", default=run_defaults.device,
                   help="auto | cpu | cuda | cuda:N | mps (auto: a GPU when there is one)")
    g.add_argument("--precision", default=run_defaults.precision, choices=["float32", "bfloat16", "float16"],
                   help="forward precision of transformers models (the papers' models run in float32)")
    add_data_options(g)


def settings_from_args(args: argparse.Namespace) -> JWRunSettings:
    """The parsed ``hf-attn analyze`` namespace (``--split``, ``--seed``, ``--quiet`` and the flags of
    :func:`add_options`) → :class:`JWRunSettings`. Every attribute must be there (no fallbacks)."""
    algorithm = JWSettings(
        num_permutations=args.jw_permutations, k=args.jw_adversaries, lam=args.jw_lambda, eps=args.jw_eps,
        steps=args.jw_steps, lr=args.jw_lr, seed=args.seed, token_budget=args.jw_token_budget,
        gradient_token_budget=args.jw_gradient_token_budget, loo_token_budget=args.jw_loo_token_budget,
        num_threads=args.jw_threads, tie_tolerance=args.jw_tie_tolerance)
    heads = heads_option(args.jw_heads, "--jw-heads")
    return JWRunSettings(split=args.split, progress=not args.quiet, max_instances=args.jw_max_instances,
                         use_cache=not args.jw_no_cache, algorithm=algorithm,
                         transformer_layer=args.jw_layer, transformer_heads=heads, dataset=args.dataset,
                         device=args.device, precision=args.precision,
                         text_column=args.text_column, label_column=args.label_column)


register_battery(Battery("jw", settings_class=JWRunSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run))
