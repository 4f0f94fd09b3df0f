"""scripts/bench/long_inputs.py on a tiny random llama: the record holds every method at every
length, each with its seconds or the reason it did not run, and the analytic FLOP counts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from architectures import saved_classifier

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("bench_long_inputs", ROOT / "scripts" / "bench" / "long_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flop_formulas_by_hand():
    script = _script()
    shape = {"non_embedding_parameters": 100, "layers": 2, "hidden": 8}
    assert script.forward_flops(shape, 10) == 2 * 100 * 10 + 4 * 2 * 100 * 8  # 8400
    assert script.method_flops("rollout", shape, 10, 16) == 8400 + 2 * 2 * 100  # head means kept: L·N²
    wide = {"non_embedding_parameters": 100, "layers": 30, "hidden": 8}  # 30·8192² floats pass 2 GiB: L·N³
    assert script.method_flops("rollout", wide, 8192, 16) == script.forward_flops(wide, 8192) + 2 * 30 * 8192 ** 3
    assert script.method_flops("rollout", wide, 4096, 16) == script.forward_flops(wide, 4096) + 2 * 30 * 4096 ** 2
    assert script.method_flops("integrated_gradients", shape, 10, 16) == 16 * 3 * 8400
    assert script.method_flops("leave_one_out", shape, 10, 16) == 8400 + 10 * (2 * 100 * 9 + 4 * 2 * 81 * 8)
    assert script.method_flops("value_zeroing", shape, 10, 16) == 11 * 8400
    assert script.method_flops("attention_flow", shape, 10, 16) is None
    with pytest.raises(ValueError, match="method"):
        script.method_flops("forward", shape, 10, 16)


def test_record_on_a_tiny_llama(tmp_path):
    folder, _ = saved_classifier("llama", tmp_path)
    output = tmp_path / "long.json"
    script = _script()
    assert script.main(["--model", str(folder), "--lengths", "8", "16", "--budget", "5", "--long-budget", "5",
                        "--ig-steps", "2", "--memory-limit-gb", "0", "--output", str(output)]) == 0
    record = json.loads(output.read_text())
    assert record["threads"] == 1 and record["machine"]["cpus"] >= 1
    assert [row["n"] for row in record["rows"]] == [8, 16]
    for row in record["rows"]:
        assert row["content_tokens"] == row["n"]
        assert set(row["methods"]) == set(script.METHODS)
        for name, entry in row["methods"].items():
            assert (entry["ran"] and entry["seconds"] >= 0) or entry["reason"], (row["n"], name, entry)
            assert name == "attention_flow" or entry["flops"] >= 0
        assert row["methods"]["attention"]["ran"]
        assert row["methods"]["attention"]["flops"] == row["forward_flops"]
