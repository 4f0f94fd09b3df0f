"""The one intervention seam for ``transformers`` models: a function registered with transformers'
attention interface (``AttentionInterface``) under :data:`ATTN_IMPLEMENTATION`.

Every attention call of a model switched to it goes through :func:`intervened_attention`, which

1. calls the model's **own** eager attention (``eager_attention_forward`` of the model's modelling
   module), so the arithmetic is exactly the architecture's (scaling, grouped key/value heads,
   float32 softmax, masks);
2. counts the attention calls of the forward: call number ``i`` is layer ``i``. Layers are
   identified by call order, not by a ``layer_idx`` attribute, so models without one (DistilBERT,
   ALBERT, whose layers share one module) are handled alike;
3. on the intervened layer only, replaces (or detaches) the probability rows of the query
   positions the classification head reads, zeroes value vectors, or — in the query-only mode of
   the exact fast path — returns ``weights @ V`` from values cached by an earlier forward; the
   attention output is recomputed as ``probabilities @ V`` from the modified probabilities. The
   intervention's tensors are moved to the device of the call that reads them (a model dispatched
   across devices by a ``device_map``: :mod:`hf_attn.adapters.placement`); what is recorded stays
   on that device, and the adapter's readers move it to theirs.

A decoder whose one softmax runs over its own positions followed by the encoder's (T5Gemma2's
merged self- and cross-attention, :data:`MERGED_ATTENTION`) is explained on its encoder part, as a
distribution over the input tokens (:func:`_merged`).

The per-call instruction is an :class:`Intervention` passed as the keyword argument
:data:`INTERVENTION_KWARG` of the model's forward; transformers forwards it unchanged to every
attention call (``**kwargs``). Some modelling files drop the extra keyword arguments between the
layer and its attention module (StableLM, Nemotron, the Zamba hybrids): for them the same
instruction is also held in :func:`active` for the duration of the forward, and read from there when
the keyword is missing. A model whose attention calls see neither is detected when the adapter is
built (no call is counted) and refused, never run as if the intervention worked.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from dataclasses import dataclass, field

import torch

ATTN_IMPLEMENTATION = "hf_attn_intervention"
INTERVENTION_KWARG = "hf_attn_intervention"


class InterventionError(ValueError):
    """A model or an intervention the engine cannot carry out exactly (the message says why)."""


@dataclass
class Intervention:
    """What :func:`intervened_attention` does during one forward.

    ``layer``: the attention call (layer) to change, counted from 0 in call order; ``-1`` changes
    nothing (a recording forward). ``query`` ``(B, T)`` bool: the query rows replaced — the rows the
    classification head reads (one per instance, or every real row for mean-pooled heads).
    ``weights``: replacement probabilities over the keys, ``(B, T)`` (shared by the heads) or
    ``(B, H, T)`` (per head); they must be 0 on padding keys (not renormalised here). ``None`` keeps
    the model's own rows. ``head``: ``None`` changes every head, an int only that head's row.
    ``detach``: cut the gradient through the (possibly replaced) rows. ``every_layer``: apply the
    replacement on every layer instead of ``layer`` alone. ``zero_values`` ``(B, T)``
    bool: value vectors set to 0 at that layer (every head; value zeroing). ``cached_values``: the
    query-only mode of the fast path, see :func:`intervened_attention`. ``record``: when a list, every
    call appends ``(module, probabilities, value)`` (probabilities and values as used, values with the
    grouped heads repeated to one per query head). ``fused``: nothing is changed or recorded, so every
    call runs transformers' fused kernel (``sdpa_attention_forward``) instead of the eager
    arithmetic — the same output up to rounding, without the (T × T) probabilities kept for the
    backward; the adapter uses it only after checking it on the model. ``stream``: a
    :class:`hf_attn.adapters.streaming.Stream` — the calls hand their probabilities to its collector
    in slices of query rows (only the rows it asks for) and keep none (a streamed forward). ``calls``
    counts the attention calls. ``shared_values``: with ``zero_values`` (one zeroed position per row),
    an object whose ``attend(module, eager, query, key, value, attention_mask, args, kwargs)`` computes
    the zeroed layer's attention once per instance (value zeroing's variants of one instance share
    it: :class:`hf_attn.methods.value_zeroing.SharedZeroing`). ``readout``: a
    :class:`hf_attn.adapters.readout.Readout` — a forward whose last layer runs for the row the head
    reads only (read-out pruning); every call goes through its ``attend``."""

    layer: int = -1
    query: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    head: int | None = None
    detach: bool = False
    zero_values: torch.Tensor | None = None
    cached_values: torch.Tensor | None = None
    record: list | None = None
    every_layer: bool = False
    fused: bool = False
    stream: object | None = None
    lrp: str | None = None  # "attnlrp" | "cp": the LRP attention rules (hf_attn.adapters.lrp_rules)
    shared_values: object | None = None
    readout: object | None = None
    calls: int = field(default=0)


_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("hf_attn_active_intervention", default=None)
_INSIDE: contextvars.ContextVar = contextvars.ContextVar("hf_attn_inside_adapter_forward", default=False)


@contextlib.contextmanager
def active(intervention: "Intervention | None"):
    """``intervention`` is the instruction of every attention call made inside the block that does
    not receive it as a keyword argument (per thread: a context variable); the block is an
    adapter's forward (:func:`inside`), whatever the intervention."""
    token, inside_token = _ACTIVE.set(intervention), _INSIDE.set(True)
    try:
        yield
    finally:
        _INSIDE.reset(inside_token)
        _ACTIVE.reset(token)


def inside() -> bool:
    """Whether an adapter's forward is running in this thread (:func:`active`)."""
    return _INSIDE.get()


def current() -> "Intervention | None":
    """The intervention of the forward running in this thread (:func:`active`), or ``None``."""
    return _ACTIVE.get()


def eager_function_of(module: torch.nn.Module):
    """The eager attention function of ``module``'s modelling file (``eager_attention_forward``), or
    ``None`` when the architecture has none."""
    return getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)


def _repeat_heads(value: torch.Tensor, heads: int) -> torch.Tensor:
    """``(B, H_kv, T, d)`` → ``(B, H, T, d)``: grouped key/value heads repeated as transformers'
    ``repeat_kv`` does (query head h uses key/value head h // (H / H_kv))."""
    groups = heads // value.shape[1]
    return value if groups == 1 else value.repeat_interleave(groups, dim=1)


def _replacement(probs: torch.Tensor, iv: Intervention) -> torch.Tensor:
    """The rows that replace the query rows: ``(B, H, 1, T)`` or full ``(B, H, T, T)`` broadcastable."""
    heads = probs.shape[1]
    own = probs
    if iv.weights is None:
        new = own
    else:
        w = iv.weights.to(device=probs.device, dtype=probs.dtype)  # a dispatched model: this layer's device
        w = w.unsqueeze(1) if w.dim() == 2 else w  # (B, 1|H, T)
        w = w.unsqueeze(2)  # (B, 1|H, 1, T)
        if iv.head is None:
            new = w.expand(-1, heads, -1, -1) if w.shape[1] == 1 else w
        else:
            select = (torch.arange(heads, device=probs.device) == iv.head).view(1, heads, 1, 1)
            pick = w if w.shape[1] == 1 else w[:, iv.head:iv.head + 1]
            new = torch.where(select, pick, own)
    if iv.detach:
        if iv.head is None:
            new = new.detach()
        else:
            select = (torch.arange(heads, device=probs.device) == iv.head).view(1, heads, 1, 1)
            new = torch.where(select, new.detach(), new)
    return new


def intervened_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: torch.Tensor | None, *args, hf_attn_intervention: Intervention | None = None,
                         **kwargs):
    """The registered attention function: ``query`` ``(B, H, T_q, d)``, ``key``/``value``
    ``(B, H_kv, T, d)``; returns ``(attn_output (B, T_q, H, d), probabilities (B, H, T_q, T))`` like
    the architecture's ``eager_attention_forward``.

    Query-only mode (``cached_values`` set, used by the adapter's exact fast path for the last
    layer): the model runs on the query position alone (``T_q = 1``) and this call returns
    ``weights @ cached_values`` — the attention output of the query row over the full sentence's
    values, cached by the unmodified forward — so the rest of that layer and the head run for one
    position only. ``weights`` are then ``(N, H, T)`` or ``(N, T)``; ``cached_values``
    ``(B, H, T, d)`` with ``N = B·R`` (R candidate rows per instance)."""
    eager = eager_function_of(module)
    if eager is None:
        raise InterventionError(f"{type(module).__name__} has no eager_attention_forward in "
                                f"{type(module).__module__}: its attention cannot be intervened on")
    iv = hf_attn_intervention if hf_attn_intervention is not None else _ACTIVE.get()
    if iv is None:
        return eager(module, query, key, value, attention_mask, *args, **kwargs)
    if iv.readout is not None:
        return iv.readout.attend(iv, module, eager, query, key, value, attention_mask, args, kwargs)
    if iv.fused:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)
    if module.training:
        raise InterventionError("interventions need the model in eval mode (dropout would change the rows)")
    index = iv.calls
    iv.calls += 1
    heads = query.shape[1]
    if iv.lrp is not None:  # AttnLRP / CP-LRP: the model's own attention, its backward changed
        from hf_attn.adapters.lrp_rules import lrp_attention

        return lrp_attention(iv, module, eager, query, key, value, attention_mask, args, kwargs)
    if _is_merged(module):
        return _merged(module, iv, index, eager, query, key, value, attention_mask, args, kwargs)
    if iv.cached_values is not None and index == iv.layer:
        return _query_only(iv, heads)
    if iv.zero_values is not None and index == iv.layer:
        if iv.shared_values is not None:
            return iv.shared_values.attend(module, eager, query, key, value, attention_mask, args, kwargs)
        keep = (~iv.zero_values.to(device=value.device, dtype=torch.bool)).to(value.dtype)
        value = value * keep.view(keep.shape[0], 1, -1, 1)
    changes = (index == iv.layer or iv.every_layer) and (iv.weights is not None or iv.detach)
    if iv.stream is not None and not changes:  # the maps read in slices of rows, never kept whole
        return iv.stream.attend(index, module, eager, query, key, value, attention_mask, args, kwargs, _repeat_heads)
    recording = iv.record is not None
    output, probs = eager(module, query, key, value, attention_mask, *args, **kwargs)
    if not changes and not recording:
        return output, probs
    values = _repeat_heads(value, heads)
    if changes:
        rows = iv.query.to(device=probs.device, dtype=torch.bool).view(iv.query.shape[0], 1, -1, 1)  # (B, 1, T, 1)
        probs = torch.where(rows, _replacement(probs, iv), probs)
        output = torch.matmul(probs.to(values.dtype), values).transpose(1, 2).contiguous()
    if recording:
        iv.record.append((index, module, probs, values))
    return output, probs


# attention modules whose one softmax runs over the decoder's own positions followed by the encoder's
# (modelling module's short name, class name)
MERGED_ATTENTION = {("t5gemma2", "T5Gemma2MergedAttention")}


def _is_merged(module: torch.nn.Module) -> bool:
    short = type(module).__module__.rpartition(".")[2].removeprefix("modeling_")
    return (short, type(module).__name__) in MERGED_ATTENTION


def _merged(module, iv: Intervention, index: int, eager, query, key, value, attention_mask, args, kwargs):
    """A decoder's merged self- and cross-attention (T5Gemma2): one softmax over the keys of the
    decoder's own ``T_q`` positions followed by the encoder's ``T`` positions — the input tokens.
    The explained row is the **encoder part as a distribution**: the merged row's last ``T``
    entries divided by their sum (the share of the row on the encoder). An intervention replaces
    that distribution and keeps the share: the new merged row is the decoder part unchanged, then
    ``share × new row``; detaching cuts the gradient through the whole merged row. Value zeroing
    zeroes the encoder positions' values; the recorded values are the encoder's."""
    split = query.shape[2]  # the decoder's own positions come first
    heads = query.shape[1]
    if iv.cached_values is not None and index == iv.layer:
        raise InterventionError(f"{type(module).__name__} merges self- and cross-attention: the query-only replay of "
                                "the fast path is not available for it")
    if key.shape[2] <= split:
        raise InterventionError(f"{type(module).__name__}: {key.shape[2]} keys for {split} queries, so no encoder "
                                "part follows the decoder's own positions")
    if iv.zero_values is not None and index == iv.layer:  # (value zeroing's shared attention: not for a merged row)
        keep = (~iv.zero_values.to(device=value.device, dtype=torch.bool)).to(value.dtype)
        value = torch.cat([value[:, :, :split], value[:, :, split:] * keep.view(keep.shape[0], 1, -1, 1)], 2)
    output, probs = eager(module, query, key, value, attention_mask, *args, **kwargs)
    mass = probs[..., split:].sum(-1, keepdim=True)
    rows = probs[..., split:] / mass.clamp_min(torch.finfo(probs.dtype).tiny)
    values = _repeat_heads(value, heads)
    if (index == iv.layer or iv.every_layer) and (iv.weights is not None or iv.detach):
        select = iv.query.to(device=probs.device, dtype=torch.bool).view(iv.query.shape[0], 1, -1, 1)
        new = _replacement(rows, iv).expand_as(rows)
        merged = torch.cat([probs[..., :split], new * mass], -1)
        if iv.detach:
            heads_cut = torch.ones(heads, dtype=torch.bool, device=probs.device) if iv.head is None else (
                torch.arange(heads, device=probs.device) == iv.head)
            merged = torch.where(heads_cut.view(1, heads, 1, 1), merged.detach(), merged)
        probs = torch.where(select, merged, probs)
        rows = torch.where(select, new, rows)
        output = torch.matmul(probs.to(values.dtype), values).transpose(1, 2).contiguous()
    if iv.record is not None:
        iv.record.append((index, module, rows, values[:, :, split:]))
    return output, probs


def intervene_probabilities(module: torch.nn.Module, probs: torch.Tensor, values: torch.Tensor | None,
                            iv: Intervention, count: bool = True) -> torch.Tensor:
    """The interface path's intervention for attention computed in a model's own module
    (:mod:`hf_attn.adapters.own_attention`): ``probs`` ``(B, H, T_q, T)`` as the module computed
    them, ``values`` ``(B, H, T, d)`` or ``None`` (already zeroed by the value hook where asked).
    Counts the call, replaces (or detaches) the query rows on the explained layer, records; returns
    the probabilities the module multiplies with its values. ``count=False``: an earlier use of the
    same probabilities within the call (LiLT's layout stream): the rows are replaced as the counted
    use will replace them, and nothing is counted or recorded."""
    if module.training:
        raise InterventionError("interventions need the model in eval mode (dropout would change the rows)")
    index = iv.calls
    if not count:
        if (index == iv.layer or iv.every_layer) and (iv.weights is not None or iv.detach):
            rows = iv.query.to(device=probs.device, dtype=torch.bool).view(iv.query.shape[0], 1, -1, 1)
            probs = torch.where(rows, _replacement(probs, iv), probs)
        return probs
    iv.calls += 1
    if iv.zero_values is not None and index == iv.layer and values is None:
        raise InterventionError(f"{type(module).__name__} computes its values in a fused projection: value zeroing "
                                "cannot reach them")
    if (index == iv.layer or iv.every_layer) and (iv.weights is not None or iv.detach):
        rows = iv.query.to(device=probs.device, dtype=torch.bool).view(iv.query.shape[0], 1, -1, 1)
        probs = torch.where(rows, _replacement(probs, iv), probs)
    if iv.record is not None:
        iv.record.append((index, module, probs, values))
    return probs


def _query_only(iv: Intervention, heads: int):
    values = iv.cached_values  # (B, H, T, d)
    batch, _, steps, dim = values.shape
    w = iv.weights.to(device=values.device, dtype=values.dtype)
    if w.dim() == 2:
        w = w.unsqueeze(1)  # (N, 1, T)
    rows = w.shape[0] // batch
    if iv.head is not None:
        raise InterventionError("the query-only mode takes complete rows (resolve head selections first)")
    w = w.expand(-1, heads, -1) if w.shape[1] == 1 else w
    if iv.detach:
        w = w.detach()
    out = torch.einsum("brht,bhtd->brhd", w.reshape(batch, rows, heads, steps), values)
    return out.reshape(batch * rows, 1, heads, dim), w.unsqueeze(2)


def register() -> str:
    """Register :func:`intervened_attention` with ``transformers.AttentionInterface`` and the
    additive float mask the eager functions expect with ``AttentionMaskInterface``, under
    :data:`ATTN_IMPLEMENTATION`. Idempotent; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, intervened_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_IMPLEMENTATION, eager_mask)
    return ATTN_IMPLEMENTATION
