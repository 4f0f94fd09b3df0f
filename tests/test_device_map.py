"""Models larger than one device: ``Explainer.from_pretrained(..., device_map=...)``.

A tiny random Llama and BERT are saved, then loaded twice: plainly, and with a device map that keeps
the embedding and the first layer on the CPU and puts the other layers on the disk (accelerate reads
their weights in just before each layer runs and drops them after; the only split a CPU-only
machine can make). Every attribution method, the faithfulness table and ``explain`` must give the
same numbers as the plain model — the same arithmetic on the same weights, so within 1e-6 (they are
equal to the last bit here). The offloaded weights are read outside a forward by ALTI and the
norm-based attention (the output projection and layer norm), and the fast path and value zeroing
replace the layers' forwards for a replay: both are checked to leave accelerate's wrappers in place.
bfloat16 against float32 is ``scripts/bench/bf16_agreement.py`` (record
``docs/benchmarks/bf16_agreement.json``), held here to its stated bounds.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn import Explainer

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-6
MAPS = {
    "llama": {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
              "model.layers.2": "disk", "model.norm": "cpu", "model.rotary_emb": "cpu", "score": "cpu"},
    "bert": {"bert.embeddings": "cpu", "bert.encoder.layer.0": "cpu", "bert.encoder.layer.1": "disk",
             "bert.encoder.layer.2": "disk", "bert.pooler": "cpu", "classifier": "cpu"},
}
SETTINGS = {"ig_steps": 8, "ig_target": None, "shap_samples": 16, "seed": 0}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _saved(name: str, folder: Path) -> str:
    model, tokenizer = tiny_classifier(name, layers=3)
    target = folder / name
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return str(target)


def _largest_gap(a, b) -> float:
    return max(float(np.nanmax(np.abs(np.asarray(x, dtype=float) - np.asarray(y, dtype=float))))
               for x, y in zip(a, b))


@pytest.mark.parametrize("name", ["llama", "bert"])
def test_a_model_split_across_the_cpu_and_the_disk_explains_as_the_plain_model(name, tmp_path):
    path = _saved(name, tmp_path)
    plain = Explainer.from_pretrained(path, device="cpu")
    placed = Explainer.from_pretrained(path, device_map=MAPS[name], offload_folder=str(tmp_path / "offload"))
    offloaded = [n for n, p in placed.model.named_parameters() if p.device.type == "meta"]
    assert offloaded and any(".1." in n for n in offloaded)  # the disk layers hold only placeholders
    described = placed.describe()
    assert described["device"] == "cpu" and described["device_map"] == {"cpu": len(MAPS[name]) - 2, "disk": 2}
    layers = placed.adapter.layers
    wrappers = [layer.__dict__.get("forward") for layer in layers]
    assert all(w is not None for w in wrappers)  # accelerate's hooks wrap each layer's forward

    a = plain.attributions(TEXTS, **SETTINGS)
    b = placed.attributions(TEXTS, **SETTINGS)
    assert a.methods == b.methods and a.skipped == b.skipped
    assert {"alti", "attention_norm", "value_zeroing", "integrated_gradients", "leave_one_out"} <= set(b.methods)
    for method in a.methods:
        assert _largest_gap(a.values[method], b.values[method]) <= TOLERANCE, method
    # the replays (fast path, value zeroing, read-out pruning) put accelerate's own forwards back
    assert [layer.__dict__.get("forward") for layer in layers] == wrappers
    # the pruned forwards' capture stops inside the offloaded last layer; its replay puts the weights back
    assert placed.adapter.readout_pruning, placed.adapter.readout_reason
    assert [n for n, p in placed.model.named_parameters() if p.device.type == "meta"] == offloaded
    if name != "llama":  # the table and explain() once (they run the same adapter calls as the methods)
        return
    settings = dict(methods=["attention", "leave_one_out", "integrated_gradients"], ig_steps=4)
    fa = plain.faithfulness(TEXTS[:3], **settings).to_pandas()
    fb = placed.faithfulness(TEXTS[:3], **settings).to_pandas()
    numbers = [c for c in fa.columns if fa[c].dtype.kind == "f" and "seconds" not in c and "memory" not in c
               and "mb" not in c.lower()]
    assert numbers and np.allclose(fa[numbers].to_numpy(), fb[numbers].to_numpy(), atol=TOLERANCE, equal_nan=True)

    ea = plain.explain(TEXTS[:2], adversary_steps=5, k=2, num_permutations=3, ig_steps=4)
    eb = placed.explain(TEXTS[:2], adversary_steps=5, k=2, num_permutations=3, ig_steps=4)
    for x, y in zip(ea.sentences, eb.sentences):
        for field in ("attention", "gradient", "loo", "ig", "permutation_tvd", "adversaries_tvd"):
            assert np.allclose(getattr(x, field), getattr(y, field), atol=TOLERANCE), field


def test_cache_keys_read_offloaded_weights_and_f_fidelity_refuses_them(tmp_path):
    """The weights' checksum in every resumable run's cache key reads the disk-offloaded weights from
    accelerate's offload map (the same float as the plain model, to the last bit), and F-Fidelity,
    which fine-tunes a whole copy, refuses an offloaded model before computing anything."""
    from hf_attn.batteries.faithfulness.f_fidelity import run_f_fidelity
    from hf_attn.batteries.jw.common import weights_checksum

    path = _saved("bert", tmp_path)
    plain = Explainer.from_pretrained(path, device="cpu")
    placed = Explainer.from_pretrained(path, device_map=MAPS["bert"], offload_folder=str(tmp_path / "offload"))
    assert any(p.device.type == "meta" for p in placed.model.parameters())
    assert weights_checksum(placed.model) == weights_checksum(plain.model)
    assert weights_checksum(plain.model) == sum(float(p.double().sum()) for p in plain.model.parameters())
    with pytest.raises(ValueError, match=r"F-Fidelity fine-tunes a whole copy .* 32 of its parameters .* offloaded"):
        run_f_fidelity(placed, TEXTS[:2], cache_dir=str(tmp_path / "copies"))
    assert not (tmp_path / "copies").exists()


def test_device_map_refusals(tmp_path, monkeypatch):
    path = _saved("llama", tmp_path)
    with pytest.raises(ValueError, match="device_map must be one of auto"):
        Explainer.from_pretrained(path, device_map="everywhere")
    with pytest.raises(ValueError, match="'meta' holds no weights"):
        Explainer.from_pretrained(path, device_map={"": "meta"})
    with pytest.raises(ValueError, match="pass offload_folder="):
        Explainer.from_pretrained(path, device_map={"": "disk"})
    with pytest.raises(ValueError, match="max_memory applies only with device_map"):
        Explainer.from_pretrained(path, max_memory={"cpu": "1GiB"})
    with pytest.raises(ValueError, match="no CUDA device is available"):
        Explainer.from_pretrained(path, device_map={"": "cuda:0"}) if not _cuda() else pytest.skip("CUDA here")
    for name in ("dtype", "torch_dtype"):  # hf_attn takes precision=, never the dtype names
        with pytest.raises(ValueError, match=f"not {name}"):
            Explainer.from_pretrained(path, device_map="auto", **{name: "bfloat16"})
    placed = Explainer.from_pretrained(path, device_map=MAPS["llama"], offload_folder=str(tmp_path / "off"))
    with pytest.raises(ValueError, match="placed by its device_map"):
        Explainer(placed.model, placed.tokenizer, device="cuda:0" if _cuda() else "mps")
    # hf_attn's own models: refused before any weights are read
    own = tmp_path / "own"
    own.mkdir()
    (own / "config.json").write_text(json.dumps({"model_type": "hf_attn"}))
    with pytest.raises(ValueError, match="device_map applies to transformers classifiers"):
        Explainer.from_pretrained(str(own), device_map="auto")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "accelerate" else real_find_spec(name, *a))
    with pytest.raises(ValueError, match="pip install accelerate"):
        Explainer.from_pretrained(path, device_map="auto")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_bfloat16_with_a_device_map_stays_within_the_stated_bounds(tmp_path):
    """The same tiny Llama, split across the CPU and the disk, in bfloat16 (weights loaded in it)
    against float32: bfloat16 really ran (the scores differ) and each method stays inside the
    script's bounds for the tiny models."""
    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    from bf16_agreement import BOUNDS, agreement

    path = _saved("llama", tmp_path)
    placement = {"device_map": MAPS["llama"], "offload_folder": str(tmp_path / "offload")}
    record = agreement(path, TEXTS, placement, ["attention", "rollout", "saliency", "leave_one_out"], BOUNDS["tiny"])
    assert record["described"]["device_map"] == {"cpu": 5, "disk": 2}
    for method, measures in record["methods"].items():
        assert measures["within"], (method, measures)
        assert measures["max_abs"] > 0, method  # bfloat16 arithmetic, not float32 reported as bfloat16
    bf16 = Explainer.from_pretrained(path, precision="bfloat16", **placement)
    assert bf16.describe()["weights_dtype"] == "bfloat16" and bf16.describe()["precision"] == "bfloat16"


@pytest.mark.slow
def test_the_bf16_record_is_within_its_bounds_and_remade_by_its_command(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    from bf16_agreement import main

    committed = json.loads((ROOT / "docs" / "benchmarks" / "bf16_agreement.json").read_text())
    assert committed["summary"]["all_within"]
    out = tmp_path / "again.json"
    assert main(["--tiny", "llama", "bert", "--output", str(out)]) == 0
    again = json.loads(out.read_text())
    for model, record in committed["models"].items():
        for method, measures in record["methods"].items():
            assert again["models"][model]["methods"][method]["max_abs"] == pytest.approx(measures["max_abs"], rel=0.05)


def test_weights_preloaded_by_an_enclosing_block_are_read_from_its_map(tmp_path):
    """A model dispatched by hand with ``preload_module_classes``: accelerate keeps a whole layer's
    offloaded weights in the layer's own hook, under names relative to it. The weights' checksum and
    ALTI's layout (the output projection and layer norm, read outside a forward) find them there: the
    plain model's checksum and ALTI scores."""
    from accelerate import dispatch_model

    from hf_attn.batteries.jw.common import weights_checksum

    path = _saved("bert", tmp_path)
    plain = Explainer.from_pretrained(path, device="cpu")
    model = Explainer.from_pretrained(path, device="cpu").model
    device_map = {**MAPS["bert"], "bert.encoder.layer.1": "disk", "bert.encoder.layer.2": "disk"}
    model = dispatch_model(model, device_map, offload_dir=str(tmp_path / "offload"),
                           preload_module_classes=["BertLayer"])
    query = model.bert.encoder.layer[1].attention.self.query
    assert query.weight.device.type == "meta" and getattr(query, "_hf_hook", None) is None  # the layer's hook holds it
    assert weights_checksum(model) == weights_checksum(plain.model)
    placed = Explainer(model, plain.tokenizer, device="cpu")
    a = plain.attributions(TEXTS, methods=["alti", "attention_norm"])
    b = placed.attributions(TEXTS, methods=["alti", "attention_norm"])
    for method in ("alti", "attention_norm"):
        assert _largest_gap(a.values[method], b.values[method]) <= TOLERANCE, method
