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
    main = threading.get_ident()

    def midway(module, args, kwargs, output):  # the recording forward of the whole batch (not a set-up probe)
        hidden = args[0] if args else kwargs.get("hidden_states")
        if threading.get_ident() == main and "logits" not in out and hidden.shape[0] == len(batch):
            def run():
                try:
                    out["logits"] = adapter.logits(other)
                except Exception as error:  # noqa: BLE001 - reported by the test
                    out["logits"] = error
            thread = threading.Thread(target=run)
            thread.start()
            thread.join()

    handle = adapter.layers[0].register_forward_hook(midway, with_kwargs=True)
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
