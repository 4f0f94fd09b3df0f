"""The W&P battery on the papers' models: the helper models trained into the runs folder (uniform
twin, seed models, consistent adversaries, guided MLPs; resumable, one at a time), then the four
analyses on the base's outputs, ``results.json`` and the figures."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.wp.battery import (WPSettings, binned_summary, divergence_summary, ordering_holds,
                                          plot_diagnostic_mlp, plot_seed_variance, plot_tradeoff,
                                          seed_variance_statistics)
from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.environment import environment_versions
from hf_attn.core.io import write_json_atomic
from hf_attn.core.measures import jsd, tvd
from hf_attn.data.datasets import TaskData
from hf_attn.training import wp as wpt
from hf_attn.training.engine import classification_metrics, settings_from_run, task_of, tokenize_splits, train

# The battery's log: its records keep the name of the module that registers it.
logger = logging.getLogger("hf_attn.runs.wp")


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


@dataclass
class _BaseOutputs:
    """The base model on the analysed split: its encoded instances, gold labels, attention (padded,
    with its mask), probabilities and metrics; :meth:`outputs_of` runs a helper model on the same
    instances (same vocabulary required)."""

    model: torch.nn.Module
    tokenizer: object
    encoded: object
    labels: np.ndarray
    label_names: list
    attention: np.ndarray
    mask: np.ndarray
    probabilities: np.ndarray
    metrics: dict

    def outputs_of(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        _check_vocab(path, self.tokenizer)
        model, _ = wpt.load_model(path)
        att, probs = wpt.model_outputs(model, self.encoded)
        return ragged_to_padded(att)[0], probs


def _base_outputs(model_dir: str, task: TaskData, split: str, max_length: int) -> _BaseOutputs:
    model, tokenizer = wpt.load_model(model_dir)
    encoded = tokenize_splits(task, tokenizer, max_length)[split]
    labels = np.asarray(encoded["label"])
    att_list, probs = wpt.model_outputs(model, encoded)
    att, mask = ragged_to_padded(att_list)
    return _BaseOutputs(model, tokenizer, encoded, labels, list(task.label_names), att, mask, probs,
                        classification_metrics(probs, labels))


def _uniform_baseline(base: _BaseOutputs, runs_dir: str, split: str) -> tuple[dict, dict]:
    """W&P §3.2: the frozen-uniform twin's F1 against the base's, and its divergence point."""
    uni_att, uni_probs = base.outputs_of(os.path.join(runs_dir, "uniform"))
    uni_metrics = classification_metrics(uni_probs, base.labels)
    uniform = {"split": split, "base": _f1s(base.metrics), "uniform": _f1s(uni_metrics),
               "f1_gap": base.metrics["f1"] - uni_metrics["f1"],
               "macro_f1_gap": base.metrics["macro_f1"] - uni_metrics["macro_f1"],
               "note": "W&P §3.2/Table 2: a small gap makes the dataset no test of attention (SST: borderline)"}
    point = divergence_summary(jsd(torch.from_numpy(uni_att), torch.from_numpy(base.attention),
                                   torch.from_numpy(base.mask)).numpy(),
                               tvd(torch.from_numpy(uni_probs), torch.from_numpy(base.probabilities)).numpy())
    return uniform, point


def _seed_variance(base: _BaseOutputs, runs_dir: str, seeds: list[int], statistic: str, progress: bool
                   ) -> tuple[dict, list[dict], dict]:
    """W&P §3.3: the attention of models trained with other seeds against the base's; returns the
    section, one point per seed and the per-instance statistics (``stats``)."""
    seed_outputs = [base.outputs_of(wpt.seed_run_dir(runs_dir, s)) for s in
                    tqdm(seeds, desc="seed models", disable=not progress, leave=False)]
    stats = seed_variance_statistics(base.attention, np.stack([a for a, _ in seed_outputs]), base.probabilities,
                                     np.stack([p for _, p in seed_outputs]), base.mask)
    seed_points = [dict(seed=s, **divergence_summary(stats["jsd"][i], stats["tvd"][i]),
                        **_f1s(classification_metrics(seed_outputs[i][1], base.labels)))
                   for i, s in enumerate(seeds)]
    section = {
        "seeds": seeds, "statistic": statistic, "per_seed": seed_points,
        "summary": {"mean_max_jsd": float(stats["max_jsd"].mean()),
                    "mean_median_jsd": float(stats["median_jsd"].mean()),
                    "mean_max_tvd": float(stats["max_tvd"].mean()),
                    "mean_median_tvd": float(stats["median_tvd"].mean()),
                    "f1_mean": float(np.mean([p["f1"] for p in seed_points])),
                    "f1_std": float(np.std([p["f1"] for p in seed_points]))},
        "by_class_and_max_attention": binned_summary(stats[f"{statistic}_jsd"], stats["max_attention"], base.labels,
                                                     label_names=base.label_names)}
    return section, seed_points, stats


def _jw_adversary(base: _BaseOutputs, settings: WPSettings, max_attention: np.ndarray
                  ) -> tuple[dict | None, dict | None, np.ndarray | None]:
    """J&W's per-instance adversary on the same axes: ``(section, divergence point, ε-max JSD per
    instance)``, all None when it is skipped."""
    if not settings.per_instance_adversary:
        return None, None, None
    eps_jsd, eps_tvd = _per_instance_adversary(base.model, base.encoded, settings.adversary_k,
                                               settings.adversary_steps, settings.adversary_eps,
                                               settings.adversary_lambda, settings.seed, 256, settings.progress)
    point = divergence_summary(eps_jsd, eps_tvd)
    section = {"available": True, "k": settings.adversary_k, "steps": settings.adversary_steps,
               "eps": settings.adversary_eps, "lambda": settings.adversary_lambda,
               "fraction_with_feasible_adversary": float((eps_jsd > 0).mean()),
               **point,
               "by_class_and_max_attention": binned_summary(eps_jsd, max_attention, base.labels,
                                                            label_names=base.label_names)}
    return section, point, eps_jsd


def _read_metrics(path: str) -> dict:
    with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
        return json.load(f)


def _consistent_adversary_rows(base: _BaseOutputs, runs_dir: str, lambdas: list[float], guide_lambda: float,
                               tag: str) -> list[dict]:
    """W&P §4: every model-consistent adversary of the sweep (and the guide's λ) against the base."""
    rows = []
    for lam in sorted(set(lambdas) | {guide_lambda}):
        path = wpt.adversary_run_dir(runs_dir, lam, tag=tag)
        att, probs = base.outputs_of(path)
        trained_as = _read_metrics(path)
        j = jsd(torch.from_numpy(att), torch.from_numpy(base.attention), torch.from_numpy(base.mask)).numpy()
        t = tvd(torch.from_numpy(probs), torch.from_numpy(base.probabilities)).numpy()
        _, _, kl = wpt.consistent_adversary_loss(torch.from_numpy(probs), torch.from_numpy(base.probabilities),
                                                 torch.from_numpy(att), torch.from_numpy(base.attention),
                                                 torch.from_numpy(base.mask), lam)
        rows.append({"lambda": lam, "in_sweep": lam in lambdas,
                     **_f1s(classification_metrics(probs, base.labels)),
                     **divergence_summary(j, t), "mean_kl": float(kl.mean()),
                     "epochs_trained": trained_as.get("epochs_trained"),
                     "train_seconds": trained_as.get("train_seconds")})
    return rows


def _adversary_guide_seed_runs(runs_dir: str, guide_lambda: float, guide_seed_list: list, base_seed: int,
                               tag: str) -> list[dict]:
    """The ADVERSARY-guided MLP of every seed of the guide adversary, with that adversary's divergences."""
    runs = []
    for s in guide_seed_list:
        m = _read_metrics(wpt.guide_run_dir(runs_dir, "adversary", s, tag))
        a = _read_metrics(wpt.adversary_run_dir(runs_dir, guide_lambda, s, tag))
        runs.append({"seed": base_seed if s is None else s, "test_f1": m["test_f1"],
                     "test_macro_f1": m["test_macro_f1"], "test_accuracy": m["test_accuracy"],
                     "adversary_mean_jsd_to_base": a["mean_jsd_to_base"],
                     "adversary_mean_kl_to_base": a["mean_kl_to_base"],
                     "adversary_mean_tvd_to_base": a["mean_tvd_to_base"]})
    return runs


def _diagnostic_mlp(runs_dir: str, settings: WPSettings, dataset: str, guide_seed_list: list, base_seed: int,
                    tag: str) -> dict:
    """W&P §3.4 / Table 3: the test F1 of the MLP guided by each attention (as trained: the guide is
    needed at test time); with several guide seeds the ADVERSARY guide's is their mean."""
    mlp = {}
    for guide in wpt.GUIDES:
        m = _read_metrics(wpt.guide_run_dir(runs_dir, guide, tag=tag))
        mlp[guide] = {"test_f1": m["test_f1"], "test_macro_f1": m["test_macro_f1"],
                      "test_accuracy": m["test_accuracy"],
                      "published_sst_f1": wpt.WP_TABLE3_SST[guide] if dataset == "sst" else None}
    if settings.guide_seeds > 1:  # ADVERSARY guide: mean over the guide adversary's seeds
        runs = _adversary_guide_seed_runs(runs_dir, settings.guide_lambda, guide_seed_list, base_seed, tag)
        f1s = np.array([r["test_f1"] for r in runs])
        mlp["adversary"].update({"test_f1": float(f1s.mean()), "test_f1_std": float(f1s.std()),
                                 "test_macro_f1": float(np.mean([r["test_macro_f1"] for r in runs])),
                                 "test_accuracy": float(np.mean([r["test_accuracy"] for r in runs])),
                                 "seed_runs": runs})
    return {"guides": mlp, "adversary_lambda": settings.guide_lambda, "adversary_seeds": settings.guide_seeds,
            "split": "test",
            "ordering": ordering_holds({g: v["test_f1"] for g, v in mlp.items()}),
            "published_table3": "W&P Table 3 (SST): uniform 0.812, trained 0.817, base 0.824, "
                                "adversary 0.592"}


def _plot_figures(output_dir: str, seed_values, adversary_values, stats: dict, base: _BaseOutputs,
                  settings: WPSettings, lambda_rows: list[dict], seed_points: list[dict], uniform_point: dict,
                  jw_point: dict | None, mlp: dict, dataset: str) -> dict:
    """The battery's three figures in ``output_dir``; returns their file names."""
    figures = {"seed_variance": "seed_variance.png", "tradeoff": "tradeoff.png",
               "diagnostic_mlp": "diagnostic_mlp.png"}
    plot_seed_variance(os.path.join(output_dir, figures["seed_variance"]), seed_values, adversary_values,
                       stats["max_attention"], base.labels, base.label_names, statistic=settings.seed_statistic,
                       num_seeds=settings.num_seeds)
    plot_tradeoff(os.path.join(output_dir, figures["tradeoff"]), [r for r in lambda_rows if r["in_sweep"]],
                  seed_points, uniform_point, jw_point)
    plot_diagnostic_mlp(os.path.join(output_dir, figures["diagnostic_mlp"]),
                        {g: v["test_f1"] for g, v in mlp.items()},
                        wpt.WP_TABLE3_SST if dataset == "sst" else None)
    return figures


def _consistent_adversary_block(lambdas: list[float], guide_lambda: float, rows: list[dict], protocol: dict) -> dict:
    """results.json's ``consistent_adversary``: the sweep's rows with the objective and checkpoint
    selection of the protocol that trained them."""
    return {"lambdas": lambdas, "guide_lambda": guide_lambda, "rows": rows,
            "protocol": protocol,
            "objective": ("L = TVD − λ·KL" if protocol["tvd_scale"] == 1.0 else
                          f"L = {protocol['tvd_scale']:g}·TVD − λ·KL")
                         + (", class-weighted (W&P's batch-level weights)"
                            if protocol["class_weighted"] else ""),
            "selection": ("epoch with the lowest training objective, early stopping after "
                          f"{protocol['patience']} epochs without a decrease, at most "
                          f"{protocol['max_epochs']} epochs (W&P's code)"
                          if protocol["selection"] == "train_objective"
                          else "checkpoint with the lowest dev objective")}


def _timing(plan: list[tuple], runs_dir: str, todo: list, train_seconds: float, analysis_seconds: float,
            wall_start: float) -> dict:
    """results.json's ``timing``: this run's training and analysis, and every helper model's training."""
    helper_train_seconds = {os.path.relpath(path, runs_dir): _read_metrics(path).get("train_seconds")
                            for _, path, _ in plan}
    return {"training_seconds_this_run": round(train_seconds, 1),
            "models_trained_this_run": len(todo),
            "helper_train_seconds": helper_train_seconds,
            "helper_train_seconds_total": round(sum(v or 0 for v in helper_train_seconds.values()), 1),
            "analysis_seconds": round(analysis_seconds, 1),
            "wall_seconds": round(time.perf_counter() - wall_start, 1)}


def run_wp(model_dir: str, output_dir: str, settings: WPSettings | None = None,
           task: TaskData | None = None, **overrides) -> dict:
    """The whole W&P battery on the base model in ``model_dir`` (see the module docstring).
    ``settings`` (:class:`WPSettings`; None: its defaults) with keyword ``overrides`` of single fields
    (``run_wp(DIR, OUT, num_seeds=2)``). Helper models live in ``settings.runs_dir`` (default
    ``output_dir/models``); missing ones are trained (``train_missing``) one after another, finished
    ones reused. ``epochs`` overrides the base's epoch count for every helper model (default: the
    base's). ``task``: the base's task when already loaded. Returns the results dict.

    The steps: the helper models' training (:func:`_helper_plan`, :func:`_train_missing`), then the
    four W&P analyses over the same base outputs (:func:`_uniform_baseline` §3.2, :func:`_seed_variance`
    §3.3 with J&W's adversary on its axes, :func:`_consistent_adversary_rows` §4, :func:`_diagnostic_mlp`
    §3.4) and the figures.

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
    tag = wpt.protocol_tag(settings.adversary_protocol, settings.adversary_max_epochs)
    protocol = wpt.adversary_protocol(settings.adversary_protocol, max_epochs=settings.adversary_max_epochs)

    # training (resumable, one at a time)
    guide_seed_list = [None, *range(base_settings.seed + 1, base_settings.seed + settings.guide_seeds)]
    plan = _helper_plan(model_dir, runs_dir, settings, base_settings, helper, task, guide_seed_list[1:], tag)
    todo, train_seconds = _train_missing(plan, settings.train_missing, settings.progress)

    # the analyses on the split: §3.2, §3.3 (with J&W's adversary on its axes), §4, §3.4
    analysis_start = time.perf_counter()
    base = _base_outputs(model_dir, task, settings.split, base_settings.max_length)
    uniform, uniform_point = _uniform_baseline(base, runs_dir, settings.split)
    seeds = list(range(base_settings.seed + 1, base_settings.seed + 1 + settings.num_seeds))
    seed_section, seed_points, stats = _seed_variance(base, runs_dir, seeds, settings.seed_statistic,
                                                      settings.progress)
    jw_section, jw_point, adversary_values = _jw_adversary(base, settings, stats["max_attention"])
    lambda_rows = _consistent_adversary_rows(base, runs_dir, lambdas, settings.guide_lambda, tag)
    mlp_section = _diagnostic_mlp(runs_dir, settings, base_settings.dataset, guide_seed_list, base_settings.seed,
                                  tag)
    figures = _plot_figures(output_dir, stats[f"{settings.seed_statistic}_jsd"], adversary_values, stats, base,
                            settings, lambda_rows, seed_points, uniform_point, jw_point, mlp_section["guides"],
                            base_settings.dataset)
    analysis_seconds = time.perf_counter() - analysis_start

    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation",
        "model_dir": os.path.abspath(model_dir), "runs_dir": os.path.abspath(runs_dir), "split": settings.split,
        "num_instances": int(len(base.labels)), "label_names": base.label_names,
        "base": _f1s(base.metrics) | {"roc_auc": base.metrics["roc_auc"]},
        "uniform_baseline": uniform, "seed_variance": seed_section, "per_instance_adversary": jw_section,
        "consistent_adversary": _consistent_adversary_block(lambdas, settings.guide_lambda, lambda_rows, protocol),
        "diagnostic_mlp": mlp_section,
        "tradeoff_points": {"uniform": uniform_point, "seeds": seed_points, "jw_per_instance": jw_point,
                            "consistent_adversary": lambda_rows},
        "figures": figures,
        "timing": _timing(plan, runs_dir, todo, train_seconds, analysis_seconds, wall_start),
        "options": {"num_seeds": settings.num_seeds, "guide_seeds": settings.guide_seeds,
                    "seed_statistic": settings.seed_statistic, "epochs": helper.epochs,
                    "adversary_k": settings.adversary_k, "adversary_steps": settings.adversary_steps,
                    "seed": settings.seed, "adversary_protocol": settings.adversary_protocol,
                    "adversary_max_epochs": settings.adversary_max_epochs},
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    return results


def _f1s(metrics: dict) -> dict:
    return {"f1": metrics["f1"], "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"]}
