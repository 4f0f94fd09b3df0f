"""Reading a reproduction's numbers back from its run and analysis folders (:func:`collect`): the
batteries' results files and the facts of every trained model, per dataset."""

from __future__ import annotations

import json
import os


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _maybe(path: str):
    return read_json(path) if os.path.exists(path) else None


def _run_facts(model_dir: str) -> dict | None:
    """Embeddings, sizes and test metrics of a finished run."""
    if not os.path.exists(os.path.join(model_dir, "metrics.json")):
        return None
    run, metrics = read_json(os.path.join(model_dir, "run.json")), read_json(os.path.join(model_dir, "metrics.json"))
    model = run.get("model", {})
    return {"dir": model_dir, "embeddings": model.get("embeddings"), "embedding_dim": model.get("embedding_dim"),
            "encoder": model.get("encoder"), "attention": model.get("attention"), "variant": model.get("variant"),
            "hidden_size": model.get("hidden_size"), "parameters": model.get("parameters"),
            "epochs": run["settings"]["epochs"], "seed": run["settings"]["seed"],
            "preprocessing": run["settings"].get("preprocessing", "default"),
            "split_sizes": run.get("split_sizes"), "test_f1": metrics.get("test_f1"),
            "test_accuracy": metrics.get("test_accuracy"), "test_roc_auc": metrics.get("test_roc_auc"),
            "train_seconds": metrics.get("train_seconds")}


def seed_model_dirs(wp_runs: str) -> list[tuple[str, str]]:
    """``[(seed-S, folder)]`` of the finished W&P seed models, by seed."""
    if not os.path.isdir(wp_runs):
        return []
    names = [n for n in os.listdir(wp_runs) if n.startswith("seed-") and n[5:].isdigit()
             and os.path.exists(os.path.join(wp_runs, n, "metrics.json"))]
    return [(n, os.path.join(wp_runs, n)) for n in sorted(names, key=lambda n: int(n[5:]))]


SEED_SUMMARY_KEYS = ("tau_gradient", "tau_loo", "tau_gradient_loo", "permutation", "adversary")


def _jw_seed_summaries(folder: str | None) -> list[dict]:
    """The J&W battery on the W&P seed models, compact: ``[{"seed", "summary"}]``."""
    if not folder or not os.path.isdir(folder):
        return []
    out = []
    for name in sorted(os.listdir(folder), key=lambda n: int(n[5:]) if n[5:].isdigit() else -1):
        res = _maybe(os.path.join(folder, name, "results.json"))
        if res and name.startswith("seed-") and name[5:].isdigit():
            out.append({"seed": int(name[5:]),
                        "summary": {k: res["summary"][k] for k in SEED_SUMMARY_KEYS if k in res["summary"]}})
    return out


def transformer_facts(model_dir: str) -> dict | None:
    """Base model, fine-tuning settings, dev/test metrics and training time of a BERT-family folder
    written by ``hf-attn train --base-model`` (its run.json, kind "transformer"); None when missing."""
    run = _maybe(os.path.join(model_dir, "run.json"))
    if not isinstance(run, dict) or run.get("kind") != "transformer":
        return None
    settings, test, dev = run.get("settings") or {}, run.get("test") or {}, run.get("dev") or {}
    return {"dir": model_dir, "base_model": settings.get("base_model"), "dataset": run.get("dataset"),
            "epochs": settings.get("epochs"), "seed": settings.get("seed"),
            "freeze_layers": settings.get("freeze_layers"), "max_length": settings.get("max_length"),
            "parameters": run.get("parameters"), "test_accuracy": test.get("accuracy"), "test_f1": test.get("f1"),
            "test_roc_auc": test.get("roc_auc"), "dev_accuracy": dev.get("accuracy"),
            "train_seconds": (run.get("seconds") or {}).get("train"), "threads": run.get("threads")}


def _bert_family(paths: dict) -> dict:
    """The --bert-family section's numbers: the model's facts, its J&W results, (when the W&P
    transformer battery ran) its W&P results and its faithfulness table."""
    return {"model": transformer_facts(paths["bert_model"]),
            "jw": _maybe(os.path.join(paths["jw_bert"], "results.json")),
            "wp": _maybe(os.path.join(paths["wp_bert"], "results.json")),
            "faithfulness": _faithfulness(paths.get("faith_bert"))}


# what the report keeps of a faithfulness table's results.json (not the per-sentence values and texts)
FAITHFULNESS_KEYS = ("methods", "table", "cost", "skipped", "agreement", "settings", "model", "num_instances",
                     "forwards", "measure_definitions")


def _faithfulness(folder: str | None) -> dict | None:
    """The faithfulness table of ``folder`` (its results.json, :data:`FAITHFULNESS_KEYS`), None when missing."""
    res = _maybe(os.path.join(folder, "results.json")) if folder else None
    return {k: res[k] for k in FAITHFULNESS_KEYS if k in res} if res else None


def collect(paths: dict) -> dict:
    """Every number the report shows for one dataset (from the batteries' results files); the
    BERT-family section's only when the plan has it (``paths["bert_model"]``)."""
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
            "jw": {"lstm": jw_lstm, "average": jw_avg, "seeds": _jw_seed_summaries(paths.get("jw_seeds")),
                   "extra": {name: {"model": _run_facts(run_dir),
                                    "results": _maybe(os.path.join(out, "results.json"))}
                             for name, (run_dir, out) in (paths.get("jw_extra") or {}).items()},
                   "snli": ({"model": _run_facts(paths["snli_model"]),
                             "results": _maybe(os.path.join(paths["jw_snli"], "results.json")),
                             "seeds": _jw_seed_summaries(paths.get("jw_snli_seeds")),
                             "seed_models": [_run_facts(d) for _, d in seed_model_dirs(paths.get("snli_seeds", ""))]}
                            if paths.get("snli_model") else None),
                   "qa": {task: {"model": _run_facts(run_dir), "results": _maybe(os.path.join(out, "results.json"))}
                          for task, (run_dir, out) in (paths.get("qa") or {}).items()} or None},
            "wp": wp, "ts": ts,
            "ts_select": _maybe(os.path.join(paths["ts_select"], "selection.json")) if paths.get("ts_select") else None,
            # {"2": summary, "3": summary} of the depths that ran (None: none)
            "ts_layers": ({str(n): found for n, folder in paths["ts_layers"].items()
                           if (found := _maybe(os.path.join(folder, "summary.json")))} or None
                          if paths.get("ts_layers") else None),
            "ts_grid": {k: grid_json.get(k) for k in ("num_runs", "total_trained_runs", "total_trained_seconds",
                                                        "total_seconds_per_run")} if grid_json else None,
            "eraser": eraser, "faithfulness": _faithfulness(paths.get("faith_lstm")), "paths": paths} | ({"bert_family": _bert_family(paths)} if paths.get("bert_model") else {})

