"""The adapter engine on a matrix of architectures (tiny random models, no download).

For every architecture: the adapter leaves the model's logits unchanged; padding does not change an
instance's results; the intervention (replacing the explained query rows) gives exactly the logits
of a slow reference that patches the architecture's own eager attention function with explicit
loops over instances, heads and keys; the exact fast path agrees with the full forward; an
intervention that would not reach the classifier fails a test; gradients with the attention held
fixed match finite differences of the reference; unsupported models are refused with the reason."""

from __future__ import annotations

import copy
import sys

import pytest
import torch

from architectures import ARCHITECTURES, DECODERS, TEXTS, saved_classifier, tiny_classifier
from hf_attn.adapters import AttentionSpec, UnsupportedModelError, adapter_for
from hf_attn.adapters.interface import Intervention



@pytest.fixture(scope="module", params=ARCHITECTURES)
def pair(request):
    """(adapter, eager reference model, architecture name)."""
    model, tokenizer = tiny_classifier(request.param)
    reference = copy.deepcopy(model)
    return adapter_for(model, tokenizer, device="cpu"), reference, request.param


def patched_reference(reference, batch, layer: int, change, **inputs) -> torch.Tensor:
    """The reference model's logits with its modelling file's ``eager_attention_forward`` patched:
    attention call ``layer`` returns ``change(out, query, value)`` in place of its output ``out``
    (``None``: no change). ``inputs``: ``input_ids`` or ``inputs_embeds``; the batch's mask and
    position ids are added."""
    module = sys.modules[type(reference).__module__]
    original = module.eager_attention_forward
    calls = [0]

    def patched(mod, query, key, value, attention_mask, *args, **kwargs):
        out, probs = original(mod, query, key, value, attention_mask, *args, **kwargs)
        index = calls[0]
        calls[0] += 1
        if change is None or index != layer:
            return out, probs
        return change(out, query, value), probs

    module.eager_attention_forward = patched
    try:
        with torch.no_grad():
            inputs["attention_mask"] = batch.attention_mask
            if batch.position_ids is not None:
                inputs["position_ids"] = batch.position_ids
            logits = reference(**inputs).logits
    finally:
        module.eager_attention_forward = original
    assert calls[0] >= 1, "the reference patch was never called"
    return logits


def reference_logits(reference, batch, layer: int, weights: torch.Tensor | None) -> torch.Tensor:
    """The slow reference: on attention call ``layer`` the output of every query row is recomputed
    as Σ_j weights[b, h, j] · v[b, h // groups, j] by explicit loops. ``weights`` ``(B, H, T)`` or
    None (no change)."""
    def loops(out, query, value):
        out = out.clone()
        heads, groups = query.shape[1], query.shape[1] // value.shape[1]
        for b in range(out.shape[0]):
            for q in batch.query[b].nonzero().flatten().tolist():
                for h in range(heads):
                    acc = torch.zeros(value.shape[-1], dtype=value.dtype)
                    for j in range(value.shape[2]):
                        acc = acc + weights[b, h, j] * value[b, h // groups, j]
                    out[b, q, h] = acc
        return out

    return patched_reference(reference, batch, layer, None if weights is None else loops, input_ids=batch.input_ids)


def random_rows(batch, heads: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand((len(batch), heads, batch.input_ids.shape[1]), generator=generator) ** 4
    noise = noise * batch.attention_mask[:, None, :]
    return noise / noise.sum(-1, keepdim=True)


def test_adapter_leaves_logits_unchanged(pair):
    adapter, reference, _ = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    torch.testing.assert_close(forward.logits, reference_logits(reference, batch, 0, None), atol=1e-5, rtol=1e-5)
    assert torch.allclose(forward.attention.sum(-1), torch.ones(len(batch)), atol=1e-5)
    assert torch.all(forward.attention[batch.attention_mask == 0] == 0)


def test_padding_does_not_change_an_instance(pair):
    adapter, _, _ = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    for i, text in enumerate(TEXTS):
        alone = adapter.forward(adapter.encode([text]))
        real = batch.attention_mask[i].bool()
        torch.testing.assert_close(forward.logits[i], alone.logits[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(forward.attention[i][real], alone.attention[0], atol=1e-5, rtol=1e-5)


def test_query_rows_are_the_rows_the_head_reads(pair):
    adapter, _, name = pair
    batch = adapter.encode(TEXTS)
    assert batch.query.sum(-1).tolist() == [1] * len(TEXTS)
    position = batch.query.float().argmax(-1)
    if name in DECODERS:
        assert adapter.pooling == "last" and adapter.left_padding
        assert position.tolist() == [batch.input_ids.shape[1] - 1] * len(TEXTS)
    else:
        assert adapter.pooling == "first" and position.tolist() == [0] * len(TEXTS)


def test_intervention_matches_slow_reference(pair):
    adapter, reference, _ = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    expected = reference_logits(reference, batch, adapter.layer, weights)
    full = adapter._full_logits(batch, weights.unsqueeze(1), per_head=True)[:, 0]
    torch.testing.assert_close(full, expected, atol=1e-5, rtol=1e-4)
    routed = adapter.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=forward)[:, 0]
    torch.testing.assert_close(routed, expected, atol=1e-5, rtol=1e-4)
    # never silently inactive: the replaced rows move the logits, and every layer was counted
    assert (expected - forward.logits).abs().max() > 1e-3
    intervention = Intervention(layer=adapter.layer, query=batch.query, weights=weights)
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, intervention, batch.position_ids)
    assert intervention.calls == adapter.num_layers


def test_fast_path_is_used_and_exact_where_it_applies(pair):
    adapter, _, name = pair
    if name == "albert":
        assert not adapter.fast_path and "share" in adapter.fast_path_reason
        return
    assert adapter.fast_path, adapter.fast_path_reason
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    weights = torch.stack([random_rows(batch, adapter.num_heads, seed) for seed in range(3)], 1)  # (B, 3, H, T)
    fast = adapter.logits_under(batch, weights, per_head=True, forward=forward)
    full = adapter._full_logits(batch, weights, per_head=True)
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-4)


def test_own_rows_reproduce_logits_and_one_head_is_replaced_alone(pair):
    adapter, reference, _ = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    same = adapter.logits_under(batch, forward.head_rows.unsqueeze(1), per_head=True, forward=forward)[:, 0]
    torch.testing.assert_close(same, forward.logits, atol=1e-5, rtol=1e-4)
    # heads=1: only head 1's row is replaced, the others keep theirs
    one = adapter_for(adapter.model, adapter.tokenizer, heads=1, device="cpu")
    row = random_rows(batch, 1, seed=5)[:, 0]
    expected_rows = forward.head_rows.clone()
    expected_rows[:, 1] = row
    got = one.logits_under(batch, row.unsqueeze(1), per_head=False, forward=one.forward(batch))[:, 0]
    torch.testing.assert_close(got, reference_logits(reference, batch, adapter.layer, expected_rows),
                               atol=1e-5, rtol=1e-4)


def test_gradient_with_attention_fixed_matches_finite_differences(pair):
    """∂ logit / ∂ embedding with the explained rows detached = the finite difference of the
    reference model whose explained rows are frozen at their unperturbed values."""
    adapter, reference, name = pair
    # float64 and one unpadded sentence: in float64 several architectures' own eager paths turn
    # fully masked pad rows into NaN (a float32 softmax of float64 minima), a transformers limitation.
    # Those architectures also round their softmax to float32, hence a step of 1e-3 (rounding noise
    # ~1e-7 / 1e-3) and a tolerance of 1e-3 (detaching or not changes the gradient by far more).
    dtype, step, tolerance = torch.float64, 1e-3, 1e-3
    adapter = adapter_for(copy.deepcopy(adapter.model).to(dtype), adapter.tokenizer, device="cpu")
    reference64 = copy.deepcopy(reference).to(dtype)
    batch = adapter.encode(TEXTS[1:2])
    embeds = adapter.embeddings(batch).detach().requires_grad_(True)
    forward = adapter.forward(batch)
    logits = adapter.logits_from_embeddings(batch, embeds, detach_attention=True)
    (grad,) = torch.autograd.grad(logits[:, 0].sum(), embeds)
    free = adapter.logits_from_embeddings(batch, embeds, detach_attention=False)
    (grad_free,) = torch.autograd.grad(free[:, 0].sum(), embeds)
    frozen = forward.head_rows.to(dtype)
    position = int(batch.content[0].nonzero()[0])
    for dim in (0, 3):
        shifted = []
        for sign in (1, -1):
            delta = torch.zeros_like(embeds)
            delta[0, position, dim] = sign * step
            shifted.append(_reference_from_embeds(reference64, batch, embeds.detach() + delta, adapter.layer, frozen))
        numeric = (shifted[0][0, 0] - shifted[1][0, 0]) / (2 * step)
        assert abs(float(numeric) - float(grad[0, position, dim])) < tolerance * (1 + abs(float(numeric)))
    # detaching the rows is not silently inactive: the gradient moves by more than the tolerance
    assert float((grad - grad_free).abs().max()) > 10 * tolerance


def _reference_from_embeds(reference, batch, embeds, layer, frozen):
    """The reference from input embeddings with the query rows of attention call ``layer`` frozen
    at ``frozen`` ``(B, H, T)``."""
    def frozen_rows(out, query, value):
        values = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
        new = torch.einsum("bht,bhtd->bhd", frozen.to(values.dtype), values)  # (B, H, d)
        rows = batch.query.view(batch.query.shape[0], -1, 1, 1)
        return torch.where(rows, new.unsqueeze(1), out)

    return patched_reference(reference, batch, layer, frozen_rows, inputs_embeds=embeds)


def test_mean_pooled_head_replaces_every_row():
    model, tokenizer = tiny_classifier("modernbert", classifier_pooling="mean")
    reference = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.pooling == "mean" and not adapter.fast_path
    batch = adapter.encode(TEXTS)
    assert torch.equal(batch.query, batch.attention_mask.bool())
    weights = random_rows(batch, adapter.num_heads, seed=2)
    got = adapter.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=adapter.forward(batch))[:, 0]
    torch.testing.assert_close(got, reference_logits(reference, batch, adapter.layer, weights), atol=1e-5, rtol=1e-4)


def test_own_attention_without_a_hook_is_refused_with_what_to_do():
    """Nyströmformer approximates attention in its own module (no probability matrix over the tokens,
    no hook): refused in one line that says what is wrong and what the user can do instead."""
    model, tokenizer = tiny_classifier("nystromformer")
    with pytest.raises(UnsupportedModelError, match="does not route its attention through transformers' attention "
                                                    "interface") as caught:
        adapter_for(model, tokenizer, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and "open an issue" in message and "docs/engine.md" in message


def test_intervention_that_never_reaches_the_classifier_is_refused(monkeypatch):
    """A model whose attention ignores the intervention argument is refused, never run."""
    import hf_attn.adapters.transformer as module

    model, tokenizer = tiny_classifier("bert")
    real_call = module.TransformersAdapter._model_call

    def dropping(self, input_ids, mask, embeds, intervention, position_ids=None, **kwargs):
        return real_call(self, input_ids, mask, embeds, None, position_ids, **kwargs)

    monkeypatch.setattr(module.TransformersAdapter, "_model_call", dropping)
    with pytest.raises(UnsupportedModelError, match="no attention call reached"):
        adapter_for(model, tokenizer, device="cpu")


def test_settings_are_validated():
    model, tokenizer = tiny_classifier("bert")
    with pytest.raises(ValueError, match="out of range"):
        adapter_for(model, tokenizer, layer=5, device="cpu")
    with pytest.raises(ValueError, match="heads=7"):
        adapter_for(model, tokenizer, heads=7, device="cpu")
    with pytest.raises(ValueError, match="query must be"):
        AttentionSpec(query="middle")
    with pytest.raises(ValueError, match="no CUDA device"):
        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the refusal cannot be shown")
        adapter_for(model, tokenizer, device="cuda")
    with pytest.raises(ValueError, match="float16 needs a CUDA"):
        adapter_for(model, tokenizer, device="cpu", precision="float16")


def test_non_last_layer_runs_the_full_forward_and_matches_reference():
    model, tokenizer = tiny_classifier("llama", layers=3)
    reference = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, layer=0, device="cpu")
    assert not adapter.fast_path and adapter.layer == 0
    batch = adapter.encode(TEXTS)
    weights = random_rows(batch, adapter.num_heads, seed=3)
    got = adapter.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=adapter.forward(batch))[:, 0]
    torch.testing.assert_close(got, reference_logits(reference, batch, 0, weights), atol=1e-5, rtol=1e-4)


def test_bfloat16_forward_is_close_to_float32():
    model, tokenizer = tiny_classifier("bert")
    exact = adapter_for(copy.deepcopy(model), tokenizer, device="cpu")
    half = adapter_for(model, tokenizer, device="cpu", precision="bfloat16")
    batch = exact.encode(TEXTS)
    a, b = exact.forward(batch), half.forward(batch)
    assert b.logits.dtype == torch.float32
    assert not torch.equal(a.logits, b.logits)  # the option is active
    torch.testing.assert_close(a.probabilities, b.probabilities, atol=5e-2, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_forward_matches_cpu():
    model, tokenizer = tiny_classifier("llama")
    cpu = adapter_for(copy.deepcopy(model), tokenizer, device="cpu")
    gpu = adapter_for(model, tokenizer, device="cuda")
    batch_cpu, batch_gpu = cpu.encode(TEXTS), gpu.encode(TEXTS)
    assert batch_gpu.input_ids.device.type == "cuda"
    weights = random_rows(batch_cpu, cpu.num_heads, seed=4).unsqueeze(1)
    a = cpu.logits_under(batch_cpu, weights, True, cpu.forward(batch_cpu))
    b = gpu.logits_under(batch_gpu, weights.cuda(), True, gpu.forward(batch_gpu))
    torch.testing.assert_close(a, b.cpu(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_cli_jw_battery_on_every_architecture(name, tmp_path, capsys):
    """``hf-attn analyze DIR --battery jw`` on a saved folder of each architecture: exit 0, the
    explained rows the head reads recorded, every instance analysed (Qwen2 too: the folder's own
    tokenizer is used, where transformers would rebuild another that drops these words)."""
    import json

    from hf_attn.cli import main

    folder, data = saved_classifier(name, tmp_path)
    out = tmp_path / "out"
    code = main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--output-dir", str(out),
                 "--jw-permutations", "4", "--jw-adversaries", "2", "--jw-steps", "3", "--device", "cpu",
                 "--quiet", "--threads", "1"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["summary"]["num_instances"] == len(TEXTS)
    assert results["attention_spec"]["query"] == ("last" if name in DECODERS else "first")
    assert results["parameters"]["device"] == "cpu"


@pytest.mark.parametrize("name", DECODERS)
def test_decoder_rows_in_either_padding_give_the_same_results(name):
    """Right-padded rows handed to a decoder's adapter are re-padded on the left: the same logits,
    attention, gradient (the inputs_embeds path, where transformers itself cannot see pads) and
    intervention results as the adapter's own encoding."""
    from hf_attn.methods.gradient import attention_fixed_gradient

    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    own = adapter.encode(TEXTS)
    encoded = tokenizer(TEXTS)["input_ids"]
    width = max(map(len, encoded))
    ids = torch.tensor([e + [0] * (width - len(e)) for e in encoded])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    right = adapter.batch_from_tensors(ids, mask)
    assert torch.equal(right.input_ids, own.input_ids) and torch.equal(right.query, own.query)
    a, b = adapter.forward(own), adapter.forward(right)
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(attention_fixed_gradient(adapter, own), attention_fixed_gradient(adapter, right))


def test_every_battery_takes_device_and_precision_or_refuses_them(tmp_path, trained_model_dir, capsys):
    """--device/--precision reach the transformers path of jw, wp and eraser; for the papers' CPU
    float32 models each battery refuses them with the reason (exit 2, one line), never ignores them."""
    import json

    from hf_attn.cli import main

    for battery in ("jw", "wp", "eraser"):
        argv = (["eraser", trained_model_dir] if battery == "eraser" else
                ["analyze", trained_model_dir, "--battery", battery])
        code = main(argv + ["--output-dir", str(tmp_path / battery), "--device", "cuda", "--quiet"])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and "run on the CPU" in err[0], (battery, err)
        code = main(argv + ["--output-dir", str(tmp_path / f"{battery}-p"), "--precision", "bfloat16", "--quiet"])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and "analysed in float32" in err[-1], (battery, err)
    folder, data = saved_classifier("bert", tmp_path)
    assert main(["eraser", str(folder), "--dataset", str(data), "--output-dir", str(tmp_path / "e"), "--device", "cpu",
                 "--precision", "bfloat16", "--ig-steps", "2", "--quiet"]) == 0
    assert json.loads((tmp_path / "e" / "results.json").read_text())["request"]["precision"] == "bfloat16"


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_input_gradients_run_the_fused_kernel_with_the_eager_results(name, monkeypatch):
    """Gradients to the input embeddings run transformers' sdpa kernel once the adapter has checked
    it on the model (the kernel is really called), with the eager forward's logits and gradients;
    a model that does not declare sdpa support stays eager and says why."""
    import transformers.integrations.sdpa_attention as sdpa_module

    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.fused and adapter.describe()["fused_attention"], adapter.fused_reason
    batch = adapter.encode(TEXTS)
    calls = []
    real = sdpa_module.sdpa_attention_forward
    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward", lambda *a, **k: calls.append(1) or real(*a, **k))

    def gradient(fused: bool):
        adapter.fused = fused
        embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
        logits = adapter.logits_from_embeddings(batch, embeddings)
        (grad,) = torch.autograd.grad(logits.softmax(-1)[:, 0].sum(), embeddings)
        return logits, grad

    eager_logits, eager_grad = gradient(False)
    assert not calls
    fused_logits, fused_grad = gradient(True)
    assert len(calls) == adapter.num_layers
    torch.testing.assert_close(fused_logits, eager_logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused_grad, eager_grad, atol=1e-5, rtol=1e-3)
    monkeypatch.setattr(type(model), "_supports_sdpa", False)
    again = adapter_for(model, tokenizer, device="cpu")
    assert not again.fused and "does not declare support" in again.fused_reason


def test_a_fused_kernel_wrong_only_on_padding_is_caught_by_the_padded_probe(monkeypatch):
    """The fused kernel's check runs a padded batch as well as the probe sentence: a kernel that drops
    the attention mask gives the sentence's logits alone but not a padded row's, and stays off."""
    import transformers.integrations.sdpa_attention as sdpa_module

    real = sdpa_module.sdpa_attention_forward
    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward",
                        lambda module, q, k, v, mask, *a, **kw: real(module, q, k, v, None, *a, **kw))
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert not adapter.fused and adapter.fused_reason.endswith("on a padded probe batch"), adapter.fused_reason
    assert adapter.describe()["fused_attention_reason"] == adapter.fused_reason


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_no_gradient_forwards_take_the_gradients_path(name, monkeypatch):
    """The forwards without gradients (``logits``: deletions and erasures; the soft metrics' hooked
    embedding output) run the same kernel as the gradients once it is checked: the sdpa kernel is
    really called, every such forward gives bit for bit the same logits as the others (so a
    difference of two of them, leave-one-out or comprehensiveness, compares like with like) and the
    eager forward's logits within rounding; an adapter on the eager path calls no kernel."""
    import transformers.integrations.sdpa_attention as sdpa_module

    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.fused, adapter.fused_reason
    batch = adapter.encode(TEXTS)
    calls = []
    real = sdpa_module.sdpa_attention_forward
    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward", lambda *a, **k: calls.append(1) or real(*a, **k))

    def plain_forwards():
        calls.clear()
        with torch.no_grad():
            outs = (adapter.logits(batch), adapter.logits_with_embedding_output(batch, lambda h, rows: h),
                    adapter.logits_from_embeddings(batch, adapter.embeddings(batch)))
        return outs, len(calls)

    (fused, hooked, from_embeddings), fused_calls = plain_forwards()
    assert fused_calls == 3 * adapter.num_layers
    assert torch.equal(fused, hooked) and torch.equal(fused, from_embeddings)
    adapter.fused = False
    (eager, eager_hooked, _), eager_calls = plain_forwards()
    assert eager_calls == 0 and torch.equal(eager, eager_hooked)
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-4)
