"""The ERASER table (:func:`hf_attn.batteries.eraser.battery.eraser_table`) shard by shard: its
per-instance work — every importance measure, the undefined rows, each measure's comprehensiveness /
sufficiency per fraction bin, the rows the Kendall τ compares, integrated gradients' completeness
gaps — is computed on consecutive groups of instances (:func:`hf_attn.core.sharding.run_sharded`:
under ``accelerate launch`` the shards are split between the processes and gathered on every one;
with a cache folder each finished shard is kept so a killed run resumes); the summaries (AOPC,
standard errors, τ) are then computed once over all instances. One shard's work is
:func:`hf_attn.batteries.eraser.battery.shard_rows`.

Same results whatever the number of processes: the shards are planned from all instances, and the
random floor is the seeded ``(N, T)`` matrix of one process, drawn whole on every process and sliced
per shard (the same draws as an unsharded table). With one shard (``shard_instances`` ≥ N) every value
is computed exactly as by an unsharded table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import torch

DEFAULT_SHARD_INSTANCES = 256  # instances per shard
# the measures the Kendall τ compares, in the table's order (rollout where the model has it)
CORRELATED = ("attention", "rollout", "gradient", "loo", "ig_abs", "ig")


def plan_eraser_shards(count: int, shard_instances: int) -> list[np.ndarray]:
    """Consecutive runs of ``shard_instances`` instance indices covering ``range(count)``."""
    if isinstance(shard_instances, bool) or not isinstance(shard_instances, int) or shard_instances < 1:
        raise ValueError(f"shard_instances must be a positive int, got {shard_instances!r}")
    if count < 1:
        raise ValueError("no instances to shard")
    return [np.arange(start, min(start + shard_instances, count)) for start in range(0, count, shard_instances)]


def eraser_shards(shard, adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                  measures: Sequence[str], fractions: Sequence[float], *, ig_steps: int, ig_baseline: str, seed: int,
                  token_budget: int, gradient_token_budget: int, shard_instances: int = DEFAULT_SHARD_INSTANCES,
                  cache_dir: str | None = None, key: str | None = None, accelerator="auto",
                  progress: bool = False) -> tuple[list[np.ndarray], list[dict], dict]:
    """Every shard's per-instance results: ``(shards, results, sharding)`` with ``sharding`` the
    processes and the shards each computed (as the J&W battery and the faithfulness table record it).
    ``shard``: ``(adapter, ids, mask, units, indices, measures, fractions, random_rows, **settings) →
    dict`` (:func:`hf_attn.batteries.eraser.battery.shard_rows`)."""
    from hf_attn.batteries.eraser.units import special_frame
    from hf_attn.core.sharding import cache_key, current_accelerator, run_sharded

    special_frame(input_ids, attention_mask, units)  # checked over all texts: a refusal names the text's own index
    if accelerator == "auto":
        accelerator = current_accelerator()
    shards = plan_eraser_shards(len(input_ids), shard_instances)
    # the random floor: one process' (N, T) draws, the same on every process, sliced per shard
    random_rows = (torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
                   if "random" in measures else None)

    def compute(number: int, indices: np.ndarray) -> dict:
        part = shard(adapter, input_ids, attention_mask, units, indices, measures, fractions, random_rows,
                      ig_steps=ig_steps, ig_baseline=ig_baseline, token_budget=token_budget,
                      gradient_token_budget=gradient_token_budget)
        return part | {"process": np.asarray(0 if accelerator is None else int(accelerator.process_index))}

    if key is not None:  # shard number i holds other instances under another shard size: another key
        key = cache_key(key, shard_instances)
    results = run_sharded(shards, compute, cache_dir=cache_dir, key=key, accelerator=accelerator,
                          progress=progress, desc="ERASER shards")
    by_process: dict[int, list[int]] = {}
    for number, r in enumerate(results):
        by_process.setdefault(int(r["process"]), []).append(number)
    sharding = {"processes": 1 if accelerator is None else int(accelerator.num_processes), "shards": len(shards),
                "shard_instances": shard_instances,
                "shards_by_process": {str(k): v for k, v in sorted(by_process.items())}}
    return shards, results, sharding


def merge_shards(shards: list[np.ndarray], results: list[dict], measures: Sequence[str], num_instances: int) -> dict:
    """The shards' per-instance results in instance order: ``comprehensiveness`` / ``sufficiency``
    ``{measure: (N, K)}``, ``undefined`` ``{measure: per instance reason or None}`` (measures with one),
    ``emptied`` (``(mask (N, K), reason)`` or None), ``predicted`` ``(N,)``, ``rows`` ``{measure: per
    instance scores over its units}``, the IG ``gap`` / ``difference`` ``(N,)`` (or absent) and
    ``seconds`` summed over the shards."""
    order = np.concatenate([np.asarray(s, dtype=np.int64) for s in shards])
    infos = [json.loads(str(r["info"])) for r in results]

    def stacked(field: str) -> np.ndarray:
        values = np.concatenate([np.asarray(r[field]) for r in results])
        out = np.empty_like(values)
        out[order] = values
        return out

    def ragged(field: str) -> list:
        values = [row for r in results for row in r[field]]
        out = [None] * num_instances
        for i, row in zip(order.tolist(), values):
            out[i] = np.asarray(row)
        return out

    merged: dict = {"comprehensiveness": {n: stacked(f"comprehensiveness__{n}") for n in measures},
                    "sufficiency": {n: stacked(f"sufficiency__{n}") for n in measures},
                    "predicted": stacked("predicted"),
                    "rows": {n: ragged(f"rows__{n}") for n in CORRELATED if f"rows__{n}" in results[0]}}
    for name in ("ig_completeness_gap", "ig_difference"):
        if name in results[0]:
            merged[name] = stacked(name)
    undefined: dict[str, list] = {}
    for indices, info in zip(shards, infos):
        for name, why in info["undefined"].items():
            rows = undefined.setdefault(name, [None] * num_instances)
            for i, reason in zip(np.asarray(indices).tolist(), why):
                rows[i] = reason
    merged["undefined"] = {n: undefined[n] for n in measures if n in undefined}
    emptied = [info["emptied"] for info in infos]
    if any(e is not None for e in emptied):
        mask = np.zeros((num_instances, results[0][f"comprehensiveness__{measures[0]}"].shape[1]), dtype=bool)
        for indices, e in zip(shards, emptied):
            if e is not None:
                mask[np.asarray(indices)] = np.asarray(e["mask"], dtype=bool)
        merged["emptied"] = (mask, next(e["reason"] for e in emptied if e is not None))
    else:
        merged["emptied"] = None
    seconds: dict[str, float] = {}
    for info in infos:
        for name, value in info["seconds"].items():
            seconds[name] = seconds.get(name, 0.0) + value
    merged["seconds"] = seconds
    return merged


__all__ = ["DEFAULT_SHARD_INSTANCES", "eraser_shards", "merge_shards", "plan_eraser_shards"]
