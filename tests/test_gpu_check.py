"""scripts/gpu_check.py: its measures on hand-made scores, the refusal without CUDA, a CPU-against-CPU
run on a tiny model built the way the script builds MiniLM, and the committed GPU record."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from conftest import needs_minilm

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_measures_by_hand():
    reference = [[1.0, 0.5, 0.0], [0.2, -0.4]]
    same = gpu_check.compare(reference, reference)
    assert same["max_abs"] == 0 and same["pearson"] == pytest.approx(1) and same["pair_agreement"] == 1
    assert same["pairs"] == 3 + 1
    swapped = gpu_check.compare(reference, [[1.0, 0.0, 0.5], [0.2, -0.4]])  # two tokens trade places
    assert swapped["max_abs"] == pytest.approx(0.5) and swapped["relative_max_abs"] == pytest.approx(0.5)
    assert swapped["pair_agreement"] == pytest.approx(3 / 4)
    assert gpu_check.within(same, "float32", "saliency") == (True, [])
    passed, failed = gpu_check.within(swapped, "bfloat16", "saliency")
    assert not passed and set(failed) == {"relative_max_abs", "pair_agreement", "pearson"}
    # Kernel SHAP draws on the device's generator: only its correlation is held to account
    assert gpu_check.within(swapped | {"pearson": 0.95}, "bfloat16", "kernel_shap") == (True, [])
    broken = gpu_check.compare(reference, [[float("nan"), 0.5, 0.0], [0.2, -0.4]])
    assert "finite" in gpu_check.within(broken, "float32", "saliency")[1]


def test_pairs_closer_than_rounding_are_not_ranked():
    reference = [[1.0, 1.0 + 1e-9, 0.0]]
    measures = gpu_check.compare(reference, [[1.0 + 1e-9, 1.0, 0.0]])
    assert measures["pairs"] == 2 and measures["pair_agreement"] == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_without_cuda(tmp_path, capsys):
    assert gpu_check.main(["--assets", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        gpu_check.parse(["--assets", "a", "--out", "b", "--models", "gpt9"])
    with pytest.raises(SystemExit):
        gpu_check.parse(["--prepare", "a", "--trained", "minilm"])
    with pytest.raises(SystemExit):
        gpu_check.parse(["--assets", "a"])


@needs_minilm  # the packaged MiniLM's tokenizer (the bert extra)
def test_a_cpu_run_on_a_tiny_model_writes_the_record(tmp_path):
    from transformers import BertConfig

    from hf_attn.models.pretrained import resolve_base_model
    from transformers import AutoTokenizer

    assets = tmp_path / "assets"
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=2, initializer_range=0.5)
    config.save_pretrained(assets / "minilm")
    AutoTokenizer.from_pretrained(resolve_base_model("minilm-l6")).save_pretrained(assets / "minilm")
    (assets / "sentences.json").write_text(json.dumps(gpu_check.sst_test_sentences(3)))
    out = tmp_path / "record.json"
    code = gpu_check.main(["--assets", str(assets), "--out", str(out), "--device", "cpu", "--models", "minilm",
                           "--methods", "attention,value_zeroing,saliency", "--sentences", "3"])
    record = json.loads(out.read_text())
    assert code == 0 and record["failures"] == []
    rows = record["models"][0]["methods"]
    assert set(rows) == {"attention", "value_zeroing", "saliency"}
    for row in rows.values():
        assert row["float32"]["max_abs"] == 0 and row["float32"]["passed"]
        assert row["bfloat16"]["passed"] and row["bfloat16"]["pearson"] > 0.9


def test_sst_sentences_are_the_bundled_test_split():
    texts = gpu_check.sst_test_sentences(2)
    assert texts[0] == "Effective but too-tepid biopic"


def test_committed_record_is_complete_and_within_tolerance():
    record = json.loads((ROOT / "docs" / "benchmarks" / "gpu_check.json").read_text())
    assert "H100" in record["device"] or "cuda" in record["device"].lower() or "NVIDIA" in record["device"]
    assert record["failures"] == [] and record["seconds"] < 8 * 60
    assert [m["model"] for m in record["models"]] == ["minilm-l6", "smollm2-135m"]
    from hf_attn.batteries.faithfulness import DEFAULT_METHODS, METHODS

    for model in record["models"]:  # every default method; an opt-in one once the record is re-made with it
        assert set(DEFAULT_METHODS) - {"random"} <= set(model["methods"]) <= set(METHODS) - {"random"}
        for name, row in model["methods"].items():
            if "skipped" in row:
                assert row["skipped"]
                continue
            for precision in ("float32", "bfloat16"):
                cell = row[precision]
                assert cell["passed"] and cell["finite"] and cell["seconds"] > 0 and cell["peak_gpu_mb"] > 0
                assert cell["relative_max_abs"] <= record["tolerances"][precision]["relative_max_abs"] or \
                    name in record["compared_on_correlation_only"]
