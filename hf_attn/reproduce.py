"""One-command reproduction report: ``hf-attn reproduce --datasets sst --output-dir OUT``.

Trains every model the three batteries need (resumable: a finished run is reused as is, a killed
one resumes from its checkpoint), runs the Jain & Wallace 2019 (``hf_attn.analysis.jw``),
Wiegreffe & Pinter 2019 (``hf_attn.analysis.wp``) and Tutek & Šnajder 2020 (``hf_attn.analysis.ts``
over an ``hf_attn.grid`` variant grid) batteries and the ERASER / integrated-gradients table
(``hf_attn.faithfulness``), and writes

* ``OUT/REPORT.md``: for every published table of SPEC.md the published value beside the measured
  one (mean ± std over seeds where the paper averaged runs), one sentence per finding saying
  whether it reproduced — computed from the numbers by the checks in :func:`findings_for` — the
  embeddings and model sizes beside each table, the machine, versions and wall time per stage;
* ``OUT/report.json``: the same numbers, machine readable;
* ``OUT/figures/``: the batteries' figures, copied.

Runs are shared between batteries where the settings coincide (they live in ``OUT/runs/<dataset>``):

* the J&W BiLSTM **is** the W&P base model (BiLSTM H = 128, additive, GloVe-6B-50d, seed 0);
  W&P's uniform, seed, adversary and diagnostic-MLP helpers are trained against it;
* the J&W Average model **is** W&P's TRAINED-MLP guide (per-token affine + tanh, its own additive
  attention, as in the J&W code's Average encoder);
* the T&Š grid cannot share them: T&Š put every variant on equal footing with H = d/2 (2H = d is
  required by residual / tying / MLM; with GloVe-50d that is H = 25), so its base model is a
  different (smaller) BiLSTM than the J&W one (H = 128). The ERASER table reuses the T&Š base /
  tying / MLM seed-0 models (the question: is attention a worse explanation than gradients?).

Budget (``--datasets sst``, 2 idle cores): ~50 trainings and all analyses in well under an hour with
the defaults below; the expensive T&Š mutual information (k = 1000 MiniBatchKMeans on up to 1M
occurrences) runs on seed 0 only. ``--quick`` trains on small real-SST subsets for one epoch with
short adversary searches: a smoke test of the whole pipeline (numbers are meaningless).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from .threads import threads_argument
from .files import exclusive_output_folder, write_jsonl_atomic, write_text_atomic

logger = logging.getLogger(__name__)

DATASETS = ("sst", "agnews", "imdb")
DEFAULT_AGNEWS_PATH = "/work/shared/data/ag_news/test.csv"

# ------------------------------------------------------------------------------------------------
# published values (SPEC §4–6; the papers' tables). SST values of W&P / T&Š / J&W are the batteries'
# own constants; AG News and IMDB come from J&W Table 1–2 and T&Š Tables 1–3.

JW_PUBLISHED = {
    "sst": {"test_f1": 0.81, "tau_gradient": [0.34, 0.36], "tau_gradient_std": [0.21, 0.21],
            "tau_gradient_sig": [0.48, 0.49], "tau_gradient_average": [0.61, 0.60],
            "tau_gradient_average_sig": [0.87, 0.83], "tau_loo": [0.27, 0.32],
            "tau_loo_sig": [0.33, 0.40]},
    "imdb": {"test_f1": 0.88, "tau_gradient": [0.44, 0.43], "tau_gradient_average": [0.67, 0.68],
             "tau_loo": [0.34, 0.34]},
    "agnews": {"test_f1": 0.96, "tau_gradient": [0.36, 0.42], "tau_gradient_average": [0.78, 0.76],
               "tau_loo": [0.30, 0.43]},
}
JW_GRADIENT_LOO_GAP = (0.20, 0.25)  # J&W §4.1 / appendix C: τ(g, LOO) above τ(α, either)
JW_AVERAGE_LOO_GAIN = 0.375  # J&W §4.1: Average attention vs LOO, above the BiLSTM's

TS_PUBLISHED_EXTRA = {  # T&Š Tables 1–3 (AG = AG News, IM = IMDB); SST is hf_attn.analysis.ts.PUBLISHED_SST
    "agnews": {"fragility": {"base": (95.9, -2.3, -3.9), "concat": (95.9, -1.5, -2.6),
                             "tying": (95.0, -3.3, -14.6), "mlm": (95.2, -1.5, -6.6)},
               "fragility_dot": {"base": (95.9, -2.3, -3.8), "concat": (96.1, -1.9, -3.0),
                                 "tying": (95.4, -3.0, -12.2), "mlm": (95.4, -2.0, -5.3)},
               "mi_MF": {"base": 1.940, "residual": 5.467, "tying": 4.075, "mlm": 3.845},
               "mi_RS": {"base": 2.078, "residual": 4.518, "tying": 4.177, "mlm": 3.980},
               "token_probability": {"base": 0.887, "residual": 0.822, "tying": 0.615, "mlm": 0.695},
               "token_probability_dot": {"base": 0.862, "residual": 0.876, "tying": 0.646, "mlm": 0.698}},
    "imdb": {"fragility": {"base": (88.3, -10.0, -13.4), "concat": (88.3, -10.2, -14.0),
                           "tying": (87.1, -56.2, -43.3), "mlm": (87.5, -22.8, -26.5)},
             "fragility_dot": {"base": (88.2, -18.6, -22.9), "concat": (87.9, -17.2, -20.8),
                               "tying": (87.2, -57.7, -45.3), "mlm": (87.8, -15.3, -18.5)},
             "mi_MF": {"base": 2.455, "residual": 4.998, "tying": 5.186, "mlm": 3.728},
             "mi_RS": {"base": 2.682, "residual": 4.366, "tying": 4.434, "mlm": 3.885},
             "token_probability": {"base": 0.625, "residual": 0.609, "tying": 0.533, "mlm": 0.562},
             "token_probability_dot": {"base": 0.590, "residual": 0.608, "tying": 0.539, "mlm": 0.553}},
}

# Tolerances of the quantitative checks (a value "matches" when within them). The papers used
# 300-d fastText/GloVe-840B; offline we have GloVe-6B-50d, so F1 tolerances are a few points.
TOLERANCE = {"f1": 0.03, "f1_points": 2.5, "tau": 0.10, "mi": 0.75, "token_probability": 0.05,
             "wp_f1": 0.03, "uniform_gap": 0.03}

# The section headers every report has (the test checks them).
TABLE_HEADERS = (
    "J&W Table 1–2: test performance and rank correlations",
    "J&W §4.2: permutation and adversarial attention",
    "W&P §3.2: uniform attention as the adversary",
    "W&P §3.3: variance within a model (random seeds)",
    "W&P Table 3: diagnostic MLP guided by attention",
    "W&P §4: model-consistent adversary",
    "T&Š Table 1: fragility",
    "T&Š Table 2: mutual information",
    "T&Š Table 3: per-token prediction probability",
    "T&Š Fig. 1: adversaries on regularised models",
    "ERASER faithfulness",
    "Findings",
)

VERDICTS = ("reproduced", "qualitatively reproduced", "partly reproduced", "not reproduced",
            "not measured", "new measurement")


# ------------------------------------------------------------------------------------------------
# plan

@dataclass
class ReproducePlan:
    """Everything that sets how much is trained and analysed (recorded in report.json)."""

    quick: bool = False
    epochs: int = 8
    ts_seeds: int = 5  # T&Š averaged 5 runs (--datasets sst from scratch: ~30 min on 2 cores)
    ts_variants: tuple = ("base", "concat", "residual", "tying", "mlm")
    ts_attentions: tuple = ("additive", "dot")
    ts_permutation_draws: int = 10
    ts_adversary_limit: int = 500  # J&W adversary on the first N test instances of every grid run
    ts_fig1_cells: tuple = ("base-additive", "tying-additive", "mlm-additive")
    ts_fig1_lambdas: tuple = (0.001, 0.01)
    mi_seeds: tuple = (0,)  # MI (k = 1000 k-means, twice per method) only on seed 0
    mi_variants: tuple = ("base", "residual", "tying", "mlm")
    mi_words: int = 1000
    mi_clusters: int = 1000
    mi_max_occurrences: int = 1_000_000
    wp_seeds: int = 8
    wp_lambdas: tuple = (0.001, 0.01, 0.1, 1.0, 10.0)
    wp_guide_lambda: float = 0.001
    wp_guide_seeds: int = 3  # the λ = 0.001 adversary is seed-sensitive: mean guided-MLP F1 over 3
    wp_adversary_steps: int = 500
    jw_permutations: int = 100
    jw_steps: int = 500
    jw_max_instances: int | None = None
    eraser_cells: tuple = ("base-additive", "tying-additive", "mlm-additive")
    eraser_ig_steps: int = 50
    eraser_max_instances: int | None = None
    quick_sizes: tuple = (240, 60, 80)  # train / validation / test rows in --quick

    @classmethod
    def for_mode(cls, quick: bool, seeds: int | None = None, wp_seeds: int | None = None) -> "ReproducePlan":
        plan = cls()
        if quick:
            plan = replace(plan, quick=True, epochs=1, ts_seeds=1, ts_attentions=("additive",),
                           ts_adversary_limit=16, ts_fig1_cells=("base-additive", "mlm-additive"),
                           ts_fig1_lambdas=(0.001,), ts_permutation_draws=3, mi_words=40, mi_clusters=8,
                           mi_max_occurrences=2000, wp_seeds=2, wp_lambdas=(0.001, 1.0), wp_guide_seeds=1,
                           wp_adversary_steps=20, jw_permutations=10, jw_steps=20,
                           eraser_cells=("base-additive", "tying-additive"), eraser_ig_steps=4,
                           eraser_max_instances=40)
        if seeds is not None:
            if seeds < 1:
                raise ValueError(f"--seeds must be >= 1, got {seeds}")
            plan = replace(plan, ts_seeds=seeds)
        if wp_seeds is not None:
            if wp_seeds < 1:
                raise ValueError(f"--wp-seeds must be >= 1, got {wp_seeds}")
            plan = replace(plan, wp_seeds=wp_seeds)
        return plan

    def for_dataset(self, dataset: str) -> "ReproducePlan":
        """Long-document datasets get the T&Š cells with published AG/IMDB numbers only."""
        if dataset == "sst" or self.quick:
            return self
        return replace(self, ts_variants=("base", "concat", "tying", "mlm"), ts_attentions=("additive",),
                       eraser_max_instances=self.eraser_max_instances or 500,
                       jw_max_instances=self.jw_max_instances or (500 if dataset == "imdb" else None))


# Rough wall seconds on 2 idle cores for SST (for the per-stage estimate; scaled by what the
# first trainings actually take).
# per-item seconds, calibrated on the from-scratch run of 2026-11-21 (2 idle cores; 19.9 min with 3 seeds)
_SECONDS = {"train_lstm": 30, "train_small_lstm": 16, "train_mlm": 25, "train_average": 10,
            "train_adversary": 20, "jw_lstm": 5, "jw_average": 3, "wp_analysis": 40,
            "ts_run": 2, "ts_mi": 15, "eraser": 6}


def stage_estimates(plan: ReproducePlan) -> dict[str, float]:
    """Estimated wall seconds per stage on 2 idle cores (SST-sized data)."""
    if plan.quick:
        return {"models": 20, "jw": 15, "wp": 60, "ts_grid": 30, "ts": 40, "eraser": 15}
    s = _SECONDS
    cells = len(plan.ts_variants) * len(plan.ts_attentions)
    grid = plan.ts_seeds * sum(s["train_mlm"] if v == "mlm" else s["train_small_lstm"]
                               for v in plan.ts_variants for _ in plan.ts_attentions)
    wp_lambdas = len(set(plan.wp_lambdas) | {plan.wp_guide_lambda})
    wp_train = (s["train_lstm"] * (1 + plan.wp_seeds)
                + s["train_adversary"] * (wp_lambdas + plan.wp_guide_seeds - 1)
                + (2 + plan.wp_guide_seeds) * s["train_average"])
    mi_runs = len(plan.mi_seeds) * len([v for v in plan.mi_variants if v in plan.ts_variants])
    return {"models": s["train_lstm"] + s["train_average"],
            "jw": s["jw_lstm"] + s["jw_average"],
            "wp": wp_train + s["wp_analysis"],
            "ts_grid": grid,
            "ts": cells * plan.ts_seeds * s["ts_run"] + mi_runs * s["ts_mi"]
                  + len(plan.ts_fig1_cells) * len(plan.ts_fig1_lambdas) * s["train_adversary"],
            "eraser": len(plan.eraser_cells) * s["eraser"]}


STAGE_TITLES = {"models": "J&W BiLSTM (= W&P base) and J&W Average (= W&P trained-MLP guide)",
                "jw": "J&W battery on the BiLSTM and the Average model",
                "wp": "W&P battery (uniform, seeds, λ sweep of consistent adversaries, guided MLPs)",
                "ts_grid": "T&Š variant grid training",
                "ts": "T&Š battery on every grid run, MI on seed 0, Fig. 1 adversaries",
                "eraser": "ERASER / integrated gradients on T&Š base / tying / MLM (seed 0)"}


# ------------------------------------------------------------------------------------------------
# data

def dataset_source(dataset: str, output_dir: str, plan: ReproducePlan,
                   agnews_path: str | None = None) -> tuple[str, str | None]:
    """``(TrainSettings.dataset, data_path)`` for one dataset. ``--quick`` writes seeded random
    subsets of the real splits to ``OUT/data/<dataset>-quick/{train,validation,test}.jsonl`` (the
    batteries reload the data from run.json, so the subset has to exist on disk)."""
    from .data import load_task

    data_path = None
    if dataset == "agnews":
        data_path = agnews_path or DEFAULT_AGNEWS_PATH
        if not os.path.exists(data_path):
            raise FileNotFoundError(f"AG News CSV not found at {data_path!r}: pass --agnews-path")
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {DATASETS}")
    if not plan.quick:
        return dataset, data_path
    folder = os.path.join(output_dir, "data", f"{dataset}-quick")
    if not os.path.exists(os.path.join(folder, "test.jsonl")):
        task = load_task(dataset, data_path=data_path)
        rng = np.random.default_rng(0)
        os.makedirs(folder, exist_ok=True)
        for split, n in zip(("train", "validation", "test"), plan.quick_sizes):
            data = task.splits[split]
            rows = np.sort(rng.choice(len(data), min(n, len(data)), replace=False))
            texts, labels = data["text"], data["label"]
            write_jsonl_atomic(os.path.join(folder, f"{split}.jsonl"),
                               ({"text": texts[i], "label": int(labels[i])} for i in rows.tolist()))
    return folder, None


# ------------------------------------------------------------------------------------------------
# small helpers

def _read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _done(path: str, request: dict) -> bool:
    """An analysis folder is finished when its results.json exists and it was made with ``request``."""
    marker = os.path.join(path, "reproduce-request.json")
    return (os.path.exists(os.path.join(path, "results.json")) and os.path.exists(marker)
            and _read_json(marker) == json.loads(json.dumps(request)))


def _mark(path: str, request: dict) -> None:
    from .training import write_json_atomic

    write_json_atomic(os.path.join(path, "reproduce-request.json"), request)


def machine_info() -> dict:
    """CPU model and count, load average, torch threads, versions."""
    import torch

    from .training import environment_versions

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "load_average_1_5_15": [round(x, 2) for x in load],
            "versions": environment_versions()}


class StageClock:
    """Wall time per stage, persisted in ``OUT/stages.json`` (atomic) so a resumed run keeps the
    times of the invocation that did the work, with an estimate printed before each stage."""

    def __init__(self, output_dir: str, progress: bool = True):
        from .training import write_json_atomic

        self._write = write_json_atomic
        self.path = os.path.join(output_dir, "stages.json")
        self.record = _read_json(self.path) if os.path.exists(self.path) else {"stages": {}}
        self.progress = progress
        self.scale = 1.0  # measured / estimated, updated after each stage that did work

    def run(self, key: str, title: str, estimate: float, fn):
        if self.progress:
            print(f"[reproduce] {key}: {title} — estimate ~{self.scale * estimate / 60:.1f} min "
                  f"(2 idle cores; load now {os.getloadavg()[0]:.1f})", flush=True)
        start = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - start
        entry = self.record["stages"].get(key, {})
        entry.update(title=title, seconds_this_invocation=round(seconds, 1), estimate_seconds=round(estimate))
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
# the pipeline for one dataset

def _namespace(**kwargs):
    return argparse.Namespace(**kwargs)


def run_dataset(dataset: str, output_dir: str, plan: ReproducePlan, clock: StageClock,
                agnews_path: str | None = None, progress: bool = True) -> dict:
    """Train and analyse everything for one dataset; returns the paths of every result."""
    from . import wp_training as wpt
    from .data import load_task
    from .grid import DEFAULT_MLM_WEIGHT, DEFAULT_TYING_DELTA, grid_runs, train_grid
    from .training import TrainSettings, train

    plan = plan.for_dataset(dataset)
    name, data_path = dataset_source(dataset, output_dir, plan, agnews_path)
    runs = os.path.join(output_dir, "runs", dataset)
    analysis = os.path.join(output_dir, "analysis", dataset)
    base_dir = os.path.join(runs, "lstm-additive")  # J&W BiLSTM = W&P base
    wp_runs = os.path.join(runs, "wp")
    average_dir = wpt.guide_run_dir(wp_runs, "trained")  # J&W Average = W&P TRAINED-MLP guide
    grid_dir = os.path.join(runs, "ts-grid")
    paths = {"dataset": dataset, "data": name, "runs": runs, "analysis": analysis, "base": base_dir,
             "average": average_dir, "wp_runs": wp_runs, "grid": grid_dir,
             "jw_lstm": os.path.join(analysis, "jw-lstm"), "jw_average": os.path.join(analysis, "jw-average"),
             "wp": os.path.join(analysis, "wp"), "ts": os.path.join(analysis, "ts"),
             "eraser": {c: os.path.join(analysis, "eraser", c) for c in plan.eraser_cells}}
    estimates = stage_estimates(plan)
    task_cache: dict = {}

    def task():
        if "task" not in task_cache:
            task_cache["task"] = load_task(name, data_path=data_path)
        return task_cache["task"]

    base_settings = TrainSettings(dataset=name, data_path=data_path, epochs=plan.epochs, seed=0)
    # T&Š grid: the grid's own regulariser defaults (δ = 10, η = 1; hf_attn.grid docstring)
    grid_settings = replace(base_settings, tying_delta=DEFAULT_TYING_DELTA, mlm_weight=DEFAULT_MLM_WEIGHT)

    def models():
        need = [p for p in (base_dir, average_dir) if not os.path.exists(os.path.join(p, "metrics.json"))]
        t = task() if need else None
        train(base_settings, base_dir, task=t, progress=False)
        wpt.train_guided_mlp(base_dir, average_dir, "trained", task=t, progress=False)

    clock.run(f"{dataset}/models", STAGE_TITLES["models"], estimates["models"], models)

    def jw():
        from .analysis.jw import jw_battery_runner

        for model_dir, out in ((base_dir, paths["jw_lstm"]), (average_dir, paths["jw_average"])):
            options = _namespace(split="test", seed=0, quiet=not progress, jw_permutations=plan.jw_permutations,
                                 jw_adversaries=5, jw_lambda=500.0, jw_eps=0.01, jw_steps=plan.jw_steps,
                                 jw_lr=0.01, jw_token_budget=16384, jw_loo_token_budget=32768,
                                 jw_gradient_token_budget=4096,
                                 jw_max_instances=plan.jw_max_instances, jw_no_cache=False)
            request = {"model": model_dir, **{k: v for k, v in vars(options).items() if k != "quiet"}}
            if not _done(out, request):
                jw_battery_runner(model_dir, out, options)
                _mark(out, request)

    clock.run(f"{dataset}/jw", STAGE_TITLES["jw"], estimates["jw"], jw)

    def wp():
        from .analysis.wp import run_wp

        request = {"model": base_dir, "runs": wp_runs, "seeds": plan.wp_seeds, "lambdas": list(plan.wp_lambdas),
                   "guide_lambda": plan.wp_guide_lambda, "steps": plan.wp_adversary_steps,
                   "guide_seeds": plan.wp_guide_seeds}
        if not _done(paths["wp"], request):
            run_wp(base_dir, paths["wp"], runs_dir=wp_runs, num_seeds=plan.wp_seeds,
                   lambdas=plan.wp_lambdas, guide_lambda=plan.wp_guide_lambda,
                   adversary_steps=plan.wp_adversary_steps, guide_seeds=plan.wp_guide_seeds,
                   progress=progress)
            _mark(paths["wp"], request)

    clock.run(f"{dataset}/wp", STAGE_TITLES["wp"], estimates["wp"], wp)

    grid = grid_runs(grid_settings, plan.ts_variants, plan.ts_attentions, plan.ts_seeds)

    def ts_grid():
        missing = [r for r, _ in grid if not os.path.exists(os.path.join(grid_dir, r, "metrics.json"))]
        summary = train_grid(grid, grid_dir, task=task() if missing else None, progress=progress)
        failed = [r for r in summary["runs"] if r["status"] == "failed"]
        if failed:
            raise RuntimeError(f"T&Š grid runs failed: {[(r['dir'], r['error']) for r in failed]}")

    clock.run(f"{dataset}/ts_grid", STAGE_TITLES["ts_grid"], estimates["ts_grid"], ts_grid)

    def ts():
        from tqdm.auto import tqdm

        from .analysis.ts import run_battery, summarize_grid, train_consistent_adversaries

        for relative, settings in tqdm(grid, desc="T&Š battery", unit="run", disable=not progress):
            out = os.path.join(paths["ts"], relative)
            want_mi = (settings.variant in plan.mi_variants and settings.seed in plan.mi_seeds
                       and settings.attention == "additive")
            options = _namespace(split="test", seed=0, quiet=True,
                                 ts_permutation_draws=plan.ts_permutation_draws, ts_skip_mi=not want_mi,
                                 ts_mi_split="train", ts_mi_words=plan.mi_words,
                                 ts_mi_clusters=plan.mi_clusters, ts_mi_max_occurrences=plan.mi_max_occurrences,
                                 ts_skip_adversary=False, ts_adversary_limit=plan.ts_adversary_limit)
            request = {"model": os.path.join(grid_dir, relative), **vars(options)}
            if not _done(out, request):
                run_battery(os.path.join(grid_dir, relative), out, options)
                _mark(out, request)
        summarize_grid(grid_dir, paths["ts"])  # the tables exist even if the adversaries below are cut short
        train_consistent_adversaries(grid_dir, paths["ts"], plan.ts_fig1_cells, plan.ts_fig1_lambdas,
                                     seed=0, progress=False)
        summarize_grid(grid_dir, paths["ts"])

    def eraser():
        from .faithfulness import run_eraser

        for cell, out in paths["eraser"].items():
            model_dir = os.path.join(grid_dir, cell, "seed0")
            if os.path.exists(os.path.join(model_dir, "metrics.json")):
                run_eraser(model_dir, out, ig_steps=plan.eraser_ig_steps,
                           max_instances=plan.eraser_max_instances, progress=False)

    # ERASER before the T&Š battery: it only needs the grid's seed-0 models
    clock.run(f"{dataset}/eraser", STAGE_TITLES["eraser"], estimates["eraser"], eraser)
    clock.run(f"{dataset}/ts", STAGE_TITLES["ts"], estimates["ts"], ts)
    return paths


# ------------------------------------------------------------------------------------------------
# collecting the numbers

def _maybe(path: str):
    return _read_json(path) if os.path.exists(path) else None


def _run_facts(model_dir: str) -> dict | None:
    """Embeddings, sizes and test metrics of a finished run."""
    if not os.path.exists(os.path.join(model_dir, "metrics.json")):
        return None
    run, metrics = _read_json(os.path.join(model_dir, "run.json")), _read_json(os.path.join(model_dir, "metrics.json"))
    model = run.get("model", {})
    return {"dir": model_dir, "embeddings": model.get("embeddings"), "embedding_dim": model.get("embedding_dim"),
            "encoder": model.get("encoder"), "attention": model.get("attention"), "variant": model.get("variant"),
            "hidden_size": model.get("hidden_size"), "parameters": model.get("parameters"),
            "epochs": run["settings"]["epochs"], "seed": run["settings"]["seed"],
            "split_sizes": run.get("split_sizes"), "test_f1": metrics.get("test_f1"),
            "test_accuracy": metrics.get("test_accuracy"), "test_roc_auc": metrics.get("test_roc_auc"),
            "train_seconds": metrics.get("train_seconds")}


def collect(paths: dict) -> dict:
    """Every number the report shows for one dataset (from the batteries' results files)."""
    jw_lstm = _maybe(os.path.join(paths["jw_lstm"], "results.json"))
    jw_avg = _maybe(os.path.join(paths["jw_average"], "results.json"))
    wp = _maybe(os.path.join(paths["wp"], "results.json"))
    ts = _maybe(os.path.join(paths["ts"], "summary.json"))
    eraser = {c: _maybe(os.path.join(p, "results.json")) for c, p in paths["eraser"].items()}
    grid_json = _maybe(os.path.join(paths["grid"], "grid.json"))
    ts_base = os.path.join(paths["grid"], "base-additive", "seed0")
    return {"dataset": paths["dataset"], "data": paths["data"],
            "models": {"jw_wp_base": _run_facts(paths["base"]), "jw_average": _run_facts(paths["average"]),
                       "ts_base": _run_facts(ts_base)},
            "jw": {"lstm": jw_lstm, "average": jw_avg}, "wp": wp, "ts": ts,
            "ts_grid": {k: grid_json.get(k) for k in ("num_runs", "total_trained_runs", "total_trained_seconds",
                                                        "total_seconds_per_run")} if grid_json else None,
            "eraser": eraser, "paths": paths}


# ------------------------------------------------------------------------------------------------
# findings: each is a claim of a paper, checked against the numbers

def _finding(fid, paper, claim, verdict, sentence, published=None, measured=None) -> dict:
    assert verdict in VERDICTS, verdict
    return {"id": fid, "paper": paper, "claim": claim, "verdict": verdict, "sentence": sentence,
            "published": published, "measured": measured}


def _within(measured, published, tol) -> bool:
    return measured is not None and published is not None and abs(measured - published) <= tol


def _per_class_means(summary: dict, key: str) -> list[float | None]:
    block = summary[key]["per_class"]
    return [block[c]["mean"] for c in sorted(block, key=int)]


def _f(x, digits=3):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _published_key(dataset: str) -> str:
    return dataset if dataset in JW_PUBLISHED else "sst"


def ts_published(dataset: str) -> dict:
    from .analysis.ts import PUBLISHED_SST

    return TS_PUBLISHED_EXTRA.get(dataset, PUBLISHED_SST) if dataset != "sst" else PUBLISHED_SST


def findings_for(data: dict) -> list[dict]:
    """Check every published finding against the measured numbers of one dataset."""
    from .wp_training import WP_TABLE3_SST

    ds = data["dataset"]
    pub = JW_PUBLISHED[_published_key(ds)]
    out = []
    jw, jwa = data["jw"]["lstm"], data["jw"]["average"]
    base = data["models"]["jw_wp_base"]
    # ---- J&W
    if base:
        f1 = base["test_f1"]
        ok = _within(f1, pub["test_f1"], TOLERANCE["f1"])
        out.append(_finding("JW-1", "J&W Table 1", "BiLSTM+additive test F1",
                            "reproduced" if ok else "not reproduced",
                            f"BiLSTM test F1 {f1:.3f} vs published {pub['test_f1']:.2f} "
                            f"({'within' if ok else 'outside'} ±{TOLERANCE['f1']}): "
                            f"{'reproduced' if ok else 'not reproduced'}.", pub["test_f1"], f1))
    if jw:
        s = jw["summary"]
        for fid, key, pkey, label in (("JW-2", "tau_gradient", "tau_gradient", "τ(attention, gradient)"),
                                      ("JW-3", "tau_loo", "tau_loo", "τ(attention, LOO)")):
            m = _per_class_means(s, key)
            hits = [_within(a, b, TOLERANCE["tau"]) for a, b in zip(m, pub[pkey])]
            weak = all(v is not None and 0 < v < 0.6 for v in m)
            verdict = ("reproduced" if all(hits) else "partly reproduced" if any(hits)
                       else "qualitatively reproduced" if weak else "not reproduced")
            out.append(_finding(
                fid, "J&W Table 2", f"BiLSTM {label} per predicted class is positive but weak (τ ≈ "
                f"{' / '.join(map(str, pub[pkey]))})", verdict,
                f"BiLSTM mean {label} {' / '.join(_f(v, 2) for v in m)} (class 0 / 1) vs published "
                f"{' / '.join(f'{v:.2f}' for v in pub[pkey])}: {sum(hits)} of 2 classes within ±{TOLERANCE['tau']}, "
                f"{'weak-to-moderate positive agreement as J&W report' if weak else 'not the weak agreement J&W report'}"
                f" — {verdict}.", pub[pkey], m))
        tg, tl, tgl = (s[k]["overall"]["mean"] for k in ("tau_gradient", "tau_loo", "tau_gradient_loo"))
        gap = tgl - (tg + tl) / 2
        verdict = ("reproduced" if gap >= JW_GRADIENT_LOO_GAP[0] - 0.05 else
                   "qualitatively reproduced" if gap > 0 else "not reproduced")
        out.append(_finding("JW-4", "J&W §4.1 / appendix C",
                            "gradient and LOO agree with each other ~0.2–0.25 more than attention with either",
                            verdict, f"τ(gradient, LOO) {tgl:.2f} is {gap:+.2f} above the mean of τ(attention, "
                            f"gradient) {tg:.2f} and τ(attention, LOO) {tl:.2f} (published gap 0.20–0.25): {verdict}.",
                            list(JW_GRADIENT_LOO_GAP), gap))
        perm = s["permutation"]["overall"]["median"]
        ok = perm is not None and perm < 0.1
        out.append(_finding("JW-7", "J&W §4.2.1, Fig. 3",
                            "randomly permuting BiLSTM attention changes the output little for most instances",
                            "qualitatively reproduced" if ok else "not reproduced",
                            f"median over instances of the median permutation TVD is {perm:.3f} "
                            f"({'< 0.1: small output change' if ok else '≥ 0.1: outputs change'}): "
                            f"{'qualitatively reproduced' if ok else 'not reproduced'}.", None, perm))
        adv = s["adversary"]["overall"]
        ok = (adv["mean"] or 0) >= 0.4 and (adv["fraction_feasible"] or 0) >= 0.5
        out.append(_finding("JW-8", "J&W §4.2.2, Fig. 4",
                            "for most instances an adversarial attention far from the original (high JSD) "
                            "keeps the prediction within ε",
                            "qualitatively reproduced" if ok else "not reproduced",
                            f"{100 * adv['fraction_feasible']:.0f}% of test instances have an adversary with "
                            f"TVD ≤ ε = {s['adversary']['eps']}, mean ε-max JSD {adv['mean']:.2f} (ln 2 = 0.69 "
                            f"is the maximum): {'qualitatively reproduced' if ok else 'not reproduced'}.",
                            None, adv["mean"]))
    if jwa:
        sa = jwa["summary"]
        ma = _per_class_means(sa, "tau_gradient")
        hits = [_within(a, b, TOLERANCE["tau"]) for a, b in zip(ma, pub["tau_gradient_average"])]
        higher = jw is not None and sa["tau_gradient"]["overall"]["mean"] > jw["summary"]["tau_gradient"]["overall"]["mean"]
        verdict = ("reproduced" if all(hits) and higher else "partly reproduced" if any(hits) and higher
                   else "qualitatively reproduced" if higher else "not reproduced")
        out.append(_finding("JW-5", "J&W Table 2", "Average-encoder attention agrees more with gradients than "
                            "BiLSTM attention (τ ≈ 0.61 / 0.60)", verdict,
                            f"Average τ(attention, gradient) {' / '.join(_f(v, 2) for v in ma)} vs published "
                            f"{' / '.join(f'{v:.2f}' for v in pub['tau_gradient_average'])}"
                            f"{'' if jw is None else ', BiLSTM ' + _f(jw['summary']['tau_gradient']['overall']['mean'], 2)}"
                            f" overall ({'higher' if higher else 'not higher'} for the Average model): {verdict}.",
                            pub["tau_gradient_average"], ma))
        if jw:
            diff = sa["tau_loo"]["overall"]["mean"] - jw["summary"]["tau_loo"]["overall"]["mean"]
            verdict = ("reproduced" if abs(diff - JW_AVERAGE_LOO_GAIN) <= 0.15 else
                       "qualitatively reproduced" if diff > 0 else "not reproduced")
            out.append(_finding("JW-6", "J&W §4.1", "Average attention correlates ~0.375 higher with LOO than "
                                "BiLSTM attention", verdict,
                                f"τ(attention, LOO) is {diff:+.2f} higher for the Average model than for the "
                                f"BiLSTM (published ≈ +0.375, tolerance ±0.15): {verdict}.", JW_AVERAGE_LOO_GAIN, diff))
    # ---- W&P
    wp = data["wp"]
    if wp:
        gap = wp["uniform_baseline"]["f1_gap"]
        tol = TOLERANCE["uniform_gap"]
        if 0 <= gap <= tol:
            verdict, why = "reproduced", f"a small gain (0 ≤ gap ≤ {tol}): borderline, as W&P call SST"
        elif -tol <= gap < 0:
            verdict, why = "qualitatively reproduced", "no gain at all from trained attention"
        elif gap < -tol:
            verdict, why = "not reproduced", "uniform attention is clearly better: the trained-attention model underperforms"
        else:
            verdict, why = "not reproduced", f"trained attention clearly helps (gap > {tol})"
        out.append(_finding("WP-1", "W&P §3.2, Table 2", "uniform attention costs little F1 (W&P: SST is a "
                            "borderline test case for attention, AG News none)", verdict,
                            f"F1 trained attention {wp['uniform_baseline']['base']['f1']:.3f} vs frozen uniform "
                            f"{wp['uniform_baseline']['uniform']['f1']:.3f}: gap {gap:+.3f}, {why} — {verdict}.",
                            None, gap))
        seed_jsd = wp["seed_variance"]["summary"]["mean_max_jsd"]
        adv = wp.get("per_instance_adversary") or {}
        adv_jsd = adv.get("mean_jsd") if adv.get("available") else None
        if adv_jsd is not None:
            ok = seed_jsd < adv_jsd
            out.append(_finding("WP-2", "W&P §3.3, Fig. 3", "attention is robust to the random seed: seed "
                                "models diverge from the base far less than J&W's per-instance adversary",
                                "reproduced" if ok else "not reproduced",
                                f"mean over instances of the max JSD across {len(wp['seed_variance']['seeds'])} "
                                f"seed models is {seed_jsd:.3f} vs {adv_jsd:.3f} for the per-instance adversary: "
                                f"{'reproduced' if ok else 'not reproduced'}.", None,
                                {"seed_max_jsd": seed_jsd, "adversary_jsd": adv_jsd}))
        mlp = wp["diagnostic_mlp"]["guides"]
        measured = {g: v["test_f1"] for g, v in mlp.items()}
        hits = [g for g in WP_TABLE3_SST if _within(measured.get(g), WP_TABLE3_SST[g], TOLERANCE["wp_f1"])]
        if ds == "sst":
            verdict = ("reproduced" if len(hits) == 4 else "partly reproduced" if hits else "not reproduced")
            out.append(_finding("WP-3", "W&P Table 3", "diagnostic-MLP F1 per guide on SST", verdict,
                                "guided-MLP F1 " + ", ".join(f"{g} {measured[g]:.3f} (published {WP_TABLE3_SST[g]:.3f})"
                                                             for g in WP_TABLE3_SST if g in measured)
                                + f": {len(hits)} of 4 within ±{TOLERANCE['wp_f1']} — {verdict}.",
                                WP_TABLE3_SST, measured))
        order = wp["diagnostic_mlp"]["ordering"]
        core = measured["base"] > measured["adversary"] and measured["trained"] >= measured["uniform"]
        verdict = "reproduced" if order["holds"] else "partly reproduced" if core else "not reproduced"
        out.append(_finding("WP-4", "W&P §3.4, Table 3", "guides rank BASE LSTM ≥ TRAINED MLP ≥ UNIFORM > ADVERSARY "
                            "(adversarial attention is a poor guide)", verdict,
                            "ordering checks " + ", ".join(f"{k} {'holds' if v else 'fails'}"
                                                           for k, v in order["checks"].items())
                            + f": {verdict}.", "base ≥ trained ≥ uniform > adversary", order["checks"]))
        rows = sorted([r for r in wp["consistent_adversary"]["rows"] if r["in_sweep"]], key=lambda r: r["lambda"])
        if len(rows) >= 2:
            jsds = [r["mean_jsd"] for r in rows]
            rising = jsds[-1] > jsds[0]
            base_f1 = wp["base"]["f1"]
            found = [r for r in rows if r["mean_jsd"] >= 0.3 and r["mean_tvd"] <= 0.1]
            verdict = ("reproduced" if rising and found else "partly reproduced" if rising or found
                       else "not reproduced")
            out.append(_finding("WP-5", "W&P §4, Fig. 5", "a model-consistent adversary trained against the base "
                                "reaches divergent attention (JSD grows with λ) at a small cost in predictions",
                                verdict,
                                f"mean JSD to the base {' → '.join(f'{j:.2f}' for j in jsds)} over λ = "
                                f"{', '.join(format(r['lambda'], 'g') for r in rows)}; "
                                + (f"at λ = {found[0]['lambda']:g}: JSD {found[0]['mean_jsd']:.2f} with TVD "
                                   f"{found[0]['mean_tvd']:.3f} and F1 {found[0]['f1']:.3f} (base {base_f1:.3f})"
                                   if found else "no λ reaches JSD ≥ 0.3 with TVD ≤ 0.1")
                                + f": {verdict}.", None, {"lambda": [r["lambda"] for r in rows], "jsd": jsds}))
    # ---- T&Š
    ts = data["ts"]
    if ts:
        tpub = ts_published(ds)
        cells = ts["cells"]

        def cell(variant, attention="additive"):
            return cells.get(f"{variant}-{attention}")

        rows, hits = [], 0
        for variant, ref in tpub["fragility"].items():
            c = cell(variant)
            if c and c["f1_trained"]["mean"] is not None:
                rows.append(variant)
                hits += _within(c["f1_trained"]["mean"], ref[0], TOLERANCE["f1_points"])
        if rows:
            verdict = "reproduced" if hits == len(rows) else "partly reproduced" if hits else "not reproduced"
            out.append(_finding("TS-1", "T&Š Table 1", "every variant keeps the base model's F1 (additive)", verdict,
                                "F1 (trained α, additive) " + ", ".join(
                                    f"{v} {cell(v)['f1_trained']['mean']:.1f} (published {tpub['fragility'][v][0]})"
                                    for v in rows) + f": {hits} of {len(rows)} within ±{TOLERANCE['f1_points']} "
                                f"points — {verdict}.", {v: tpub["fragility"][v][0] for v in rows},
                                {v: cell(v)["f1_trained"]["mean"] for v in rows}))
        for attention in ("additive", "dot"):
            b = cell("base", attention)
            if not b:
                continue
            checks = {}
            for variant in ("tying", "mlm"):
                c = cell(variant, attention)
                if c:
                    for key in ("delta_uniform", "delta_permuted"):
                        checks[f"{variant} {key}"] = c[key]["mean"] < b[key]["mean"]
            if checks:
                held = sum(checks.values())
                verdict = ("reproduced" if held == len(checks) else "partly reproduced" if held else "not reproduced")
                out.append(_finding(f"TS-2{'a' if attention == 'additive' else 'd'}", "T&Š Table 1",
                                    f"tying and MLM make {attention} attention more fragile than base (larger F1 drop "
                                    "with uniform / permuted α)", verdict,
                                    f"ΔF1 uniform / permuted: base {b['delta_uniform']['mean']:.1f} / "
                                    f"{b['delta_permuted']['mean']:.1f}, " + ", ".join(
                                        f"{v} {cell(v, attention)['delta_uniform']['mean']:.1f} / "
                                        f"{cell(v, attention)['delta_permuted']['mean']:.1f}"
                                        for v in ("tying", "mlm") if cell(v, attention))
                                    + f" ({held} of {len(checks)} drops larger than base's): {verdict}.",
                                    {k: tpub["fragility" if attention == "additive" else "fragility_dot"].get(k.split()[0])
                                     for k in checks}, checks))
        b = cell("base")
        if b and b["mi_MF"]["n"]:
            checks, close = {}, 0
            for variant in ("residual", "tying", "mlm"):
                c = cell(variant)
                if c and c["mi_MF"]["n"]:
                    for method in ("MF", "RS"):
                        checks[f"{variant} {method}"] = c[f"mi_{method}"]["mean"] > b[f"mi_{method}"]["mean"]
                        close += _within(c[f"mi_{method}"]["mean"], tpub[f"mi_{method}"][variant], TOLERANCE["mi"])
            if checks:
                held = sum(checks.values())
                verdict = ("reproduced" if held == len(checks) and close == len(checks) else
                           "qualitatively reproduced" if held == len(checks) else
                           "partly reproduced" if held else "not reproduced")
                out.append(_finding("TS-3", "T&Š Table 2", "hidden states of residual / tying / MLM keep more of their "
                                    "input (higher MI e_t ↔ h_t) than base", verdict,
                                    f"MI MF/RS (nats): base {b['mi_MF']['mean']:.2f}/{b['mi_RS']['mean']:.2f}, " + ", ".join(
                                        f"{v} {cell(v)['mi_MF']['mean']:.2f}/{cell(v)['mi_RS']['mean']:.2f}"
                                        for v in ("residual", "tying", "mlm") if cell(v) and cell(v)["mi_MF"]["n"])
                                    + f" ({held} of {len(checks)} above base; {close} of {len(checks)} within "
                                    f"±{TOLERANCE['mi']} of published): {verdict}.",
                                    {"MF": tpub["mi_MF"], "RS": tpub["mi_RS"]}, checks))
        if b:
            checks, close = {}, 0
            for variant in ("tying", "mlm"):
                c = cell(variant)
                if c and c["token_probability"]["mean"] is not None:
                    checks[variant] = c["token_probability"]["mean"] < b["token_probability"]["mean"]
                    close += _within(c["token_probability"]["mean"], tpub["token_probability"][variant],
                                     TOLERANCE["token_probability"])
            close += _within(b["token_probability"]["mean"], tpub["token_probability"]["base"],
                             TOLERANCE["token_probability"])
            if checks:
                held = sum(checks.values())
                verdict = ("reproduced" if held == len(checks) and close == len(checks) + 1 else
                           "qualitatively reproduced" if held == len(checks) else
                           "partly reproduced" if held else "not reproduced")
                out.append(_finding("TS-4", "T&Š Table 3", "tying and MLM have a lower per-token prediction probability "
                                    "than base (more faithful attention)", verdict,
                                    f"p̂ base {b['token_probability']['mean']:.3f} (published "
                                    f"{tpub['token_probability']['base']}), " + ", ".join(
                                        f"{v} {cell(v)['token_probability']['mean']:.3f} (published "
                                        f"{tpub['token_probability'][v]})" for v in checks)
                                    + f": {held} of {len(checks)} below base, {close} of {len(checks) + 1} within "
                                    f"±{TOLERANCE['token_probability']} — {verdict}.",
                                    tpub["token_probability"], {v: cell(v)["token_probability"]["mean"] for v in ["base", *checks]}))
        wp_rows = ts.get("wp_consistent_adversary") or []
        base_rows = {r["lambda"]: r for r in wp_rows if r["cell"] == "base-additive"}
        checks = {}
        for r in wp_rows:
            if r["cell"] != "base-additive" and r["lambda"] in base_rows:
                b_r = base_rows[r["lambda"]]
                ratio = r["mean_tvd"] / max(r["mean_jsd"], 1e-9)
                b_ratio = b_r["mean_tvd"] / max(b_r["mean_jsd"], 1e-9)
                checks[f"{r['cell']} λ={r['lambda']:g}"] = ratio > b_ratio
        if checks:
            held = sum(checks.values())
            verdict = "reproduced" if held == len(checks) else "partly reproduced" if held else "not reproduced"
            out.append(_finding("TS-5", "T&Š §4.3, Fig. 1", "a model-consistent adversary of a regularised model pays more "
                                "TVD per unit of JSD than one of the base model", verdict,
                                "TVD/JSD of the adversary above the base model's in " + f"{held} of {len(checks)} "
                                "(cell, λ) pairs: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in checks.items())
                                + f" — {verdict}.", None, checks))
        adv = {v: cell(v) for v in ("base", "tying", "mlm") if cell(v) and cell(v)["jw_mean_eps_max_jsd"]["n"]}
        if "base" in adv and len(adv) > 1:
            checks = {v: adv[v]["jw_mean_eps_max_jsd"]["mean"] < adv["base"]["jw_mean_eps_max_jsd"]["mean"]
                      for v in adv if v != "base"}
            held = sum(checks.values())
            verdict = "reproduced" if held == len(checks) else "partly reproduced" if held else "not reproduced"
            out.append(_finding("TS-6", "T&Š §4.3", "J&W adversaries within ε are harder to find for regularised "
                                "models (lower ε-max JSD)", verdict,
                                "mean ε-max JSD " + ", ".join(f"{v} {adv[v]['jw_mean_eps_max_jsd']['mean']:.3f}" for v in adv)
                                + f" ({held} of {len(checks)} below base): {verdict}.", None,
                                {v: adv[v]["jw_mean_eps_max_jsd"]["mean"] for v in adv}))
    # ---- ERASER (beyond the papers: no published value)
    for cell_name, res in data["eraser"].items():
        if not res:
            continue
        m = res["measures"]
        comp = {k: v["comprehensiveness_aopc"] for k, v in m.items()}
        suff = {k: v["sufficiency_aopc"] for k, v in m.items()}
        ranked = sorted((k for k in comp if k != "random"), key=lambda k: -comp[k])
        att_rank = ranked.index("attention") + 1 if "attention" in ranked else None
        worse_than_grad = ("gradient" in comp and "attention" in comp and comp["attention"] < comp["gradient"])
        beats_random = [k for k in comp if k != "random" and "random" in comp and comp[k] > comp["random"]]
        out.append(_finding(f"ER-{cell_name}", "beyond the papers (DeYoung et al. 2020)",
                            f"is attention a worse explanation than gradients by ERASER comprehensiveness? "
                            f"({cell_name}, seed 0)", "new measurement",
                            f"{cell_name}: comprehensiveness AOPC " + ", ".join(f"{k} {comp[k]:.3f}" for k in ranked)
                            + (f", random {comp['random']:.3f}" if "random" in comp else "")
                            + f"; attention ranks {att_rank} of {len(ranked)} and is "
                            f"{'worse' if worse_than_grad else 'not worse'} than the gradient "
                            f"(sufficiency AOPC attention {_f(suff.get('attention'))} vs gradient "
                            f"{_f(suff.get('gradient'))}, lower is better); {len(beats_random)} of {len(ranked)} "
                            "measures beat random. No published value: a new measurement, not a reproduction.",
                            None, {"comprehensiveness_aopc": comp, "sufficiency_aopc": suff}))
    return out


# ------------------------------------------------------------------------------------------------
# report

def _fig(figures: list, dataset: str, src_dir: str, name: str, out_dir: str, caption: str) -> str:
    """Copy ``src_dir/name`` into ``OUT/figures/<dataset>-<name>`` and return its Markdown."""
    src = os.path.join(src_dir, name)
    if not os.path.exists(src):
        return ""
    stem, ext = os.path.splitext(name)
    target = (f"{dataset}-{stem}-{os.path.basename(os.path.dirname(src))}{ext}" if stem == "eraser"
              else f"{dataset}-{name}")
    os.makedirs(os.path.join(out_dir, "figures"), exist_ok=True)
    shutil.copyfile(src, os.path.join(out_dir, "figures", target))
    figures.append(f"figures/{target}")
    return f"\n![{caption}](figures/{target})\n\n*{caption}*\n"


def _ms(stat: dict | None, digits=1, scale=1.0) -> str:
    """mean ± std (n) of a {mean, std, n} block."""
    if not stat or stat.get("mean") is None:
        return "–"
    if stat.get("n", 1) <= 1:
        return f"{scale * stat['mean']:.{digits}f} (n=1)"
    return f"{scale * stat['mean']:.{digits}f} ± {scale * stat['std']:.{digits}f} (n={stat['n']})"


def _model_line(facts: dict | None, what: str) -> str:
    if not facts:
        return f"{what}: not trained."
    sizes = facts.get("split_sizes") or {}
    return (f"{what}: {facts['encoder']}+{facts['attention']} ({facts['variant']}), embeddings "
            f"{facts['embeddings']} (d = {facts['embedding_dim']}), H = {facts['hidden_size']}, "
            f"{facts['parameters']:,} parameters, {facts['epochs']} epochs, seed {facts['seed']}; "
            f"train/dev/test {sizes.get('train')}/{sizes.get('validation')}/{sizes.get('test')}; "
            f"test F1 {_f(facts['test_f1'])}, accuracy {_f(facts['test_accuracy'])}, "
            f"ROC-AUC {_f(facts['test_roc_auc'])}.")


def _verdict_lines(findings: list[dict], ids) -> str:
    lines = [f"- **{f['id']}** ({f['paper']}) — {f['sentence']}" for f in findings if f["id"] in ids
             or any(f["id"].startswith(i) for i in ids)]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def dataset_section(data: dict, findings: list[dict], out_dir: str, figures: list, plan: ReproducePlan) -> str:
    ds = data["dataset"]
    pub = JW_PUBLISHED[_published_key(ds)]
    P = []
    P.append(f"\n# Dataset: {ds}\n")
    if plan.quick:
        P.append("> **--quick smoke test**: small random subsets of the real data and one epoch — the numbers "
                 "below exercise the pipeline and are **not** a reproduction.\n")
    # ---------------- J&W
    P.append("\n## Jain & Wallace 2019 (Attention is not Explanation)\n")
    P.append(_model_line(data["models"]["jw_wp_base"], "BiLSTM (also the W&P base)") + "  \n")
    P.append(_model_line(data["models"]["jw_average"], "Average (also W&P's TRAINED-MLP guide)") + "\n")
    P.append(f"\n### {TABLE_HEADERS[0]}\n")
    P.append("Papers: 300-d fastText, H = 128. Per predicted class (0 / 1): mean τ ± std, fraction with p < 0.05 "
             "in brackets. Single-run values in the paper (no seeds averaged).\n")
    P.append("| quantity | published | measured |\n|---|---|---|")
    jw, jwa = data["jw"]["lstm"], data["jw"]["average"]
    base = data["models"]["jw_wp_base"]
    P.append(f"| BiLSTM test F1 | {pub['test_f1']} | {_f(base['test_f1']) if base else '–'} |")

    def tau_cell(res, key):
        if not res:
            return "–"
        blk = res["summary"][key]["per_class"]
        return " / ".join(f"{_f(blk[c]['mean'], 2)}±{_f(blk[c]['std'], 2)} ({_f(blk[c]['fraction_significant'], 2)})"
                          for c in sorted(blk, key=int))

    def pub_cell(key, std_key=None, sig_key=None):
        vals = pub.get(key)
        if not vals:
            return "–"
        parts = []
        for i, v in enumerate(vals):
            s = f"{v:.2f}"
            if std_key and pub.get(std_key):
                s += f"±{pub[std_key][i]:.2f}"
            if sig_key and pub.get(sig_key):
                s += f" ({pub[sig_key][i]:.2f})"
            parts.append(s)
        return " / ".join(parts)

    P.append(f"| τ(attention, gradient), BiLSTM | {pub_cell('tau_gradient', 'tau_gradient_std', 'tau_gradient_sig')} | "
             f"{tau_cell(jw, 'tau_gradient')} |")
    P.append(f"| τ(attention, gradient), Average | {pub_cell('tau_gradient_average', None, 'tau_gradient_average_sig')} | "
             f"{tau_cell(jwa, 'tau_gradient')} |")
    P.append(f"| τ(attention, LOO), BiLSTM | {pub_cell('tau_loo', None, 'tau_loo_sig')} | {tau_cell(jw, 'tau_loo')} |")
    P.append(f"| τ(attention, LOO), Average | – | {tau_cell(jwa, 'tau_loo')} |")
    P.append(f"| τ(gradient, LOO), BiLSTM | ~0.2–0.25 above attention's | {tau_cell(jw, 'tau_gradient_loo')} |")
    P.append(_verdict_lines(findings, ["JW-1", "JW-2", "JW-3", "JW-4", "JW-5", "JW-6"]))
    if jw:
        P.append(_fig(figures, ds, paths_of(data)["jw_lstm"], "fig2_tau_gradient.png", out_dir,
                      "J&W Fig. 2: τ(attention, gradient) of the BiLSTM, per predicted class"))
    P.append(f"\n### {TABLE_HEADERS[1]}\n")
    if jw:
        s = jw["summary"]
        prm = jw["parameters"]
        P.append(f"{prm['num_permutations']} permutations; k = {prm['k']} adversaries, λ = {prm['lam']}, "
                 f"ε = {prm['eps']}, {prm['steps']} Adam steps. No numeric table in the paper (Figs. 3–5).\n")
        P.append("| model | median Δŷ_med (class 0 / 1) | mean ε-max JSD (class 0 / 1) | instances with an adversary ≤ ε |")
        P.append("|---|---|---|---|")
        for label, res in (("BiLSTM", jw), ("Average", jwa)):
            if res:
                s = res["summary"]
                pc, ac = s["permutation"]["per_class"], s["adversary"]["per_class"]
                P.append(f"| {label} | {' / '.join(_f(pc[c]['median'], 3) for c in sorted(pc, key=int))} | "
                         f"{' / '.join(_f(ac[c]['mean'], 3) for c in sorted(ac, key=int))} | "
                         f"{100 * s['adversary']['overall']['fraction_feasible']:.0f}% |")
        P.append(_verdict_lines(findings, ["JW-7", "JW-8"]))
        P.append(_fig(figures, ds, paths_of(data)["jw_lstm"], "fig3_permutation.png", out_dir,
                      "J&W Fig. 3: median output change under attention permutation vs max attention (BiLSTM)"))
        P.append(_fig(figures, ds, paths_of(data)["jw_lstm"], "fig4_eps_max_jsd.png", out_dir,
                      "J&W Fig. 4: ε-max JSD of the adversarial attention (BiLSTM)"))
    else:
        P.append("Not measured.\n")
    # ---------------- W&P
    wp = data["wp"]
    P.append("\n## Wiegreffe & Pinter 2019 (Attention is not not Explanation)\n")
    P.append("Base model = the J&W BiLSTM above; every helper model has its settings (GloVe-6B-50d, H = 128, "
             f"{base['epochs'] if base else '–'} epochs) and differs only where W&P say.\n")
    P.append(f"\n### {TABLE_HEADERS[2]}\n")
    if wp:
        u = wp["uniform_baseline"]
        P.append("W&P Table 2 (published numbers not in our copy of the paper; SPEC: a small gap, SST 'borderline').\n")
        P.append("| model | F1 | macro F1 |\n|---|---|---|")
        P.append(f"| trained attention | {u['base']['f1']:.3f} | {u['base']['macro_f1']:.3f} |")
        P.append(f"| frozen uniform | {u['uniform']['f1']:.3f} | {u['uniform']['macro_f1']:.3f} |")
        P.append(f"| gap | {u['f1_gap']:+.3f} | {u['macro_f1_gap']:+.3f} |")
        P.append(_verdict_lines(findings, ["WP-1"]))
        P.append(f"\n### {TABLE_HEADERS[3]}\n")
        sv = wp["seed_variance"]
        P.append(f"{len(sv['seeds'])} models differing from the base only in seed ({sv['seeds'][0]}…{sv['seeds'][-1]}); "
                 f"test F1 {sv['summary']['f1_mean']:.3f} ± {sv['summary']['f1_std']:.3f} over seeds.\n")
        adv = wp.get("per_instance_adversary") or {}
        P.append("| quantity | seeds (max over seeds) | seeds (median) | J&W per-instance adversary |\n|---|---|---|---|")
        P.append(f"| mean JSD(α, α_base) | {sv['summary']['mean_max_jsd']:.3f} | {sv['summary']['mean_median_jsd']:.3f} | "
                 f"{_f(adv.get('mean_jsd'))} |")
        P.append(f"| mean TVD(ŷ, ŷ_base) | {sv['summary']['mean_max_tvd']:.3f} | {sv['summary']['mean_median_tvd']:.3f} | "
                 f"{_f(adv.get('mean_tvd'))} |")
        P.append(_verdict_lines(findings, ["WP-2"]))
        P.append(_fig(figures, ds, paths_of(data)["wp"], "seed_variance.png", out_dir,
                      "W&P Fig. 3: JSD of seed models (left) and of J&W's adversary (right) vs max base attention"))
        P.append(f"\n### {TABLE_HEADERS[4]}\n")
        from .wp_training import WP_TABLE3_SST
        P.append("Positive-class test F1 of the per-token MLP (affine + tanh) whose token scores are weighted by a "
                 f"fixed guide in training and testing; ADVERSARY = consistent adversary with λ = "
                 f"{wp['diagnostic_mlp']['adversary_lambda']:g}. Published: SST column of W&P Table 3 (single runs; "
                 "Diabetes/Anemia are MIMIC data we do not have).\n")
        P.append("| guide | published (SST) | measured |\n|---|---|---|")
        names = {"uniform": "UNIFORM", "trained": "TRAINED MLP", "base": "BASE LSTM", "adversary": "ADVERSARY"}
        for g, v in wp["diagnostic_mlp"]["guides"].items():
            value = f"{v['test_f1']:.3f}"
            if v.get("seed_runs"):
                value += (f" ± {v['test_f1_std']:.3f} (mean over {len(v['seed_runs'])} adversary seeds: "
                          + " / ".join(f"{r['test_f1']:.3f}" for r in v["seed_runs"]) + ")")
            P.append(f"| {names.get(g, g)} | {WP_TABLE3_SST.get(g, '–') if ds == 'sst' else '–'} | {value} |")
        runs = wp["diagnostic_mlp"]["guides"].get("adversary", {}).get("seed_runs")
        if runs:
            P.append("\nThe λ = 0.001 adversary per seed — mean JSD / KL of its attention to the base's, and the "
                     "F1 of the MLP it guides: "
                     + "; ".join(f"seed {r['seed']}: JSD {r['adversary_mean_jsd_to_base']:.3f}, KL "
                                 f"{r['adversary_mean_kl_to_base']:.2f}, F1 {r['test_f1']:.3f}" for r in runs)
                     + ". With so small a λ the KL term barely constrains the attention, so the adversary "
                       "lands at a different attention with every seed and the guided F1 follows; W&P's single "
                       "run is one draw from this spread.\n")
        P.append(_verdict_lines(findings, ["WP-3", "WP-4"]))
        P.append(_fig(figures, ds, paths_of(data)["wp"], "diagnostic_mlp.png", out_dir,
                      "W&P Table 3 as bars: diagnostic MLP F1 by guide, measured beside published"))
        P.append(f"\n### {TABLE_HEADERS[5]}\n")
        P.append("L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b), a new model per λ trained against the fixed base (no numeric "
                 "table in the paper; Fig. 5).\n")
        P.append("| λ | test F1 | mean JSD(α_a, α_b) | mean TVD(ŷ_a, ŷ_b) | mean KL |\n|---|---|---|---|---|")
        for r in sorted(wp["consistent_adversary"]["rows"], key=lambda r: r["lambda"]):
            P.append(f"| {r['lambda']:g} | {r['f1']:.3f} | {r['mean_jsd']:.3f} | {r['mean_tvd']:.3f} | {r['mean_kl']:.3f} |")
        P.append(_verdict_lines(findings, ["WP-5"]))
        P.append(_fig(figures, ds, paths_of(data)["wp"], "tradeoff.png", out_dir,
                      "W&P Fig. 5: JSD–TVD trade-off of the consistent adversaries, seeds, uniform, per-instance adversary"))
    else:
        for h in TABLE_HEADERS[3:6]:
            P.append(f"\n### {h}\n\nNot measured.\n")
    # ---------------- T&Š
    ts = data["ts"]
    P.append("\n## Tutek & Šnajder 2020 (Staying True to Your Word)\n")
    tsb = data["models"]["ts_base"]
    P.append(("Grid: " + (ts["setup"] if ts else "–") + ". ") + _model_line(tsb, "T&Š base (seed 0)")
             + " T&Š used 300-d vectors with H = 150 and averaged 5 runs; H = d/2 is required by residual / tying / "
             "MLM (2H = d), so this grid does not share the J&W BiLSTM (H = 128).\n")
    tpub = ts_published(ds)
    P.append(f"\n### {TABLE_HEADERS[6]}\n")
    if ts:
        cells = ts["cells"]
        P.append("F1 % with trained α (Tr.) and the change in F1 when α is uniform (Un.) or randomly permuted (Pm.) at "
                 "test time; mean ± std over seeds.\n")
        P.append("| variant | attention | published Tr. / Un. / Pm. | measured Tr. | measured Un. | measured Pm. |")
        P.append("|---|---|---|---|---|---|")
        for variant, attention, c in _ts_rows(cells, tpub, "fragility"):
            ref = tpub["fragility" if attention == "additive" else "fragility_dot"].get(variant)
            P.append(f"| {variant} | {attention} | {' / '.join(map(str, ref)) if ref else '– (not in the paper)'} | "
                     f"{_ms(c['f1_trained'])} | {_ms(c['delta_uniform'])} | {_ms(c['delta_permuted'])} |")
        P.append(_verdict_lines(findings, ["TS-1", "TS-2"]))
        P.append(_fig(figures, ds, paths_of(data)["ts"], "fragility.png", out_dir,
                      "T&Š Table 1 as bars: ΔF1 with uniform / permuted attention per variant"))
        P.append(f"\n### {TABLE_HEADERS[7]}\n")
        P.append(f"{plan.mi_words} word types (MF: most frequent; RS: sampled ∝ count^0.75; T&Š: 1000), up to "
                 f"{plan.mi_max_occurrences:,} occurrences from the training split, MiniBatchKMeans with k = "
                 f"{plan.mi_clusters} (T&Š: 1000) on e_t and on h_t, MI of the two cluster labelings (nats). Seed(s) "
                 f"{', '.join(map(str, plan.mi_seeds))} only — the k-means is the slowest part of the whole report — "
                 "additive attention as in the paper (no std: one seed).\n")
        P.append("| variant | published MF / RS | measured MF | measured RS |\n|---|---|---|---|")
        for variant, attention, c in _ts_rows(cells, tpub, "mi_MF", attentions=("additive",)):
            if c["mi_MF"]["n"] or c["mi_RS"]["n"] or variant in tpub["mi_MF"]:
                ref = (f"{tpub['mi_MF'][variant]} / {tpub['mi_RS'][variant]}" if variant in tpub["mi_MF"] else "–")
                P.append(f"| {variant} | {ref} | {_ms(c['mi_MF'], 3)} | {_ms(c['mi_RS'], 3)} |")
        P.append(_verdict_lines(findings, ["TS-3"]))
        P.append(f"\n### {TABLE_HEADERS[8]}\n")
        P.append("Mean over tokens of P(predicted class) from the decoder on h_t alone, correctly classified test "
                 "instances; lower at equal F1 = more faithful.\n")
        P.append("| variant | attention | published | measured |\n|---|---|---|---|")
        for variant, attention, c in _ts_rows(cells, tpub, "token_probability"):
            ref = tpub["token_probability" if attention == "additive" else "token_probability_dot"].get(variant, "–")
            P.append(f"| {variant} | {attention} | {ref} | {_ms(c['token_probability'], 3)} |")
        P.append(_verdict_lines(findings, ["TS-4"]))
        P.append(_fig(figures, ds, paths_of(data)["ts"], "token_probability_base_vs_regularised.png", out_dir,
                      "T&Š Fig. 2: per-token P(positive) of one validation sentence, base vs regularised"))
        P.append(f"\n### {TABLE_HEADERS[9]}\n")
        P.append("W&P model-consistent adversary (L = TVD − λ·KL) against the seed-0 model of each cell, and J&W's "
                 f"per-instance adversary on the first {plan.ts_adversary_limit} test instances of every run (no "
                 "numeric table in the paper).\n")
        rows = ts.get("wp_consistent_adversary") or []
        if rows:
            P.append("| model | λ | mean JSD(α_a, α) | mean TVD(ŷ_a, ŷ) | TVD / JSD | adversary F1 |\n|---|---|---|---|---|---|")
            for r in rows:
                P.append(f"| {r['cell']} | {r['lambda']:g} | {r['mean_jsd']:.3f} | {r['mean_tvd']:.4f} | "
                         f"{r['mean_tvd'] / max(r['mean_jsd'], 1e-9):.3f} | {r['test_f1']:.3f} |")
        P.append("\n| variant | attention | J&W adversary mean JSD | mean TVD | mean ε-max JSD |\n|---|---|---|---|---|")
        for name, c in cells.items():
            variant, attention = name.split("-")
            P.append(f"| {variant} | {attention} | {_ms(c['jw_mean_jsd'], 3)} | {_ms(c['jw_mean_tvd'], 4)} | "
                     f"{_ms(c['jw_mean_eps_max_jsd'], 3)} |")
        P.append(_verdict_lines(findings, ["TS-5", "TS-6"]))
        P.append(_fig(figures, ds, paths_of(data)["ts"], "wp_adversary_jsd_tvd.png", out_dir,
                      "T&Š Fig. 1: JSD vs TVD of the model-consistent adversaries, base vs regularised"))
    else:
        for h in TABLE_HEADERS[7:10]:
            P.append(f"\n### {h}\n\nNot measured.\n")
    # ---------------- ERASER
    P.append(f"\n## {TABLE_HEADERS[10]} (beyond the papers)\n")
    P.append("ERASER (DeYoung et al. 2020 §4): comprehensiveness (drop of p(predicted class) when the top-k% tokens "
             "are removed; higher = more faithful) and sufficiency (drop when only they are kept; lower = better), "
             "AOPC = mean over k ∈ {1, 5, 10, 20, 50}%; ± = standard error over instances. Models: the T&Š grid's "
             "seed-0 BiLSTMs (additive). No published values exist.\n")
    any_eraser = False
    for cell_name, res in data["eraser"].items():
        if not res:
            continue
        any_eraser = True
        from .faithfulness import format_eraser_table

        gap = res.get("ig_completeness", {})
        P.append(f"\n**{cell_name}** ({res['num_instances']} test instances; IG {res['parameters']['ig_steps']} steps, "
                 f"{res['parameters']['ig_baseline']} baseline, mean |completeness gap| {_f(gap.get('mean_abs_gap'), 4)})\n")
        P.append(format_eraser_table(res))
        P.append(_fig(figures, ds, paths_of(data)["eraser"][cell_name], "eraser.png", out_dir,
                      f"ERASER curves, {cell_name}"))
    if not any_eraser:
        P.append("Not measured.\n")
    P.append(_verdict_lines(findings, ["ER-"]))
    return "\n".join(P) + "\n"


def _ts_rows(cells: dict, tpub: dict, key: str, attentions=("additive", "dot")):
    """(variant, attention, measured cell or an empty one) for every measured cell and every cell
    with a published value, in T&Š's order: unmeasured published cells show as "–"."""
    from .analysis.ts import VARIANT_ORDER

    empty = {"mean": None, "std": None, "n": 0}
    for attention in attentions:
        published = tpub.get(key if attention == "additive" else f"{key}_dot", {})
        for variant in VARIANT_ORDER:
            c = cells.get(f"{variant}-{attention}")
            if c is None and variant in published:
                c = {k: empty for k in ("f1_trained", "delta_uniform", "delta_permuted", "token_probability",
                                        "mi_MF", "mi_RS", "jw_mean_jsd", "jw_mean_tvd", "jw_mean_eps_max_jsd")}
            if c is not None:
                yield variant, attention, c


def paths_of(data: dict) -> dict:
    return data["paths"]


def write_report(output_dir: str, datasets: list[str], plan: ReproducePlan, all_paths: dict,
                 started: float | None = None, machine_start: dict | None = None) -> dict:
    """Collect, check and write ``OUT/report.json`` + ``OUT/REPORT.md`` + ``OUT/figures``."""
    from .training import write_json_atomic

    figures: list[str] = []
    shutil.rmtree(os.path.join(output_dir, "figures"), ignore_errors=True)  # generated: copied afresh
    per_dataset, sections, all_findings = {}, [], []
    for ds in datasets:
        data = collect(all_paths[ds])
        findings = findings_for(data)
        for f in findings:
            f["dataset"] = ds
        all_findings += findings
        sections.append(dataset_section(data, findings, output_dir, figures, plan))
        per_dataset[ds] = {k: v for k, v in data.items() if k != "paths"} | {"findings": findings}
    stages = _read_json(os.path.join(output_dir, "stages.json"))["stages"] if os.path.exists(
        os.path.join(output_dir, "stages.json")) else {}
    machine = machine_info()
    total = sum(v.get("seconds", 0.0) for v in stages.values())
    report = {"datasets": datasets, "plan": asdict(plan), "machine_start": machine_start, "machine_end": machine,
              "stages": stages, "total_stage_seconds": round(total, 1),
              "this_invocation_seconds": round(time.perf_counter() - started, 1) if started else None,
              "tolerances": TOLERANCE, "results": per_dataset, "findings": all_findings, "figures": figures}
    counts = {v: sum(f["verdict"] == v for f in all_findings) for v in VERDICTS}
    head = ["# hf_attn reproduction report", "",
            "Generated by `hf-attn reproduce --datasets " + " ".join(datasets) + f" --output-dir {output_dir}"
            + (" --quick" if plan.quick else "") + "`. Every published number is from the papers as distilled in "
            "SPEC.md; every verdict sentence is computed from the measured numbers by `hf_attn.reproduce.findings_for` "
            f"(tolerances: {', '.join(f'{k} ±{v}' for k, v in TOLERANCE.items())}).", "",
            "## Summary", "",
            "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".", "",
            "## Setup", "",
            f"- Machine: {machine['cpu']}, {machine['cpu_count']} CPUs, torch threads {machine['torch_threads']}, "
            f"{machine['platform']}; load average at start "
            f"{(machine_start or {}).get('load_average_1_5_15', '–')}, at the end {machine['load_average_1_5_15']} "
            "(above the CPU count the wall times are contended).",
            "- Versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()) + ".",
            "- Embeddings: GloVe-6B-50d (d = 50; the papers used 300-d fastText / GloVe-840B, not available "
            "offline); pads zero, words without a vector N(0, 1).",
            "- Shared runs: J&W BiLSTM = W&P base; J&W Average = W&P TRAINED-MLP guide; the T&Š grid uses H = d/2 = 25 "
            "for every variant (T&Š's equal footing), so it does not share the J&W BiLSTM (H = 128). ERASER runs on "
            "the T&Š seed-0 base / tying / MLM models.",
            f"- Plan: {plan.epochs} epochs; T&Š {plan.ts_seeds} seed(s) × {len(plan.ts_variants)} variants × "
            f"{len(plan.ts_attentions)} attention(s) (the paper: 5 runs); MI on seed(s) "
            f"{', '.join(map(str, plan.mi_seeds))} with k = {plan.mi_clusters}; W&P {plan.wp_seeds} seed models, "
            f"λ ∈ {{{', '.join(f'{x:g}' for x in plan.wp_lambdas)}}}, ADVERSARY guide over {plan.wp_guide_seeds} "
            f"adversary seed(s); J&W adversary {plan.jw_steps} steps; "
            f"ERASER IG {plan.eraser_ig_steps} steps.",
            "", "### Wall time per stage", "",
            "Per stage, the invocation that did the most work (a resumed run splits a stage across invocations, and "
            "runs that already existed cost nothing here); `stages.json` has every invocation's last time.", "",
            "| stage | what | wall time (min) | estimate on 2 idle cores (min) |", "|---|---|---|---|"]
    for key, st in stages.items():
        head.append(f"| {key} | {st['title']} | {st['seconds'] / 60:.1f} | {st['estimate_seconds'] / 60:.1f} |")
    head.append(f"| total | | {total / 60:.1f} | |")
    body = "\n".join(head) + "\n" + "".join(sections)
    body += f"\n# {TABLE_HEADERS[11]}\n\n| dataset | id | source | verdict | finding |\n|---|---|---|---|---|\n"
    for f in all_findings:
        body += f"| {f['dataset']} | {f['id']} | {f['paper']} | {f['verdict']} | {f['claim']} |\n"
    write_json_atomic(os.path.join(output_dir, "report.json"), report)
    write_text_atomic(os.path.join(output_dir, "REPORT.md"), body)
    return report


# ------------------------------------------------------------------------------------------------
# entry points

def reproduce(datasets, output_dir: str, quick: bool = False, seeds: int | None = None,
              wp_seeds: int | None = None, agnews_path: str | None = None, progress: bool = True,
              report_only: bool = False, threads: int | None = None) -> dict:
    """Train (resumably), analyse and report; returns the report dict (also OUT/report.json).
    ``threads``: torch intra-op threads (1 is much faster on a CPU shared with other busy
    processes: two spinning OpenMP threads on two busy cores slowed training 4-10× here)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    datasets = list(dict.fromkeys(datasets))
    bad = [d for d in datasets if d not in DATASETS]
    if bad:
        raise ValueError(f"unknown dataset(s) {bad}; choose from {DATASETS}")
    plan = ReproducePlan.for_mode(quick, seeds, wp_seeds)
    os.makedirs(output_dir, exist_ok=True)
    started = time.perf_counter()
    machine_start = machine_info()
    clock = StageClock(output_dir, progress)
    if progress:
        total = sum(sum(stage_estimates(plan.for_dataset(d)).values()) for d in datasets)
        print(f"[reproduce] {', '.join(datasets)} → {output_dir}; estimate ~{total / 60:.0f} min on 2 idle cores "
              f"for SST-sized data (load average now {machine_start['load_average_1_5_15'][0]}); finished runs "
              "are reused", flush=True)
    all_paths = {}
    for ds in datasets:
        if report_only:
            all_paths[ds] = _paths_only(ds, output_dir, plan)
        else:
            all_paths[ds] = run_dataset(ds, output_dir, plan, clock, agnews_path, progress)
    report = write_report(output_dir, datasets, plan, all_paths, started, machine_start)
    if progress:
        print(f"[reproduce] wrote {os.path.join(output_dir, 'REPORT.md')} ({len(report['findings'])} findings) in "
              f"{(time.perf_counter() - started) / 60:.1f} min", flush=True)
    return report


def _paths_only(dataset: str, output_dir: str, plan: ReproducePlan) -> dict:
    from . import wp_training as wpt

    plan = plan.for_dataset(dataset)
    runs = os.path.join(output_dir, "runs", dataset)
    analysis = os.path.join(output_dir, "analysis", dataset)
    data = os.path.join(output_dir, "data", f"{dataset}-quick") if plan.quick else dataset
    return {"dataset": dataset, "data": data, "runs": runs, "analysis": analysis,
            "base": os.path.join(runs, "lstm-additive"), "average": wpt.guide_run_dir(os.path.join(runs, "wp"), "trained"),
            "wp_runs": os.path.join(runs, "wp"), "grid": os.path.join(runs, "ts-grid"),
            "jw_lstm": os.path.join(analysis, "jw-lstm"), "jw_average": os.path.join(analysis, "jw-average"),
            "wp": os.path.join(analysis, "wp"), "ts": os.path.join(analysis, "ts"),
            "eraser": {c: os.path.join(analysis, "eraser", c) for c in plan.eraser_cells}}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce", help="train, run all three batteries + ERASER, write REPORT.md (resumable)",
        description="One command for the whole reproduction: trains what is missing under OUT/runs (finished runs "
                    "are reused, across batteries too), runs the J&W, W&P and T&Š batteries and the ERASER table, "
                    "and writes OUT/REPORT.md, OUT/report.json and OUT/figures. --datasets sst takes < 1 h on 2 "
                    "idle cores; --quick is a 1–2 minute smoke test on small subsets.")
    p.add_argument("--datasets", nargs="+", default=["sst"], choices=list(DATASETS))
    p.add_argument("--output-dir", required=True)
    p.add_argument("--quick", action="store_true", help="small subsets, 1 epoch, short searches (smoke test)")
    p.add_argument("--seeds", type=int, default=None, help="T&Š grid seeds (default 5, as the paper)")
    p.add_argument("--wp-seeds", type=int, default=None, help="W&P seed models (default 8)")
    p.add_argument("--agnews-path", default=None, help=f"AG News CSV (default {DEFAULT_AGNEWS_PATH})")
    p.add_argument("--threads", type=threads_argument, default="auto",
                   help="torch threads: a number, or auto (default): the cores the load average says "
                        "are free, at least 1")
    p.add_argument("--report-only", action="store_true", help="only rebuild REPORT.md from existing results")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    with exclusive_output_folder(args.output_dir):  # one writer per output folder
        report = reproduce(args.datasets, args.output_dir, quick=args.quick, seeds=args.seeds,
                           wp_seeds=args.wp_seeds, agnews_path=args.agnews_path, progress=not args.quiet,
                           report_only=args.report_only, threads=args.threads)
    counts = {v: sum(f["verdict"] == v for f in report["findings"]) for v in VERDICTS}
    print(json.dumps({"report": os.path.join(args.output_dir, "REPORT.md"),
                      "verdicts": {k: v for k, v in counts.items() if v},
                      "total_stage_minutes": round(report["total_stage_seconds"] / 60, 1)}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reproduce", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    args = parser.parse_args(["reproduce", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING)
    return args.func(args)


__all__ = ["reproduce", "ReproducePlan", "findings_for", "write_report", "stage_estimates", "TABLE_HEADERS",
           "VERDICTS", "JW_PUBLISHED", "TS_PUBLISHED_EXTRA", "main"]
