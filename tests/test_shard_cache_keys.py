"""Cached shards are only reused by a run that plans the same shards: a resumed run with another
shard size must not read a shard file that holds other instances under the same number."""

from __future__ import annotations

import json

import numpy as np
import torch


def _framed_rows(count: int, width: int = 5):
    """``count`` texts framed as [CLS] w w w [SEP] (ids 101 / 102), no padding."""
    ids = torch.full((count, width), 7, dtype=torch.long)
    ids[:, 0], ids[:, -1] = 101, 102
    mask = torch.ones_like(ids)
    units = torch.zeros_like(ids, dtype=torch.bool)
    units[:, 1:-1] = True
    return ids, mask, units


def _recording_shard(seen: list):
    def shard(adapter, ids, mask, units, indices, measures, fractions, random_rows, **settings):
        seen.append(np.asarray(indices).tolist())
        return {"indices": np.asarray(indices, dtype=np.int64), "info": json.dumps({})}
    return shard


def test_eraser_shards_of_another_shard_size_are_not_reused(tmp_path):
    from hf_attn.batteries.eraser.shards import eraser_shards

    ids, mask, units = _framed_rows(20)
    common = {"ig_steps": 2, "ig_baseline": "zero", "seed": 0, "token_budget": 64, "gradient_token_budget": 64,
              "cache_dir": str(tmp_path / "cache"), "key": "k", "accelerator": None}
    first_seen: list = []
    eraser_shards(_recording_shard(first_seen), None, ids, mask, units, ("attention",), (0.5,), shard_instances=5,
                  **common)
    assert first_seen == [list(range(i, i + 5)) for i in range(0, 20, 5)]
    # the same key, another shard size: shard 0 now covers instances 0–7, not the cached 0–4
    seen: list = []
    shards, results, _ = eraser_shards(_recording_shard(seen), None, ids, mask, units, ("attention",), (0.5,),
                                       shard_instances=8, **common)
    assert [s.tolist() for s in shards] == [list(range(0, 8)), list(range(8, 16)), list(range(16, 20))]
    assert [r["indices"].tolist() for r in results] == [s.tolist() for s in shards]
    assert seen == [s.tolist() for s in shards]  # computed afresh, none read from the other plan's files
    # the first plan's shards stay reusable by a rerun of that plan
    again: list = []
    eraser_shards(_recording_shard(again), None, ids, mask, units, ("attention",), (0.5,), shard_instances=5,
                  **common)
    assert again == []
