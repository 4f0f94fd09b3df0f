"""The faithfulness table in shards: planned once from all the texts, each computed alone (in any
process, cached atomically so a killed run resumes), merged into the one table.

Every per-sentence value of the table is a function of the sentence, the model and the settings alone
(the package docstring), so a shard's table holds the same per-sentence values as the whole table's,
up to float32 rounding where a forward shares a batch with other rows. To make the result independent
of the number of processes, the battery always computes shard by shard — one process computes
every shard, N processes split them (:func:`hf_attn.core.sharding.run_sharded`:
``Accelerator.split_between_processes``, gathered on every process) — and :func:`merge_tables`
builds the table from the shards' per-sentence values: each cell's mean, interval, median and
undefined count over every sentence, the reasons' counts summed, the soft cells' Monte-Carlo errors
from the sentences' own, the paired tests, the agreement between methods and the plausibility columns
recomputed over all the sentences. The shards are consecutive runs of ``shard_sentences`` texts, so
the same texts and settings give the same shards, whatever the processes.

What sums rather than recomputes: a method's seconds (its seconds per sentence is the total over the
sentences), peak memory per sentence (the shards' mean weighted by their sentences), integrated
gradients' completeness figures (weighted means, the largest node count, the misses summed), the
erasure inputs requested and unique (unique within each shard) and NAOPC's bound counts."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import numpy as np

from hf_attn.batteries.faithfulness.result import FaithfulnessResult
from hf_attn.batteries.faithfulness.settings import PLAUSIBILITY_METRICS, FaithfulnessSettings
from hf_attn.batteries.faithfulness.soft import SOFT_COLUMNS


def plan_shards(count: int, shard_sentences: int) -> list[np.ndarray]:
    """Consecutive runs of ``shard_sentences`` text indices covering ``range(count)``."""
    if count < 1:
        raise ValueError("no texts to shard")
    if not isinstance(shard_sentences, int) or shard_sentences < 1:
        raise ValueError(f"shard_sentences must be a positive int, got {shard_sentences!r}")
    return [np.arange(start, min(start + shard_sentences, count)) for start in range(0, count, shard_sentences)]


def _payload(result: FaithfulnessResult) -> dict:
    """Everything of a shard's table, attributions and content included, as JSON values."""
    out = asdict(result)
    out["attributions"] = {m: [np.asarray(r, dtype=float).tolist() for r in rows]
                           for m, rows in result.attributions.items()}
    out["content"] = [np.asarray(c, dtype=bool).tolist() for c in result.content]
    out["per_instance"] = {m: {k: np.asarray(v, dtype=float).tolist() for k, v in d.items()}
                           for m, d in result.per_instance.items()}
    return out


def _from_payload(payload: dict) -> FaithfulnessResult:
    attributions = {m: [np.asarray(r, dtype=float) for r in rows] for m, rows in payload.pop("attributions").items()}
    content = [np.asarray(c, dtype=bool) for c in payload.pop("content")]
    return FaithfulnessResult.from_payload(payload, attributions, content)


def _weighted(parts: list, values: list) -> float:
    sizes = np.array([p.num_instances for p in parts], dtype=float)
    values = np.array(values, dtype=float)
    return float(np.sum(sizes * values) / sizes.sum())


def _merged_cost(parts: list[FaithfulnessResult], method: str, count: int) -> dict:
    costs = [p.cost[method] for p in parts]
    out = {k: v for k, v in costs[0].items() if isinstance(v, str)}  # notes (shared backward, …)
    seconds = float(sum(c.get("seconds", 0.0) for c in costs))
    out |= {"seconds": seconds, "seconds_per_sentence": seconds / count,
            "peak_mb_per_sentence": _weighted(parts, [c.get("peak_mb_per_sentence", 0.0) for c in costs])}
    for key in ("completeness_gap_mean_abs", "output_difference_mean_abs", "completeness_within_1pct_share",
                "ig_steps_mean", "ig_gradients_mean"):
        if key in costs[0]:
            out[key] = _weighted(parts, [c[key] for c in costs])
    if "ig_steps_max" in costs[0]:
        out["ig_steps_max"] = max(int(c["ig_steps_max"]) for c in costs)
    if "ig_target_missed" in costs[0]:
        out |= {"ig_target": costs[0]["ig_target"], "ig_target_missed": sum(int(c["ig_target_missed"]) for c in costs)}
    for key in ("ig_baseline", "ig_baseline_offered"):
        if key in costs[0]:
            out[key] = costs[0][key]
    return out


def _merged_naopc(parts: list[FaithfulnessResult]) -> dict:
    infos = [p.metric_details["naopc"] for p in parts]
    out = {k: v for k, v in infos[0].items() if not isinstance(v, (list, dict)) and k not in ("seconds",
                                                                                              "k_grid_sentences")}
    out["bounds"] = {k: sum(i["bounds"][k] for i in infos) for k in infos[0]["bounds"]}
    for key in ("bound_method", "aopc_min", "aopc_max"):
        out[key] = [v for i in infos for v in i[key]]
    out["k_grid_sentences"] = sum(int(i["k_grid_sentences"]) for i in infos)
    out["seconds"] = float(sum(i["seconds"] for i in infos))
    return out


def merge_tables(adapter, parts: list[FaithfulnessResult], settings: FaithfulnessSettings,
                 rationales=None, k_source: str | None = None) -> FaithfulnessResult:
    """One table from the tables of consecutive shards (module docstring). ``rationales``: all the
    texts' rationales (the plausibility columns are recomputed over all of them, with the k fraction
    ``settings.rationale_k_fraction`` every shard used)."""
    from hf_attn.batteries.faithfulness.inputs import _instances
    from hf_attn.batteries.faithfulness.table import (_agreement_cells, _Columns, _paired_tests, _result_from,
                                                      soft_summary)

    if not parts:
        raise ValueError("no shards to merge")
    methods = list(parts[0].methods)
    for part in parts[1:]:
        if part.methods != methods or part.skipped.keys() != parts[0].skipped.keys():
            raise RuntimeError(f"the shards ran different methods ({methods} vs {part.methods}): they cannot be "
                               "merged into one table")
    texts = [t for p in parts for t in p.texts]
    count = len(texts)
    content = [c for p in parts for c in p.content]
    raw = {m: [r for p in parts for r in p.attributions[m]] for m in methods}
    undefined = {m: [r for p in parts for r in (p.undefined.get(m) or [None] * p.num_instances)] for m in methods}
    batch = adapter.encode(texts)
    instances = _instances(adapter, batch)
    columns = _Columns(methods, settings.confidence, adapter, instances, undefined)
    recomputed = {"tau_loo", *PLAUSIBILITY_METRICS}  # by the agreement and the plausibility steps below
    for method in methods:
        for metric in parts[0].per_instance.get(method, {}):
            if metric in recomputed:
                continue
            values = np.concatenate([np.asarray(p.per_instance[method][metric], dtype=float) for p in parts])
            counted: dict = {}
            for p in parts:
                for reason, n in ((p.undefined_reasons or {}).get(method, {}).get(metric) or {}).items():
                    counted[reason] = counted.get(reason, 0) + int(n)
            columns.set(method, metric, values, counted)
    extra: dict = {}
    if "soft" in parts[0].metric_details:
        details = [p.metric_details["soft"] for p in parts]
        soft = {"draws": {m: np.concatenate([np.asarray(d["draws"][m]) for d in details]) for m in methods},
                "stderr": {m: {c: np.concatenate([np.asarray(d["stderr"][m][c], dtype=float) for d in details])
                               for c in SOFT_COLUMNS} for m in methods},
                "null": np.concatenate([np.asarray(d["null_probability"], dtype=float) for d in details]),
                "seconds": float(sum(d["seconds"] for d in details)),
                "forwards": int(sum(d["forwards"] for d in details))}
        extra["soft"] = soft_summary(columns, soft, methods, settings)
    if "naopc" in parts[0].metric_details:
        extra["naopc"] = _merged_naopc(parts)
    scores = {m: [np.where(np.isfinite(r), r, 0.0) for r in raw[m]] for m in methods}
    if rationales is not None:
        from hf_attn.batteries.faithfulness.plausibility import plausibility_cells

        extra["plausibility"] = plausibility_cells(columns, adapter, texts, instances, scores, list(rationales),
                                                   settings.rationale_k_fraction, settings.metrics, k_source)
    agreement = _agreement_cells(columns, scores, content, settings)
    paired = _paired_tests(columns, methods, settings)
    if paired is not None:
        extra["paired"] = paired
    cost = {m: _merged_cost(parts, m, count) for m in methods}
    forwards = {"requested": sum(p.forwards.get("requested", 0) for p in parts),
                "unique": sum(p.forwards.get("unique", 0) for p in parts)}
    forwards["saved_share"] = 1 - forwards["unique"] / max(forwards["requested"], 1)
    return _result_from(adapter, texts, instances, settings, raw, cost, dict(parts[0].skipped), columns, agreement,
                        extra, forwards)


def run_faithfulness_sharded(adapter, texts, settings: FaithfulnessSettings | None = None, progress: bool = False,
                             rationales=None, shard_sentences: int = 64, cache_dir: str | None = None,
                             key: str | None = None, accelerator="auto", attributions=None,
                             attributions_level: str = "token", k_source: str | None = None
                             ) -> tuple[FaithfulnessResult, dict]:
    """:func:`~hf_attn.batteries.faithfulness.table.run_faithfulness` shard by shard (module
    docstring): ``(result, sharding)`` where ``sharding`` records the processes and the shards each
    computed. ``cache_dir`` / ``key``: where finished shards are kept (a rerun computes only the
    missing ones; the key must name the model, the texts and the settings)."""
    from hf_attn.batteries.faithfulness.plausibility import checked_rationales, k_fraction_of
    from hf_attn.batteries.faithfulness.table import run_faithfulness
    from hf_attn.core.io import json_safe
    from hf_attn.core.sharding import current_accelerator, run_sharded

    from hf_attn.batteries.faithfulness.given import checked_attributions

    from hf_attn.adapters.base import checked_texts
    from hf_attn.batteries.faithfulness.plausibility import ANALYSED_K

    settings = settings or FaithfulnessSettings()
    texts = checked_texts(texts)  # checked whole, so that a refusal names the text's own index
    shards = plan_shards(len(texts), shard_sentences)
    given = checked_attributions(attributions, len(texts))
    empty = [i for i, c in enumerate(adapter.encode(texts).content.any(1).tolist()) if not c]
    if empty:
        raise ValueError(f"texts {empty[:5]} have no tokens of their own (only special tokens): nothing to rank")
    if rationales is not None:
        rationales = checked_rationales(texts, rationales)
        if settings.rationale_k_fraction is None:  # one k for every shard: the rationales' share over all texts
            settings = replace(settings, rationale_k_fraction=k_fraction_of(rationales))
            k_source = k_source or ANALYSED_K
    if accelerator == "auto":
        accelerator = current_accelerator()
    computed_by: dict[int, int] = {}

    def compute(number: int, indices: np.ndarray) -> dict:
        part = run_faithfulness(adapter, [texts[i] for i in indices], settings, progress=False,
                                rationales=None if rationales is None else [rationales[i] for i in indices],
                                attributions=None if not given else {n: [rows[i] for i in indices]
                                                                     for n, rows in given.items()},
                                attributions_level=attributions_level)
        computed_by[number] = 0 if accelerator is None else int(accelerator.process_index)
        return {"payload": np.asarray(json.dumps(json_safe(_payload(part)), allow_nan=False)),
                "process": np.asarray(computed_by[number])}

    results = run_sharded(shards, compute, cache_dir=cache_dir, key=key, accelerator=accelerator,
                          progress=progress, desc="faithfulness shards")
    parts = [_from_payload(json.loads(str(r["payload"]))) for r in results]
    merged = merge_tables(adapter, parts, settings, rationales, k_source)
    processes = 1 if accelerator is None else int(accelerator.num_processes)
    by_process: dict[int, list[int]] = {}
    for number, r in enumerate(results):
        by_process.setdefault(int(r["process"]), []).append(number)
    sharding = {"processes": processes, "shards": len(shards), "shard_sentences": shard_sentences,
                "shards_by_process": {str(k): v for k, v in sorted(by_process.items())}}
    return merged, sharding


def run_methods_sharded(adapter, full_batch, settings: FaithfulnessSettings, groups: list, time_budget=None,
                        accelerator="auto", contrast=None):
    """:func:`~hf_attn.batteries.faithfulness.methods.run_methods` with its length ``groups`` split
    between the processes (:func:`hf_attn.core.sharding.run_sharded`) and gathered on every one. Each
    group is computed as one process computes it (the same texts, trimmed to the same width), so every
    text's scores are the same; the costs are summed (seconds) or averaged over the texts."""
    from types import SimpleNamespace

    from hf_attn.batteries.faithfulness.methods import MethodRun, run_methods
    from hf_attn.core.io import json_safe
    from hf_attn.core.sharding import run_sharded

    def compute(number: int, indices: np.ndarray) -> dict:
        part = run_methods(adapter, full_batch.select(indices.tolist()), settings,
                           groups=[np.arange(len(indices))], time_budget=time_budget, contrast=contrast)
        rows = {f"scores__{m}": [np.asarray(r, dtype=float) for r in part.scores[m]] for m in part.scores}
        info = {"cost": part.cost, "skipped": part.skipped, "padding": part.padding,
                "undefined": {m: {str(int(indices[i])): why for i, why in d.items()} for m, d in part.undefined.items()}}
        return rows | {"info": np.asarray(json.dumps(json_safe(info)))}

    results = run_sharded(groups, compute, accelerator=accelerator, progress=False, desc="method groups")
    infos = [json.loads(str(r["info"])) for r in results]
    methods = [k[len("scores__"):] for k in results[0] if k.startswith("scores__")]
    scores = {m: [None] * len(full_batch) for m in methods}
    for indices, result in zip(groups, results):
        for m in methods:
            for i, row in zip(np.asarray(indices).tolist(), result[f"scores__{m}"]):
                scores[m][i] = row
    parts = [SimpleNamespace(cost=info["cost"], num_instances=len(indices)) for info, indices in zip(infos, groups)]
    cost = {m: _merged_cost(parts, m, len(full_batch)) for m in methods}
    undefined = {}
    for info in infos:
        for m, rows in info["undefined"].items():
            undefined.setdefault(m, {}).update({int(i): why for i, why in rows.items()})
    padding = _weighted(parts, [info["padding"] for info in infos])
    return MethodRun(scores, cost, infos[0]["skipped"], padding, undefined)


__all__ = ["merge_tables", "plan_shards", "run_faithfulness_sharded", "run_methods_sharded"]
