"""Precision is what runs: checkpoints saved in float32, bfloat16 and float16 load in the precision
asked (float32 by default, whatever the checkpoint's dtype), and ``describe()`` / results.json record
the precision the forwards ran in and the dtype of the weights. A model passed in memory is never
converted: weights that cannot run in the precision asked are refused in one line."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from architectures import TEXTS, saved_classifier, tiny_classifier

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SETTINGS = dict(ig_steps=4, num_permutations=3, k=1, adversary_steps=3, seed=0)


def _checkpoint(name: str, dtype: torch.dtype, folder):
    """``tiny_classifier(name)`` saved in ``dtype``; returns the in-memory float32 model whose weights
    are the saved ones (rounded to ``dtype``, upcast back exactly; its buffers, e.g. rotary
    frequencies, are recomputed in float32 at loading and so stay float32 here) and the tokenizer."""
    model, tokenizer = tiny_classifier(name)
    copy.deepcopy(model).to(dtype).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(dtype).float())
    return model, tokenizer


def _linear_output_dtypes(model) -> tuple[set, list]:
    seen: set = set()
    handles = [m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
               for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return seen, handles


@pytest.mark.parametrize("saved", list(DTYPES))
@pytest.mark.parametrize("name", ["bert", "llama"])
def test_a_checkpoint_of_any_dtype_runs_in_float32_by_default(name, saved, tmp_path):
    """The saved weights upcast to float32 (exact) give exactly the probabilities and attention of the
    same weights run in float32 in memory; transformers' own default would have kept the checkpoint's
    dtype, which is what ran (and was reported as float32) before."""
    from transformers import AutoModelForSequenceClassification

    from hf_attn import Explainer

    reference_model, tokenizer = _checkpoint(name, DTYPES[saved], tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == saved
    assert next(AutoModelForSequenceClassification.from_pretrained(tmp_path).parameters()).dtype == DTYPES[saved]
    loaded = Explainer.from_pretrained(str(tmp_path), device="cpu")
    assert {p.dtype for p in loaded.model.parameters()} == {torch.float32}
    assert (loaded.describe()["precision"], loaded.describe()["weights_dtype"]) == ("float32", "float32")
    seen, handles = _linear_output_dtypes(loaded.model)
    got = loaded.explain(TEXTS[:2], **SETTINGS)
    for handle in handles:
        handle.remove()
    assert seen == {torch.float32}
    expected = Explainer(reference_model, tokenizer, device="cpu").explain(TEXTS[:2], **SETTINGS)
    for a, b in zip(got, expected):
        for field in ("probabilities", "attention", "gradient", "ig", "adversaries_tvd"):
            torch.testing.assert_close(torch.as_tensor(getattr(a, field)), torch.as_tensor(getattr(b, field)),
                                       rtol=0, atol=0, msg=field)


@pytest.mark.parametrize("saved", ["float32", "float16"])
def test_bfloat16_asked_loads_and_runs_in_bfloat16(saved, tmp_path):
    from hf_attn import Explainer

    reference_model, tokenizer = _checkpoint("bert", DTYPES[saved], tmp_path)
    half = Explainer.from_pretrained(str(tmp_path), device="cpu", precision="bfloat16")
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    assert (half.describe()["precision"], half.describe()["weights_dtype"]) == ("bfloat16", "bfloat16")
    seen, handles = _linear_output_dtypes(half.model)
    got = half.explain(TEXTS[:2], **SETTINGS)
    for handle in handles:
        handle.remove()
    assert seen == {torch.bfloat16}
    # the same arithmetic as the saved weights cast to bfloat16 in memory, run in bfloat16
    same = Explainer(reference_model.to(torch.bfloat16), tokenizer, device="cpu", precision="bfloat16")
    expected = same.explain(TEXTS[:2], **SETTINGS)
    exact = Explainer(_checkpoint("bert", DTYPES[saved], tmp_path / "again")[0], tokenizer, device="cpu")
    for a, b, c in zip(got, expected, exact.explain(TEXTS[:2], **SETTINGS)):
        torch.testing.assert_close(torch.as_tensor(a.probabilities), torch.as_tensor(b.probabilities), rtol=0, atol=0)
        assert not torch.equal(torch.as_tensor(a.probabilities), torch.as_tensor(c.probabilities))  # not float32
        torch.testing.assert_close(torch.as_tensor(a.probabilities), torch.as_tensor(c.probabilities), rtol=0,
                                   atol=5e-2)


def test_float16_asked_on_the_cpu_is_refused_in_one_line(tmp_path):
    from hf_attn import Explainer

    _checkpoint("bert", torch.float16, tmp_path)
    with pytest.raises(ValueError, match="precision float16 needs a CUDA or MPS device; on the CPU use bfloat16$"):
        Explainer.from_pretrained(str(tmp_path), device="cpu", precision="float16")


def test_an_in_memory_model_is_never_converted_and_its_dtypes_are_recorded():
    """float32 weights run in any precision (autocast; both recorded); half-precision weights run only
    in their own precision, and float16 weights not at all on the CPU: refused in one line, the
    model left as it was."""
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    mixed = Explainer(copy.deepcopy(model), tokenizer, device="cpu", precision="bfloat16").describe()
    assert (mixed["precision"], mixed["weights_dtype"]) == ("bfloat16", "float32")
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    with pytest.raises(ValueError) as refused:
        Explainer(bf16, tokenizer, device="cpu")
    message = str(refused.value)
    assert message.startswith("the model's weights are bfloat16 but precision float32 was asked")
    assert "\n" not in message
    assert "precision='bfloat16'" in message
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}  # not converted behind the caller's back
    own = Explainer(bf16, tokenizer, device="cpu", precision="bfloat16").describe()
    assert (own["precision"], own["weights_dtype"]) == ("bfloat16", "bfloat16")
    half = copy.deepcopy(model).half()
    for precision in ("float32", "bfloat16"):
        with pytest.raises(ValueError, match="weights are float16 but .* model.float\\(\\) first \\(float16 does "
                                             "not run on the CPU\\)"):
            Explainer(half, tokenizer, device="cpu", precision=precision)
    assert {p.dtype for p in half.parameters()} == {torch.float16}


def test_the_weights_dtype_is_the_one_most_weights_are_in():
    """transformers keeps a few modules of some half-precision models in float32: the weights' dtype
    is the one holding most elements, and those float32 modules are allowed."""
    from hf_attn.adapters.device import check_weights_dtype, weights_dtype

    model, _ = tiny_classifier("bert")
    model.to(torch.bfloat16)
    model.classifier.float()  # 16 × 3 + 3 weights in float32, the rest in bfloat16
    assert weights_dtype(model) == torch.bfloat16
    assert check_weights_dtype(model, torch.bfloat16, torch.device("cpu")) == torch.bfloat16


def test_results_json_records_the_precision_and_the_weights_dtype(tmp_path):
    """``hf-attn analyze --precision bfloat16`` of a float32 folder: the forwards in bfloat16 (autocast)
    over float32 weights, both in results.json."""
    from hf_attn.cli import main

    folder, data = saved_classifier("bert", tmp_path)
    out = tmp_path / "out"
    assert main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--output-dir", str(out),
                 "--precision", "bfloat16", "--device", "cpu", "--jw-permutations", "2", "--jw-adversaries", "1",
                 "--jw-steps", "2", "--quiet", "--threads", "1"]) == 0
    parameters = json.loads((out / "results.json").read_text())["parameters"]
    assert (parameters["precision"], parameters["weights_dtype"]) == ("bfloat16", "float32")
