"""``hf-attn analyze DIR --battery wp``: the Wiegreffe & Pinter battery on a model folder, written to
an output folder by one driver, :func:`run_wp`, for the papers' models and any transformers
classifier (folder or Hub id). Every analysis reads the models through their adapters
(:mod:`hf_attn.adapters`): the explained attention over the content tokens and the class
probabilities of the base, of its seed models and of the helper models, and the uniform-attention
intervention. What differs between the two kinds is only which other models exist:

- the papers' models are retrained from scratch (:mod:`hf_attn.runs.wp_papers`: the frozen-uniform
  twin of §3.2, the seed models of §3.3, the model-consistent adversaries of §4 and the guided MLPs
  of §3.4, trained into ``--wp-runs-dir``; resumable, one training at a time);
- a transformer is not retrained here (:mod:`hf_attn.runs.wp_transformer`): its seed models are
  given or found in the runs folder, its §3.2 is the test-time intervention, and its guided MLPs read
  its word-piece embeddings; §4 (fine-tuning new transformers against the base) is not run.

The statistics, settings and figures themselves are :mod:`hf_attn.batteries.wp`."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace

from hf_attn.batteries.wp.battery import WPSettings, format_wp_summary
from hf_attn.core.settings_cli import add_settings_options, settings_from_namespace
from hf_attn.runs import Battery, register_battery


# `hf-attn analyze --battery wp`: the flags and the registered entry
PREFIX = "wp"


def add_options(parser) -> None:
    """The ``--wp-*`` options of ``hf-attn analyze``, generated from :class:`WPSettings`
    (:func:`hf_attn.core.settings_cli.add_settings_options`)."""
    add_settings_options(parser, WPSettings, PREFIX, "wp battery (Wiegreffe & Pinter)", "settings file section: wp")


def settings_from_args(args) -> WPSettings:
    """The parsed ``hf-attn analyze`` namespace → :class:`WPSettings`."""
    return settings_from_namespace(WPSettings, args, PREFIX)


def run(model_dir: str, output_dir: str, settings: WPSettings) -> dict:
    """The registered battery: :func:`run_wp` plus a labelled summary on stdout (unless quiet)."""
    results = run_wp(model_dir, output_dir, settings)
    if settings.progress:
        print(format_wp_summary(results))
    return results


def run_wp(model_dir: str, output_dir: str, settings: WPSettings | None = None, *, task=None, texts=None,
           labels=None, label_names=None, **overrides) -> dict:
    """The whole W&P battery on the model in ``model_dir`` (the papers' models: a folder written by
    ``hf-attn train``; any transformers classifier: a folder or Hub id), through its adapter.
    ``settings`` (:class:`WPSettings`; None: its defaults) with keyword ``overrides`` of single fields
    (``run_wp(DIR, OUT, num_seeds=2)``). ``task``: the model's task when already loaded; ``texts`` /
    ``labels`` / ``label_names``: the instances to analyse instead of the split (transformers).

    The steps, the same for every model: the base's outputs on the analysed split (one batched pass,
    the uniform intervention included), the other models (:mod:`hf_attn.runs.wp_papers` trains them,
    :mod:`hf_attn.runs.wp_transformer` finds them), then §3.2 uniform attention, §3.3 seed variance
    with J&W's per-instance adversary on its axes, §4 the model-consistent adversaries and §3.4 the
    diagnostic MLP, the figures and ``OUT/results.json`` (atomic). A section a model kind cannot have
    says why (``"run": False`` and a ``status``).

    Every forward over the analysed instances and the per-instance adversary run batch by batch as
    shards (:func:`hf_attn.core.sharding.run_sharded`), each finished batch cached in ``OUT/cache``
    until the results are written (a killed run resumes); under ``accelerate launch`` the batches are
    split between the processes (``processes`` and ``sharding`` record who computed which) and the main
    process writes; the values are those of one process. Training is unchanged."""
    from hf_attn.batteries.data import is_transformer_model_dir
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic
    from hf_attn.core.sharding import distributed_world_size, is_main_process
    from hf_attn.runs import wp_sections

    settings = replace(settings or WPSettings(), **overrides)
    settings.validate()
    wall = time.perf_counter()
    os.makedirs(output_dir, exist_ok=True)
    if is_transformer_model_dir(model_dir):
        from hf_attn.runs.wp_transformer import TransformerModels

        models = TransformerModels(model_dir, output_dir, settings, task, texts, labels, label_names)
    else:
        from hf_attn.runs.wp_papers import PapersModels

        models = PapersModels(model_dir, output_dir, settings, task,
                              given_data=any(v is not None for v in (texts, labels, label_names)))
    models.train_missing()
    started = time.perf_counter()
    base = models.base()
    uniform, uniform_point = models.uniform(base)
    seed_section, seed_points, stats = wp_sections.seed_variance(base, models.seed_models(), settings)
    jw_section, jw_point, adversary_values = wp_sections.per_instance_adversary(base, settings, stats)
    lambda_rows, consistent = models.consistent_adversary(base)
    mlp_section = models.diagnostic_mlp(base)
    if not is_main_process():  # `accelerate launch`: every process has every section; one writes
        return {"battery": "wp", "main_process": False}
    figures = wp_sections.figures(output_dir, base, settings, stats, adversary_values, uniform, lambda_rows,
                                  seed_points, uniform_point, jw_point, mlp_section, models)
    analysis_seconds = time.perf_counter() - started
    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation",
        **models.where(), "split": base.split, "num_instances": int(len(base.labels)),
        "label_names": base.label_names, **models.description(base), "base": base.metrics_summary(),
        "uniform_baseline": uniform, "seed_variance": seed_section, "per_instance_adversary": jw_section,
        "consistent_adversary": consistent, "diagnostic_mlp": mlp_section,
        "tradeoff_points": {"uniform": uniform_point, "seeds": seed_points, "jw_per_instance": jw_point,
                            "consistent_adversary": lambda_rows},
        "figures": figures, "timing": models.timing(analysis_seconds, wall), "options": models.options(),
        "processes": distributed_world_size(), "sharding": {"processes": distributed_world_size(), **base.sharding},
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    shutil.rmtree(os.path.join(output_dir, "cache"), ignore_errors=True)  # finished: only needed to resume
    return results


register_battery(Battery("wp", settings_class=WPSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run, prefix=PREFIX))
