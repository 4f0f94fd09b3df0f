"""FLOPs a run computes, by stage, and the machine's matmul ceiling they are read against.

:class:`StageFlops` is a torch dispatch mode that adds up the FLOPs of every matrix product and
attention product the code inside it runs, forwards and backwards (the formulas of
:mod:`torch.utils.flop_counter`, 2 FLOP per multiply–add, plus the CPU's fused attention kernel,
which that module does not list), and files each under the stage that asked for it: a function
``stage(frame)`` reads the Python call stack of the operation. :func:`table_stage` names the
faithfulness table's stages (each method, the ERASER, soft and NAOPC columns, ...).

What is counted is what the code computes, padding included, not a definition's minimum; the
element-wise work (softmax, layer norms, GELU) and non-tensor work (attention flow's maximum flows)
cost seconds but no FLOPs here. :func:`matmul_peak` measures the ceiling: the best rate of the
fine-tuned model's feed-forward matrix products on the given threads; :func:`rate_bound` says what
bounds a speed goal against it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count


def _cpu_flash(query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_flop_count(query.shape, key.shape, value.shape)


def _cpu_flash_backward(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


# the CPU's fused attention kernel (what scaled_dot_product_attention runs on a CPU), counted as
# torch.utils.flop_counter counts the CUDA flash kernel: QKᵀ and AV over every query and key
_EXTRA = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
          torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward}


class StageFlops(TorchDispatchMode):
    """Within ``with StageFlops(stage) as counter:``, ``counter.flops`` (a Counter) holds the FLOPs of
    every operation run, under ``stage(frame)`` of the frame that ran it (None → ``"other"``)."""

    def __init__(self, stage: Callable[[object], str | None]):
        super().__init__()
        self.stage = stage
        self.flops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func._overloadpacket
        formula = _EXTRA.get(packet) or flop_registry.get(packet)
        if formula is None and func is not torch.ops.prim.device.default:
            # an op without a formula that decomposes (linear, matmul, einsum, scaled_dot_product_attention
            # reach the mode whole under inference_mode) runs as its decomposition, whose products count
            # (torch.utils.flop_counter.FlopCounterMode's rule)
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        if formula is not None:
            self.flops[self.stage(sys._getframe(1)) or "other"] += int(formula(*args, **kwargs, out_val=out))
        return out

    def gflop(self) -> dict[str, float]:
        """The counts in GFLOP, by stage."""
        return {stage: flops / 1e9 for stage, flops in sorted(self.flops.items())}


# the faithfulness table's stages, by the function of hf_attn/batteries/faithfulness that runs them
TABLE_STAGES = {"_table_inputs": "inputs", "_cached_leave_one_out": "leave_one_out", "_erasure_cells": "erasure",
                "_soft_cells": "soft",
                "_naopc_cells": "naopc", "plausibility_cells": "plausibility", "_agreement_cells": "agreement"}


def table_stage(frame) -> str | None:
    """The faithfulness table's stage of ``frame``'s call: within the methods, the method's name
    (``_run_methods``'s ``name``); else the column stage of :data:`TABLE_STAGES`; else None."""
    while frame is not None:
        name = frame.f_code.co_name
        if name == "_run_methods":
            return frame.f_locals.get("name")
        if name in TABLE_STAGES and "hf_attn" in frame.f_code.co_filename:
            return TABLE_STAGES[name]
        frame = frame.f_back
    return None


def matmul_peak(threads: int, repeats: int = 20) -> dict:
    """The machine's single-precision matmul rate on ``threads`` torch threads: the best of ``repeats``
    products at the fine-tuned model's feed-forward shapes ((1024 × 384)·(384 × 1536) and back),
    GFLOP/s — the ceiling every rate is read against."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        best = 0.0
        for m, k, n in ((1024, 384, 1536), (1024, 1536, 384)):
            a, b = torch.randn(m, k), torch.randn(k, n)
            a @ b  # warm
            for _ in range(repeats):
                start = time.perf_counter()
                a @ b
                best = max(best, 2 * m * k * n / (time.perf_counter() - start) / 1e9)
        return {"gflops": best, "threads": threads, "repeats": repeats,
                "shape": "(1024 × 384)·(384 × 1536) and (1024 × 1536)·(1536 × 384), float32"}
    finally:
        torch.set_num_threads(previous)


def rate_bound(gflop: float, seconds: float, reference_seconds: float, reference: str, at_least: float,
               peak: float, who: str = "hf_attn") -> str:
    """What bounds the goal "``at_least`` × as fast as ``reference``" for a run of ``gflop`` GFLOP in
    ``seconds`` (the reference took ``reference_seconds``): the rate the run would need at its own
    FLOPs against the measured matmul ``peak`` (GFLOP/s). Beyond the peak, the FLOPs bound it (only
    computing less would meet it); within, the overhead around the matrix products does."""
    needed = gflop / (reference_seconds / at_least)
    achieved = gflop / seconds
    share = needed / peak
    if share > 1:
        return (f"FLOPs: {at_least}× {reference} needs {needed:.0f} GFLOP/s at {who}'s {gflop:.0f} GFLOP, "
                f"{100 * share:.0f} % of the measured matmul peak ({peak:.0f} GFLOP/s); {who} runs at "
                f"{achieved:.0f} ({100 * achieved / peak:.0f} %)")
    return (f"overhead: {at_least}× {reference} needs {needed:.0f} GFLOP/s ({100 * share:.0f} % of the measured "
            f"matmul peak) at {who}'s {gflop:.0f} GFLOP; {who} runs at {achieved:.0f} ({100 * achieved / peak:.0f} %)")
