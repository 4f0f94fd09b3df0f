"""What the attention-family methods need from inside a ``transformers`` model, read through the
adapter's public pieces (:class:`~hf_attn.adapters.interface.Intervention` ``record``, the
adapter's ``model`` / ``layers`` / ``_model_call``) and forward hooks — never by editing the model.

Per layer l (attention call l, in forward order) :func:`record_internals` returns a
:class:`LayerInternals`: the attention probabilities α ``(B, H, T, T)``, the value vectors
``(B, H, T, d)`` (grouped key/value heads repeated to one per query head, biases included), the
residual stream entering the attention block ``(B, T, D)``, the block's output ``(B, T, D)`` (the
hidden state after the attention sub-layer: residual added, and for post-LN blocks normalised) and
the block's :class:`BlockLayout`: where the output projection W_O, b_O and the layer norm are.

The layout is looked up per architecture in :data:`LAYOUTS` (a small table, not guessed): a model
whose ``model_type`` is not in it, or whose modules do not have the expected names, is refused
with the reason (:class:`~hf_attn.adapters.base.UnsupportedModelError`).

Shapes: B instances, T positions, H query heads, d head size, D model size, L layers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.interface import Intervention
from hf_attn.adapters.placement import materialised, to_device


@dataclass(frozen=True)
class LayoutRule:
    """Where one architecture keeps its attention block's pieces, relative to the module that makes
    the attention call (``module``) and the layer holding it (``parent``: the module one level up in
    ``model.named_modules()``, or the adapter's layer).

    ``projection``: attribute path of the output projection (``nn.Linear`` or GPT-2's ``Conv1D``)
    from ``module`` (``"module.x"``) or ``parent`` (``"parent.x"``); ``norm``: the layer norm —
    for ``kind="post"`` applied to residual + attention output (BERT: y = LN(x + Attn(x))), for
    ``kind="pre"`` applied to each input before the attention (Llama: y = x + Attn(LN(x))), where it
    is already inside the recorded value vectors; ``residual``: ``"module_input"`` (the hidden
    states the attention module is called with) or ``"layer_input"`` (those the layer is called
    with)."""

    kind: str
    projection: str
    norm: str
    residual: str


_BERT = LayoutRule("post", "parent.output.dense", "parent.output.LayerNorm", "module_input")
LAYOUTS: dict[str, LayoutRule] = {
    "bert": _BERT, "roberta": _BERT, "xlm-roberta": _BERT, "electra": _BERT, "camembert": _BERT,
    "distilbert": LayoutRule("post", "module.out_lin", "parent.sa_layer_norm", "module_input"),
    "albert": LayoutRule("post", "module.dense", "module.LayerNorm", "module_input"),
    "llama": LayoutRule("pre", "module.o_proj", "parent.input_layernorm", "layer_input"),
    "qwen2": LayoutRule("pre", "module.o_proj", "parent.input_layernorm", "layer_input"),
    "mistral": LayoutRule("pre", "module.o_proj", "parent.input_layernorm", "layer_input"),
    "gpt2": LayoutRule("pre", "module.c_proj", "parent.ln_1", "layer_input"),
    "modernbert": LayoutRule("pre", "module.Wo", "parent.attn_norm", "layer_input"),
}


@dataclass
class BlockLayout:
    """One layer's attention block: ``kind`` ("post" / "pre"), ``weight`` ``(D, H·d)`` and ``bias``
    ``(D,)`` or None of the output projection (attention output = concat_h(z_h) · Wᵀ + b), ``norm``
    the layer-norm module (post: applied to the block output; pre: already in the values) and
    ``norm_weight`` its scale γ (None without one). The tensors are on the adapter's device, read from
    accelerate's offload map for a model whose block sits on the disk (:mod:`hf_attn.adapters.placement`)."""

    kind: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    norm: torch.nn.Module
    norm_weight: torch.Tensor | None = None


@dataclass
class LayerInternals:
    """One layer (see the module docstring): ``probs`` ``(B, H, T, T)``, ``values`` ``(B, H, T, d)``,
    ``residual`` ``(B, T, D)``, ``output`` ``(B, T, D)``, ``layout``."""

    probs: torch.Tensor
    values: torch.Tensor
    residual: torch.Tensor
    output: torch.Tensor
    layout: BlockLayout


def require_internals(adapter, what: str) -> None:
    """Refuse (``UnsupportedModelError``) an adapter without a ``transformers`` model inside, naming
    the method ``what`` that needs it."""
    if not all(hasattr(adapter, name) for name in ("model", "_model_call", "num_layers")):
        raise UnsupportedModelError(f"{what} needs the layers of a transformers model; "
                                    f"{type(adapter).__name__} does not expose them")


def _resolve(path: str, module: torch.nn.Module, parent: torch.nn.Module | None):
    root, *rest = path.split(".")
    target = module if root == "module" else parent
    for name in rest:
        target = getattr(target, name, None) if target is not None else None
    return target


def _parents(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    modules = dict(model.named_modules())
    out = {}
    for name, module in modules.items():
        if name:
            out[id(module)] = modules[name.rpartition(".")[0]]
    return out


def block_layout(adapter, module: torch.nn.Module) -> BlockLayout:
    """The :class:`BlockLayout` of attention module ``module`` (one recorded by the adapter), from
    :data:`LAYOUTS`; refused with the reason when the architecture or its module names are unknown."""
    require_internals(adapter, "the attention block layout")
    model_type = getattr(adapter.model.config, "model_type", type(adapter.model).__name__)
    rule = LAYOUTS.get(model_type)
    if rule is None:
        raise UnsupportedModelError(f"the attention block layout of {model_type!r} models is not known (known: "
                                    f"{', '.join(sorted(LAYOUTS))}): where its output projection and layer "
                                    "norm sit cannot be assumed")
    parent = _parents(adapter.model).get(id(module))
    projection = _resolve(rule.projection, module, parent)
    norm = _resolve(rule.norm, module, parent)
    if projection is None or not hasattr(projection, "weight") or norm is None:
        raise UnsupportedModelError(f"{type(module).__name__} ({model_type}) has no {rule.projection} / {rule.norm}: "
                                    "not the layout this architecture is listed with")
    device = adapter.device
    weight = to_device(materialised(projection, "weight", adapter.model), device)
    if type(projection).__name__ == "Conv1D":  # GPT-2: y = x @ W + b, W (in, out)
        weight = weight.t()
    return BlockLayout(rule.kind, weight, to_device(materialised(projection, "bias", adapter.model), device), norm,
                       to_device(materialised(norm, "weight", adapter.model), device))


def _hidden_from(args, kwargs, names=("hidden_states", "query")):
    if args:
        return args[0]
    for name in names:
        if name in kwargs:
            return kwargs[name]
    raise UnsupportedModelError("cannot find the hidden states an attention module was called with")


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def this_thread_only(hook):
    """``hook`` acting on the forwards of the thread that made it only (``None``, no change, in any
    other): a recording's hooks on a model shared between threads never see another thread's forward."""
    owner = threading.get_ident()

    def hooked(*args, **kwargs):
        return hook(*args, **kwargs) if threading.get_ident() == owner else None
    return hooked


def record_internals(adapter, batch, grad: bool = False) -> list[LayerInternals]:
    """One forward of ``batch`` recording every layer's :class:`LayerInternals` (module docstring).
    ``grad``: keep the autograd graph (default: no gradient)."""
    require_internals(adapter, "recording the attention blocks")
    record: list = []
    probe: list = []
    with torch.no_grad():  # the layout of each module first, from a tiny recording forward
        adapter._model_call(batch.input_ids[:1], batch.attention_mask[:1], None, Intervention(record=probe),
                            None if batch.position_ids is None else batch.position_ids[:1])
    modules = [m for _, m, _, _ in probe]
    layouts = [block_layout(adapter, m) for m in modules]
    rules = LAYOUTS[adapter.model.config.model_type]
    captured: dict[str, list] = {"residual": [], "attn": [], "norm": []}
    handles = []
    try:
        if rules.residual == "layer_input":
            if getattr(adapter, "layers", None) is None:
                raise UnsupportedModelError("a pre-norm block's residual needs the list of layers")
            for layer in adapter.layers:
                handles.append(layer.register_forward_pre_hook(this_thread_only(
                    lambda mod, args, kwargs: captured["residual"].append(_hidden_from(args, kwargs))),
                    with_kwargs=True))
        for module in dict.fromkeys(modules):  # shared modules (ALBERT) hooked once
            if rules.residual == "module_input":
                handles.append(module.register_forward_pre_hook(this_thread_only(
                    lambda mod, args, kwargs: captured["residual"].append(_hidden_from(args, kwargs))),
                    with_kwargs=True))
            handles.append(module.register_forward_hook(this_thread_only(
                lambda mod, args, output: captured["attn"].append(_first(output)))))
        if rules.kind == "post":
            for norm in dict.fromkeys(layout.norm for layout in layouts):
                handles.append(norm.register_forward_hook(this_thread_only(
                    lambda mod, args, output: captured["norm"].append(output))))
        with torch.set_grad_enabled(grad):
            adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record),
                                batch.position_ids)
    finally:
        for handle in handles:
            handle.remove()
    layers = []
    here = adapter.device  # a dispatched model records each layer on its own device: all moved to the inputs'
    for index, (_, _, probs, values) in enumerate(record):
        residual = to_device(captured["residual"][index], here)
        if rules.kind == "post":
            output = captured["norm"][index]
        else:
            output = residual + to_device(captured["attn"][index], here)
        layers.append(LayerInternals(probs=to_device(probs.float(), here), values=to_device(values.float(), here),
                                     residual=residual.float(), output=to_device(output.float(), here),
                                     layout=layouts[index]))
    return layers


def attention_matrices(adapter, batch) -> list[torch.Tensor]:
    """Every layer's attention probabilities ``(B, H, T, T)`` (float32), from one recording forward."""
    require_internals(adapter, "the attention of every layer")
    record: list = []
    with torch.no_grad():
        adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record),
                            batch.position_ids)
    return [to_device(probs.float(), adapter.device) for _, _, probs, _ in record]


def head_contributions(layer: LayerInternals) -> torch.Tensor:
    """f_h(x_j) = v_h,j · W_O,hᵀ for every head and key position: ``(B, H, T, D)``, so that the
    attention output of row i is Σ_h Σ_j α_h,ij f_h(x_j) + b_O (Kobayashi et al. 2020, §3: the value
    transformation including its bias, then the output projection)."""
    heads, dim = layer.values.shape[1], layer.values.shape[-1]
    weight = layer.layout.weight.float().reshape(-1, heads, dim)  # (D, H, d)
    return torch.einsum("bhtd,Dhd->bhtD", layer.values, weight)


def query_average(batch, rows: torch.Tensor) -> torch.Tensor:
    """``(B, T, T)`` matrices → ``(B, T)``: the mean of their query rows (``batch.query``)."""
    query = batch.query.to(rows.dtype)
    return torch.einsum("bq,bqt->bt", query, rows) / query.sum(-1, keepdim=True).clamp_min(1.0)


def content_only(batch, scores: torch.Tensor) -> torch.Tensor:
    """``scores`` ``(B, T)`` with 0 outside the text's tokens (``batch.content``), float32."""
    return torch.where(batch.content, scores.float(), torch.zeros((), dtype=torch.float32, device=scores.device))


def predicted_class(adapter, batch) -> torch.Tensor:
    """``(B,)`` the class each instance is predicted as (the explained class of the gradient methods)."""
    return adapter.logits(batch).argmax(-1)


__all__ = ["BlockLayout", "LAYOUTS", "attention_matrices", "LayerInternals", "LayoutRule", "block_layout", "content_only",
           "head_contributions", "predicted_class", "query_average", "record_internals", "require_internals"]
