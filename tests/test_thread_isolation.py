"""A recording's hooks on a model shared between threads act on the recording thread's forward only:
another thread's forward through the same model, run to completion in the middle of the recording,
neither fails nor changes the recorded values (ALTI recorded and streamed, every layer's residual
and output, ALTI-Logit)."""

from __future__ import annotations

import threading

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.adapters.internals import record_internals
from hf_attn.methods.alti import alti
from hf_attn.methods.alti_logit import alti_logit


def _with_another_forward_midway(adapter, method, batch, other):
    """``method(adapter, batch)`` while, when its forward reaches the first layer, another thread runs
    ``adapter.logits(other)`` to completion; returns (the result, the other thread's logits)."""
    out: dict = {}
    # the recording forward of the whole batch (not a set-up probe): exactly the batch's rows
    handle = _other_forward_when(adapter, 0, other, out, lambda rows: rows == len(batch))
    try:
        result = method(adapter, batch)
    finally:
        handle.remove()
    return result, out["logits"]


def _residuals_and_outputs(adapter, batch):
    layers = record_internals(adapter, batch)
    return torch.stack([layer.residual for layer in layers] + [layer.output for layer in layers])


@pytest.mark.parametrize("name,method,streamed", [("bert", alti, True), ("bert", alti, False),
                                                  ("bert", _residuals_and_outputs, None),
                                                  ("llama", alti_logit, None)])
def test_another_threads_forward_does_not_reach_a_recording(name, method, streamed):
    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    if streamed is not None:
        adapter._streaming = streamed  # the streamed internals or the recording forward
    batch, other = adapter.encode(TEXTS[:3]), adapter.encode(TEXTS[3:5])  # told apart by their sizes
    alone = method(adapter, batch)
    other_alone = adapter.logits(other)
    result, logits = _with_another_forward_midway(adapter, method, batch, other)
    assert not isinstance(logits, Exception), logits
    torch.testing.assert_close(logits, other_alone, rtol=0, atol=1e-6)
    torch.testing.assert_close(result, alone, rtol=0, atol=1e-6)


def _other_forward_when(adapter, layer_index, other, out, when):
    """A hook on layer ``layer_index`` that, the first time it runs in this thread on a number of rows
    ``when(rows)`` accepts, runs ``adapter.logits(other)`` in another thread to completion (into
    ``out["logits"]``: the logits, or the error it raised)."""
    main = threading.get_ident()

    def midway(module, args, kwargs, output):
        hidden = args[0] if args else kwargs.get("hidden_states")
        if threading.get_ident() == main and when(hidden.shape[0]) and "logits" not in out:
            def run():
                try:
                    out["logits"] = adapter.logits(other)
                except BaseException as error:  # noqa: BLE001 - reported by the test
                    out["logits"] = error
            thread = threading.Thread(target=run)
            thread.start()
            thread.join()
    return adapter.layers[layer_index].register_forward_hook(midway, with_kwargs=True)


def test_the_layer_replay_leaves_another_threads_forward_alone():
    """The layers before the explained one return the cached rows in the replaying thread only."""
    model, tokenizer = tiny_classifier("mpnet", layers=3)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.describe()["layer_replay"]
    batch, other = adapter.encode(TEXTS[:3]), adapter.encode(TEXTS[3:5])
    forward = adapter.forward(batch)
    weights = torch.softmax(torch.randn((len(batch), 2, adapter.num_heads, batch.input_ids.shape[1]),
                                        generator=torch.Generator().manual_seed(0)), -1)
    weights = weights * batch.attention_mask[:, None, None, :]
    weights = weights / weights.sum(-1, keepdim=True)
    alone, other_alone = adapter.logits_under(batch, weights, per_head=True, forward=forward), adapter.logits(other)
    out: dict = {}
    handle = _other_forward_when(adapter, adapter.layer, other, out, lambda rows: rows > len(batch))
    try:
        replayed = adapter.logits_under(batch, weights, per_head=True, forward=forward)
    finally:
        handle.remove()
    assert not isinstance(out["logits"], BaseException), out["logits"]
    torch.testing.assert_close(out["logits"], other_alone, rtol=0, atol=1e-6)
    torch.testing.assert_close(replayed, alone, rtol=0, atol=1e-6)


def test_value_zeroing_leaves_another_threads_forward_alone():
    """Value zeroing's stop after the zeroed layer (and its replay of the earlier ones) acts in its own
    thread only."""
    from hf_attn.methods.value_zeroing import value_zeroing

    model, tokenizer = tiny_classifier("bert", layers=3)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch, other = adapter.encode(TEXTS[:3]), adapter.encode(TEXTS[3:5])
    alone, other_alone = value_zeroing(adapter, batch), adapter.logits(other)
    out: dict = {}
    handle = _other_forward_when(adapter, 1, other, out, lambda rows: rows > len(batch))
    try:
        result = value_zeroing(adapter, batch)
    finally:
        handle.remove()
    assert not isinstance(out["logits"], BaseException), out["logits"]
    torch.testing.assert_close(out["logits"], other_alone, rtol=0, atol=1e-6)
    torch.testing.assert_close(result, alone, rtol=0, atol=1e-6)
