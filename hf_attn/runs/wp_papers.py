"""The other models the W&P battery compares a papers' model with (:class:`PapersModels`, used by
:func:`hf_attn.runs.wp.run_wp`): the helper models trained into the runs folder — the frozen-uniform
twin (§3.2), the seed models (§3.3), the model-consistent adversaries (§4) and the guided MLPs
(§3.4); resumable, one at a time — read back through their adapters."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.wp.battery import WPSettings, divergence_summary, ordering_holds, plot_diagnostic_mlp
from hf_attn.core.measures import jsd, tvd
from hf_attn.data.tasks import TaskData
from hf_attn.training import wp as wpt
from hf_attn.training.engine import classification_metrics, settings_from_run, task_of, tokenize_splits, train

# The battery's log: its records keep the name of the module that registers it.
logger = logging.getLogger("hf_attn.runs.wp")


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


def _read_metrics(path: str) -> dict:
    with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
        return json.load(f)


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


def _f1s(metrics: dict) -> dict:
    return {"f1": metrics["f1"], "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"]}


def _refuse_transformer_options(settings: WPSettings, given_data: bool) -> None:
    """The options that apply to transformers classifiers only, refused with the reason when set for a
    papers' model (its data is its run.json's; its helper models are trained here)."""
    defaults = WPSettings()
    reasons = {"transformer_layer": "it has one attention layer", "transformer_heads": "it has one attention head",
               "seed_model_dirs": "its seed models are trained here (num_seeds)",
               "max_instances": "it is analysed on its whole split", "dataset": "its data is its run.json's",
               "text_column": "its data is its run.json's", "label_column": "its data is its run.json's",
               "diagnostic_mlp": "its guided MLPs are part of the battery", "mlp_guides": "W&P's four guides are trained",
               "mlp_freeze_embeddings": "its MLPs train their embeddings, as W&P's"}
    for name, reason in reasons.items():
        if getattr(settings, name) != getattr(defaults, name):
            raise ValueError(f"{name}={getattr(settings, name)!r} applies to transformers classifiers only: for an "
                             f"hf_attn model, {reason}")
    if given_data:
        raise ValueError("texts / labels apply to transformers classifiers only: an hf_attn model is analysed on "
                         "the split of its run.json's dataset")


class PapersModels:
    """A papers' model (a folder written by ``hf-attn train``) and the helper models W&P compare it
    with, trained here from the base's own settings (``settings.epochs`` overrides the epochs)."""

    def __init__(self, model_dir: str, output_dir: str, settings: WPSettings, task: TaskData | None = None,
                 given_data: bool = False):
        from hf_attn.batteries.jw.battery import check_papers_model_device

        check_papers_model_device(settings.device, settings.precision)
        _refuse_transformer_options(settings, given_data)
        if not os.path.exists(os.path.join(model_dir, "run.json")):
            raise FileNotFoundError(f"{model_dir} has no run.json: the wp battery needs a folder written by "
                                    "`hf-attn train` (it retrains the same setup with other seeds/attention)")
        self.model_dir, self.settings = model_dir, settings
        self.cache_dir = os.path.join(output_dir, "cache")  # finished batches of the analyses, for resuming
        self.runs_dir = settings.runs_dir or os.path.join(output_dir, "models")
        self.base_settings = settings_from_run(model_dir)
        self.task = task or task_of(self.base_settings)
        if self.task.num_labels != 2:
            raise ValueError("the wp battery reports positive-class F1 (W&P): binary tasks only")
        self.helper = self.base_settings if settings.epochs is None else replace(self.base_settings,
                                                                                 epochs=settings.epochs)
        self.tag = wpt.protocol_tag(settings.adversary_protocol, settings.adversary_max_epochs)
        self.lambdas = sorted({float(x) for x in settings.lambdas})
        first = self.base_settings.seed
        self.guide_seed_list = [None, *range(first + 1, first + settings.guide_seeds)]
        self.seeds = list(range(first + 1, first + 1 + settings.num_seeds))
        self.plan = _helper_plan(model_dir, self.runs_dir, settings, self.base_settings, self.helper, self.task,
                                 self.guide_seed_list[1:], self.tag)
        self.todo, self.train_seconds = [], 0.0

    def name(self) -> str:
        return f"{self.base_settings.encoder} + {self.base_settings.attention}"

    def adapter_of(self, path: str):
        from hf_attn.adapters import adapter_for

        model, tokenizer = wpt.load_model(path)
        return adapter_for(model, tokenizer)

    def train_missing(self) -> None:
        """Train the helper models that are not there yet (one at a time; resumable)."""
        self.todo, self.train_seconds = _train_missing(self.plan, self.settings.train_missing, self.settings.progress)

    def base(self):
        """The base on the analysed split, tokenized as it was trained (its ``max_length``)."""
        from hf_attn.runs.wp_sections import base_outputs

        adapter = self.adapter_of(self.model_dir)
        encoded = tokenize_splits(self.task, adapter.tokenizer, self.base_settings.max_length)[self.settings.split]
        return base_outputs(adapter, [list(x) for x in encoded["input_ids"]], encoded["label"],
                            self.task.label_names, self.settings.split, self.base_settings.dataset, self.settings,
                            cache_dir=self.cache_dir)

    def _outputs(self, base, path: str) -> dict:
        return base.outputs_of(self.adapter_of(path), self.settings.batch_size)

    def uniform(self, base) -> tuple[dict, dict]:
        """W&P §3.2: the frozen-uniform twin's F1 against the base's, and its divergence point; the
        test-time intervention (the base's α made uniform) beside it."""
        from hf_attn.batteries.wp.transformer import uniform_section

        twin = self._outputs(base, os.path.join(self.runs_dir, "uniform"))
        base_metrics = base.metrics()
        twin_metrics = classification_metrics(twin["probabilities"], base.labels)
        intervention = uniform_section(base.outputs, base.labels, base.split)
        section = {"split": base.split, "base": _f1s(base_metrics), "uniform": _f1s(twin_metrics),
                   "f1_gap": base_metrics["f1"] - twin_metrics["f1"],
                   "macro_f1_gap": base_metrics["macro_f1"] - twin_metrics["macro_f1"],
                   "note": "W&P §3.2/Table 2: a small gap makes the dataset no test of attention (SST: borderline)",
                   "intervention": intervention}
        content = torch.from_numpy(base.content)
        point = divergence_summary(jsd(torch.from_numpy(twin["attention"]), torch.from_numpy(base.attention),
                                       content).numpy(),
                                   tvd(torch.from_numpy(twin["probabilities"]),
                                       torch.from_numpy(base.probabilities)).numpy())
        return section, point

    def seed_models(self) -> list[tuple]:
        return [(s, lambda s=s: self.adapter_of(wpt.seed_run_dir(self.runs_dir, s))) for s in self.seeds]

    def consistent_adversary(self, base) -> tuple[list[dict], dict]:
        """W&P §4: every model-consistent adversary of the sweep (and the guide's λ) against the base."""
        rows = []
        content = torch.from_numpy(base.content)
        base_attention, base_probabilities = torch.from_numpy(base.attention), torch.from_numpy(base.probabilities)
        for lam in sorted(set(self.lambdas) | {self.settings.guide_lambda}):
            path = wpt.adversary_run_dir(self.runs_dir, lam, tag=self.tag)
            out = self._outputs(base, path)
            attention, probabilities = torch.from_numpy(out["attention"]), torch.from_numpy(out["probabilities"])
            trained_as = _read_metrics(path)
            j = jsd(attention, base_attention, content).numpy()
            t = tvd(probabilities, base_probabilities).numpy()
            _, _, kl = wpt.consistent_adversary_loss(probabilities, base_probabilities, attention, base_attention,
                                                     content, lam)
            rows.append({"lambda": lam, "in_sweep": lam in self.lambdas,
                         **_f1s(classification_metrics(out["probabilities"], base.labels)),
                         **divergence_summary(j, t), "mean_kl": float(kl.mean()),
                         "epochs_trained": trained_as.get("epochs_trained"),
                         "train_seconds": trained_as.get("train_seconds")})
        protocol = wpt.adversary_protocol(self.settings.adversary_protocol,
                                          max_epochs=self.settings.adversary_max_epochs)
        return rows, _consistent_adversary_block(self.lambdas, self.settings.guide_lambda, rows, protocol)

    def diagnostic_mlp(self, base) -> dict:
        return _diagnostic_mlp(self.runs_dir, self.settings, self.base_settings.dataset, self.guide_seed_list,
                               self.base_settings.seed, self.tag)

    def plot_mlp(self, path: str, section: dict) -> None:
        plot_diagnostic_mlp(path, {g: v["test_f1"] for g, v in section["guides"].items()},
                            wpt.WP_TABLE3_SST if self.base_settings.dataset == "sst" else None)

    def where(self) -> dict:
        return {"model_dir": os.path.abspath(self.model_dir), "runs_dir": os.path.abspath(self.runs_dir)}

    def description(self, base) -> dict:
        s = self.base_settings
        return {"model": {"encoder": s.encoder, "attention": s.attention, "variant": s.variant}}

    def timing(self, analysis_seconds: float, wall: float) -> dict:
        return _timing(self.plan, self.runs_dir, self.todo, self.train_seconds, analysis_seconds, wall)

    def options(self) -> dict:
        options = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.settings).items()
                   if k not in ("seed_model_dirs", "runs_dir")}
        return options | {"epochs": self.helper.epochs}
