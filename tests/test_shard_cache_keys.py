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


def test_wp_adversary_cache_key_depends_on_the_precision(tmp_path, monkeypatch):
    """The per-instance adversary's shards of a float32 run are not read by a bfloat16 run (the
    forwards' shards are keyed by the precision already)."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from architectures import TEXTS, tiny_classifier

    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.wp.battery import WPSettings
    from hf_attn.core import sharding
    from hf_attn.runs import wp_sections

    keys = []

    class Stop(Exception):
        pass

    def capture(shards, compute, cache_dir=None, key=None, **kwargs):
        keys.append(key)
        raise Stop

    monkeypatch.setattr(sharding, "run_sharded", capture)
    model, tokenizer = tiny_classifier("bert")
    settings = WPSettings()
    for precision in ("float32", "bfloat16"):
        adapter = adapter_for(model, tokenizer, device="cpu", precision=precision)
        sequences = [tokenizer(t)["input_ids"] for t in TEXTS[:3]]
        base = wp_sections.WPBase(adapter, sequences, np.zeros(3, dtype=np.int64), ["a", "b"], {}, "test", "d",
                                  cache_dir=str(tmp_path))
        try:
            wp_sections.per_instance_adversary(base, settings, None)
        except Stop:
            pass
    assert len(keys) == 2 and None not in keys and keys[0] != keys[1]
