"""Every layer's :class:`~hf_attn.adapters.internals.LayerInternals` handed to a function as the
forward reaches it, without keeping any layer's ``(B, H, T, T)`` maps: the streamed counterpart of
:func:`hf_attn.adapters.internals.record_internals` (:mod:`hf_attn.adapters.streaming`).

When layer l's attention block has produced its output (the attention module's output added to
the residual for pre-LN blocks, the layer norm's output for post-LN blocks; the same hooks as
``record_internals``), ``consume(l, internals)`` runs with ``internals.probs`` a stand-in whose
``[instances, :, rows]`` (slices) computes those probabilities with the model's own eager
arithmetic from the layer's query, key and value — so a consumer that reads the maps in slices of
rows (ALTI's contributions) never holds a whole map. Then the layer's query, key and value are
dropped. Kept at any time: one layer's query, key, values, residual and output (``O(B·T·D)``).
"""

from __future__ import annotations

import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.internals import LAYOUTS, LayerInternals, block_layout, require_internals, this_thread_only
from hf_attn.adapters.streaming import Collector, streamed_call


class LazyProbs:
    """``probs[instances, :, rows]`` (slices) → ``(b, H, r, T)`` float32, computed on demand by the
    layer's ``probs_of`` (:meth:`hf_attn.adapters.streaming.Collector.take_call`)."""

    def __init__(self, probs_of):
        self.probs_of = probs_of

    def __getitem__(self, key):
        if not isinstance(key, tuple) or len(key) != 3 or key[1] != slice(None):
            raise TypeError("streamed probabilities are read as probs[instances, :, rows] with slices")
        instances, _, rows = key
        return self.probs_of(instances, rows).float()


class _Modules(Collector):
    """The attention module of every call, nothing computed."""

    def __init__(self):
        self.modules: list = []

    def wants(self, index, module=None):
        self.modules.append(module)
        return None


class _Pending(Collector):
    """Holds the last attention call's means of computing its rows until its block's output is known."""

    def __init__(self):
        self.pending = None

    def wants(self, index, module=None):
        return "call"

    def take_call(self, index, module, probs_of, values):
        self.pending = (probs_of, values)


def _hidden(args, kwargs):
    if args:
        return args[0]
    for name in ("hidden_states", "query"):
        if name in kwargs:
            return kwargs[name]
    raise UnsupportedModelError("cannot find the hidden states an attention module was called with")


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def modules_of(adapter, batch) -> list:
    """The attention module of every layer, from a streamed forward of one instance's first (or, left
    padded, last) few positions that computes no map."""
    one = batch.select([0])
    short = one.trimmed(min(one.input_ids.shape[1], 8), left=bool(getattr(adapter, "left_padding", False)))
    collector = _Modules()
    with torch.no_grad():
        streamed_call(adapter, short, collector)
    return collector.modules


@torch.no_grad()
def stream_internals(adapter, batch, consume) -> None:
    """One streamed forward of ``batch`` calling ``consume(l, LayerInternals)`` for every layer l in
    order (module docstring); the same layouts and refusals as ``record_internals``."""
    require_internals(adapter, "recording the attention blocks")
    modules = modules_of(adapter, batch)
    layouts = [block_layout(adapter, m) for m in modules]  # refused here where the layout is unknown
    rules = LAYOUTS[adapter.model.config.model_type]
    collector = _Pending()
    state = {"residual": None, "done": 0}
    device = batch.input_ids.device

    def finish(output):
        probs_of, values = collector.pending
        index = state["done"]
        internals = LayerInternals(probs=LazyProbs(probs_of), values=values.float(),
                                   residual=state["residual"].float(), output=output.float(), layout=layouts[index])
        collector.pending, state["done"] = None, index + 1
        with torch.autocast(device_type=device.type, enabled=False):  # the consumer's own arithmetic
            consume(index, internals)

    def keep_residual(module, args, kwargs):
        state["residual"] = _hidden(args, kwargs)

    def attention_done(module, args, output):
        if rules.kind == "pre":
            finish(state["residual"] + _first(output))

    handles = []
    try:
        if rules.residual == "layer_input":
            if getattr(adapter, "layers", None) is None:
                raise UnsupportedModelError("a pre-norm block's residual needs the list of layers")
            handles += [layer.register_forward_pre_hook(this_thread_only(keep_residual), with_kwargs=True)
                        for layer in adapter.layers]
        for module in dict.fromkeys(modules):  # shared modules (ALBERT) hooked once
            if rules.residual == "module_input":
                handles.append(module.register_forward_pre_hook(this_thread_only(keep_residual), with_kwargs=True))
            handles.append(module.register_forward_hook(this_thread_only(attention_done)))
        if rules.kind == "post":
            for norm in dict.fromkeys(layout.norm for layout in layouts):
                handles.append(norm.register_forward_hook(this_thread_only(lambda mod, args, output: finish(output))))
        streamed_call(adapter, batch, collector)
    finally:
        for handle in handles:
            handle.remove()
    if state["done"] != len(layouts):
        raise UnsupportedModelError(f"{state['done']} of {len(layouts)} attention blocks reached their output hooks")


__all__ = ["LazyProbs", "modules_of", "stream_internals"]
