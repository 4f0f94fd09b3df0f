"""scripts/gpu_throughput.py: its FLOP count on hand-computed products (forward and the backward of
``torch.autograd.grad``, which PyTorch's own FlopCounterMode refuses), its refusals, and a CPU run of
the J&W battery on a tiny model built the way the script builds MiniLM."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from conftest import needs_minilm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402 (the scripts folder, put on the path above)

spec = importlib.util.spec_from_file_location("gpu_throughput", ROOT / "scripts" / "gpu_throughput.py")
gpu_throughput = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_throughput)


class _Products:
    """Stands in for an Explainer: ``jw`` runs x @ w (4×8 by 8×3) and the gradient of its sum with
    respect to w through ``torch.autograd.grad``."""

    def jw(self, texts):
        x = torch.randn(4, 8)
        w = torch.randn(8, 3, requires_grad=True)
        torch.autograd.grad((x @ w).sum(), w)


def test_flops_are_counted_by_hand():
    flops, why = gpu_throughput.counted_flops(_Products(), "jw", ["a"])
    # forward 2·4·8·3 = 192; the backward's gradient for w is xᵀ @ g, 2·8·4·3 = 192 (none for x)
    assert why is None and flops == 192 + 192


def test_a_failing_count_says_why():
    class Broken:
        def jw(self, texts):
            raise RuntimeError("no")

    assert gpu_throughput.counted_flops(Broken(), "jw", ["a"]) == (None, "RuntimeError: no")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refuses_without_cuda(tmp_path, capsys):
    assert gpu_throughput.main(["--assets", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_arguments_are_checked():
    for argv in (["--assets", "a", "--out", "b", "--models", "gpt9"],
                 ["--assets", "a", "--out", "b", "--batteries", "eraser"],
                 ["--assets", "a", "--out", "b", "--sentences", "8", "--count", "9"]):
        with pytest.raises(SystemExit):
            gpu_throughput.parse(argv)


@needs_minilm  # the packaged MiniLM's tokenizer (the bert extra)
def test_a_cpu_run_of_the_jw_battery_writes_the_record(tmp_path):
    from transformers import AutoTokenizer, BertConfig

    from hf_attn.models.pretrained import resolve_base_model

    assets = tmp_path / "assets"
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=2, initializer_range=0.5)
    config.save_pretrained(assets / "minilm")
    AutoTokenizer.from_pretrained(resolve_base_model("minilm-l6")).save_pretrained(assets / "minilm")
    (assets / "sentences.json").write_text(json.dumps(gpu_check.sst_test_sentences(4)))
    out = tmp_path / "record.json"
    code = gpu_throughput.main(["--assets", str(assets), "--out", str(out), "--device", "cpu", "--models", "minilm",
                                "--batteries", "jw", "--sentences", "4", "--count", "2", "--budget", "600"])
    record = json.loads(out.read_text())
    assert code == 0 and record["left_out"] == [] and record["sentences"] == 4
    assert [(r["battery"], r["precision"]) for r in record["rows"]] == [("jw", "float32"), ("jw", "bfloat16")]
    for row in record["rows"]:
        assert row["sentences_per_second"] > 0 and row["flops"] > 0 and 0 < row["fraction_of_floor"]
