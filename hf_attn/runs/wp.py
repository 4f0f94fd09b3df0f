"""``hf-attn analyze DIR --battery wp``: the Wiegreffe & Pinter battery on a model folder, written to
an output folder. :func:`run_wp` (the papers' models) trains what is missing into ``--wp-runs-dir``
(uniform twin, seed models, consistent adversaries, guided MLPs; resumable, one training at a time)
and writes ``results.json`` plus the figures; :func:`run_transformer_wp` does the same for a
BERT-family classifier (folder or Hub id). The statistics, settings and figures themselves are
:mod:`hf_attn.batteries.wp`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from dataclasses import asdict, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.jw.common import add_data_options, heads_option
from hf_attn.batteries.wp.battery import (WPSettings, binned_summary, divergence_summary, format_wp_summary,
                                          ordering_holds, plot_diagnostic_mlp, plot_seed_variance, plot_tradeoff,
                                          seed_variance_statistics)
from hf_attn.batteries.wp.transformer import (SEED_STATUS_NOT_RUN, TransformerWPSettings, diagnostic_mlp_section,
                                              encode_texts, find_seed_model_dirs, plot_uniform, seed_variance_section,
                                              settings_from_wp, split_forward, uniform_divergence, uniform_section)
from hf_attn.batteries.wp.transformer import plot_diagnostic_mlp as plot_transformer_diagnostic_mlp
from hf_attn.core.arguments import finite_float, non_negative_int, positive_int
from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.environment import environment_versions
from hf_attn.core.io import write_json_atomic
from hf_attn.core.measures import jsd, tvd
from hf_attn.data.datasets import TaskData
from hf_attn.runs import Battery, register_battery
from hf_attn.training import wp as wpt
from hf_attn.training.engine import classification_metrics, settings_from_run, task_of, tokenize_splits, train

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
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
    add(["--wp-num-seeds", "--num-seeds"], "wp_num_seeds", type=positive_int, help="seed models (default %(default)s)")
    add(["--wp-lambdas", "--lambdas"], "wp_lambdas", type=_float_list,
        help="λ sweep of the consistent adversary (default " + ",".join(f"{x:g}" for x in default["wp_lambdas"]) + ")")
    add(["--wp-guide-lambda"], "wp_guide_lambda", type=finite_float(0),
        help="λ of the adversary whose attention guides the diagnostic MLP (default %(default)s, as W&P)")
    add(["--wp-guide-seeds"], "wp_guide_seeds", type=positive_int,
        help="seeds of the guide adversary (one guided MLP each; F1 = their mean); default %(default)s, as W&P")
    add(["--wp-seed-statistic"], "wp_seed_statistic", choices=["max", "median"],
        help="max over seeds (W&P paper) or median (W&P code); default %(default)s")
    add(["--wp-epochs"], "wp_epochs", type=positive_int, help="epochs of helper models (default: base's)")
    add(["--wp-no-train"], "wp_no_train", action="store_true", help="fail instead of training missing models")
    add(["--wp-adversary-steps"], "wp_adversary_steps", type=non_negative_int,
        help="optimisation steps of the J&W per-instance adversary (default %(default)s)")
    add(["--wp-skip-per-instance-adversary"], "wp_skip_per_instance_adversary", action="store_true")
    add(["--wp-adversary-protocol"], "wp_adversary_protocol", choices=sorted(wpt.ADVERSARY_PROTOCOLS),
        help="consistent adversary: 'wp' = W&P's code (≤ 80 epochs, early stopping on the training "
             "objective, ½·TVD, class-weighted) or 'fast' (base's epochs, dev selection); default %(default)s")
    add(["--wp-adversary-max-epochs"], "wp_adversary_max_epochs", type=positive_int,
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
    """The registered battery: :func:`run_wp` plus a labelled summary on stdout (unless quiet). A BERT-family
    classifier (folder or Hub id) goes to :func:`run_transformer`."""
    from hf_attn.batteries.jw.transformer import is_transformer_model_dir

    if is_transformer_model_dir(model_dir):
        return run_transformer(model_dir, output_dir, settings)
    from hf_attn.batteries.jw.battery import check_papers_model_device

    check_papers_model_device(settings.device, settings.precision)
    results = run_wp(model_dir, output_dir, settings)
    if settings.progress:
        print(format_wp_summary(results))
    return results


# ---------------------------------------------------------------------------------------------
# the papers' models: helper trainings, then the battery on the folder
def _per_instance_adversary(model, encoded, k, steps, eps, lam, seed, batch_size, progress):
    """J&W Alg. 3 on every instance (batched by length) via ``hf_attn.batteries.jw.battery``; returns the
    per-instance ε-max JSD and the TVD of the adversary attaining it (0, 0 when no adversary is
    within ε: the base attention is kept)."""
    from hf_attn.core.batching import pad_batch
    from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary

    ids = encoded["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(lengths, kind="stable")
    eps_jsd = np.zeros(len(ids))
    eps_tvd = np.zeros(len(ids))
    for start in tqdm(range(0, len(order), batch_size), desc="J&W per-instance adversary",
                      disable=not progress, leave=False):
        rows = order[start:start + batch_size]
        input_ids, attended = pad_batch([ids[int(r)] for r in rows])
        mask = attended.long()
        with torch.no_grad():
            out = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        result = adversarial_attention(model, out.hidden_states, out.attentions, mask, k=k, lam=lam,
                                       eps=eps, steps=steps, seed=seed + start)
        best = best_feasible_adversary(result.tvd, result.jsd, eps)
        chosen_tvd = result.tvd.gather(1, best.index[:, None]).squeeze(1)
        eps_jsd[rows] = best.eps_max_jsd.double().numpy()
        eps_tvd[rows] = torch.where(best.any_feasible, chosen_tvd, torch.zeros_like(chosen_tvd)).double().numpy()
    return eps_jsd, eps_tvd


def _check_vocab(model_dir, tokenizer):
    from transformers import PreTrainedTokenizerFast
    other = PreTrainedTokenizerFast.from_pretrained(model_dir)
    if other.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{model_dir} was trained with another vocabulary than the base model")


def _helper_plan(model_dir: str, runs_dir: str, settings: WPSettings, base_settings, helper, task: TaskData,
                 extra_guide_seeds, tag: str) -> list[tuple]:
    """Every helper model of the battery as ``(name, folder, train(folder))``: cheapest and most
    telling first (uniform, the guide adversary, the MLPs), seeds last."""
    base_cache = []  # the base's attention/probabilities on every split, computed once if needed
    guide_lambda = settings.guide_lambda

    def trained(train_settings):
        return lambda path: train(train_settings, path, task=task, progress=False)

    def adversary(lam, adversary_seed=None):
        def run(path):
            if not base_cache:
                base_cache.append(wpt.base_columns(model_dir, task, progress=False))
            wpt.train_consistent_adversary(model_dir, path, lam, task=task, epochs=helper.epochs,
                                           seed=adversary_seed, progress=False, _base=base_cache[0],
                                           protocol=settings.adversary_protocol,
                                           max_epochs=settings.adversary_max_epochs)
        return run

    def guided_mlp(guide, guide_seed=None):
        source = {"base": model_dir, "adversary": wpt.adversary_run_dir(runs_dir, guide_lambda, guide_seed, tag)}.get(guide)
        return lambda path: wpt.train_guided_mlp(model_dir, path, guide, source, task=task,
                                                 epochs=helper.epochs, progress=False)

    lambdas = sorted({float(x) for x in settings.lambdas})
    return ([("uniform", os.path.join(runs_dir, "uniform"), trained(wpt.uniform_settings(helper))),
             (f"adversary λ={guide_lambda:g}", wpt.adversary_run_dir(runs_dir, guide_lambda, tag=tag), adversary(guide_lambda))]
            + [(f"MLP guide {g}", wpt.guide_run_dir(runs_dir, g, tag=tag), guided_mlp(g)) for g in wpt.GUIDES]
            + [item for s in extra_guide_seeds for item in (
                (f"adversary λ={guide_lambda:g} seed {s}", wpt.adversary_run_dir(runs_dir, guide_lambda, s, tag),
                 adversary(guide_lambda, s)),
                (f"MLP guide adversary seed {s}", wpt.guide_run_dir(runs_dir, "adversary", s, tag),
                 guided_mlp("adversary", s)))]
            + [(f"adversary λ={lam:g}", wpt.adversary_run_dir(runs_dir, lam, tag=tag), adversary(lam))
               for lam in lambdas if lam != guide_lambda]
            + [(f"seed {s}", wpt.seed_run_dir(runs_dir, s), trained(replace(helper, seed=s)))
               for s in range(base_settings.seed + 1, base_settings.seed + 1 + settings.num_seeds)])


def _train_missing(plan: list[tuple], train_missing: bool, progress: bool) -> tuple[list[tuple], float]:
    """Train the helper models of ``plan`` without a ``metrics.json``, one after another; returns
    them and the seconds it took. ``train_missing=False``: a missing one is an error."""
    def need(path):
        if os.path.exists(os.path.join(path, "metrics.json")):
            return False
        if not train_missing:
            raise FileNotFoundError(f"{path} is not trained (run without --wp-no-train to train it)")
        return True

    start = time.perf_counter()
    todo = [item for item in plan if need(item[1])]
    bar = tqdm(todo, desc="wp: training helper models", disable=not progress)
    for name, path, train_it in bar:
        bar.set_postfix_str(name)
        logger.info("wp: training %s into %s", name, path)
        train_it(path)
    return todo, time.perf_counter() - start


def run_wp(model_dir: str, output_dir: str, settings: WPSettings | None = None,
           task: TaskData | None = None, **overrides) -> dict:
    """The whole W&P battery on the base model in ``model_dir`` (see the module docstring).
    ``settings`` (:class:`WPSettings`; None: its defaults) with keyword ``overrides`` of single fields
    (``run_wp(DIR, OUT, num_seeds=2)``). Helper models live in ``settings.runs_dir`` (default
    ``output_dir/models``); missing ones are trained (``train_missing``) one after another, finished
    ones reused. ``epochs`` overrides the base's epoch count for every helper model (default: the
    base's). ``task``: the base's task when already loaded. Returns the results dict.

    Long: the four W&P analyses (§3.2, §3.3, §4, §3.4) in sequence over the same base outputs, each
    section marked; the training of the helper models is :func:`_helper_plan` /
    :func:`_train_missing`.

    ``guide_seeds`` > 1 trains the λ = ``guide_lambda`` adversary with that many seeds and one MLP
    guided by each: the ADVERSARY guide's F1 is then their mean (± std, per seed in
    ``diagnostic_mlp.guides.adversary.seed_runs``). W&P report one run; with λ = 0.001 the KL
    term barely constrains the adversary's attention, so runs that differ only in seed (or in
    floating-point rounding) end at different attention and the guided F1 varies widely.

    ``adversary_protocol`` trains the consistent adversaries with ``"fast"`` (the base's epochs,
    L = TVD − λ·KL, dev-objective selection) or ``"wp"`` (W&P's code: up to 80 epochs, or
    ``adversary_max_epochs``, early stopping on the training objective with patience 10,
    L = ½·TVD − λ·KL class-weighted; see ``hf_attn.training.wp.ADVERSARY_PROTOCOLS``). Their
    folders (and the ADVERSARY-guided MLPs) carry the protocol's tag, so both can coexist."""
    settings = replace(settings or WPSettings(), **overrides)
    settings.validate()
    split, seed, progress = settings.split, settings.seed, settings.progress
    num_seeds, guide_lambda, guide_seeds = settings.num_seeds, settings.guide_lambda, settings.guide_seeds
    seed_statistic, per_instance_adversary = settings.seed_statistic, settings.per_instance_adversary
    adversary_k, adversary_steps = settings.adversary_k, settings.adversary_steps
    adversary_eps, adversary_lambda = settings.adversary_eps, settings.adversary_lambda
    adversary_protocol, adversary_max_epochs = settings.adversary_protocol, settings.adversary_max_epochs
    lambdas = sorted({float(x) for x in settings.lambdas})
    if not os.path.exists(os.path.join(model_dir, "run.json")):
        raise FileNotFoundError(f"{model_dir} has no run.json: the wp battery needs a folder written by "
                                "`hf-attn train` (it retrains the same setup with other seeds/attention)")
    wall_start = time.perf_counter()
    runs_dir = settings.runs_dir or os.path.join(output_dir, "models")
    os.makedirs(output_dir, exist_ok=True)
    base_settings = settings_from_run(model_dir)
    task = task or task_of(base_settings)
    if task.num_labels != 2:
        raise ValueError("the wp battery reports positive-class F1 (W&P): binary tasks only")
    helper = base_settings if settings.epochs is None else replace(base_settings, epochs=settings.epochs)
    tag = wpt.protocol_tag(adversary_protocol, adversary_max_epochs)
    protocol = wpt.adversary_protocol(adversary_protocol, max_epochs=adversary_max_epochs)

    # ---- training (resumable, one at a time) ----
    guide_seed_list = [None, *range(base_settings.seed + 1, base_settings.seed + guide_seeds)]
    plan = _helper_plan(model_dir, runs_dir, settings, base_settings, helper, task, guide_seed_list[1:], tag)
    todo, train_seconds = _train_missing(plan, settings.train_missing, progress)

    # ---- analysis on the split ----
    analysis_start = time.perf_counter()
    base_model, tokenizer = wpt.load_model(model_dir)
    encoded = tokenize_splits(task, tokenizer, base_settings.max_length)[split]
    labels = np.asarray(encoded["label"])
    label_names = list(task.label_names)
    base_att_list, base_probs = wpt.model_outputs(base_model, encoded)
    base_att, mask = ragged_to_padded(base_att_list)
    base_metrics = classification_metrics(base_probs, labels)

    def outputs_of(path):
        _check_vocab(path, tokenizer)
        model, _ = wpt.load_model(path)
        att, probs = wpt.model_outputs(model, encoded)
        return ragged_to_padded(att)[0], probs

    # 1. uniform baseline
    uni_att, uni_probs = outputs_of(os.path.join(runs_dir, "uniform"))
    uni_metrics = classification_metrics(uni_probs, labels)
    uniform = {"split": split, "base": _f1s(base_metrics), "uniform": _f1s(uni_metrics),
               "f1_gap": base_metrics["f1"] - uni_metrics["f1"],
               "macro_f1_gap": base_metrics["macro_f1"] - uni_metrics["macro_f1"],
               "note": "W&P §3.2/Table 2: a small gap makes the dataset no test of attention (SST: borderline)"}
    uniform_point = divergence_summary(jsd(torch.from_numpy(uni_att), torch.from_numpy(base_att),
                                           torch.from_numpy(mask)).numpy(),
                                       tvd(torch.from_numpy(uni_probs), torch.from_numpy(base_probs)).numpy())

    # 2. seed variance
    seeds = list(range(base_settings.seed + 1, base_settings.seed + 1 + num_seeds))
    seed_outputs = [outputs_of(wpt.seed_run_dir(runs_dir, s)) for s in
                    tqdm(seeds, desc="seed models", disable=not progress, leave=False)]
    stats = seed_variance_statistics(base_att, np.stack([a for a, _ in seed_outputs]), base_probs,
                                     np.stack([p for _, p in seed_outputs]), mask)
    seed_values = stats[f"{seed_statistic}_jsd"]
    seed_points = [dict(seed=s, **divergence_summary(stats["jsd"][i], stats["tvd"][i]),
                        **_f1s(classification_metrics(seed_outputs[i][1], labels)))
                   for i, s in enumerate(seeds)]
    seed_section = {
        "seeds": seeds, "statistic": seed_statistic, "per_seed": seed_points,
        "summary": {"mean_max_jsd": float(stats["max_jsd"].mean()),
                    "mean_median_jsd": float(stats["median_jsd"].mean()),
                    "mean_max_tvd": float(stats["max_tvd"].mean()),
                    "mean_median_tvd": float(stats["median_tvd"].mean()),
                    "f1_mean": float(np.mean([p["f1"] for p in seed_points])),
                    "f1_std": float(np.std([p["f1"] for p in seed_points]))},
        "by_class_and_max_attention": binned_summary(seed_values, stats["max_attention"], labels,
                                                     label_names=label_names)}

    # J&W per-instance adversary on the same axes
    jw_section, jw_point, adversary_values = None, None, None
    if per_instance_adversary:
        eps_jsd, eps_tvd = _per_instance_adversary(base_model, encoded, adversary_k, adversary_steps,
                                                   adversary_eps, adversary_lambda, seed, 256, progress)
        adversary_values = eps_jsd
        jw_point = divergence_summary(eps_jsd, eps_tvd)
        jw_section = {"available": True, "k": adversary_k, "steps": adversary_steps,
                      "eps": adversary_eps, "lambda": adversary_lambda,
                      "fraction_with_feasible_adversary": float((eps_jsd > 0).mean()),
                      **jw_point,
                      "by_class_and_max_attention": binned_summary(eps_jsd, stats["max_attention"], labels,
                                                                   label_names=label_names)}

    # 4. model-consistent adversary sweep
    lambda_rows = []
    for lam in sorted(set(lambdas) | {guide_lambda}):
        path = wpt.adversary_run_dir(runs_dir, lam, tag=tag)
        att, probs = outputs_of(path)
        with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
            trained_as = json.load(f)
        j = jsd(torch.from_numpy(att), torch.from_numpy(base_att), torch.from_numpy(mask)).numpy()
        t = tvd(torch.from_numpy(probs), torch.from_numpy(base_probs)).numpy()
        _, _, kl = wpt.consistent_adversary_loss(torch.from_numpy(probs), torch.from_numpy(base_probs),
                                                 torch.from_numpy(att), torch.from_numpy(base_att),
                                                 torch.from_numpy(mask), lam)
        lambda_rows.append({"lambda": lam, "in_sweep": lam in lambdas,
                            **_f1s(classification_metrics(probs, labels)),
                            **divergence_summary(j, t), "mean_kl": float(kl.mean()),
                            "epochs_trained": trained_as.get("epochs_trained"),
                            "train_seconds": trained_as.get("train_seconds")})

    # 3. diagnostic MLP (test F1 as trained: the guide is needed at test time)
    mlp = {}
    for guide in wpt.GUIDES:
        with open(os.path.join(wpt.guide_run_dir(runs_dir, guide, tag=tag), "metrics.json"), encoding="utf-8") as f:
            m = json.load(f)
        mlp[guide] = {"test_f1": m["test_f1"], "test_macro_f1": m["test_macro_f1"],
                      "test_accuracy": m["test_accuracy"],
                      "published_sst_f1": wpt.WP_TABLE3_SST[guide] if base_settings.dataset == "sst" else None}
    if guide_seeds > 1:  # ADVERSARY guide: mean over the guide adversary's seeds
        runs = []
        for s in guide_seed_list:
            with open(os.path.join(wpt.guide_run_dir(runs_dir, "adversary", s, tag), "metrics.json"), encoding="utf-8") as f:
                m = json.load(f)
            with open(os.path.join(wpt.adversary_run_dir(runs_dir, guide_lambda, s, tag), "metrics.json"),
                      encoding="utf-8") as f:
                a = json.load(f)
            runs.append({"seed": base_settings.seed if s is None else s, "test_f1": m["test_f1"],
                         "test_macro_f1": m["test_macro_f1"], "test_accuracy": m["test_accuracy"],
                         "adversary_mean_jsd_to_base": a["mean_jsd_to_base"],
                         "adversary_mean_kl_to_base": a["mean_kl_to_base"],
                         "adversary_mean_tvd_to_base": a["mean_tvd_to_base"]})
        f1s = np.array([r["test_f1"] for r in runs])
        mlp["adversary"].update({"test_f1": float(f1s.mean()), "test_f1_std": float(f1s.std()),
                                 "test_macro_f1": float(np.mean([r["test_macro_f1"] for r in runs])),
                                 "test_accuracy": float(np.mean([r["test_accuracy"] for r in runs])),
                                 "seed_runs": runs})
    mlp_section = {"guides": mlp, "adversary_lambda": guide_lambda, "adversary_seeds": guide_seeds,
                   "split": "test",
                   "ordering": ordering_holds({g: v["test_f1"] for g, v in mlp.items()}),
                   "published_table3": "W&P Table 3 (SST): uniform 0.812, trained 0.817, base 0.824, "
                                       "adversary 0.592"}

    # figures
    figures = {"seed_variance": "seed_variance.png", "tradeoff": "tradeoff.png",
               "diagnostic_mlp": "diagnostic_mlp.png"}
    plot_seed_variance(os.path.join(output_dir, figures["seed_variance"]), seed_values, adversary_values,
                       stats["max_attention"], labels, label_names, statistic=seed_statistic,
                       num_seeds=num_seeds)
    plot_tradeoff(os.path.join(output_dir, figures["tradeoff"]), [r for r in lambda_rows if r["in_sweep"]],
                  seed_points, uniform_point, jw_point)
    plot_diagnostic_mlp(os.path.join(output_dir, figures["diagnostic_mlp"]),
                        {g: v["test_f1"] for g, v in mlp.items()},
                        wpt.WP_TABLE3_SST if base_settings.dataset == "sst" else None)
    analysis_seconds = time.perf_counter() - analysis_start

    helper_train_seconds = {}
    for _, path, _ in plan:
        with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
            helper_train_seconds[os.path.relpath(path, runs_dir)] = json.load(f).get("train_seconds")
    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation",
        "model_dir": os.path.abspath(model_dir), "runs_dir": os.path.abspath(runs_dir), "split": split,
        "num_instances": int(len(labels)), "label_names": label_names,
        "base": _f1s(base_metrics) | {"roc_auc": base_metrics["roc_auc"]},
        "uniform_baseline": uniform, "seed_variance": seed_section, "per_instance_adversary": jw_section,
        "consistent_adversary": {"lambdas": lambdas, "guide_lambda": guide_lambda, "rows": lambda_rows,
                                 "protocol": protocol,
                                 "objective": ("L = TVD − λ·KL" if protocol["tvd_scale"] == 1.0 else
                                               f"L = {protocol['tvd_scale']:g}·TVD − λ·KL")
                                              + (", class-weighted (W&P's batch-level weights)"
                                                 if protocol["class_weighted"] else ""),
                                 "selection": ("epoch with the lowest training objective, early stopping after "
                                               f"{protocol['patience']} epochs without a decrease, at most "
                                               f"{protocol['max_epochs']} epochs (W&P's code)"
                                               if protocol["selection"] == "train_objective"
                                               else "checkpoint with the lowest dev objective")},
        "diagnostic_mlp": mlp_section,
        "tradeoff_points": {"uniform": uniform_point, "seeds": seed_points, "jw_per_instance": jw_point,
                            "consistent_adversary": lambda_rows},
        "figures": figures,
        "timing": {"training_seconds_this_run": round(train_seconds, 1),
                   "models_trained_this_run": len(todo),
                   "helper_train_seconds": helper_train_seconds,
                   "helper_train_seconds_total": round(sum(v or 0 for v in helper_train_seconds.values()), 1),
                   "analysis_seconds": round(analysis_seconds, 1),
                   "wall_seconds": round(time.perf_counter() - wall_start, 1)},
        "options": {"num_seeds": num_seeds, "guide_seeds": guide_seeds, "seed_statistic": seed_statistic,
                    "epochs": helper.epochs,
                    "adversary_k": adversary_k, "adversary_steps": adversary_steps, "seed": seed,
                    "adversary_protocol": adversary_protocol, "adversary_max_epochs": adversary_max_epochs},
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    return results


def _f1s(metrics: dict) -> dict:
    return {"f1": metrics["f1"], "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"]}


def _relative(path: str, start: str) -> str:
    """A path as written into results.json: relative to the output folder (no machine paths)."""
    if not os.path.exists(path):  # a Hub id
        return path
    return os.path.relpath(os.path.abspath(path), os.path.abspath(start))


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
    os.makedirs(output_dir, exist_ok=True)
    runs_dir = settings.runs_dir or os.path.join(output_dir, "models")
    spec = settings.spec
    timing = {}

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
    seed_dirs = list(settings.seed_model_dirs) or find_seed_model_dirs(runs_dir, settings.num_seeds)
    figures = {}
    if seed_dirs:
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
    else:
        seed_section = {"run": False, "status": SEED_STATUS_NOT_RUN,
                        "how": "fine-tune the base with other seeds (hf-attn train --base-model ... --seed S) and "
                               "pass the folders as seed_model_dirs, or put them in the runs folder as seed-S"}
        seed_points = []
    timing["seed_variance_seconds"] = round(time.perf_counter() - started, 1)

    # 3. §3.4 diagnostic MLP
    started = time.perf_counter()
    if settings.diagnostic_mlp:
        if task is None:
            raise ValueError("the diagnostic MLP needs the task's train/validation/test splits (task=...)")
        model_label = _relative(model_dir, output_dir)
        mlp_section = diagnostic_mlp_section(adapter, task, settings, runs_dir, max_length, model_label)
        figures["diagnostic_mlp"] = "diagnostic_mlp.png"
        plot_transformer_diagnostic_mlp(os.path.join(output_dir, figures["diagnostic_mlp"]), mlp_section)
    else:
        mlp_section = {"run": False, "status": "not run: diagnostic_mlp=False"}
    timing["diagnostic_mlp_seconds"] = round(time.perf_counter() - started, 1)

    figures["uniform_attention"] = "uniform_attention.png"
    tvds = {name: tvd(torch.from_numpy(base[name]), torch.from_numpy(base["probabilities"])).numpy()
            for name in uniform["variants"]}
    plot_uniform(os.path.join(output_dir, figures["uniform_attention"]), uniform | {"_tvd": tvds},
                 f"W&P §3.2 on {model.config.model_type} ({spec.describe()}): uniform attention")
    timing["wall_seconds"] = round(time.perf_counter() - wall, 1)

    content_counts = base["content"].sum(1)
    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation (§3.2–3.4, on a transformer)",
        "model_dir": _relative(model_dir, output_dir), "runs_dir": _relative(runs_dir, output_dir),
        "dataset": dataset if not os.path.exists(str(dataset)) else _relative(dataset, output_dir),
        "split": settings.split, "num_instances": int(len(labels)), "label_names": label_names,
        "model": {"encoder": "transformer", "architecture": type(model).__name__,
                  "model_type": model.config.model_type, "num_layers": adapter.num_layers,
                  "num_heads": adapter.num_heads, "attention": spec.describe(),
                  "base_model": run["settings"]["base_model"] if run else None, "max_length": max_length},
        "attention_spec": {"layer": settings.layer, "heads": settings.heads, "query": adapter.query_rule,
                           "units": "word pieces; divergences over the content pieces ([CLS]/[SEP]/[UNK]/pads "
                                    "excluded), the explained row renormalised there",
                           "mean_content_pieces": float(content_counts.mean())},
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


register_battery(Battery("wp", settings_class=WPSettings, add_options=add_options,
                         settings_from_args=settings_from_args, run=run))
