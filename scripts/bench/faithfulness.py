#!/usr/bin/env python
"""Benchmark sections for ERASER and integrated gradients (hf_attn.batteries.eraser.battery).

    python scripts/bench/faithfulness.py [--model-dir runs/sst-lstm-additive]
        [--sections eraser integrated_gradients] [--loop-instances 200] [--threads N]

Same protocol as ``scripts/bench/analyses.py`` (whose ``SECTIONS`` picks these up): the batched
implementation on the whole split (SST test: 1821 sentences), a per-instance loop of the same
computation on ``--loop-instances`` of them, agreement on those, instances/s and speed-up.

- ``eraser``: comprehensiveness + sufficiency of the attention ranking at 1/5/10/20/50 %
  (11 inputs per instance). Loop: ``eraser_scores_slow`` (one forward per instance and bin).
- ``integrated_gradients``: 50-step trapezoid IG (51 path points per instance). Loop: one
  instance at a time (its 51 points in one forward + backward). Also reports the completeness gap.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, run as a script or loaded by path
from common import main as run_sections, peak_rss_mb  # noqa: E402


def _row(name, n_batched, batched_seconds, n_loop, loop_seconds, max_abs_diff, tolerance, **extra):
    batched_rate, loop_rate = n_batched / batched_seconds, n_loop / loop_seconds
    row = {"analysis": name, "instances": n_batched, "batched_seconds": batched_seconds,
           "batched_instances_per_s": batched_rate, "loop_instances": n_loop,
           "loop_seconds": loop_seconds, "loop_instances_per_s": loop_rate,
           "speedup": batched_rate / loop_rate, "max_abs_diff": max_abs_diff,
           "agree": bool(max_abs_diff <= tolerance), "peak_rss_mb": peak_rss_mb(), **extra}
    print(f"{name:16s} batched {batched_seconds:7.2f} s ({batched_rate:8.1f} inst/s) | loop "
          f"{loop_rate:7.1f} inst/s on {n_loop} | speed-up {row['speedup']:6.1f}× | max |Δ| "
          f"{max_abs_diff:.1e} {'ok' if row['agree'] else 'MISMATCH'} | peak RSS {row['peak_rss_mb']:.0f} MB"
          + "".join(f" | {k} {v:.2e}" if isinstance(v, float) else f" | {k} {v}" for k, v in extra.items()),
          flush=True)
    return row


def _padded(encoded, rows=None):
    from hf_attn.batteries.jw.battery import pad_batch

    rows = range(len(encoded)) if rows is None else rows
    return pad_batch([encoded[i] for i in rows])


def eraser(ctx) -> dict:
    """``ctx``: any object with ``model``, ``encoded`` (token id lists) and ``loop_rows``."""
    from hf_attn.batteries.eraser.battery import eraser_scores, eraser_scores_slow

    ids, mask = _padded(ctx.encoded)
    with torch.inference_mode():
        attention = torch.cat([ctx.model(input_ids=ids[s:s + 512], attention_mask=mask[s:s + 512]).attentions
                               for s in range(0, len(ids), 512)])
    start = time.perf_counter()
    batched = eraser_scores(ctx.model, ids, mask, attention)
    seconds = time.perf_counter() - start
    rows = np.asarray(ctx.loop_rows)
    start = time.perf_counter()
    looped = eraser_scores_slow(ctx.model, ids[rows], mask[rows], attention[rows])
    loop_seconds = time.perf_counter() - start
    diff = max(np.abs(batched.comprehensiveness[rows] - looped.comprehensiveness).max(),
               np.abs(batched.sufficiency[rows] - looped.sufficiency).max())
    return _row("eraser", len(ids), seconds, len(rows), loop_seconds, float(diff), 1e-5,
                forwards_per_instance=1 + 2 * len(batched.fractions))


def integrated_gradients(ctx, steps: int = 50) -> dict:
    from hf_attn.batteries.eraser.battery import integrated_gradients as ig

    ids, mask = _padded(ctx.encoded)
    start = time.perf_counter()
    batched = ig(ctx.model, ids, mask, steps=steps)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    looped = {int(i): ig(ctx.model, torch.tensor([ctx.encoded[i]]), None, steps=steps).attributions[0]
              for i in ctx.loop_rows}
    loop_seconds = time.perf_counter() - start
    diff = max(float((looped[i] - batched.attributions[i, :len(looped[i])]).abs().max()) for i in looped)
    gap = batched.completeness_gap.abs()
    return _row("integrated-grad", len(ids), seconds, len(looped), loop_seconds, diff, 1e-5,
                completeness_mean_abs_gap=float(gap.mean()), completeness_max_abs_gap=float(gap.max()))


SECTIONS = {"eraser": eraser, "integrated_gradients": integrated_gradients}


def main(argv=None) -> int:
    """These sections only, through common.py's driver (same options and output as analyses.py)."""
    return run_sections(SECTIONS, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
