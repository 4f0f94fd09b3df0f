"""scripts/bench/stage_flops.py: hand-computed FLOPs of a linear layer and of attention through the CPU's
fused kernel (forward and backward, against the eager products torch's own counter sees), the
faithfulness table's leave-one-out stage equal to its deletions' forwards counted one by one, and
the bound a speed goal gets against a peak (hand-computed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def flops():
    path = ROOT / "scripts" / "bench" / "stage_flops.py"
    spec = importlib.util.spec_from_file_location("bench_stage_flops", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_stage_flops"] = module  # the dispatch mode's class is resolved through its module
    spec.loader.exec_module(module)
    return module


def test_a_linear_layer_forward_and_backward(flops):
    layer = torch.nn.Linear(3, 4, bias=False)
    x = torch.randn(5, 3, requires_grad=True)
    with flops.StageFlops(lambda frame: "here") as counter:
        layer(x).sum().backward()
    # 2 · 5 · 3 · 4 each: the forward, the gradient to the input and the one to the weight
    assert counter.flops == {"here": 3 * 120}
    assert counter.gflop() == {"here": 360 / 1e9}


def test_attention_through_the_cpu_kernel_is_counted(flops):
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = (torch.randn(1, 2, t, 8, requires_grad=True) for t in (4, 6, 6))
    with flops.StageFlops(lambda frame: None) as counter:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    qk = 2 * 1 * 2 * 4 * 6 * 8  # QKᵀ; AV the same
    assert counter.flops == {"other": 2 * qk}
    with flops.StageFlops(lambda frame: None) as counter:
        out.sum().backward()
    with FlopCounterMode(display=False) as eager:  # the same products unfused, as torch counts them
        weights = (q @ k.transpose(-1, -2) / 8 ** 0.5).softmax(-1)
        (weights @ v).sum().backward()
    assert eager.get_total_flops() == 2 * qk + 4 * qk  # forward, then two products per product back
    assert counter.flops["other"] == 4 * qk + qk  # the fused backward recomputes QKᵀ


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_products_count_the_same_under_inference_mode(flops, mode):
    # under inference_mode linear, einsum and attention reach the mode whole: their decompositions count
    layer = torch.nn.Linear(8, 4, bias=True)
    x, q, k = torch.randn(3, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 6, 8)
    with mode(), flops.StageFlops(lambda frame: None) as counter:
        layer(x)
        torch.einsum("bhqd,bhkd->bhqk", q, k)
        torch.nn.functional.scaled_dot_product_attention(q, k, k)
    qk = 2 * 1 * 2 * 4 * 6 * 8
    assert counter.flops == {"other": 2 * 3 * 8 * 4 + qk + 2 * qk}


def test_the_tables_leave_one_out_stage_is_its_deletions_forwards(flops):
    from architectures import tiny_classifier
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    text = "the movie was good but far too long"
    settings = FaithfulnessSettings(methods=("saliency", "leave_one_out"), ig_target=None, soft_draws=2,
                                    soft_max_draws=2, batch_tokens=4096)
    with flops.StageFlops(flops.table_stage) as counter:
        result = run_faithfulness(adapter, [text], settings)
    ids = adapter.encode([text]).input_ids[0].tolist()
    content = result.content[0].nonzero()[0]
    # one forward per distinct deletion (words the tokenizer does not know all read as the same id)
    distinct = {tuple(ids[:t] + ids[t + 1:]) for t in content}
    assert len(content) == 8 and len(distinct) < 8
    with flops.StageFlops(lambda frame: "one") as single, torch.no_grad():
        adapter.logits(adapter.from_token_lists([list(next(iter(distinct)))]))
    assert counter.flops["leave_one_out"] == len(distinct) * single.flops["one"] > 0
    assert {"saliency", "inputs", "erasure", "soft", "naopc"} <= set(counter.flops)


def test_a_goal_beyond_the_peak_is_bounded_by_flops(flops):
    # 300 GFLOP in 3 s; 3 × a 9 s reference needs 300 / 3 = 100 GFLOP/s, above a 95 GFLOP/s peak
    assert flops.rate_bound(300.0, 3.0, 9.0, "abc", 3.0, 95.0, who="def") == (
        "FLOPs: 3.0× abc needs 100 GFLOP/s at def's 300 GFLOP, 105 % of the measured matmul peak (95 GFLOP/s); "
        "def runs at 100 (105 %)")
    # within the peak: the overhead around the products bounds it
    assert flops.rate_bound(300.0, 6.0, 12.0, "abc", 3.0, 95.0).startswith(
        "overhead: 3.0× abc needs 75 GFLOP/s (79 % of the measured matmul peak) at hf_attn's 300 GFLOP; "
        "hf_attn runs at 50 (53 %)")


def test_the_matmul_peak_is_measured(flops):
    before = torch.get_num_threads()
    peak = flops.matmul_peak(1, repeats=2)
    assert peak["gflops"] > 0 and peak["threads"] == 1 and torch.get_num_threads() == before
