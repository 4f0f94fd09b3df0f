"""Interventions on attention that a model computes inside its own modules, not through
transformers' attention interface (DeBERTa and DeBERTa-v2/v3, MPNet, Falcon, Bloom, GPT-Neo, GPT-J,
RoFormer, Megatron-BERT, ConvBERT, RemBERT, LayoutLMv3, LiLT, SqueezeBERT, Funnel, Longformer, Nyströmformer, …).

Each of these modules computes its probabilities (softmax of its own scores: DeBERTa's
disentangled content/position terms, MPNet's relative buckets, Bloom's ALiBi, …) and passes them
through one dropout module before multiplying them with the values. In eval mode that dropout is
the identity, so a forward hook on it sees the exact probabilities ``(B, H, T_q, T)`` and may return
others: the module's own code then computes ``probabilities @ V`` with them. That is the whole
seam — one table row per attention class (:data:`OWN_ATTENTION`: the dropout the probabilities go
through, and the value projection when it is a separate linear layer) and two hooks:

- on the dropout: :func:`hf_attn.adapters.interface.intervene_probabilities` counts the call,
  replaces (or detaches) the query rows on the explained layer and records the probabilities — the
  same arithmetic as the interface path, on the module's own probabilities;
- on the value projection (where listed): records the value vectors ``(B, H, T, d)`` and zeroes
  those of the positions a value-zeroing intervention names.

LiLT's self-attention computes one softmax twice per call — its layout stream's scores and its
text stream's are the same sum of text and layout terms — and multiplies it with each stream's
values: the explained attention is that one matrix, replaced in both streams (the first use is not
counted, the second is counted and recorded), and value zeroing zeroes both streams' values.

Funnel's later blocks pool their queries (and keys) to shorter sequences, so their rows are not
over the tokens: only the first block's attention modules are hooked and counted as layers (the
``explained`` predicate of the row); the head reads the pooled first row, which mixes every row of
the first block's output.

Longformer attends locally and globally: every token within a window of ±w positions (its
probabilities a band ``(B, T, H, G + 2w + 1)``: G entries over the global tokens, then the window),
and each global token — [CLS] for the classification head, the row the head reads — over every
position, through its own projections (``query_global``, ``key_global``, ``value_global``). The
explained attention is the **global tokens' rows**: a full softmax over the input, replaced where
the module computes it (``_compute_global_attn_output_from_hidden``) and multiplied with the
``value_global`` vectors again. A window row cannot be replaced by a row over the whole text: an
intervention naming one is refused. The recorded matrix ``(B, H, T, T)`` holds the global rows and
every window row mapped from its band (zero outside its window and the global keys), cropped to the
input's T positions (the model pads the input to a multiple of its window); value zeroing zeroes a
position's local and global values.

Nyströmformer is explained in its exact mode only (as many landmarks as its segment length: a
softmax over the tokens, reached at its softmax); its depthwise convolution over the values, added
to the attention output, is not attention and is kept — and since it reads every position, the
values at padding positions are zeroed in the adapter's forwards (``zero_padding_values``): the
zeros the convolution pads a text alone with, so a padded instance gets its logits alone.

Attention that cannot be explained — no probability rows over the tokens, or none the head reads
(Nyström approximation, hashing, multi-resolution blocks, latents, downsampled characters, no
attention at all) — is listed with why in :data:`NOT_EXPLAINED`; the adapter refuses such models
with that reason.

Classes that apply their dropout as a function (XLM, FlauBERT, MPT, MVP) or none at all (Falcon's
rotary path) are reached at their softmax instead: the name their modelling file calls it through
(``nn`` for ``nn.functional.softmax``, ``F`` for ``F.softmax``) is replaced, in that file only, by a
thin proxy whose ``softmax`` hands the probabilities to the same function while one of the hooked
modules is running (a pre-hook and a hook on the module say when) and is plain softmax otherwise.

The instruction comes from :func:`hf_attn.adapters.interface.current` (these modules take no extra
keyword arguments). The hooks do nothing outside an adapter's forward, so the model stays usable
as it was; installing them twice is a no-op. What is not available on this path: the exact
query-only fast path (it replays the layer through the interface) and transformers' fused kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import contextvars
import sys

import torch

from hf_attn.adapters.interface import InterventionError, _replacement, current, inside, intervene_probabilities

_MARK = "_hf_attn_own_attention"
_OWNER = "_hf_attn_owner"
_VALUES = "_hf_attn_values"
_PASS = "_hf_attn_pass"
_PADDING = "_hf_attn_padding"


@dataclass(frozen=True)
class OwnAttention:
    """Where one attention class keeps its pieces: ``dropout``, the attribute of the dropout module
    its probabilities go through (a forward hook there sees and may replace them); ``value``, the
    attribute of its value projection (``nn.Linear`` with output ``(B, T, H·d)``), or ``None`` when
    the values come out of a fused projection (then value zeroing is refused)."""

    dropout: str | None
    value: str | None
    family: str
    softmax: str | None = None  # the modelling file's name for torch.nn ("nn") or torch.nn.functional ("F")
    heads: str | None = None  # head-count attribute, for probabilities shaped (B·H, T_q, T)
    # uses of the same probabilities through the dropout per call (LiLT: its layout stream's, then
    # its text stream's): every use gets the same rows, the last one is counted and recorded
    passes: int = 1
    zero_also: tuple[str, ...] = ()  # further value projections zeroed with ``value`` (LiLT's layout_value)
    # which modules of the class are explained (None: all); the others are not hooked and not counted
    explained: Callable[[torch.nn.Module], bool] | None = None
    # values at padding positions set to zero in the adapter's forwards: a module that mixes its values
    # outside its attention (Nyströmformer's convolution) would read the pad tokens' values, which a text
    # alone never has; the zeros are the ones the convolution pads a text alone with
    zero_padding_values: bool = False
    # a dedicated installer ``(module, model)`` in place of the dropout / softmax hooks (Longformer)
    installer: Callable[[torch.nn.Module, torch.nn.Module], None] | None = None


# (modelling module's short name, class name) → its layout
OWN_ATTENTION: dict[tuple[str, str], OwnAttention] = {
    ("deberta_v2", "DisentangledSelfAttention"): OwnAttention("dropout", "value_proj", "DeBERTa-v2/v3"),
    ("deberta", "DisentangledSelfAttention"): OwnAttention("dropout", None, "DeBERTa"),
    ("mpnet", "MPNetSelfAttention"): OwnAttention("dropout", "v", "MPNet"),
    ("falcon", "FalconAttention"): OwnAttention(None, None, "Falcon", softmax="F"),
    ("bloom", "BloomAttention"): OwnAttention("attention_dropout", None, "Bloom"),
    ("gpt_neo", "GPTNeoSelfAttention"): OwnAttention("attn_dropout", "v_proj", "GPT-Neo"),
    ("gptj", "GPTJAttention"): OwnAttention("attn_dropout", "v_proj", "GPT-J"),
    ("roformer", "RoFormerSelfAttention"): OwnAttention("dropout", "value", "RoFormer"),
    ("megatron_bert", "MegatronBertSelfAttention"): OwnAttention("dropout", "value", "Megatron-BERT"),
    ("convbert", "ConvBertSelfAttention"): OwnAttention("dropout", "value", "ConvBERT"),
    ("rembert", "RemBertSelfAttention"): OwnAttention("dropout", "value", "RemBERT"),
    ("luke", "LukeSelfAttention"): OwnAttention("dropout", "value", "LUKE"),
    ("tapas", "TapasSelfAttention"): OwnAttention("dropout", "value", "TAPAS"),
    ("big_bird", "BigBirdSelfAttention"): OwnAttention("dropout", "value", "BigBird (full attention)"),
    ("openai", "Attention"): OwnAttention("attn_dropout", None, "OpenAI GPT"),
    ("ibert", "IBertSelfAttention"): OwnAttention("dropout", None, "I-BERT (float mode)"),
    ("xlnet", "XLNetRelativeAttention"): OwnAttention("dropout", None, "XLNet"),  # also drops (T, B, D) outputs
    ("squeezebert", "SqueezeBertSelfAttention"): OwnAttention("dropout", None, "SqueezeBERT"),
    # one softmax, used by the layout stream and then by the text stream
    ("lilt", "LiltSelfAttention"): OwnAttention("dropout", "value", "LiLT (text and layout streams)", passes=2,
                                               zero_also=("layout_value",)),
    # the first block only: later blocks pool their queries (and keys), so their rows are not over the tokens
    ("funnel", "FunnelRelMultiheadAttention"): OwnAttention("attention_dropout", "v_head", "Funnel (first block)",
                                                           explained=lambda module: module.block_index == 0),
    # exact mode only (num_landmarks == segment_means_seq_len: a softmax over the tokens); its
    # depthwise convolution over the values, added to the attention output, is not attention and is kept
    ("nystromformer", "NystromformerSelfAttention"): OwnAttention(
        None, "value", "Nyströmformer (exact softmax mode)", softmax="nn", zero_padding_values=True,
        explained=lambda module: module.num_landmarks == module.seq_len),
    # dedicated hooks (defined below, hence the lambda)
    ("longformer", "LongformerSelfAttention"): OwnAttention(
        None, None, "Longformer (global tokens' rows)",
        installer=lambda module, model: _longformer_install(module, model)),
    ("layoutlmv3", "LayoutLMv3SelfAttention"): OwnAttention("dropout", "value", "LayoutLMv3 (text only)"),
    # reached at their softmax (functional dropout, or none)
    ("xlm", "MultiHeadAttention"): OwnAttention(None, "v_lin", "XLM", softmax="nn"),
    ("flaubert", "MultiHeadAttention"): OwnAttention(None, "v_lin", "FlauBERT", softmax="nn"),
    ("mpt", "MptAttention"): OwnAttention(None, None, "MPT", softmax="nn"),
    ("mvp", "MvpAttention"): OwnAttention(None, "v_proj", "MVP", softmax="nn", heads="num_heads"),
}


def _nystrom_reason(module) -> str | None:
    if module.num_landmarks == module.seq_len:
        return None
    return (f"its Nyström approximation ({module.num_landmarks} landmarks for segment_means_seq_len "
            f"{module.seq_len}) mixes the values with kernel_1 · pinv(kernel_2) · kernel_3, a matrix whose entries can be "
            "negative and whose rows need not sum to 1: not a probability distribution over the tokens; with "
            "num_landmarks equal to segment_means_seq_len it computes exact softmax attention, which is explained")


_REFORMER = ("its reversible layers compute gradients only in training mode (a backward in eval mode fails), so no "
             "gradient reaches its inputs, and its attention runs in chunks (local) or hashed buckets (LSH)")

# attention classes that cannot be explained: (modelling module's short name, class name) → why
# (a string, or a function of the module returning one, or None where this module can be)
NOT_EXPLAINED: dict[tuple[str, str], str | Callable[[torch.nn.Module], str | None]] = {
    ("nystromformer", "NystromformerSelfAttention"): _nystrom_reason,
    ("fnet", "FNetFourierTransform"): "FNet mixes its tokens with Fourier transforms: it has no attention at all",
    ("mra", "MraSelfAttention"): (
        "its multi-resolution attention approximates softmax attention from block averages and selected blocks in a "
        "CUDA kernel, whose output is zeros where the kernel is missing: there is no probability matrix over the "
        "tokens"),
    ("yoso", "YosoSelfAttention"): (
        "its attention weighs the values by the expected collisions of locality-sensitive hashes, an unnormalised "
        "kernel: there is no probability distribution over the tokens"),
    ("reformer", "LocalSelfAttention"): _REFORMER,
    ("reformer", "LSHSelfAttention"): _REFORMER,
    ("perceiver", "PerceiverSelfAttention"): (
        "its classifier reads latent vectors, not tokens: the attention over the input is a cross-attention whose rows "
        "are latents, and no row of a token reaches its head"),
    ("canine", "CanineSelfAttention"): (
        "its head reads the deep encoder's molecules (characters downsampled by a strided convolution); the attention "
        "over the input characters that feeds them is the initial encoder's local attention within chunks of "
        "local_transformer_stride characters, whose rows the downsampling reads only in part (it drops the last "
        "molecule), so no attention row over the input is the row the head reads"),
}


def not_explained(model: torch.nn.Module) -> str | None:
    """Why ``model``'s attention cannot be explained (:data:`NOT_EXPLAINED`), or ``None``."""
    for module in model.modules():
        short = type(module).__module__.rpartition(".")[2].removeprefix("modeling_")
        reason = NOT_EXPLAINED.get((short, type(module).__name__))
        if callable(reason):
            reason = reason(module)
        if reason:
            return reason
    return None


def layout_of(module: torch.nn.Module) -> OwnAttention | None:
    """The :data:`OWN_ATTENTION` row of ``module``'s class, or ``None``."""
    short = type(module).__module__.rpartition(".")[2].removeprefix("modeling_")
    return OWN_ATTENTION.get((short, type(module).__name__))


def is_hooked(module: torch.nn.Module) -> bool:
    """Whether ``module`` is an attention module intervened on through these hooks."""
    return bool(module.__dict__.get(_MARK))


def _probabilities_hook(dropout, args, output):
    iv = current()
    if iv is None or iv.fused or not isinstance(output, torch.Tensor) or output.dim() != 4:
        return None
    owner = dropout.__dict__[_OWNER]
    passes = layout_of(owner).passes
    if passes > 1:
        use = owner.__dict__.get(_PASS, 0)
        owner.__dict__[_PASS] = use + 1
        if use % passes != passes - 1:  # an earlier use: the same rows, not counted
            return intervene_probabilities(owner, output, None, iv, count=False)
    return _probabilities(owner, output, iv)


def _reset_passes(module, args):
    module.__dict__[_PASS] = 0


_RUNNING: contextvars.ContextVar = contextvars.ContextVar("hf_attn_running_attention", default=())


def _enter(module, args):
    _RUNNING.set(_RUNNING.get() + (module,))


def _leave(module, args, output):
    running = _RUNNING.get()
    if running and running[-1] is module:
        _RUNNING.set(running[:-1])


def _intercepted_softmax(*args, **kwargs):
    probs = torch.nn.functional.softmax(*args, **kwargs)  # looked up at each call
    running = _RUNNING.get()
    iv = current()
    if not running or iv is None or iv.fused or probs.dim() not in (3, 4):
        return probs
    owner = running[-1]
    layout = layout_of(owner)
    if probs.dim() == 3:  # (B·H, T_q, T)
        if layout is None or layout.heads is None:
            return probs
        heads = int(getattr(owner, layout.heads))
        shape = probs.shape
        return _probabilities(owner, probs.view(-1, heads, *shape[1:]), iv).reshape(shape)
    return _probabilities(owner, probs, iv)


class _FunctionalProxy:
    """``torch.nn.functional`` with :func:`_intercepted_softmax` as its ``softmax``."""

    def __getattr__(self, name):
        return _intercepted_softmax if name == "softmax" else getattr(torch.nn.functional, name)


class _NNProxy:
    """``torch.nn`` whose ``functional`` is :class:`_FunctionalProxy`."""

    functional = _FunctionalProxy()

    def __getattr__(self, name):
        return getattr(torch.nn, name)


def _proxy_softmax(module: torch.nn.Module, name: str) -> None:
    namespace = sys.modules[type(module).__module__]
    current_value = getattr(namespace, name, None)
    if isinstance(current_value, (_NNProxy, _FunctionalProxy)):
        return
    expected = torch.nn if name == "nn" else torch.nn.functional
    if current_value is not expected:
        raise InterventionError(f"{namespace.__name__}.{name} is not torch's: {type(module).__name__}'s softmax "
                                "cannot be reached")
    setattr(namespace, name, _NNProxy() if name == "nn" else _FunctionalProxy())


def _probabilities(owner, probs, iv):
    if iv.cached_values is not None:
        raise InterventionError(f"{type(owner).__name__} computes attention in its own module: the query-only "
                                "replay of the fast path is not available for it")
    values = owner.__dict__.pop(_VALUES, None)
    if values is not None:
        batch, steps = values.shape[:2]
        values = values.view(batch, steps, probs.shape[1], -1).transpose(1, 2)
    return intervene_probabilities(owner, probs, values, iv)


def _zeroed(output, iv):
    if iv.zero_values is not None and iv.calls == iv.layer:
        keep = (~iv.zero_values.to(device=output.device, dtype=torch.bool)).to(output.dtype)
        output = output * keep.unsqueeze(-1)
    return output


def _value_hook(linear, args, output):
    if not isinstance(output, torch.Tensor) or output.dim() != 3:
        return None
    owner = linear.__dict__[_OWNER]
    changed = None
    padding = owner.__dict__.get(_PADDING)
    if inside() and padding is not None and padding.shape == output.shape[:2]:
        output = changed = output * (~padding).unsqueeze(-1).to(output.dtype)
    iv = current()
    if iv is None or iv.fused:
        return changed
    output = _zeroed(output, iv)
    owner.__dict__[_VALUES] = output
    return output


def _note_padding(module, args, kwargs):
    """The padding positions ``(B, T)`` of the call, from its attention mask (additive: negative at
    padding; or 0/1)."""
    mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
    padding = None
    if isinstance(mask, torch.Tensor):
        while mask.dim() > 2:
            mask = mask[:, 0]
        padding = mask < 0 if mask.is_floating_point() and bool((mask < 0).any()) else mask == 0
    module.__dict__[_PADDING] = padding


def _zero_hook(linear, args, output):
    iv = current()
    if iv is None or iv.fused or not isinstance(output, torch.Tensor) or output.dim() != 3:
        return None
    return _zeroed(output, iv)


def install(model: torch.nn.Module) -> list[str]:
    """Hook every attention module of ``model`` listed in :data:`OWN_ATTENTION`; returns the
    families hooked (empty: none of its modules is listed). Idempotent. Refuses (``InterventionError``)
    a listed module whose dropout or value projection is not where the table says."""
    families = []
    for module in model.modules():
        layout = layout_of(module)
        if layout is None or (layout.explained is not None and not layout.explained(module)):
            continue
        if not is_hooked(module):
            if layout.installer is not None:
                layout.installer(module, model)
            elif layout.softmax is not None:
                _proxy_softmax(module, layout.softmax)
                module.register_forward_pre_hook(_enter)
                module.register_forward_hook(_leave, always_call=True)
            else:
                dropout = getattr(module, layout.dropout, None)
                if not isinstance(dropout, torch.nn.Module):
                    raise InterventionError(f"{type(module).__name__} has no {layout.dropout} module: not the layout "
                                            "its class is listed with")
                dropout.__dict__[_OWNER] = module  # a plain attribute, not a sub-module (no cycle)
                dropout.register_forward_hook(_probabilities_hook)
                if layout.passes > 1:
                    module.register_forward_pre_hook(_reset_passes)
            if layout.value is not None:
                value = getattr(module, layout.value, None)
                if not isinstance(value, torch.nn.Linear):
                    raise InterventionError(f"{type(module).__name__} has no linear {layout.value}: not the layout "
                                            "its class is listed with")
                value.__dict__[_OWNER] = module
                value.register_forward_hook(_value_hook)
                if layout.zero_padding_values:
                    module.register_forward_pre_hook(_note_padding, with_kwargs=True)
                for name in layout.zero_also:
                    other = getattr(module, name, None)
                    if not isinstance(other, torch.nn.Linear):
                        raise InterventionError(f"{type(module).__name__} has no linear {name}: not the layout its "
                                                "class is listed with")
                    other.register_forward_hook(_zero_hook)
            module.__dict__[_MARK] = True
        if layout.family not in families:
            families.append(layout.family)
    return families


# ------------------------------------------------------------------------------------------------
# Longformer: local (banded) attention for every token, global attention for the global tokens

_WINDOW_PADDING: contextvars.ContextVar = contextvars.ContextVar("hf_attn_window_padding", default=0)
_ASKED = "_hf_attn_output_attentions"


def _longformer_install(module: torch.nn.Module, model: torch.nn.Module) -> None:
    """Hooks of one ``LongformerSelfAttention`` (see :func:`_longformer_global`); the base models
    of ``model`` note how many positions they pad the input with (to a multiple of the window)."""
    for name in ("value", "value_global", "query_global", "key_global"):
        if not isinstance(getattr(module, name, None), torch.nn.Linear):
            raise InterventionError(f"{type(module).__name__} has no linear {name}: not the layout its class is listed "
                                    "with")
    for base in model.modules():
        pad = base.__dict__.get("_pad_to_window_size") or getattr(base, "_pad_to_window_size", None)
        if pad is None or getattr(pad, "_hf_attn_noted", False):
            continue

        def noted(*args, _pad=pad, **kwargs):
            out = _pad(*args, **kwargs)
            _WINDOW_PADDING.set(int(out[0]))
            return out

        noted._hf_attn_noted = True
        base._pad_to_window_size = noted
    original = module._compute_global_attn_output_from_hidden

    def global_rows(hidden_states, max_num_global_attn_indices, is_local_index_global_attn_nonzero,
                    is_index_global_attn_nonzero, is_local_index_no_global_attn_nonzero, is_index_masked):
        out, probs = original(hidden_states, max_num_global_attn_indices, is_local_index_global_attn_nonzero,
                              is_index_global_attn_nonzero, is_local_index_no_global_attn_nonzero, is_index_masked)
        return _longformer_global(module, hidden_states, out, probs, is_local_index_global_attn_nonzero,
                                  is_index_global_attn_nonzero)

    module._compute_global_attn_output_from_hidden = global_rows
    module.register_forward_pre_hook(_longformer_ask, with_kwargs=True)
    module.register_forward_hook(_longformer_record, with_kwargs=True)
    module.value.register_forward_hook(_longformer_zero)
    module.value_global.register_forward_hook(_longformer_zero)


def _longformer_ask(module, args, kwargs):
    """Its probabilities are returned only with ``output_attentions``: asked for while an
    intervention runs, and dropped again after the call where the caller did not ask."""
    module.__dict__[_ASKED] = bool(kwargs.get("output_attentions", False))
    iv = current()
    if iv is None or iv.fused:
        return None
    return args, {**kwargs, "output_attentions": True}


def _longformer_zero(linear, args, output):
    """Value zeroing on Longformer's sequence-first value projections ``(T_padded, B, D)``."""
    iv = current()
    if iv is None or iv.fused or iv.zero_values is None or iv.calls != iv.layer:
        return None
    keep = (~iv.zero_values.to(device=output.device, dtype=torch.bool)).to(output.dtype).t()  # (T, B)
    keep = torch.nn.functional.pad(keep, (0, 0, 0, output.shape[0] - keep.shape[0]), value=1.0)
    return output * keep.unsqueeze(-1)


def _longformer_global(module, hidden_states, out, probs, local_index, global_index):
    """The global tokens' rows ``probs`` ``(B, H, G, T_padded)`` — a softmax over every position,
    multiplied with the ``value_global`` vectors — with the query rows the intervention names
    replaced on the explained layer, and their output ``out`` ``(B, H, G, d)`` recomputed. A query
    row that is not a global token attends within its window only: replacing it is refused."""
    iv = current()
    if iv is None or iv.fused or iv.cached_values is not None:
        return out, probs
    if not ((iv.calls == iv.layer or iv.every_layer) and (iv.weights is not None or iv.detach)):
        return out, probs
    batch, heads, count, steps = probs.shape
    query = iv.query.to(device=probs.device, dtype=torch.bool)
    outside = query.clone()
    outside[global_index[0], global_index[1]] = False
    if bool(outside.any()):
        raise InterventionError(f"{type(module).__name__}: a query row of a token without global attention attends "
                                "within its window only, so it cannot be replaced by a row over the whole text; "
                                "explain the rows of global tokens ([CLS] for the classification head)")
    select = torch.zeros((batch, count), dtype=torch.bool, device=probs.device)
    select[local_index[0], local_index[1]] = query[global_index[0], global_index[1]]
    weights = iv.weights
    if weights is not None:
        weights = torch.nn.functional.pad(weights, (0, steps - weights.shape[-1]))
    new = _replacement(probs, replace(iv, weights=weights))
    probs = torch.where(select.view(batch, 1, count, 1), new, probs)
    values = module.value_global(hidden_states)  # (T_padded, B, H·d), zeroed by its hook where asked
    values = values.view(steps, batch, heads, -1).permute(1, 2, 0, 3)
    return torch.matmul(probs.to(values.dtype), values), probs


def _longformer_record(module, args, kwargs, output):
    """Counts the call and records its probabilities as one ``(B, H, T, T)`` matrix over the input
    positions: the global tokens' rows from their global attention, every other row from its
    window band ``(B, T, H, G + 2w + 1)`` — its first G entries over the global tokens, then the
    keys ``q − w … q + w`` — mapped to the full row (zero outside the window and the global keys)."""
    iv = current()
    asked = module.__dict__.get(_ASKED, False)
    if iv is None or iv.fused:
        return None
    index = iv.calls
    iv.calls += 1
    if iv.record is not None:
        band = output[1]
        batch, steps, heads, width = band.shape
        window = module.one_sided_attn_window_size
        full = band.new_zeros((batch, heads, steps, steps))
        local = band[..., width - (2 * window + 1):].permute(0, 2, 1, 3)  # (B, H, T, 2w + 1)
        keys = (torch.arange(steps, device=band.device).view(-1, 1)
                + torch.arange(-window, window + 1, device=band.device))  # (T, 2w + 1)
        valid = ((keys >= 0) & (keys < steps)).to(band.dtype)
        full.scatter_add_(-1, keys.clamp(0, steps - 1).expand(batch, heads, -1, -1), local * valid)
        if len(output) > 2:  # global tokens: their key columns in every row, and their own rows
            global_probs = output[2]  # (B, H, G, T)
            _, (instances, positions), (_, slots), _ = module._get_global_attn_indices(kwargs["is_index_global_attn"])
            for b, p, g in zip(instances.tolist(), positions.tolist(), slots.tolist()):
                full[b, :, :, p] += band[b, :, :, g].t()
                full[b, :, p, :] = global_probs[b, :, g, :]
        real = steps - _WINDOW_PADDING.get()
        iv.record.append((index, module, full[:, :, :real, :real], None))
    return output if asked else output[:1]


def hooked_value(module: torch.nn.Module) -> bool:
    """Whether value vectors of hooked ``module`` can be recorded and zeroed."""
    layout = layout_of(module)
    return layout is not None and layout.value is not None


__all__ = ["NOT_EXPLAINED", "OWN_ATTENTION", "OwnAttention", "hooked_value", "install", "is_hooked", "layout_of",
           "not_explained"]
