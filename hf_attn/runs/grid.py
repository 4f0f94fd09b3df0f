"""Train the Tutek & Šnajder variant grid: variants × attentions × seeds (T&Š §4.1, Table 1).

``hf-attn train-grid`` (:mod:`hf_attn.cli.grid`) ``--dataset sst --variants base concat residual tying mlm --attentions additive
dot --seeds 5 --output-dir DIR`` trains one model per cell and seed into
``DIR/<variant>-<attention>/seed<k>``, one at a time, seed-major (every cell's seed 0 first, then
seed 1, …) so a partial grid is already a complete table with fewer seeds. Rerunning skips the
finished runs (``train`` returns a finished folder as is) and resumes an interrupted one from its
last checkpoint. ``DIR/grid.json`` (written atomically after every run) records the settings, each
run's status, test metrics and wall time, and the grid's total wall time.

Equal footing: every variant — base and concat included — gets the same
embeddings, epochs, seeds and BiLSTM size, by default H = d/2 so that 2H = d as the residual /
tying / MLM variants require (T&Š appendix A: 2H = d = 300, "we also use the new hidden state size
for all experiments with the base model"). Defaults of the regularisers, from T&Š Table 4:
δ = 10 (tying; their ablation range is {10, 20, 30}) and η = 1 (MLM weight, the middle of
{0.1, 0.3, 1, 3, 5}; our MLM loss is a mean over masked tokens, so it does not grow with length),
p_mlm = 0.15.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace

from hf_attn.training.engine import TrainSettings, task_of, train
from hf_attn.core.environment import environment_versions
from hf_attn.core.io import read_json, write_json_atomic

DEFAULT_VARIANTS = ("base", "concat", "residual", "tying", "mlm")
DEFAULT_ATTENTIONS = ("additive", "dot")
DEFAULT_TYING_DELTA = 10.0
DEFAULT_MLM_WEIGHT = 1.0


def cell_name(variant: str, attention: str) -> str:
    return f"{variant}-{attention}"


def grid_runs(base: TrainSettings, variants=DEFAULT_VARIANTS, attentions=DEFAULT_ATTENTIONS,
              seeds: int | list[int] = 5) -> list[tuple[str, TrainSettings]]:
    """``[(relative run dir, settings)]`` in training order: seed-major, then variant, attention.

    ``seeds`` is a count (seeds 0…n−1) or an explicit list. ``base.hidden_size`` is used for every
    variant (``None`` → d/2, see the module docstring)."""
    from hf_attn.data.embeddings import embedding_dim_of

    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("seeds must name at least one seed")
    bad = [v for v in variants if v not in DEFAULT_VARIANTS]
    if bad:
        raise ValueError(f"unknown variant(s) {bad}; choose from {DEFAULT_VARIANTS}")
    bad = [a for a in attentions if a not in ("additive", "dot", "uniform")]
    if bad:
        raise ValueError(f"unknown attention(s) {bad}")
    if len(set(variants)) != len(variants) or len(set(attentions)) != len(attentions):
        raise ValueError("variants and attentions must not repeat")
    d = embedding_dim_of(base.embeddings, base.embedding_dim)
    hidden = base.hidden_size if base.hidden_size is not None else d // 2
    if 2 * hidden != d and set(variants) & {"residual", "tying", "mlm"} and base.encoder == "lstm":
        raise ValueError(f"residual/tying/mlm need 2H = d: hidden_size {hidden} with d = {d}")
    runs = []
    for seed in seed_list:
        for variant in variants:
            for attention in attentions:
                settings = replace(base, variant=variant, attention=attention, seed=seed,
                                   hidden_size=hidden)
                settings.validate()
                runs.append((os.path.join(cell_name(variant, attention), f"seed{seed}"), settings))
    return runs


def train_grid(runs: list[tuple[str, TrainSettings]], output_dir: str, task=None,
               progress: bool = True, run_progress: bool = False) -> dict:
    """Train ``runs`` (from :func:`grid_runs`) one after another under ``output_dir``.

    Returns (and writes to ``output_dir/grid.json`` after every run) ``{"runs": [{"dir", "variant",
    "attention", "seed", "status": "trained"|"finished before"|"failed", "wall_seconds",
    "test_f1", …}], "wall_seconds": total this invocation, "trained_seconds": Σ wall of the runs
    trained now, …}``. A failing run is recorded with its error and the grid goes on.
    """
    from tqdm.auto import tqdm

    os.makedirs(output_dir, exist_ok=True)
    if task is None and runs:
        first = runs[0][1]
        task = task_of(first)
    # wall times of runs trained by earlier (interrupted) invocations are carried over
    earlier = {}
    grid_json = os.path.join(output_dir, "grid.json")
    if os.path.exists(grid_json):
        with open(grid_json, encoding="utf-8") as f:
            earlier = {r["dir"]: r for r in json.load(f).get("runs", [])}
    summary = {"output_dir": os.path.abspath(output_dir), "num_runs": len(runs),
               "settings": asdict(runs[0][1]) if runs else None, "versions": environment_versions(),
               "runs": []}
    start = time.perf_counter()
    bar = tqdm(runs, desc="grid", unit="run", disable=not progress)
    for relative, settings in bar:
        bar.set_postfix_str(relative)
        run_dir = os.path.join(output_dir, relative)
        finished_before = os.path.exists(os.path.join(run_dir, "metrics.json"))
        record = {"dir": relative, "variant": settings.variant, "attention": settings.attention,
                  "seed": settings.seed}
        t0 = time.perf_counter()
        try:
            metrics = train(settings, run_dir, task=task, progress=run_progress)
        except Exception as err:  # one broken run must not lose the others
            record.update(status="failed", error=f"{type(err).__name__}: {err}")
        else:
            record.update(status="finished before" if finished_before else "trained",
                          test_f1=metrics.get("test_f1"), test_accuracy=metrics.get("test_accuracy"),
                          train_seconds=metrics.get("train_seconds"))
        record["wall_seconds"] = round(time.perf_counter() - t0, 2)
        if record["status"] == "trained":
            record["trained_wall_seconds"] = record["wall_seconds"]
        elif record["status"] == "finished before":
            before = earlier.get(relative, {})
            carried = before.get("trained_wall_seconds",
                                 before.get("wall_seconds") if before.get("status") == "trained" else None)
            if carried is not None:
                record["trained_wall_seconds"] = carried
        summary["runs"].append(record)
        trained = [r["wall_seconds"] for r in summary["runs"] if r["status"] == "trained"]
        all_trained = [r["trained_wall_seconds"] for r in summary["runs"] if "trained_wall_seconds" in r]
        summary.update(wall_seconds=round(time.perf_counter() - start, 2),
                       trained_runs=len(trained), trained_seconds=round(sum(trained), 2),
                       seconds_per_trained_run=round(sum(trained) / len(trained), 2) if trained else None,
                       # over every invocation (runs whose training wall time is known)
                       total_trained_runs=len(all_trained),
                       total_trained_seconds=round(sum(all_trained), 2),
                       total_seconds_per_run=(round(sum(all_trained) / len(all_trained), 2)
                                              if all_trained else None))
        write_json_atomic(os.path.join(output_dir, "grid.json"), summary)
    return summary


# T&Š's regulariser ranges: δ from §3.1's text ("We consider values [1, 10, 20, 30] for δ"; Table 4 lists
# {10, 20, 30}, the text's range holds it), η from Table 4 ({0.1, 0.3, 1, 3, 5})
TS_TYING_DELTAS = (1.0, 10.0, 20.0, 30.0)
TS_MLM_WEIGHTS = (0.1, 0.3, 1.0, 3.0, 5.0)
SELECTION_FILE = "selection.json"
# the setting each regularised variant selects
REGULARISER = {"tying": "tying_delta", "mlm": "mlm_weight"}


def selection_runs(base: TrainSettings, attentions, deltas=TS_TYING_DELTAS,
                   weights=TS_MLM_WEIGHTS) -> list[tuple[str, TrainSettings]]:
    """The runs of T&Š's model selection: seed 0 of tying for every δ and of MLM for every η, per attention,
    as ``[("<variant>-<attention>/<setting>-<value>", settings)]`` (H = d/2 as in the grid)."""
    runs = []
    for variant, values in (("tying", deltas), ("mlm", weights)):
        for (relative, settings) in grid_runs(base, (variant,), attentions, [0]):
            cell = relative.split(os.sep)[0]
            for value in values:
                runs.append((os.path.join(cell, f"{REGULARISER[variant]}-{value:g}"),
                             replace(settings, **{REGULARISER[variant]: float(value)})))
    return runs


def select_regularisers(runs: list[tuple[str, TrainSettings]], output_dir: str, task=None,
                        progress: bool = False) -> dict:
    """Train the :func:`selection_runs` (resumable) and pick, per cell, the value with the best dev F1
    (T&Š §3.1: "we only report results of the model with the best-performing results"; the first of
    equal values). Writes and returns ``{cell: {"setting", "dev_f1": {value: F1}, "chosen"}}``
    (``output_dir/selection.json``)."""
    summary = train_grid(runs, output_dir, task=task, progress=progress)
    failed = [r for r in summary["runs"] if r["status"] == "failed"]
    if failed:
        raise RuntimeError(f"T&Š model selection runs failed: {[(r['dir'], r['error']) for r in failed]}")
    selection: dict = {}
    for relative, settings in runs:
        cell = relative.split(os.sep)[0]
        setting = REGULARISER[settings.variant]
        dev_f1 = read_json(os.path.join(output_dir, relative, "metrics.json"))["dev_f1"]
        entry = selection.setdefault(cell, {"setting": setting, "dev_f1": {}})
        entry["dev_f1"][f"{getattr(settings, setting):g}"] = dev_f1
    for entry in selection.values():
        best = max(entry["dev_f1"].values())
        entry["chosen"] = float(next(v for v, f1 in entry["dev_f1"].items() if f1 == best))
    write_json_atomic(os.path.join(output_dir, SELECTION_FILE), selection)
    return selection


def read_selection(output_dir: str) -> dict | None:
    """The selection :func:`select_regularisers` wrote in ``output_dir``, None when there is none."""
    path = os.path.join(output_dir, SELECTION_FILE)
    return read_json(path) if os.path.exists(path) else None


def with_selection(runs: list[tuple[str, TrainSettings]], selection: dict | None) -> list[tuple[str, TrainSettings]]:
    """Grid ``runs`` with each regularised cell's chosen value (cells the selection has no entry for keep
    theirs)."""
    if not selection:
        return runs
    out = []
    for relative, settings in runs:
        entry = selection.get(cell_name(settings.variant, settings.attention))
        if entry and settings.variant in REGULARISER:
            settings = replace(settings, **{entry["setting"]: float(entry["chosen"])})
        out.append((relative, settings))
    return out


__all__ = ["grid_runs", "train_grid", "cell_name", "DEFAULT_TYING_DELTA", "DEFAULT_MLM_WEIGHT", "TS_TYING_DELTAS",
           "TS_MLM_WEIGHTS", "selection_runs", "select_regularisers", "read_selection", "with_selection"]
