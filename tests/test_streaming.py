"""Attention read in slices of query rows (:mod:`hf_attn.adapters.streaming`) against the recording
forward that keeps every layer's (B, H, T, T) maps: the same query rows, rollout, raw attention and
attention norms within float32 rounding (1e-5 absolute on probabilities and norms of these tiny
models, 1e-5 relative on logits), with slices small enough that every layer is cut into several,
and no slice ever holding more rows than asked. Tiny random models of tests/architectures.py."""

from __future__ import annotations

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for, streaming
from hf_attn.methods.attention_norm import attention_norm
from hf_attn.methods.raw_attention import raw_attention

TOLERANCE = 1e-5
LONG = ["the film is a gripping and wonderfully acted story " * 3, "a dull , lifeless and overlong mess"]


@pytest.fixture(scope="module", params=["bert", "llama"])
def setup(request):
    model, tokenizer = tiny_classifier(request.param)
    adapter = adapter_for(model, tokenizer, device="cpu")
    return adapter, adapter.encode(TEXTS + LONG)


class _Spy(streaming.Collector):
    """Wraps a collector and keeps the shape of every slice it is handed."""

    def __init__(self, inner):
        self.inner, self.shapes = inner, []

    def wants(self, index, module=None):
        return self.inner.wants(index, module)

    def take(self, index, module, rows, probs, values):
        self.shapes.append((index, tuple(probs.shape)))
        self.inner.take(index, module, rows, probs, values)

    def done(self, index):
        self.inner.done(index)


def _close(new, old, scale=1.0):
    assert new.shape == old.shape
    assert float((new - old).abs().max()) <= TOLERANCE * scale


def test_the_adapter_streams_after_checking(setup):
    adapter, _ = setup
    assert streaming.streams(adapter)
    assert "checked" in adapter.streaming_reason


@pytest.mark.parametrize("rows, mode", [(1, "product"), (3, "means"), (7, "product"), (7, "means")])
def test_streamed_forward_equals_the_recorded_maps(setup, rows, mode):
    adapter, batch = setup
    assert batch.input_ids.shape[1] > 3 * rows  # several slices per layer
    old_out, old = streaming.forward_maps(adapter, batch, True, streamed=False)
    new_out, new = streaming.forward_maps(adapter, batch, True, streamed=True, chunk_rows=rows, mode=mode)
    for name in ("head_rows", "layer_rows", "rollout"):
        _close(getattr(new, name), getattr(old, name))
    _close(new.values, old.values, float(old.values.abs().max()))
    _close(new_out.logits, old_out.logits, max(1.0, float(old_out.logits.abs().max())))
    forward = adapter.forward(batch)  # the adapter's own forward streams too
    torch.testing.assert_close(forward.rollout, old.rollout, atol=TOLERANCE, rtol=0)


def test_rollout_mode_follows_its_size(setup, monkeypatch):
    adapter, batch = setup
    count, steps = batch.input_ids.shape
    size = 4 * adapter.num_layers * count * steps * steps
    monkeypatch.setattr(streaming, "ROLLOUT_MEANS_BYTES", size)
    assert streaming._ForwardCollector(batch, adapter.layer, True, adapter.num_layers).mode == "means"
    monkeypatch.setattr(streaming, "ROLLOUT_MEANS_BYTES", size - 1)
    assert streaming._ForwardCollector(batch, adapter.layer, True, adapter.num_layers).mode == "product"
    with pytest.raises(ValueError, match="mode"):
        streaming._ForwardCollector(batch, adapter.layer, True, adapter.num_layers, mode="all")


def test_slices_hold_at_most_the_rows_asked(setup, monkeypatch):
    adapter, batch = setup
    heads, steps = adapter.num_heads, batch.input_ids.shape[1]
    # the default slice size from ROW_ELEMENTS: two rows of every head of the batch
    monkeypatch.setattr(streaming, "ROW_ELEMENTS", 2 * len(batch) * heads * steps)
    spy = _Spy(streaming._ForwardCollector(batch, adapter.layer, rollout=True))
    streaming.streamed_call(adapter, batch, spy)
    assert {s[2] for _, s in spy.shapes} == {2} | ({steps % 2} - {0})
    assert len(spy.shapes) == adapter.num_layers * -(-steps // 2)
    # without the rollout only the query rows of each layer are computed
    spy = _Spy(streaming._ForwardCollector(batch, adapter.layer, rollout=False))
    streaming.streamed_call(adapter, batch, spy)
    positions = int(batch.query.any(0).sum())
    assert positions < steps and all(s[2] <= positions for _, s in spy.shapes)
    spy = _Spy(streaming.LayerRows(batch, 0, lambda *args: None))
    streaming.streamed_call(adapter, batch, spy)
    assert [index for index, _ in spy.shapes] == [0] and spy.shapes[0][1][2] == positions


def _recorded(adapter, method, *args, **kwargs):
    saved = streaming.streams(adapter)
    adapter._streaming = False
    try:
        return method(adapter, *args, **kwargs)
    finally:
        adapter._streaming = saved


@pytest.mark.parametrize("layer, heads", [(None, None), (0, 1), (-1, "mean"), (1, 0)])
def test_raw_attention_streamed_equals_recorded(setup, monkeypatch, layer, heads):
    adapter, batch = setup
    assert streaming.streams(adapter)
    monkeypatch.setattr(streaming, "CHUNK_ROWS", 1)
    old = _recorded(adapter, raw_attention, batch, layer=layer, heads=heads)
    _close(raw_attention(adapter, batch, layer=layer, heads=heads), old)
    with pytest.raises(ValueError, match="layer"):
        raw_attention(adapter, batch, layer=adapter.num_layers)
    with pytest.raises(ValueError, match="heads"):
        raw_attention(adapter, batch, layer=0, heads=adapter.num_heads)


@pytest.mark.parametrize("layer", [None, 0])
def test_attention_norm_streamed_equals_recorded(setup, monkeypatch, layer):
    adapter, batch = setup
    monkeypatch.setattr(streaming, "CHUNK_ROWS", 1)
    old = _recorded(adapter, attention_norm, batch, layer=layer)
    new = attention_norm(adapter, batch, layer=layer)
    _close(new, old, float(old.abs().max()))
    with pytest.raises(ValueError, match="layer"):
        attention_norm(adapter, batch, layer=-adapter.num_layers - 1)


def test_mean_pooled_rows_stream_in_slices(monkeypatch):
    """Every real row is a query row (a mean-pooled head, or ``query="mean"``): the query rows of
    the explained layer are all rows, still cut into slices."""
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu", query="mean")
    batch = adapter.encode(TEXTS + LONG)
    monkeypatch.setattr(streaming, "CHUNK_ROWS", 2)
    assert streaming.streams(adapter)
    _close(raw_attention(adapter, batch), _recorded(adapter, raw_attention, batch))
    old = _recorded(adapter, attention_norm, batch)
    _close(attention_norm(adapter, batch), old, float(old.abs().max()))
    _, old_maps = streaming.forward_maps(adapter, batch, True, streamed=False)
    _close(adapter.forward(batch).rollout, old_maps.rollout)


def test_streamed_internals_equal_the_recorded_ones(setup):
    from hf_attn.adapters.internals import record_internals
    from hf_attn.adapters.streaming_internals import stream_internals

    adapter, batch = setup
    recorded = record_internals(adapter, batch)
    seen = []

    def consume(index, layer):
        steps = layer.values.shape[2]
        probs = torch.cat([layer.probs[:, :, slice(i, i + 2)] for i in range(0, steps, 2)], 2)
        seen.append(index)
        old = recorded[index]
        _close(probs, old.probs)
        _close(layer.probs[slice(1, 3), :, slice(4, 6)], old.probs[1:3, :, 4:6])
        for name in ("values", "residual", "output"):
            _close(getattr(layer, name), getattr(old, name), max(1.0, float(getattr(old, name).abs().max())))
        assert layer.layout.kind == old.layout.kind

    stream_internals(adapter, batch, consume)
    assert seen == list(range(adapter.num_layers))


@pytest.mark.parametrize("mode_bytes", [0, 2**31])
def test_alti_streamed_equals_recorded(setup, monkeypatch, mode_bytes):
    from hf_attn.methods import alti as alti_module

    adapter, batch = setup
    old = _recorded(adapter, alti_module.alti, batch)
    monkeypatch.setattr(streaming, "ROLLOUT_MEANS_BYTES", mode_bytes)  # 0: the running product
    steps, dim = batch.input_ids.shape[1], adapter.model.config.hidden_size
    monkeypatch.setattr(alti_module, "CHUNK_ELEMENTS", 2 * steps * dim)  # two rows of one instance a slice
    _close(alti_module.alti(adapter, batch), old)
