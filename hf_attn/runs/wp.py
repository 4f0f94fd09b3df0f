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

import argparse
import os
import time
from dataclasses import replace

from hf_attn.batteries.jw.common import add_data_options, heads_option
from hf_attn.batteries.wp.battery import WPSettings, format_wp_summary
from hf_attn.core.arguments import count, finite_float, positive_int
from hf_attn.runs import Battery, register_battery
from hf_attn.training import wp as wpt



# `hf-attn analyze --battery wp`: the flags and the registered entry
def _float_list(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative numbers, got {text!r}")
    return values


def _option_defaults(defaults: WPSettings) -> dict:
    """``hf-attn analyze`` destination → its default, from ``defaults`` (the only place they are
    stated is :class:`WPSettings`); negative flags (``--wp-no-train``) default to False when the
    field is True."""
    return {"split": defaults.split, "seed": defaults.seed, "quiet": not defaults.progress,
            "wp_runs_dir": defaults.runs_dir, "wp_num_seeds": defaults.num_seeds,
            "wp_lambdas": list(defaults.lambdas), "wp_guide_lambda": defaults.guide_lambda,
            "wp_guide_seeds": defaults.guide_seeds, "wp_seed_statistic": defaults.seed_statistic,
            "wp_epochs": defaults.epochs, "wp_no_train": not defaults.train_missing,
            "wp_adversary_steps": defaults.adversary_steps,
            "wp_skip_per_instance_adversary": not defaults.per_instance_adversary,
            "wp_adversary_protocol": defaults.adversary_protocol,
            "wp_adversary_max_epochs": defaults.adversary_max_epochs,
            "wp_layer": defaults.transformer_layer, "wp_heads": defaults.transformer_heads,
            "device": defaults.device, "precision": defaults.precision,
            "wp_no_uniform_every_layer": not defaults.uniform_every_layer,
            "wp_seed_model_dirs": list(defaults.seed_model_dirs), "wp_max_instances": defaults.max_instances}


def add_options(parser) -> None:
    """The ``--wp-*`` flags of ``hf-attn analyze``; defaults from :class:`WPSettings`."""
    g = parser.add_argument_group("wp battery (Wiegreffe & Pinter)")
    default = _option_defaults(WPSettings())

    def add(names, dest, **kwargs):
        # the short alias (e.g. --num-seeds) only if no other battery took it
        kwargs = {"dest": dest, "default": default[dest], **kwargs}
        try:
            g.add_argument(*names, **kwargs)
        except argparse.ArgumentError:
            g.add_argument(names[0], **kwargs)

    add(["--wp-runs-dir", "--runs-dir"], "wp_runs_dir",
        help="where the helper models (uniform, seeds, adversaries, MLPs) live; default OUT/models")
    add(["--wp-num-seeds", "--num-seeds"], "wp_num_seeds", type=count(1, limit="seed_models"), help="seed models (default %(default)s)")
    add(["--wp-lambdas", "--lambdas"], "wp_lambdas", type=_float_list,
        help="λ sweep of the consistent adversary (default " + ",".join(f"{x:g}" for x in default["wp_lambdas"]) + ")")
    add(["--wp-guide-lambda"], "wp_guide_lambda", type=finite_float(0),
        help="λ of the adversary whose attention guides the diagnostic MLP (default %(default)s, as W&P)")
    add(["--wp-guide-seeds"], "wp_guide_seeds", type=count(1, limit="seed_models"),
        help="seeds of the guide adversary (one guided MLP each; F1 = their mean); default %(default)s, as W&P")
    add(["--wp-seed-statistic"], "wp_seed_statistic", choices=["max", "median"],
        help="max over seeds (W&P paper) or median (W&P code); default %(default)s")
    add(["--wp-epochs"], "wp_epochs", type=count(1, limit="epochs"), help="epochs of helper models (default: base's)")
    add(["--wp-no-train"], "wp_no_train", action="store_true", help="fail instead of training missing models")
    add(["--wp-adversary-steps"], "wp_adversary_steps", type=count(0, limit="steps"),
        help="optimisation steps of the J&W per-instance adversary (default %(default)s)")
    add(["--wp-skip-per-instance-adversary"], "wp_skip_per_instance_adversary", action="store_true")
    add(["--wp-adversary-protocol"], "wp_adversary_protocol", choices=sorted(wpt.ADVERSARY_PROTOCOLS),
        help="consistent adversary: 'wp' = W&P's code (≤ 80 epochs, early stopping on the training "
             "objective, ½·TVD, class-weighted) or 'fast' (base's epochs, dev selection); default %(default)s")
    add(["--wp-adversary-max-epochs"], "wp_adversary_max_epochs", type=count(1, limit="epochs"),
        help=f"epoch cap of the 'wp' protocol (default {wpt.ADVERSARY_PROTOCOLS['wp']['max_epochs']})")
    add(["--wp-layer"], "wp_layer", type=int,
        help="BERT-family models: the layer whose [CLS] attention is explained (default %(default)s: the last)")
    add(["--wp-heads"], "wp_heads", help="BERT-family models: 'mean' (default) or one head index")
    add(["--wp-device", "--device"], "device",
        help="transformers models: auto | cpu | cuda | cuda:N | mps (the papers' models run on the CPU)")
    add(["--wp-precision", "--precision"], "precision", choices=["float32", "bfloat16", "float16"],
        help="transformers models: forward precision (the papers' models run in float32)")
    add(["--wp-no-uniform-every-layer"], "wp_no_uniform_every_layer", action="store_true",
        help="BERT-family models: skip the uniform [CLS] row at every layer (§3.2 extra)")
    add(["--wp-seed-model-dirs"], "wp_seed_model_dirs", nargs="+", metavar="DIR",
        help="BERT-family models: fine-tuning seeds of the same model for §3.3 (folders)")
    add(["--wp-max-instances"], "wp_max_instances", type=positive_int,
        help="BERT-family models: analyse only the first N instances of the split")
    add_data_options(g)


def settings_from_args(args) -> WPSettings:
    """The parsed ``hf-attn analyze`` namespace → :class:`WPSettings`."""
    return WPSettings(split=args.split, seed=args.seed, progress=not args.quiet, runs_dir=args.wp_runs_dir,
                      num_seeds=args.wp_num_seeds, lambdas=tuple(args.wp_lambdas),
                      guide_lambda=args.wp_guide_lambda, guide_seeds=args.wp_guide_seeds,
                      seed_statistic=args.wp_seed_statistic, epochs=args.wp_epochs,
                      train_missing=not args.wp_no_train, adversary_steps=args.wp_adversary_steps,
                      per_instance_adversary=not args.wp_skip_per_instance_adversary,
                      adversary_protocol=args.wp_adversary_protocol,
                      adversary_max_epochs=args.wp_adversary_max_epochs,
                      transformer_layer=args.wp_layer, transformer_heads=heads_option(args.wp_heads, "--wp-heads"),
                      device=args.device, precision=args.precision,
                      uniform_every_layer=not args.wp_no_uniform_every_layer,
                      seed_model_dirs=tuple(args.wp_seed_model_dirs), max_instances=args.wp_max_instances,
                      dataset=args.dataset, text_column=args.text_column or WPSettings.text_column,
                      label_column=args.label_column or WPSettings.label_column)


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
    says why (``"run": False`` and a ``status``)."""
    from hf_attn.batteries.data import is_transformer_model_dir
    from hf_attn.core.environment import environment_versions
    from hf_attn.core.io import write_json_atomic
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
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    return results


register_battery(Battery("wp", settings_class=WPSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run))
