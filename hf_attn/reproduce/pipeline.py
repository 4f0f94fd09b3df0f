"""Training and analysing everything of a reproduction: :func:`reproduce` (the entry point) and
:func:`run_dataset`, one function per stage (models, jw, jw_more, snli, wp, jw_seeds, ts_grid, eraser,
ts, ts_layers, faithfulness, bert_family), each timed by :class:`StageClock` and resumable (a finished run or analysis is reused:
see ``_done``).

Runs are shared between batteries where the settings coincide (they live in ``OUT/runs/<dataset>``,
see layout.py):

* the J&W BiLSTM **is** the W&P base model (BiLSTM H = 128, additive, GloVe-6B-50d, seed 0);
  W&P's uniform, seed, adversary and diagnostic-MLP helpers are trained against it;
* the J&W Average model **is** W&P's TRAINED-MLP guide (per-token affine + tanh, its own additive
  attention, as in the J&W code's Average encoder);
* the T&Š grid cannot share them: T&Š put every variant on equal footing with H = d/2 (2H = d is
  required by residual / tying / MLM; with GloVe-50d that is H = 25), so its base model is a
  different (smaller) BiLSTM than the J&W one (H = 128). The ERASER table reuses the T&Š base /
  tying / MLM seed-0 models (the question: is attention a worse explanation than gradients?).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property

from hf_attn.reproduce.collect import read_json, seed_model_dirs
from hf_attn.reproduce.layout import ReproductionLayout
from hf_attn.reproduce.machine import machine_info
from hf_attn.reproduce.plan import (DATASETS, STAGE_TITLES, ReproducePlan, dataset_source, layer_counts,
                                         snli_folder, stage_estimates)
from hf_attn.reporting.report import write_report


# ------------------------------------------------------------------------------------------------
# resumability, machine, wall time

def _done(path: str, request: dict) -> bool:
    """An analysis folder is finished when its results.json exists and it was made with ``request``."""
    marker = os.path.join(path, "reproduce-request.json")
    return (os.path.exists(os.path.join(path, "results.json")) and os.path.exists(marker)
            and read_json(marker) == json.loads(json.dumps(request)))


def _mark(path: str, request: dict) -> None:
    from hf_attn.core.io import write_json_atomic

    write_json_atomic(os.path.join(path, "reproduce-request.json"), request)


class StageClock:
    """Wall time per stage, persisted in ``OUT/stages.json`` (atomic) so a resumed run keeps the
    times of the invocation that did the work, with an estimate printed before each stage."""

    def __init__(self, output_dir: str, progress: bool = True, path: str | None = None, lane: int = 1):
        from hf_attn.core.io import write_json_atomic

        self._write = write_json_atomic
        self.path = path or ReproductionLayout(output_dir).stages_json
        self.lane = lane  # 2: the second process of jobs=2 (its stages overlap the others)
        self.record = read_json(self.path) if os.path.exists(self.path) else {"stages": {}}
        self.progress = progress
        self.scale = 1.0  # measured / estimated, updated after each stage that did work

    def merge(self, other_path: str) -> None:
        """Take the stages another process recorded in ``other_path`` (the second lane of ``jobs=2``)."""
        if os.path.exists(other_path):
            self.record["stages"].update(read_json(other_path)["stages"])
            self._write(self.path, self.record)

    def run(self, key: str, title: str, estimate: float, fn):
        if self.progress:
            print(f"[reproduce] {key}: {title} — estimate ~{self.scale * estimate / 60:.1f} min "
                  f"(2 idle cores; load now {os.getloadavg()[0]:.1f})", flush=True)
        start = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - start
        entry = self.record["stages"].get(key, {})
        entry.update(title=title, seconds_this_invocation=round(seconds, 1), estimate_seconds=round(estimate))
        if self.lane != 1:
            entry["lane"] = self.lane
        # the invocation that did the work is the slowest one (reruns only reload finished runs)
        entry["seconds"] = round(max(seconds, entry.get("seconds", 0.0)), 1)
        self.record["stages"][key] = entry
        self._write(self.path, self.record)
        if seconds > 0.2 * estimate and estimate > 0:
            self.scale = 0.5 * self.scale + 0.5 * seconds / estimate
        if self.progress:
            print(f"[reproduce] {key}: done in {seconds / 60:.1f} min", flush=True)
        return value


# ------------------------------------------------------------------------------------------------
# battery settings: the batteries' typed settings, built from the plan (every other field keeps the
# battery's default, which is the paper's)

def _jw_battery_settings(plan: ReproducePlan, progress: bool, max_instances: int | None):
    """J&W battery settings (J&W's settings; only the permutations, steps and instances vary)."""
    from hf_attn.batteries.jw.battery import JWRunSettings, JWSettings

    return JWRunSettings(split="test", progress=progress, max_instances=max_instances,
                         algorithm=JWSettings(num_permutations=plan.jw_permutations, steps=plan.jw_steps, seed=0))


def _ts_battery_settings(plan: ReproducePlan, want_mi: bool, adversary: bool = True):
    """T&Š battery settings for one grid run: MI only where ``want_mi``; without ``adversary`` (the
    multi-layer grid, fragility only) no J&W adversary either."""
    from hf_attn.batteries.ts.battery import TSSettings

    return TSSettings(split="test", seed=0, progress=False, permutation_draws=plan.ts_permutation_draws,
                      mi=want_mi, mi_split="train", mi_words=plan.mi_words, mi_clusters=plan.mi_clusters,
                      mi_max_occurrences=plan.mi_max_occurrences, adversary=adversary,
                      adversary_limit=plan.ts_adversary_limit if adversary else 0)


def _request_of(settings) -> dict:
    """What a finished analysis was made with (progress bars excluded): its ``reproduce-request.json``."""
    return {k: v for k, v in asdict(settings).items() if k != "progress"}


def _run_jw_battery(model_dir: str, out: str, settings, **recorded) -> None:
    """The J&W battery on ``model_dir`` into ``out`` unless it is already there with these settings."""
    from hf_attn.runs import run_battery

    request = {"model": model_dir, **recorded, **_request_of(settings)}
    if not _done(out, request):
        run_battery("jw", model_dir, out, settings, claim_folder=False)
        _mark(out, request)


def _regulariser_of(model_dir: str) -> dict:
    """The tying δ / MLM η a regularised grid run was trained with ({} for the other variants): part of its
    analyses' requests, so a cell retrained with another value is analysed again."""
    from hf_attn.runs.grid import REGULARISER

    trained = read_json(os.path.join(model_dir, "run.json"))["settings"]
    setting = REGULARISER.get(trained.get("variant"))
    return {setting: trained.get(setting)} if setting else {}


def _run_ts_battery(model_dir: str, out: str, settings) -> None:
    """The T&Š battery on one grid run unless it is already there with these settings."""
    from hf_attn.runs import run_battery

    request = {"model": model_dir, **_regulariser_of(model_dir), **_request_of(settings)}
    if not _done(out, request):
        run_battery("ts", model_dir, out, settings, claim_folder=False)
        _mark(out, request)


# ------------------------------------------------------------------------------------------------
# SNLI (J&W's NLI rows; part of the SST pipeline when the offline copy exists)

def train_and_analyse_snli(snli_dir: str, model_dir: str, out: str, plan: ReproducePlan,
                           progress: bool = True, seed: int = 0) -> dict:
    """One SNLI pair run: a BiLSTM + additive pair model (the J&W BiLSTM's settings, ``seed``) trained on
    the first ``plan.snli_train_pairs`` train pairs (dev: the first ``plan.snli_dev_pairs`` of the carved-out
    dev split) and the J&W pair battery on the first ``plan.snli_jw_instances`` test pairs. Resumable; a
    finished model trained on another number of pairs is refused (its folder belongs to another plan)."""
    from datasets import DatasetDict

    from hf_attn.data.tasks import TaskData, load_snli
    from hf_attn.training.engine import TrainSettings, train

    if os.path.exists(os.path.join(model_dir, "metrics.json")):
        trained = (read_json(os.path.join(model_dir, "run.json")).get("split_sizes") or {}).get("train")
        # the plan's pairs, or every train pair left after the dev split when there are fewer
        fewer = trained is not None and trained < plan.snli_train_pairs
        if trained is not None and trained != plan.snli_train_pairs and not (
                fewer and trained == len(load_snli(snli_dir).splits["train"])):
            raise ValueError(f"{model_dir} holds an SNLI model trained on {trained} pairs, this plan asks for "
                             f"{plan.snli_train_pairs}: move it away or use another --output-dir")
    else:
        full = load_snli(snli_dir)
        sp = full.splits
        subset = TaskData(DatasetDict({
            "train": sp["train"].select(range(min(plan.snli_train_pairs, len(sp["train"])))),
            "validation": sp["validation"].select(range(min(plan.snli_dev_pairs, len(sp["validation"])))),
            "test": sp["test"]}), full.label_names, full.name)
        settings = TrainSettings(dataset="snli", data_path=snli_dir, epochs=plan.snli_epochs, seed=seed)
        train(settings, model_dir, task=subset, progress=False)
    settings = _jw_battery_settings(plan, progress, plan.snli_jw_instances)
    _run_jw_battery(model_dir, out, settings, train_pairs=plan.snli_train_pairs, epochs=plan.snli_epochs)
    return read_json(os.path.join(out, "results.json"))


# ------------------------------------------------------------------------------------------------
# the pipeline for one dataset: one function per stage

@dataclass
class DatasetRun:
    """What every stage of one dataset needs: the plan adapted to the dataset, its folders, the
    training settings and the (lazily loaded, shared) task data."""

    dataset: str
    plan: ReproducePlan
    paths: dict
    data_name: str  # TrainSettings.dataset: the name, or the --quick subset folder
    data_path: str | None
    progress: bool = True
    _task: object = field(default=None, repr=False)

    def task(self):
        """The dataset's splits, loaded once and only when a stage has to train."""
        from hf_attn.data.tasks import load_task

        if self._task is None:
            self._task = load_task(self.data_name, data_path=self.data_path)
        return self._task

    @cached_property
    def base_settings(self):
        """The J&W BiLSTM's training settings (every J&W / W&P model starts from them)."""
        from hf_attn.training.engine import TrainSettings

        return TrainSettings(dataset=self.data_name, data_path=self.data_path, epochs=self.plan.epochs, seed=0)

    @cached_property
    def grid_settings(self):
        """T&Š grid: the plan's one δ / η where it lists one, else the grid's defaults (δ = 10, η = 1;
        hf_attn.runs.grid docstring), replaced per cell by the model selection (:attr:`grid`)."""
        from hf_attn.runs.grid import DEFAULT_MLM_WEIGHT, DEFAULT_TYING_DELTA

        deltas, weights = self.plan.ts_tying_deltas, self.plan.ts_mlm_weights
        return replace(self.base_settings, tying_delta=deltas[0] if len(deltas) == 1 else DEFAULT_TYING_DELTA,
                       mlm_weight=weights[0] if len(weights) == 1 else DEFAULT_MLM_WEIGHT)

    @property
    def selection_runs(self) -> list:
        """T&Š's model selection runs (none for a regulariser the plan gives one value)."""
        from hf_attn.runs.grid import selection_runs

        plan = self.plan
        deltas = plan.ts_tying_deltas if len(plan.ts_tying_deltas) > 1 else ()
        weights = plan.ts_mlm_weights if len(plan.ts_mlm_weights) > 1 else ()
        runs = selection_runs(self.grid_settings, plan.ts_attentions, deltas, weights)
        return [(r, s) for r, s in runs if s.variant in plan.ts_variants]

    @property
    def grid(self) -> list:
        """``[(relative run folder, settings)]`` of the T&Š grid, each regularised cell with the value the
        model selection chose (``ts_select`` stage; before it, or without it, the grid's settings)."""
        from hf_attn.runs.grid import grid_runs, read_selection, with_selection

        plan = self.plan
        runs = grid_runs(self.grid_settings, plan.ts_variants, plan.ts_attentions, plan.ts_seeds)
        return with_selection(runs, read_selection(self.paths["ts_select"]))


def _stage_models(run: DatasetRun) -> None:
    """The J&W BiLSTM (= W&P base) and the J&W Average (= W&P TRAINED-MLP guide)."""
    from hf_attn.training import wp as wpt
    from hf_attn.training.engine import train

    base_dir, average_dir = run.paths["base"], run.paths["average"]
    need = [p for p in (base_dir, average_dir) if not os.path.exists(os.path.join(p, "metrics.json"))]
    t = run.task() if need else None
    train(run.base_settings, base_dir, task=t, progress=False)
    wpt.train_guided_mlp(base_dir, average_dir, "trained", task=t, progress=False)


def _stage_jw(run: DatasetRun) -> None:
    """The J&W battery on the BiLSTM and on the Average model."""
    for model_dir, out in ((run.paths["base"], run.paths["jw_lstm"]), (run.paths["average"], run.paths["jw_average"])):
        _run_jw_battery(model_dir, out, _jw_battery_settings(run.plan, run.progress, run.plan.jw_max_instances))


def _stage_jw_more(run: DatasetRun) -> None:
    """J&W Table 2's other encoder (CNN) and §4's dot attention, each with the BiLSTM's settings (the
    Average encoder with the J&W Average model's)."""
    from hf_attn.training.engine import train
    from hf_attn.training.wp import mlp_settings

    kinds = {name: (enc, att) for name, enc, att in run.plan.jw_extra_models}
    for name, (model_dir, out) in run.paths["jw_extra"].items():
        enc, att = kinds[name]
        if not os.path.exists(os.path.join(model_dir, "metrics.json")):
            # the Average encoder as J&W's (per-token affine + tanh: the W&P TRAINED-MLP guide's settings)
            settings = (replace(mlp_settings(run.base_settings), attention=att) if enc == "average"
                        else replace(run.base_settings, encoder=enc, attention=att))
            train(settings, model_dir, task=run.task(), progress=False)
        _run_jw_battery(model_dir, out, _jw_battery_settings(run.plan, run.progress, run.plan.jw_max_instances))


def _stage_snli(run: DatasetRun) -> None:
    """The SNLI pair models (seed 0, then the seed models) and their J&W pair battery (only called when the
    offline copy exists)."""
    folder = snli_folder(run.plan)
    train_and_analyse_snli(folder, run.paths["snli_model"], run.paths["jw_snli"], run.plan, run.progress)
    for seed in range(1, run.plan.snli_seeds):
        train_and_analyse_snli(folder, os.path.join(run.paths["snli_seeds"], f"seed-{seed}"),
                               os.path.join(run.paths["jw_snli_seeds"], f"seed-{seed}"), run.plan, run.progress,
                               seed=seed)


def _stage_qa(run: DatasetRun) -> None:
    """J&W's QA rows on bAbI tasks 1–3 (generated data): the pair model with J&W's bAbI settings (50-d
    embeddings trained from scratch, H = 30, batch 50) and its J&W battery (ε = 0.05 on QA)."""
    from hf_attn.training.engine import TrainSettings, train

    plan = run.plan
    for task, (model_dir, out) in run.paths["qa"].items():
        if not os.path.exists(os.path.join(model_dir, "metrics.json")):
            train(TrainSettings(dataset=task, embeddings="random", embedding_dim=50, hidden_size=30, batch_size=50,
                                epochs=plan.qa_epochs, seed=0), model_dir, progress=False)
        _run_jw_battery(model_dir, out, _jw_battery_settings(plan, run.progress, plan.qa_jw_instances))


def _stage_wp(run: DatasetRun) -> None:
    """The W&P battery: uniform, seed models, λ sweep of consistent adversaries, guided MLPs."""
    from hf_attn.batteries.wp.battery import WPSettings
    from hf_attn.runs.wp import run_wp

    plan, base_dir, wp_runs, out = run.plan, run.paths["base"], run.paths["wp_runs"], run.paths["wp"]
    settings = WPSettings(runs_dir=wp_runs, num_seeds=plan.wp_seeds, lambdas=tuple(plan.wp_lambdas),
                          guide_lambda=plan.wp_guide_lambda, adversary_steps=plan.wp_adversary_steps,
                          guide_seeds=plan.wp_guide_seeds, progress=run.progress,
                          adversary_protocol=plan.wp_adversary_protocol,
                          adversary_max_epochs=plan.wp_adversary_max_epochs)
    request = {"model": base_dir, **_request_of(settings)}
    if not _done(out, request):
        run_wp(base_dir, out, settings)
        _mark(out, request)


def _stage_jw_seeds(run: DatasetRun) -> None:
    """The same J&W battery on the W&P seed models (differing from the base only in seed): the seed
    spread of every J&W number, which the J&W verdicts take their tolerances from."""
    for name, model_dir in seed_model_dirs(run.paths["wp_runs"]):
        _run_jw_battery(model_dir, os.path.join(run.paths["jw_seeds"], name),
                        _jw_battery_settings(run.plan, run.progress, run.plan.jw_max_instances))


def _train_grid(runs: list, folder: str, run: DatasetRun, what: str) -> None:
    """Train the missing runs of a T&Š grid (loading the data only if one is missing)."""
    from hf_attn.runs.grid import train_grid

    missing = [r for r, _ in runs if not os.path.exists(os.path.join(folder, r, "metrics.json"))]
    summary = train_grid(runs, folder, task=run.task() if missing else None, progress=run.progress)
    failed = [r for r in summary["runs"] if r["status"] == "failed"]
    if failed:
        raise RuntimeError(f"{what} failed: {[(r['dir'], r['error']) for r in failed]}")


def _stage_ts_select(run: DatasetRun) -> None:
    """T&Š's model selection: tying for every δ, MLM for every η (seed 0, per attention), the best dev F1
    per cell (``OUT/runs/<dataset>/ts-select/selection.json``, read by :attr:`DatasetRun.grid`)."""
    from hf_attn.runs.grid import select_regularisers

    runs = run.selection_runs
    if runs:
        missing = [r for r, _ in runs if not os.path.exists(os.path.join(run.paths["ts_select"], r, "metrics.json"))]
        select_regularisers(runs, run.paths["ts_select"], task=run.task() if missing else None,
                            progress=run.progress)


def _stale_regularised_cells(run: DatasetRun) -> list[str]:
    """Grid cells trained earlier with another δ / η than the model selection chose: a cell's grid runs, its
    T&Š analyses, its ERASER table and its Fig. 1 adversaries were all made from those models."""
    from hf_attn.runs.grid import REGULARISER
    from hf_attn.runs.ts import ADVERSARY_ROOTS

    stale = {}
    for relative, settings in run.grid:
        run_json = os.path.join(run.paths["grid"], relative, "run.json")
        setting = REGULARISER.get(settings.variant)
        if setting and os.path.exists(run_json):
            trained = read_json(run_json)["settings"].get(setting)
            if trained != getattr(settings, setting):
                stale[relative.split(os.sep)[0]] = (setting, trained, getattr(settings, setting))
    folders = []
    for cell in stale:
        folders += [os.path.join(run.paths["grid"], cell), os.path.join(run.paths["ts"], cell),
                    *([run.paths["eraser"][cell]] if cell in run.paths["eraser"] else []),
                    *[os.path.join(run.paths["ts"], root, f"{cell}-seed0") for root in ADVERSARY_ROOTS.values()]]
    return [f for f in folders if os.path.exists(f)] if stale else []


def _stage_ts_grid(run: DatasetRun) -> None:
    """The T&Š variant grid (variants × attentions × seeds); refused, naming what to remove, when a cell was
    trained earlier with another δ / η than the model selection chose."""
    stale = _stale_regularised_cells(run)
    if stale:
        raise ValueError("the T&Š model selection chose another tying δ / MLM η than these folders were made with; "
                         "remove them and rerun to retrain and reanalyse those cells: " + ", ".join(stale))
    _train_grid(run.grid, run.paths["grid"], run, "T&Š grid runs")


def _stage_eraser(run: DatasetRun) -> None:
    """ERASER / integrated gradients on the grid's seed-0 models of ``plan.eraser_cells``."""
    from hf_attn.runs.eraser import run_eraser

    for cell, out in run.paths["eraser"].items():
        model_dir = os.path.join(run.paths["grid"], cell, "seed0")
        if os.path.exists(os.path.join(model_dir, "metrics.json")):
            run_eraser(model_dir, out, ig_steps=run.plan.eraser_ig_steps,
                       max_instances=run.plan.eraser_max_instances, progress=False)


def _stage_ts(run: DatasetRun) -> None:
    """The T&Š battery on every grid run (MI on the MI seeds), then T&Š Fig. 1's adversaries."""
    from tqdm.auto import tqdm

    from hf_attn.runs.ts import summarize_grid, train_consistent_adversaries

    plan, grid_dir, out_dir = run.plan, run.paths["grid"], run.paths["ts"]
    for relative, settings in tqdm(run.grid, desc="T&Š battery", unit="run", disable=not run.progress):
        want_mi = (settings.variant in plan.mi_variants and settings.seed in plan.mi_seeds
                   and settings.attention == "additive")
        _run_ts_battery(os.path.join(grid_dir, relative), os.path.join(out_dir, relative),
                        _ts_battery_settings(plan, want_mi))
    summarize_grid(grid_dir, out_dir)  # the tables exist even if the adversaries below are cut short
    # T&Š Fig. 1 with T&Š's own objective (Eq. 6: L = TVD − λ·JSD), not W&P's TVD − λ·KL
    train_consistent_adversaries(grid_dir, out_dir, plan.ts_fig1_cells, plan.ts_fig1_lambdas,
                                 seed=0, progress=False, divergence="jsd")
    summarize_grid(grid_dir, out_dir)


def _stage_ts_layers(run: DatasetRun) -> None:
    """T&Š appendix B, Table 6: the same grid with each of ``plan.ts_multilayer_layers`` LSTM depths;
    fragility only."""
    from tqdm.auto import tqdm

    from hf_attn.runs.ts import summarize_grid
    from hf_attn.runs.grid import grid_runs, read_selection, with_selection

    plan = run.plan
    for layers in layer_counts(plan):
        grid_dir, out_dir = run.paths["ts_layers_grid"][layers], run.paths["ts_layers"][layers]
        layered = with_selection(grid_runs(replace(run.grid_settings, num_layers=layers),
                                           plan.ts_multilayer_variants, ("additive",), plan.ts_multilayer_seeds),
                                 read_selection(run.paths["ts_select"]))
        _train_grid(layered, grid_dir, run, f"T&Š {layers}-layer runs")
        for relative, _ in tqdm(layered, desc=f"T&Š battery ({layers} layers)", unit="run",
                                disable=not run.progress):
            _run_ts_battery(os.path.join(grid_dir, relative), os.path.join(out_dir, relative),
                            _ts_battery_settings(plan, want_mi=False, adversary=False))
        summarize_grid(grid_dir, out_dir)


def _bert_family_texts(run: DatasetRun, n: int):
    """``n`` test sentences drawn without replacement by a seeded generator (seed 0; kept in file
    order), their labels and the label names (the BERT-family section's data). Not the first ``n``:
    SST's test file is ordered, and its first 500 sentences are 93 % positive."""
    import numpy as np

    task = run.task()
    test = task.splits["test"]
    n = min(n, len(test))
    rows = sorted(int(i) for i in np.random.default_rng(0).choice(len(test), size=n, replace=False))
    texts, labels = test["text"], test["label"]
    return [texts[i] for i in rows], [int(labels[i]) for i in rows], list(task.label_names), task


def _stage_bert_family(run: DatasetRun) -> None:
    """--bert-family: fine-tune the BERT-family classifier on the dataset (unless it is
    already there, or ``plan.bert_family.model_dir`` names a folder to reuse), the J&W battery on its
    ``[CLS]`` attention over ``jw_instances`` seeded-sampled test sentences, and W&P's uniform attention on
    the same sentences when hf_attn has the W&P transformer battery."""
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.runs.jw import jw_battery_runner
    from hf_attn.training.transformer import read_transformer_run, train_transformer_classifier

    plan, section = run.plan, run.plan.bert_family
    model_dir = run.paths["bert_model"]
    if section.model_dir:
        if not os.path.isfile(os.path.join(model_dir, "config.json")):
            raise FileNotFoundError(f"--bert-model-dir {model_dir!r} is not a model folder (no config.json)")
    elif read_transformer_run(model_dir) is None:
        train_transformer_classifier(section.base_model, run.task(), model_dir, epochs=section.epochs,
                                     seed=section.seed, progress=run.progress)
    settings = JWSettings(layer=section.layer, heads=section.heads, num_permutations=plan.jw_permutations,
                          steps=plan.jw_steps, seed=0)
    request = {"model": model_dir, "instances": section.jw_instances, **asdict(settings)}
    out = run.paths["jw_bert"]
    if not _done(out, request):
        texts, labels, names, _ = _bert_family_texts(run, section.jw_instances)
        jw_battery_runner(model_dir, out, texts=texts, labels=labels, settings=settings,
                          dataset=run.dataset, split="test", max_instances=len(texts),
                          label_names=names, progress=run.progress)
        _mark(out, request)
    if section.wp_uniform:
        _bert_family_wp_uniform(run, model_dir)
    if section.faithfulness_instances:
        _run_faithfulness_table(run, model_dir, run.paths["faith_bert"],
                                min(section.faithfulness_instances, section.jw_instances))


def _run_faithfulness_table(run: DatasetRun, model_dir: str, out: str, instances: int) -> None:
    """The faithfulness table (:func:`hf_attn.batteries.faithfulness.run_faithfulness`, the methods of
    ``plan.faithfulness_methods``) of ``model_dir`` on ``instances`` seeded-sampled test sentences
    (the rule of :func:`_bert_family_texts`; the same sentences for the same count) into ``out`` (results.json, attributions.npz, faithfulness.md, faithfulness.png),
    unless it is already there with this request."""
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness
    from hf_attn.explainer import Explainer

    settings = FaithfulnessSettings(methods=tuple(run.plan.faithfulness_methods), ig_steps=run.plan.faithfulness_ig_steps)
    request = {"model": model_dir, "instances": instances, "sample": "seeded test sample (seed 0)",
               **asdict(settings)}
    if _done(out, request):
        return
    texts, _, _, _ = _bert_family_texts(run, instances)
    explainer = Explainer.from_pretrained(model_dir)
    result = run_faithfulness(explainer.adapter, texts, settings, progress=False)
    result.model |= {"model_dir": model_dir, "dataset": run.dataset, "split": "test"}
    result.save(out)
    result.plot(os.path.join(out, "faithfulness.png"))
    _mark(out, request)


def _stage_faithfulness(run: DatasetRun) -> None:
    """The faithfulness table of the J&W BiLSTM (the W&P base) on ``plan.faithfulness_instances``
    seeded-sampled test sentences (the BERT-family model's table is part of its own stage)."""
    _run_faithfulness_table(run, run.paths["base"], run.paths["faith_lstm"], run.plan.faithfulness_instances)


def _bert_family_wp_uniform(run: DatasetRun, model_dir: str) -> None:
    """W&P §3.2 on the BERT-family model (its explained [CLS] row made uniform at test time) on the
    J&W battery's sentences; no seed models, MLPs or per-instance adversary (the J&W battery runs it)."""
    from hf_attn.batteries.wp.battery import WPSettings
    from hf_attn.runs.wp import run_wp

    section = run.plan.bert_family
    out = run.paths["wp_bert"]
    settings = WPSettings(transformer_layer=section.layer, transformer_heads=str(section.heads),
                          max_instances=section.jw_instances, diagnostic_mlp=False, num_seeds=0,
                          per_instance_adversary=False, progress=run.progress,
                          runs_dir=os.path.join(run.paths["runs"], "bert-family-wp"))
    request = {"model": model_dir, **_request_of(settings)}
    if not _done(out, request):
        texts, labels, names, task = _bert_family_texts(run, section.jw_instances)
        run_wp(model_dir, out, settings, texts=texts, labels=labels, task=task, label_names=names)
        _mark(out, request)


# (stage key, function, whether it runs for this dataset), in the order they run. ERASER comes before
# the T&Š battery: it only needs the grid's seed-0 models.
STAGES = (
    ("models", _stage_models, lambda run: True),
    ("jw", _stage_jw, lambda run: True),
    ("jw_more", _stage_jw_more, lambda run: True),
    # part of the SST pipeline (J&W's NLI rows); skipped, and said so in the report, without the data
    ("snli", _stage_snli, lambda run: run.dataset == "sst" and bool(snli_folder(run.plan))),
    ("qa", _stage_qa, lambda run: run.dataset == "sst" and bool(run.plan.qa_tasks)),
    ("wp", _stage_wp, lambda run: True),
    ("jw_seeds", _stage_jw_seeds, lambda run: True),
    ("ts_select", _stage_ts_select, lambda run: bool(run.selection_runs)),
    ("ts_grid", _stage_ts_grid, lambda run: True),
    ("eraser", _stage_eraser, lambda run: True),
    ("ts", _stage_ts, lambda run: True),
    ("ts_layers", _stage_ts_layers, lambda run: bool(run.plan.ts_multilayer_seeds) and run.dataset == "sst"),
    # attribution methods × faithfulness metrics on the J&W BiLSTM (SST)
    ("faithfulness", _stage_faithfulness, lambda run: bool(run.plan.faithfulness_instances) and run.dataset == "sst"),
    # opt-in (--bert-family): MiniLM's fine-tuning alone takes ~7 min on one thread
    ("bert_family", _stage_bert_family, lambda run: run.plan.bert_family is not None and run.dataset == "sst"),
)


# With two jobs, the W&P chain (its helper trainings are the longest stage) runs in a second process
# beside the T&Š chain: they share only the base models trained by the first stages.
SECOND_LANE = ("wp", "jw_seeds")
FIRST_STAGES = ("models",)


def _dataset_run(dataset: str, output_dir: str, plan: ReproducePlan, agnews_path: str | None,
                 progress: bool) -> DatasetRun:
    plan = plan.for_dataset(dataset)
    name, data_path = dataset_source(dataset, output_dir, plan, agnews_path)
    return DatasetRun(dataset, plan, ReproductionLayout(output_dir).dataset_paths(dataset, plan), name, data_path,
                      progress)


def _run_stages(run: DatasetRun, clock: StageClock, keys) -> None:
    estimates = stage_estimates(run.plan)
    for key, stage, wanted in STAGES:
        if key in keys and wanted(run):
            clock.run(f"{run.dataset}/{key}", STAGE_TITLES[key], estimates[key], lambda stage=stage: stage(run))


def _second_lane(dataset: str, output_dir: str, plan: ReproducePlan, agnews_path: str | None, progress: bool,
                 clock_path: str) -> None:
    """Entry point of the second process (``jobs=2``): the :data:`SECOND_LANE` stages, one torch thread."""
    import torch

    torch.set_num_threads(1)
    run = _dataset_run(dataset, output_dir, plan, agnews_path, progress)
    _run_stages(run, StageClock(output_dir, progress, path=clock_path, lane=2), SECOND_LANE)


def run_dataset(dataset: str, output_dir: str, plan: ReproducePlan, clock: StageClock,
                agnews_path: str | None = None, progress: bool = True, jobs: int = 1) -> dict:
    """Train and analyse everything for one dataset (the :data:`STAGES` in order, each timed by
    ``clock``); returns the paths of every result (``ReproductionLayout.dataset_paths``).

    ``jobs=2``: after :data:`FIRST_STAGES`, the :data:`SECOND_LANE` stages run in a second process
    (spawned, one torch thread) while this one runs the others; same results, about half the wall
    time on two idle cores. Each lane records its stage times; they are merged afterwards."""
    run = _dataset_run(dataset, output_dir, plan, agnews_path, progress)
    keys = [key for key, _, _ in STAGES]
    if jobs < 2:
        _run_stages(run, clock, keys)
        return run.paths
    import multiprocessing

    _run_stages(run, clock, FIRST_STAGES)
    lane_clock = os.path.join(output_dir, f"stages-{dataset}-lane2.json")
    process = multiprocessing.get_context("spawn").Process(
        target=_second_lane, args=(dataset, output_dir, plan, agnews_path, progress, lane_clock),
        name=f"reproduce-{dataset}-wp")
    process.start()
    try:
        _run_stages(run, clock, [k for k in keys if k not in FIRST_STAGES and k not in SECOND_LANE])
    finally:
        process.join()
    clock.merge(lane_clock)
    if process.exitcode != 0:
        raise RuntimeError(f"the W&P lane of {dataset} failed (exit code {process.exitcode}); rerun to resume it")
    return run.paths


# ------------------------------------------------------------------------------------------------
# entry point

def reproduce(datasets, output_dir: str, quick: bool | list = False, seeds: int | None = None,
              wp_seeds: int | None = None, agnews_path: str | None = None, progress: bool = True,
              report_only: bool = False, threads: int | None = None, jobs: int = 1,
              bert_family: bool = False, bert_model_dir: str | None = None, bert_instances: int | None = None,
              bert_base_model: str | None = None, full_corpora: bool = False) -> dict:
    """Train (resumably), analyse and report; returns the report dict (also OUT/report.json).
    ``bert_family``: also the opt-in BERT-family section on SST (:class:`BertFamilyPlan`: MiniLM, or
    ``bert_base_model``, fine-tuned — or the folder ``bert_model_dir`` reused — and the J&W battery on
    the first ``bert_instances`` test sentences).
    ``threads``: torch intra-op threads (1 is much faster on a CPU shared with other busy
    processes: two spinning OpenMP threads on two busy cores slowed training 4-10× here).
    ``jobs``: 2 runs the W&P chain in a second process beside the rest (see :func:`run_dataset`).
    ``full_corpora``: every corpus whole (IMDB's plan otherwise trains on a seeded subset:
    :data:`~hf_attn.reproduce.plan.CORPUS_PLANS`). ``quick``: True (every corpus) or a list of the
    corpora that run the --quick smoke-test plan (the others the full one)."""
    if jobs not in (1, 2):
        raise ValueError(f"jobs must be 1 or 2, got {jobs}")
    if jobs == 2:
        threads = 1  # two processes on two cores: one torch thread each (more would oversubscribe)
    if threads:  # an int or "auto" (hf_attn.core.threads); None leaves torch's setting
        from hf_attn.core.threads import apply_threads

        apply_threads(threads)
    datasets = list(dict.fromkeys(datasets))
    bad = [d for d in datasets if d not in DATASETS]
    if bad:
        raise ValueError(f"unknown dataset(s) {bad}; choose from {DATASETS}")
    quick_datasets = tuple(quick) if isinstance(quick, (list, tuple)) else ()
    bad = [d for d in quick_datasets if d not in datasets]
    if bad:
        raise ValueError(f"--quick {' '.join(bad)}: not among --datasets {' '.join(datasets)}")
    everything_quick = bool(quick) and (not quick_datasets or set(quick_datasets) == set(datasets))
    plan = replace(ReproducePlan.for_mode(everything_quick, seeds, wp_seeds), full_corpora=full_corpora,
                   quick_datasets=() if everything_quick else quick_datasets)
    if bert_family or bert_model_dir:
        plan = plan.with_bert_family(bert_model_dir, bert_instances, bert_base_model)
    layout = ReproductionLayout(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    started = time.perf_counter()
    machine_start = machine_info()
    if report_only and os.path.exists(layout.report_json):  # the machine when the work was done, not now
        machine_start = read_json(layout.report_json).get("machine_start") or machine_start
    clock = StageClock(output_dir, progress)
    if progress:
        total = sum(sum(stage_estimates(plan.for_dataset(d)).values()) for d in datasets)
        print(f"[reproduce] {', '.join(datasets)} → {output_dir}; estimate ~{total / 60:.0f} min on 2 idle cores "
              f"for SST-sized data (load average now {machine_start['load_average_1_5_15'][0]}); finished runs "
              "are reused", flush=True)
    all_paths = {}
    for ds in datasets:
        if report_only:  # the same folders, without training
            all_paths[ds] = layout.dataset_paths(ds, plan.for_dataset(ds))
        else:
            all_paths[ds] = run_dataset(ds, output_dir, plan, clock, agnews_path, progress, jobs)
    report = write_report(output_dir, datasets, plan, all_paths, started, machine_start)
    if progress:
        print(f"[reproduce] wrote {layout.report_md} ({len(report['findings'])} findings) in "
              f"{(time.perf_counter() - started) / 60:.1f} min", flush=True)
    return report
