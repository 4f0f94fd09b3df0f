"""The families beyond the interface-routed encoders and decoders of ``test_adapters.py``, against
slow references of the same kind (tiny random models, no download).

**Encoder–decoders (BART, mBART).** Their classification head reads the decoder's hidden state at
the end-of-sentence token. The explained attention is the last attention call of the forward: the
last decoder layer's **cross-attention** row of that token over the encoder's positions, which are
the input tokens one to one — the attention through which the classification token reads the
sentence. (The encoder's self-attention layers and the decoder's self-attention are earlier calls,
reachable with ``layer=``.) The references are those of ``test_adapters.py``: the model's modelling
file's ``eager_attention_forward`` patched with explicit loops; gradients from the base model's
``inputs_embeds`` / ``decoder_inputs_embeds`` and its own head, by finite differences.

**Attention computed in the model's own modules (DeBERTa-v2/v3, DeBERTa, MPNet, Bloom).** The
adapter hooks the dropout module the probabilities pass through. The reference instead patches the
softmax those modules call (``torch.nn.functional.softmax``), counting its 4-D calls as layers and
overwriting the explained rows by explicit loops over instances, heads and keys; the probabilities
the adapter records equal the model's own ``output_attentions``.
"""

from __future__ import annotations

import copy
import sys

import pytest
import torch

from architectures import ENCODER_DECODERS, OWN_ATTENTION, TEXTS, saved_classifier, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.adapters.interface import Intervention
from test_adapters import random_rows, reference_logits

FAMILIES = ENCODER_DECODERS + OWN_ATTENTION


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request):
    """(adapter, reference model, architecture name)."""
    model, tokenizer = tiny_classifier(request.param)
    reference = copy.deepcopy(model)
    return adapter_for(model, tokenizer, device="cpu"), reference, request.param


def softmax_reference(reference, batch, layer: int, rows, heads: int | None = None, passes: int = 1,
                      **inputs) -> torch.Tensor:
    """Logits of ``reference`` with attention softmax call ``layer`` (4-D calls of
    ``torch.nn.functional.softmax``, in forward order; with ``heads``, 3-D ``(B·H, T_q, T)`` calls
    too; with ``passes``, that many consecutive calls per layer) returning, at the batch's query
    rows, ``rows`` ``(B, H, T)`` written in by explicit loops (``None``: no change)."""
    original = torch.nn.functional.softmax
    calls = [0]

    def patched(scores, *args, **kwargs):
        probs = original(scores, *args, **kwargs)
        if scores.dim() == 3 and heads is not None:
            flat = probs.shape
            return patched_4d(probs.view(-1, heads, *flat[1:])).reshape(flat)
        if scores.dim() != 4:
            return probs
        return patched_4d(probs)

    def patched_4d(probs):
        index = calls[0] // passes
        calls[0] += 1
        if rows is None or index != layer:
            return probs
        probs = probs.clone()
        for b in range(probs.shape[0]):
            for q in batch.query[b].nonzero().flatten().tolist():
                for h in range(probs.shape[1]):
                    for j in range(probs.shape[-1]):
                        probs[b, h, q, j] = rows[b, h, j]
        return probs

    original_torch = torch.softmax  # Funnel calls torch.softmax

    def patched_torch(scores, *args, **kwargs):
        probs = original_torch(scores, *args, **kwargs)
        return patched_4d(probs) if scores.dim() == 4 else probs

    torch.nn.functional.softmax, torch.softmax = patched, patched_torch
    try:
        with torch.no_grad() if not any(t.requires_grad for t in inputs.values()) else torch.enable_grad():
            inputs["attention_mask"] = batch.attention_mask
            if batch.position_ids is not None:
                inputs["position_ids"] = batch.position_ids
            logits = reference(**inputs).logits
    finally:
        torch.nn.functional.softmax, torch.softmax = original, original_torch
    assert calls[0] >= 1, "the reference patch was never called"
    return logits


def reference(reference_model, name, batch, layer, rows):
    if name in ENCODER_DECODERS:
        return reference_logits(reference_model, batch, layer, rows)
    return softmax_reference(reference_model, batch, layer, rows, input_ids=batch.input_ids)


def test_hooks_or_interface_are_what_the_adapter_says(pair):
    adapter, _, name = pair
    described = adapter.describe()
    if name in ENCODER_DECODERS:
        assert described["attention_seam"] == "transformers' attention interface"
        assert adapter.explained_module.endswith("decoder.layers.1.encoder_attn")
        assert adapter.num_layers == 6  # 2 encoder self, 2 decoder self, 2 cross
        assert adapter.pooling == "last" and not adapter.left_padding
    else:
        assert described["attention_seam"].startswith("hooks on the model's own attention modules")
        assert adapter.num_layers == 2 and not adapter.fast_path and not adapter.fused
        assert adapter.pooling == ("last" if name == "bloom" else "first")


def test_adapter_leaves_logits_unchanged_and_padding_changes_no_instance(pair):
    adapter, ref, name = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    torch.testing.assert_close(forward.logits, reference(ref, name, batch, 0, None), atol=1e-5, rtol=1e-5)
    for i, text in enumerate(TEXTS):
        alone = adapter.forward(adapter.encode([text]))
        real = batch.attention_mask[i].bool()
        torch.testing.assert_close(forward.logits[i], alone.logits[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(forward.attention[i][real], alone.attention[0], atol=1e-5, rtol=1e-5)


def test_query_rows_are_the_classification_tokens(pair):
    adapter, _, name = pair
    batch = adapter.encode(TEXTS)
    position = batch.query.float().argmax(-1)
    lengths = batch.attention_mask.sum(-1)
    if name in ENCODER_DECODERS:  # the end-of-sentence token, the last real one (right padding)
        assert position.tolist() == (lengths - 1).tolist()
        assert (batch.input_ids.gather(1, position[:, None]) == adapter.model.config.eos_token_id).all()
    elif name == "bloom":
        assert position.tolist() == [batch.input_ids.shape[1] - 1] * len(TEXTS)
    else:
        assert position.tolist() == [0] * len(TEXTS)


def test_intervention_matches_slow_reference(pair):
    adapter, ref, name = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    expected = reference(ref, name, batch, adapter.layer, weights)
    got = adapter.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=forward)[:, 0]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert (expected - forward.logits).abs().max() > 1e-3  # never silently inactive
    intervention = Intervention(layer=adapter.layer, query=batch.query, weights=weights)
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, intervention, batch.position_ids)
    assert intervention.calls == adapter.num_layers
    # an earlier layer too (the encoder's first self-attention for BART)
    early = adapter_for(adapter.model, adapter.tokenizer, layer=0, device="cpu")
    got = early.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=early.forward(batch))[:, 0]
    torch.testing.assert_close(got, reference(ref, name, batch, 0, weights), atol=1e-5, rtol=1e-4)


def test_one_head_is_replaced_alone(pair):
    adapter, ref, name = pair
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    same = adapter.logits_under(batch, forward.head_rows.unsqueeze(1), per_head=True, forward=forward)[:, 0]
    torch.testing.assert_close(same, forward.logits, atol=1e-5, rtol=1e-4)
    one = adapter_for(adapter.model, adapter.tokenizer, heads=1, device="cpu")  # hooks are installed once
    row = random_rows(batch, 1, seed=5)[:, 0]
    expected_rows = forward.head_rows.clone()
    expected_rows[:, 1] = row
    got = one.logits_under(batch, row.unsqueeze(1), per_head=False, forward=one.forward(batch))[:, 0]
    torch.testing.assert_close(got, reference(ref, name, batch, adapter.layer, expected_rows), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", OWN_ATTENTION)
def test_recorded_attention_is_the_models_own(name):
    """The hooked probabilities are the ones the model reports with ``output_attentions``."""
    model, tokenizer = tiny_classifier(name)
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS)
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record),
                            batch.position_ids)
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if batch.position_ids is not None:
            inputs["position_ids"] = batch.position_ids
        own = ref(**inputs, output_attentions=True).attentions
    assert len(record) == len(own)
    real = batch.attention_mask.bool()
    for (_, _, probs, _), expected in zip(record, own):
        rows = real[:, None, :, None] & real[:, None, None, :]
        torch.testing.assert_close(probs[rows.expand_as(probs)], expected[rows.expand_as(expected)],
                                   atol=1e-6, rtol=1e-5)


def _embeds_reference(ref, name, batch, embeds, layer, frozen):
    """Logits from input embeddings with the query rows of layer ``layer`` frozen at ``frozen``."""
    if name not in ENCODER_DECODERS:
        return softmax_reference(ref, batch, layer, frozen, inputs_embeds=embeds)
    import sys

    module = sys.modules[type(ref).__module__]
    original = module.eager_attention_forward
    calls = [0]

    def patched(mod, query, key, value, attention_mask, *args, **kwargs):
        out, probs = original(mod, query, key, value, attention_mask, *args, **kwargs)
        index = calls[0]
        calls[0] += 1
        if index != layer:
            return out, probs
        new = torch.einsum("bht,bhtd->bhd", frozen.to(value.dtype), value)
        rows = batch.query.view(batch.query.shape[0], -1, 1, 1)
        return torch.where(rows, new.unsqueeze(1), out), probs

    start = ref.get_input_embeddings()(torch.full_like(batch.input_ids[:, :1], ref.config.decoder_start_token_id))
    decoder_embeds = torch.cat([start, embeds[:, :-1]], 1)  # the decoder's inputs: the ids shifted right
    module.eager_attention_forward = patched
    try:
        with torch.no_grad():
            hidden = ref.model(attention_mask=batch.attention_mask, inputs_embeds=embeds,
                               decoder_inputs_embeds=decoder_embeds).last_hidden_state
            position = batch.query.float().argmax(-1)
            return ref.classification_head(hidden[torch.arange(len(position)), position])
    finally:
        module.eager_attention_forward = original


@pytest.mark.parametrize("name", FAMILIES)
def test_gradient_with_attention_fixed_matches_finite_differences(name):
    """∂ logit / ∂ input embedding with the explained rows detached (encoder–decoders: embeddings
    swapped in at the embedding module, through the encoder and the shifted decoder inputs alike)
    = finite differences of the reference with those rows frozen."""
    model, tokenizer = tiny_classifier(name)
    dtype, step, tolerance = torch.float64, 1e-3, 1e-3
    ref = copy.deepcopy(model).to(dtype)
    adapter = adapter_for(model.to(dtype), tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[1:2])
    embeds = adapter.embeddings(batch).detach().requires_grad_(True)
    frozen = adapter.forward(batch).head_rows.to(dtype)
    (grad,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, embeds, detach_attention=True)[:, 0].sum(),
                                  embeds)
    (free,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, embeds)[:, 0].sum(), embeds)
    position = int(batch.content[0].nonzero()[0])
    for dim in (0, 3):
        shifted = []
        for sign in (1, -1):
            delta = torch.zeros_like(embeds)
            delta[0, position, dim] = sign * step
            shifted.append(_embeds_reference(ref, name, batch, embeds.detach() + delta, adapter.layer, frozen))
        numeric = (shifted[0][0, 0] - shifted[1][0, 0]) / (2 * step)
        assert abs(float(numeric) - float(grad[0, position, dim])) < tolerance * (1 + abs(float(numeric)))
    assert float((grad - free).abs().max()) > 10 * tolerance  # detaching is not silently inactive


@pytest.mark.parametrize("name", ["bart", "mpnet"])
def test_cli_jw_battery_runs(name, tmp_path, capsys):
    """``hf-attn analyze DIR --battery jw`` on a saved folder: the model is loaded with the
    intervention attention, hooked or routed, and the battery runs."""
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
    assert results["attention_spec"]["query"] == ("last" if name == "bart" else "first")


# every other attention class of hf_attn.adapters.own_attention.OWN_ATTENTION, built by the sweep's
# generic tiny config (scripts/architecture_sweep.py), against the same softmax reference
SWEEP_HOOKED = ["gpt_neo", "gptj", "roformer", "megatron-bert", "convbert", "rembert", "luke", "tapas", "big_bird",
                "openai-gpt", "falcon", "xlm", "flaubert", "mpt", "mvp", "xlnet", "ibert", "layoutlmv3",
                "squeezebert", "funnel"]
OVERRIDES: dict = {"funnel": {"block_sizes": [2, 1]}}  # two layers in its first block, the block explained
HEADS_3D = {"mvp": 2}  # MVP's softmax runs on (B·H, T, T)
SCORES = {"squeezebert"}  # its output_attentions are the masked scores before the softmax


def _sweep_build(model_type, **overrides):
    import os
    import sys

    scripts = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    from architecture_sweep import build

    return build(model_type, **overrides)


def test_every_hooked_attention_class_is_tested():
    from hf_attn.adapters.own_attention import OWN_ATTENTION

    families = {short for short, _ in OWN_ATTENTION}
    tested = {n.replace("-", "_").removesuffix("_gpt") for n in OWN_ATTENTION_NAMES + SWEEP_HOOKED + DEDICATED}
    assert families <= tested, sorted(families - tested)


OWN_ATTENTION_NAMES = list(OWN_ATTENTION)
DEDICATED = ["lilt", "longformer", "nystromformer"]  # hooked classes with a test of their own below


@pytest.mark.parametrize("model_type", SWEEP_HOOKED)
def test_hooked_family_matches_softmax_reference(model_type):
    """The hook's intervention equals the softmax reference on the explained layer, an earlier layer
    too, and the recorded probabilities are the model's own ``output_attentions``."""
    model, tokenizer = _sweep_build(model_type, **OVERRIDES.get(model_type, {}))
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.own_attention and adapter.num_layers == (6 if model_type == "mvp" else 2)
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    heads = HEADS_3D.get(model_type)
    torch.testing.assert_close(forward.logits,
                               softmax_reference(ref, batch, 0, None, heads, input_ids=batch.input_ids),
                               atol=1e-5, rtol=1e-5)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    for layer, explained in ((adapter.layer, adapter), (0, adapter_for(model, tokenizer, layer=0, device="cpu"))):
        expected = softmax_reference(ref, batch, layer, weights, heads, input_ids=batch.input_ids)
        got = explained.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=explained.forward(batch))
        torch.testing.assert_close(got[:, 0], expected, atol=1e-5, rtol=1e-4)
    assert (expected - forward.logits).abs().max() > 1e-4
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record),
                            batch.position_ids)
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if batch.position_ids is not None:
            inputs["position_ids"] = batch.position_ids
        out = ref(**inputs, output_attentions=True)
    own = out.attentions if model_type != "mvp" else out.encoder_attentions  # MVP: the encoder's, recorded first
    if model_type in SCORES:
        own = [scores.softmax(-1) for scores in own]
    real = batch.attention_mask.bool()
    rows = real[:, None, :, None] & real[:, None, None, :]
    for (_, _, probs, _), expected in zip(record, own):
        torch.testing.assert_close(probs[rows.expand_as(probs)], expected[rows.expand_as(expected)],
                                   atol=1e-6, rtol=1e-5)


def test_hooked_module_on_a_path_without_its_dropout_is_refused(monkeypatch):
    """A class hooked at a dropout its configuration never calls (Falcon's rotary path, were it
    listed by its ALiBi path's dropout): no call would be intervened on, so it is refused in one
    line, never run as if it were."""
    from hf_attn.adapters import UnsupportedModelError
    from hf_attn.adapters.own_attention import OWN_ATTENTION, OwnAttention

    monkeypatch.setitem(OWN_ATTENTION, ("falcon", "FalconAttention"),
                        OwnAttention("attention_dropout", None, "Falcon"))
    model, tokenizer = _sweep_build("falcon", alibi=False)
    with pytest.raises(UnsupportedModelError, match="its attention modules are hooked") as caught:
        adapter_for(model, tokenizer, device="cpu")
    assert "open an issue" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("model_type", ["t5", "t5gemma"])
def test_embeddings_swapped_in_where_inputs_embeds_are_refused(model_type):
    """T5 (encoder and decoder share the table) and T5Gemma (the decoder has its own, whose inputs are
    held fixed) take no inputs_embeds with their head: the embeddings are swapped in at the modules
    holding the input table; the logits equal the ids' and the gradient equals finite differences."""
    model, tokenizer = _sweep_build(model_type)
    adapter = adapter_for(model.double(), tokenizer, device="cpu")
    assert adapter.embeds_by_hook
    batch = adapter.encode(TEXTS[1:2])
    embeds = adapter.embeddings(batch).detach()
    torch.testing.assert_close(adapter.logits_from_embeddings(batch, embeds), adapter.logits(batch))
    leaf = embeds.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, leaf)[0, 0], leaf)
    position, step = int(batch.content[0].nonzero()[0]), 1e-3  # float64 model, float32 logits
    for dim in (0, 5):
        delta = torch.zeros_like(embeds)
        delta[0, position, dim] = step
        numeric = (adapter.logits_from_embeddings(batch, embeds + delta)[0, 0]
                   - adapter.logits_from_embeddings(batch, embeds - delta)[0, 0]) / (2 * step)
        assert abs(float(numeric) - float(grad[0, position, dim])) < 1e-3 * (1 + abs(float(numeric)))
    assert float(grad.abs().max()) > 1e-3


def test_interface_model_taking_no_inputs_embeds_finds_its_head_rows():
    """ESMC's base model takes no ``inputs_embeds``: the adapter swaps the embeddings in at its
    embedding module, and the rows its head reads are found from the gradient forward's last layer
    (not from the no-gradient forward that checks the swap). The intervention equals the slow
    reference of the interface path; the gradient with the rows held fixed equals finite
    differences."""
    model, tokenizer = _sweep_build("esmc")
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.embeds_by_hook and adapter.pooling == "first" and not adapter.own_attention
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    torch.testing.assert_close(forward.logits, reference_logits(ref, batch, 0, None), atol=1e-5, rtol=1e-5)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    expected = reference_logits(ref, batch, adapter.layer, weights)
    got = adapter.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=forward)[:, 0]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    assert (expected - forward.logits).abs().max() > 1e-3
    one = adapter.encode(TEXTS[1:2])
    embeds = adapter.embeddings(one).detach()
    leaf = embeds.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(adapter.logits_from_embeddings(one, leaf)[0, 0], leaf)
    position, step = int(one.content[0].nonzero()[0]), 1e-2
    for dim in (0, 5):
        delta = torch.zeros_like(embeds)
        delta[0, position, dim] = step
        numeric = (adapter.logits_from_embeddings(one, embeds + delta)[0, 0]
                   - adapter.logits_from_embeddings(one, embeds - delta)[0, 0]) / (2 * step)
        assert abs(float(numeric) - float(grad[0, position, dim])) < 2e-2 * (1 + abs(float(numeric)))
    assert float(grad.abs().max()) > 1e-3


def test_layers_called_past_their_hooks_are_not_used():
    """SqueezeBERT's encoder calls ``layer.forward`` directly, so no hook on a layer sees its output:
    the rows its head reads are found from the hidden states the model returns, and the adapter
    keeps no list of layers (the methods that hook them decline in one line)."""
    from hf_attn.methods.value_zeroing import value_zeroing
    from hf_attn.adapters import UnsupportedModelError

    model, tokenizer = _sweep_build("squeezebert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.layers is None and adapter.pooling == "first" and adapter.num_layers == 2
    with pytest.raises(UnsupportedModelError, match="called past their forward hooks"):
        value_zeroing(adapter, adapter.encode(TEXTS[:1]))


def test_lilt_text_and_layout_streams_share_the_replaced_rows():
    """LiLT computes one softmax twice per layer — the layout stream's scores and the text stream's
    are the same sum of text and layout terms — and multiplies it with each stream's values. The
    explained attention is that one matrix: a replaced row is replaced in both streams (the softmax
    reference overwrites both calls), the recorded probabilities are the text stream's
    ``output_attentions``, and value zeroing zeroes the position's value vectors in both streams."""
    from hf_attn.methods.value_zeroing import value_zeroing_matrices

    model, tokenizer = _sweep_build("lilt")
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.num_layers == 2 and adapter.own_attention == ["LiLT (text and layout streams)"]
    batch = adapter.encode(TEXTS)
    uses = []
    original = torch.nn.functional.softmax

    def watched(scores, *args, **kwargs):
        probs = original(scores, *args, **kwargs)
        if scores.dim() == 4:
            uses.append(probs)
        return probs

    torch.nn.functional.softmax = watched
    try:
        with torch.no_grad():
            own = ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True).attentions
    finally:
        torch.nn.functional.softmax = original
    assert len(uses) == 4
    for layer in range(2):
        assert torch.equal(uses[2 * layer], uses[2 * layer + 1])  # the layout stream's = the text stream's
    forward = adapter.forward(batch)
    torch.testing.assert_close(forward.logits, softmax_reference(ref, batch, 0, None, passes=2,
                                                                 input_ids=batch.input_ids), atol=1e-5, rtol=1e-5)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    for layer, explained in ((1, adapter), (0, adapter_for(model, tokenizer, layer=0, device="cpu"))):
        expected = softmax_reference(ref, batch, layer, weights, passes=2, input_ids=batch.input_ids)
        got = explained.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=explained.forward(batch))
        torch.testing.assert_close(got[:, 0], expected, atol=1e-5, rtol=1e-4)
        assert (expected - forward.logits).abs().max() > 1e-4
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record))
    real = batch.attention_mask.bool()
    rows = real[:, None, :, None] & real[:, None, None, :]
    assert len(record) == 2
    for (_, _, probs, _), expected in zip(record, own):
        torch.testing.assert_close(probs[rows.expand_as(probs)], expected[rows.expand_as(expected)],
                                   atol=1e-6, rtol=1e-5)
    got = value_zeroing_matrices(adapter, batch)
    layers = ref.lilt.encoder.layer
    for layer, b, j in ((0, 1, 2), (1, 3, 4)):
        def zero(module, args, output, j=j):
            output = output.clone()
            output[:, j] = 0
            return output

        inputs = {"input_ids": batch.input_ids[b:b + 1], "attention_mask": batch.attention_mask[b:b + 1],
                  "output_hidden_states": True}
        attention = layers[layer].attention.self
        with torch.no_grad():
            plain = ref(**inputs).hidden_states
            handles = [attention.value.register_forward_hook(zero), attention.layout_value.register_forward_hook(zero)]
            try:
                zeroed = ref(**inputs).hidden_states
            finally:
                for handle in handles:
                    handle.remove()
        expected = 1 - torch.nn.functional.cosine_similarity(zeroed[layer + 1][0], plain[layer + 1][0], dim=-1)
        torch.testing.assert_close(got[b, layer, :, j][real[b]], expected[real[b]], atol=1e-5, rtol=1e-4)


def test_funnel_explains_its_first_block():
    """Funnel's later blocks pool their queries (and keys) to shorter sequences: only the first
    block's attention, whose rows and keys are the input tokens, is hooked and counted. The head
    reads the pooled sequence's first row, which mixes every row of the first block's output: the
    query rows are every real row."""
    from hf_attn.adapters.own_attention import is_hooked

    model, tokenizer = _sweep_build("funnel", block_sizes=[2, 1])
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.explained_module == "funnel.encoder.blocks.0.1.attention" and adapter.pooling == "mean"
    blocks = model.funnel.encoder.blocks
    assert all(is_hooked(layer.attention) for layer in blocks[0]) and not is_hooked(blocks[1][0].attention)
    batch = adapter.encode(TEXTS)
    intervention = Intervention(layer=1, query=batch.query, weights=random_rows(batch, 2, seed=3))
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, intervention)
    assert intervention.calls == 2


def _merged_reference(ref, batch, layer, weights):
    """T5Gemma2's logits with attention call ``layer`` (its modelling file's
    ``eager_attention_forward``, in call order: the encoder's self-attention, then the decoder's
    merged attention) recomputed at the query rows by explicit loops: on a merged call, the decoder
    part of the row unchanged and the encoder part ``share × weights`` (share: the row's own sum over
    the encoder's positions); on a self-attention call, ``weights`` alone."""
    def change(out, query, value, probs):
        out = out.clone()
        heads, groups, split = query.shape[1], query.shape[1] // value.shape[1], query.shape[2]
        merged = value.shape[2] > split
        for b in range(out.shape[0]):
            for q in batch.query[b].nonzero().flatten().tolist():
                for h in range(heads):
                    acc = torch.zeros(value.shape[-1], dtype=value.dtype)
                    offset, share = 0, 1.0
                    if merged:
                        offset, share = split, float(probs[b, h, q, split:].sum())
                        for i in range(split):
                            acc = acc + probs[b, h, q, i] * value[b, h // groups, i]
                    for j in range(value.shape[2] - offset):
                        acc = acc + share * weights[b, h, j] * value[b, h // groups, offset + j]
                    out[b, q, h] = acc
        return out

    module = sys.modules[type(ref).__module__]
    original = module.eager_attention_forward
    calls = [0]

    def patched(mod, query, key, value, attention_mask, *args, **kwargs):
        out, probs = original(mod, query, key, value, attention_mask, *args, **kwargs)
        index = calls[0]
        calls[0] += 1
        if weights is None or index != layer:
            return out, probs
        return change(out, query, value, probs), probs

    module.eager_attention_forward = patched
    try:
        with torch.no_grad():
            return ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       decoder_input_ids=_cut_decoder_inputs(ref, batch)).logits
    finally:
        module.eager_attention_forward = original


def _cut_decoder_inputs(ref, batch):
    """T5Gemma2's own shift of the ids, with pad ids at the padding positions (explicit loops)."""
    shifted = ref.prepare_decoder_input_ids_from_labels(batch.input_ids).clone()
    for b in range(shifted.shape[0]):
        for t in range(shifted.shape[1]):
            if not batch.attention_mask[b, t]:
                shifted[b, t] = ref.config.pad_token_id
    return shifted


def test_merged_self_and_cross_attention_explains_the_encoder_share():
    """T5Gemma2's decoder runs one softmax over its own positions followed by the encoder's (the
    input tokens). The explained row of a merged call is its encoder part divided by its sum; an
    intervention replaces that distribution and keeps the share, equal to the explicit-loop
    reference on the last merged call, the first merged call and an encoder self-attention call;
    the recorded rows are the model's own cross-attention weights normalised."""
    model, tokenizer = _sweep_build("t5gemma2")
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.num_layers == 4 and adapter.pooling == "last"
    assert adapter.explained_module == "model.decoder.layers.1.self_attn"
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    for i, text in enumerate(TEXTS):  # the decoder inputs cut at the padding: each text as alone
        alone = adapter.forward(adapter.encode([text]))
        torch.testing.assert_close(forward.logits[i], alone.logits[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(forward.attention[i][batch.attention_mask[i].bool()], alone.attention[0],
                                   atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(forward.logits, _merged_reference(ref, batch, 0, None), atol=1e-5, rtol=1e-5)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    for layer in (3, 2, 1):
        explained = adapter if layer == 3 else adapter_for(model, tokenizer, layer=layer, device="cpu")
        expected = _merged_reference(ref, batch, layer, weights)
        got = explained.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=explained.forward(batch))
        torch.testing.assert_close(got[:, 0], expected, atol=1e-5, rtol=1e-4)
        assert (expected - forward.logits).abs().max() > 1e-4
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record))
    module = sys.modules[type(ref).__module__]
    original, own = module.eager_attention_forward, []

    def watched(mod, query, key, value, attention_mask, *args, **kwargs):
        out, probs = original(mod, query, key, value, attention_mask, *args, **kwargs)
        own.append((query.shape[2], probs))
        return out, probs

    module.eager_attention_forward = watched
    try:
        with torch.no_grad():
            ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                decoder_input_ids=_cut_decoder_inputs(ref, batch))
    finally:
        module.eager_attention_forward = original
    assert [probs.shape[-1] for _, probs in own] == [batch.input_ids.shape[1]] * 2 + [2 * batch.input_ids.shape[1]] * 2
    for (_, _, rows, values), (split, probs) in zip(record[2:], own[2:]):
        cross = probs[..., split:]
        torch.testing.assert_close(rows, cross / cross.sum(-1, keepdim=True), atol=1e-6, rtol=1e-5)
        assert values.shape[2] == batch.input_ids.shape[1]
    embeds = adapter.embeddings(batch).detach().requires_grad_(True)
    (held,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, embeds, detach_attention=True)[:, 0].sum(),
                                  embeds)
    (free,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, embeds)[:, 0].sum(), embeds)
    assert bool(torch.isfinite(held).all()) and float((held - free).abs().max()) > 1e-4


def _longformer_reference(ref, batch, layer, weights):
    """Longformer's logits with the global attention of layer ``layer`` (the 3-D
    ``(B·H, G, T_padded)`` softmax calls, one per layer; the banded local ones are 4-D) returning,
    for the [CLS] row (its only global token), ``weights`` ``(B, H, T)`` padded with zeros, written
    in by explicit loops."""
    original = torch.nn.functional.softmax
    calls = [0]

    def patched(scores, *args, **kwargs):
        probs = original(scores, *args, **kwargs)
        if scores.dim() != 3:
            return probs
        index = calls[0]
        calls[0] += 1
        if weights is None or index != layer:
            return probs
        probs = probs.clone()
        heads = weights.shape[1]
        for b in range(weights.shape[0]):
            for h in range(heads):
                for j in range(probs.shape[-1]):
                    probs[b * heads + h, 0, j] = weights[b, h, j] if j < weights.shape[-1] else 0.0
        return probs

    torch.nn.functional.softmax = patched
    try:
        with torch.no_grad():
            logits = ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    finally:
        torch.nn.functional.softmax = original
    assert calls[0] == 2
    return logits


def test_longformer_explains_the_global_rows():
    """Longformer's classification head reads [CLS], the one token with global attention: a softmax
    over every position, multiplied with its own value projection (``value_global``). That row is
    explained and replaced (equal to the reference that overwrites the global softmax); the other
    rows attend within a window of ±w positions and the global tokens, and are recorded mapped from
    their band to full rows (zero elsewhere), equal to the model's own ``attentions`` and
    ``global_attentions``; replacing a row that is not global is refused in one line; value
    zeroing zeroes a position's local and global value vectors."""
    from hf_attn.methods.value_zeroing import value_zeroing_matrices

    model, tokenizer = _sweep_build("longformer")
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.num_layers == 2 and adapter.pooling == "first"
    batch = adapter.encode(TEXTS)
    steps = batch.input_ids.shape[1]
    forward = adapter.forward(batch)
    torch.testing.assert_close(forward.logits, _longformer_reference(ref, batch, 0, None), atol=1e-5, rtol=1e-5)
    weights = random_rows(batch, adapter.num_heads, seed=1)
    for layer, explained in ((1, adapter), (0, adapter_for(model, tokenizer, layer=0, device="cpu"))):
        expected = _longformer_reference(ref, batch, layer, weights)
        got = explained.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=explained.forward(batch))
        torch.testing.assert_close(got[:, 0], expected, atol=1e-5, rtol=1e-4)
        assert (expected - forward.logits).abs().max() > 1e-4
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record))
        out = ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
    window = model.config.attention_window[0] // 2
    real = batch.attention_mask.bool()
    for (_, _, probs, _), local, cls in zip(record, out.attentions, out.global_attentions):
        assert probs.shape == (len(TEXTS), 2, steps, steps)
        torch.testing.assert_close(probs[:, :, 0], cls[:, :, :steps, 0])
        for b in range(len(TEXTS)):
            for h in range(2):
                for q in range(1, int(real[b].sum())):
                    row = torch.zeros(steps)
                    row[0] += local[b, h, q, 0]  # the global key ([CLS])
                    for k in range(2 * window + 1):
                        if 0 <= q - window + k < steps:
                            row[q - window + k] += local[b, h, q, 1 + k]
                    torch.testing.assert_close(probs[b, h, q], row)
        sums = probs.sum(-1)[real[:, None].expand(-1, 2, -1)]
        torch.testing.assert_close(sums, torch.ones_like(sums))
    with pytest.raises(ValueError, match="attends within its window only") as caught:
        adapter_for(model, tokenizer, query="mean", device="cpu")
    assert "\n" not in str(caught.value)
    got = value_zeroing_matrices(adapter, batch)
    attention = ref.longformer.encoder.layer
    for layer, b, j in ((0, 1, 2), (1, 3, 4)):
        def zero(module, args, output, j=j):
            output = output.clone()
            output[j] = 0  # sequence-first (T_padded, B, D)
            return output

        inputs = {"input_ids": batch.input_ids[b:b + 1], "attention_mask": batch.attention_mask[b:b + 1],
                  "output_hidden_states": True}
        own = attention[layer].attention.self
        with torch.no_grad():
            plain = ref(**inputs).hidden_states
            handles = [own.value.register_forward_hook(zero), own.value_global.register_forward_hook(zero)]
            try:
                zeroed = ref(**inputs).hidden_states
            finally:
                for handle in handles:
                    handle.remove()
        expected = 1 - torch.nn.functional.cosine_similarity(zeroed[layer + 1][0], plain[layer + 1][0], dim=-1)
        length = int(real[b].sum())
        torch.testing.assert_close(got[b, layer, :length, j], expected[:length], atol=1e-5, rtol=1e-4)


def test_embeddings_swapped_in_where_the_model_pads_its_input():
    """Longformer's head needs the ids (its global attention mask is built from them), and the model
    pads the ids to a multiple of its window before its embedding module: the input embeddings are
    swapped in for the first T rows of that call, the padding keeps its own rows; the logits equal
    the ids' and the gradient equals finite differences."""
    model, tokenizer = _sweep_build("longformer")
    adapter = adapter_for(model.double(), tokenizer, device="cpu")
    assert adapter.embeds_by_hook
    batch = adapter.encode(TEXTS[1:2])
    embeds = adapter.embeddings(batch).detach()
    torch.testing.assert_close(adapter.logits_from_embeddings(batch, embeds), adapter.logits(batch))
    leaf = embeds.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(adapter.logits_from_embeddings(batch, leaf)[0, 0], leaf)
    position, step = int(batch.content[0].nonzero()[0]), 1e-3  # float64 model, float32 logits
    for dim in (0, 5):
        delta = torch.zeros_like(embeds)
        delta[0, position, dim] = step
        numeric = (adapter.logits_from_embeddings(batch, embeds + delta)[0, 0]
                   - adapter.logits_from_embeddings(batch, embeds - delta)[0, 0]) / (2 * step)
        assert abs(float(numeric) - float(grad[0, position, dim])) < 1e-3 * (1 + abs(float(numeric)))
    assert float(grad.abs().max()) > 1e-3


def test_embeddings_never_reaching_the_model_are_refused(monkeypatch):
    """Were the embedding module never called on the input ids (nor on them shifted or padded), the
    swapped-in embeddings would silently be ignored: refused in one line."""
    from hf_attn.adapters import UnsupportedModelError

    model, tokenizer = _sweep_build("longformer")
    table = model.get_input_embeddings()
    monkeypatch.setattr(model, "get_input_embeddings", lambda: torch.nn.Embedding(*table.weight.shape))
    with pytest.raises(UnsupportedModelError, match="never called on the input ids") as caught:
        adapter_for(model, tokenizer, device="cpu")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("model_type, reason", [
    ("fnet", "has no attention at all"), ("mra", "no probability matrix over the tokens"),
    ("yoso", "no probability distribution over the tokens"), ("reformer", "gradients only in training mode"),
    ("perceiver", "reads latent vectors, not tokens"), ("canine", "no attention row over the input is the row"),
])
def test_attention_that_cannot_be_explained_is_refused_with_why_and_what_to_do(model_type, reason):
    """Architectures without softmax attention rows over the tokens that their head reads are refused
    at ``adapter_for`` in one line: what is wrong with this architecture, and what to use instead."""
    from hf_attn.adapters import UnsupportedModelError

    model, tokenizer = _sweep_build(model_type)
    with pytest.raises(UnsupportedModelError, match=reason) as caught:
        adapter_for(model, tokenizer, device="cpu")
    message = str(caught.value)
    assert "\n" not in message and "use a classifier whose attention is a softmax over its tokens" in message


def test_nystromformer_is_explained_in_its_exact_mode_only():
    """Nyströmformer with as many landmarks as its segment length computes exact softmax attention,
    hooked at its softmax; its depthwise convolution over the values is kept, and reads every
    position: in the adapter's forwards the values at padding positions are zeroed — the zeros the
    convolution pads a text alone with — so a padded instance has the logits it has alone. The
    intervention equals the softmax reference whose value projections zero the padding rows by
    explicit loops; the recorded probabilities are the model's own. With fewer landmarks its Nyström
    approximation is no probability distribution: refused with the setting that would be explained."""
    from hf_attn.adapters import UnsupportedModelError

    model, tokenizer = _sweep_build("nystromformer")
    assert model.config.num_landmarks == model.config.segment_means_seq_len
    ref = copy.deepcopy(model)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.own_attention == ["Nyströmformer (exact softmax mode)"] and adapter.num_layers == 2
    batch = adapter.encode(TEXTS)
    forward = adapter.forward(batch)
    for i, text in enumerate(TEXTS):
        torch.testing.assert_close(forward.logits[i], adapter.forward(adapter.encode([text])).logits[0],
                                   atol=1e-5, rtol=1e-5)

    def zero_padding(module, args, output):
        output = output.clone()
        for b in range(output.shape[0]):
            for t in range(output.shape[1]):
                if not batch.attention_mask[b, t]:
                    output[b, t] = 0.0
        return output

    handles = [layer.attention.self.value.register_forward_hook(zero_padding)
               for layer in ref.nystromformer.encoder.layer]
    try:
        torch.testing.assert_close(forward.logits, softmax_reference(ref, batch, 0, None, input_ids=batch.input_ids),
                                   atol=1e-5, rtol=1e-5)
        weights = random_rows(batch, adapter.num_heads, seed=1)
        for layer, explained in ((1, adapter), (0, adapter_for(model, tokenizer, layer=0, device="cpu"))):
            expected = softmax_reference(ref, batch, layer, weights, input_ids=batch.input_ids)
            got = explained.logits_under(batch, weights.unsqueeze(1), per_head=True, forward=explained.forward(batch))
            torch.testing.assert_close(got[:, 0], expected, atol=1e-5, rtol=1e-4)
            assert (expected - forward.logits).abs().max() > 1e-4
        with torch.no_grad():
            own = ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True).attentions
    finally:
        for handle in handles:
            handle.remove()
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record))
    real = batch.attention_mask.bool()
    rows = real[:, None, :, None] & real[:, None, None, :]
    for (_, _, probs, _), expected in zip(record, own):
        torch.testing.assert_close(probs[rows.expand_as(probs)], expected[rows.expand_as(expected)],
                                   atol=1e-6, rtol=1e-5)
    with torch.no_grad():  # outside the adapter's forwards the model computes as it did
        plain = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        torch.testing.assert_close(plain, ref(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits)
    model, tokenizer = _sweep_build("nystromformer", num_landmarks=4, segment_means_seq_len=32)
    with pytest.raises(UnsupportedModelError, match="with num_landmarks equal to segment_means_seq_len") as caught:
        adapter_for(model, tokenizer, device="cpu")
    assert "\n" not in str(caught.value)


def test_decoder_inputs_cut_at_the_padding_where_the_head_reads_them():
    """T5Gemma2's head reads the decoder's last position whose input is not a pad token; shifted
    right, a padded text's last real id lands on its first padding position, so a padded batch
    would read one row later than the text alone: its decoder inputs are cut at the padding, and a
    padded text has its logits alone. T5Gemma reads one position past the ids' last real token
    whatever its decoder inputs: its padding behaviour is its own, and the adapter says so."""
    model, tokenizer = _sweep_build("t5gemma2")
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.decoder_padding and not adapter.describe()["padding_changes_logits"]
    batch = adapter.encode(TEXTS)
    with torch.no_grad():
        plain = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    alone = torch.cat([adapter.logits(adapter.encode([text])) for text in TEXTS])
    torch.testing.assert_close(adapter.logits(batch), alone, atol=1e-5, rtol=1e-5)
    assert float((plain - alone).abs().max()) > 1e-3  # the model's own decoder inputs would not
    model, tokenizer = _sweep_build("t5gemma")
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert not adapter.decoder_padding and adapter.describe()["padding_changes_logits"]
    for name in ("bart", "t5"):
        model, tokenizer = _sweep_build(name)
        adapter = adapter_for(model, tokenizer, device="cpu")
        assert not adapter.decoder_padding and not adapter.describe()["padding_changes_logits"]
