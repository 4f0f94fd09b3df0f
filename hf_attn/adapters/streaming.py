"""Attention maps read without keeping them: the query rows, head means and rollout of a forward
computed in slices of query rows, so memory grows with the text's length, not with its square times
the layers.

A recording forward (:class:`~hf_attn.adapters.interface.Intervention` ``record``) keeps every
layer's ``(B, H, T, T)`` probabilities: 9 heads × 4096² floats are 576 MB per layer of a 4096-token
text. A *streamed* forward (``Intervention(stream=...)``, :func:`streamed_attention`) instead asks a
:class:`Collector`, per attention call (layer), which query rows it needs:

- ``None`` (nothing): the layer's output comes from transformers' fused kernel where the adapter
  has checked it on the model (``adapter.fused``), else from the model's own eager arithmetic run on
  slices of query rows;
- a tensor of query positions (the rows the classification head reads): the output as above, and
  the probabilities of those rows alone, from the model's own ``eager_attention_forward`` called
  with ``query[:, :, rows]`` and the mask's matching rows;
- ``"all"`` (every row, e.g. for rollout): the eager arithmetic in slices of rows, each slice's
  probabilities handed to the collector and its output kept.

Each slice is ``(B, H, rows, T)``, at most :data:`ROW_ELEMENTS` elements (or :data:`CHUNK_ROWS` rows
where set, as the tests do to force several slices). Rows are independent in the softmax, so the
numbers are the recording forward's up to float32 rounding (the order of a few sums). Whether the
slicing is exact on a model is checked once per adapter on a two-text probe against the recording
forward (:func:`streams`); where it is not (a model that computes attention in its own modules, an
eager function that reads the number of query rows, a merged self- and cross-attention) the adapter
keeps the recording forward.

Memory of :func:`forward_maps` (B texts of T tokens, L layers, H heads, d head size): the query rows
of every layer ``L·B·T`` and of every head of the explained layer ``B·H·T``, the explained layer's
values ``B·H·T·d``, one slice, and for the rollout every layer's head mean ``L·B·T²`` (while that
fits in :data:`ROLLOUT_MEANS_BYTES`) or else two ``(B, T, T)`` running products — instead of every
head's maps, ``L·B·H·T²``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hf_attn.adapters.interface import Intervention
from hf_attn.adapters.rollout import attention_rollout

# Elements of one (B, H, rows, T) slice of attention probabilities computed at once (64 MB in float32).
ROW_ELEMENTS = 2**24
# Bytes of every layer's head-mean rollout matrix (L·B·T² float32) a forward may keep (2 GiB: a
# 4096-token text through 30 layers); beyond it the rollout is a running product (_ForwardCollector).
ROLLOUT_MEANS_BYTES = 2**31
# Rows per slice when set (tests force several slices with a small number); None: from ROW_ELEMENTS.
CHUNK_ROWS: int | None = None


class Collector:
    """What a streamed forward keeps (subclasses): :meth:`wants` per layer, :meth:`take` per slice of
    probabilities, :meth:`done` after each wanted layer."""

    def wants(self, index: int, module):
        """``None``, ``"all"``, a 1-D tensor of query positions needed at layer ``index`` (attention
        module ``module``), or ``"call"``: :meth:`take_call` gets the means to compute any rows later."""
        return None

    def take_call(self, index: int, module, probs_of, values: torch.Tensor) -> None:
        """``probs_of(instances, rows)`` → ``(b, H, r, T)``: the probabilities of those instances
        (a slice) and query rows (a slice), from the model's eager arithmetic (``"call"``)."""

    def take(self, index: int, module, rows, probs: torch.Tensor, values: torch.Tensor) -> None:
        """``probs`` ``(B, H, r, T)`` of the query rows ``rows`` (a slice or a position tensor) of
        layer ``index``; ``values`` ``(B, H, T, d)`` (grouped key/value heads repeated)."""

    def done(self, index: int) -> None:
        """Every slice of layer ``index`` has been taken."""


@dataclass
class Stream:
    """The instruction of a streamed forward: the ``collector``, whether unneeded outputs may use the
    fused kernel (``fused``, the adapter's checked flag) and an optional fixed ``chunk_rows``."""

    collector: Collector
    fused: bool = False
    chunk_rows: int | None = None
    layers: int = 0  # layers streamed (the check compares it with the model's)

    def attend(self, index, module, eager, query, key, value, attention_mask, args, kwargs, repeat_heads):
        """One attention call (:func:`streamed_attention`)."""
        return streamed_attention(self, index, module, eager, query, key, value, attention_mask, args, kwargs,
                                  repeat_heads)


def _rows_per_slice(stream: Stream, batch: int, heads: int, steps: int) -> int:
    fixed = stream.chunk_rows if stream.chunk_rows is not None else CHUNK_ROWS
    if fixed is not None:
        return max(1, int(fixed))
    return max(1, ROW_ELEMENTS // max(batch * heads * steps, 1))


def _mask_rows(mask, rows):
    """The additive mask's rows of the query rows ``rows`` (a mask broadcast over the rows as is)."""
    if mask is None or not isinstance(mask, torch.Tensor) or mask.dim() < 3 or mask.shape[-2] == 1:
        return mask
    if mask.dim() != 4:
        raise ValueError(f"an attention mask of shape {tuple(mask.shape)} cannot be cut into query rows")
    return mask[:, :, rows]


def streamed_attention(stream: Stream, index: int, module, eager, query, key, value, attention_mask, args, kwargs,
                       repeat_heads):
    """One attention call of a streamed forward (module docstring): returns ``(output (B, T, H, d), None)``."""
    heads, steps = query.shape[1], query.shape[2]
    want = stream.collector.wants(index, module)
    per = _rows_per_slice(stream, query.shape[0], heads, key.shape[2])
    values = repeat_heads(value, heads) if want is not None else None
    stream.layers += 1

    def eager_rows(rows):
        return eager(module, query[:, :, rows], key, value, _mask_rows(attention_mask, rows), *args, **kwargs)

    if isinstance(want, str) and want == "all":
        outputs = []
        for start in range(0, steps, per):
            rows = slice(start, min(steps, start + per))
            output, probs = eager_rows(rows)
            stream.collector.take(index, module, rows, probs, values)
            outputs.append(output)
        stream.collector.done(index)
        return torch.cat(outputs, 1), None
    if isinstance(want, str) and want == "call":
        def probs_of(instances, rows):
            mask = attention_mask
            if isinstance(mask, torch.Tensor) and mask.dim() == 4 and mask.shape[0] > 1:
                mask = mask[instances]
            return eager(module, query[instances][:, :, rows], key[instances], value[instances],
                         _mask_rows(mask, rows), *args, **kwargs)[1]

        stream.collector.take_call(index, module, probs_of, values)
        want = None
    if stream.fused:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        output = sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)[0]
    else:
        output = torch.cat([eager_rows(slice(s, min(steps, s + per)))[0] for s in range(0, steps, per)], 1)
    if want is not None:
        for start in range(0, len(want), per):
            rows = want[start:start + per]
            stream.collector.take(index, module, rows, eager_rows(rows)[1], values)
        stream.collector.done(index)
    return output, None


@dataclass
class ForwardMaps:
    """What :meth:`TransformersAdapter.forward` reads from the attention: ``head_rows`` ``(B, H, T)``
    (the explained layer's query rows, averaged over the rows), ``layer_rows`` ``(B, L, T)`` (every
    layer's head-mean query row), ``rollout`` ``(B, T)`` or None, ``values`` ``(B, H, T, d)`` of the
    explained layer (float32; None where a model's own attention module does not expose them)."""

    head_rows: torch.Tensor
    layer_rows: torch.Tensor
    rollout: torch.Tensor | None
    values: torch.Tensor | None


def _query_weights(batch) -> tuple[torch.Tensor, torch.Tensor]:
    query = batch.query.to(torch.float32)
    return query, query.sum(-1).clamp_min(1.0)


class Rollout:
    """q·M_L ··· M_1 for per-layer ``(B, T, T)`` matrices handed layer by layer (first layer
    first), each in slices of rows (:meth:`rows`, then :meth:`done`), in one of two ways (``mode``):

    - ``"means"``: every layer's matrix is kept and the query rows are carried down through them at
      the end (``L·B·T²`` floats, ``O(L·B·T²)`` work);
    - ``"product"``: only the running product R_l = M_l R_{l−1} (two ``(B, T, T)`` buffers,
      ``O(L·B·T³)`` work: 4096² · 30 layers is 4 TFLOP).

    ``None``: ``"means"`` while ``L·B·T²`` float32 fit in :data:`ROLLOUT_MEANS_BYTES`, else
    ``"product"``. Both are the product's query rows, up to float32 rounding."""

    def __init__(self, count: int, steps: int, layers: int, mode: str | None = None):
        if mode is None:
            mode = "means" if 4 * layers * count * steps * steps <= ROLLOUT_MEANS_BYTES else "product"
        if mode not in ("means", "product"):
            raise ValueError(f"mode must be 'means' or 'product', got {mode!r}")
        self.mode, self.shape = mode, (count, steps, steps)
        self.previous = self.current = None
        self.kept: list[torch.Tensor] = []

    def rows(self, rows, matrix: torch.Tensor) -> None:
        """The rows ``rows`` (a slice) of this layer's matrix, ``(B, r, T)``."""
        if self.current is None:
            self.current = torch.empty(self.shape, dtype=torch.float32, device=matrix.device)
        self.current[:, rows] = matrix if self.previous is None or self.mode == "means" else matrix @ self.previous

    def done(self) -> None:
        """Every row of this layer has been handed."""
        if self.mode == "means":  # this layer's matrix kept; a new buffer for the next
            self.kept.append(self.current)
            self.current = None
        else:  # this layer's product becomes the previous one; its buffer is reused
            self.previous, self.current = self.current, self.previous

    def query_rows(self, query: torch.Tensor) -> torch.Tensor:
        """``query`` ``(B, T)`` row weights → ``(B, T)`` their combination of the product's rows."""
        if self.mode == "product":
            return torch.einsum("bq,bqt->bt", query, self.previous)
        rolled = query
        for matrix in reversed(self.kept):  # q·M_L, then ·M_{L−1}, …
            rolled = torch.einsum("bq,bqt->bt", rolled, matrix)
        return rolled


class _ForwardCollector(Collector):
    """The query rows of every layer, the explained layer's values and (``rollout``) the rollout of
    the query rows, q·Ã_L ··· Ã_1 (:func:`hf_attn.adapters.rollout.attention_rollout`'s arithmetic,
    Ã_l built one slice of rows at a time; kept as :class:`Rollout` ``mode`` says)."""

    def __init__(self, batch, layer: int, rollout: bool, layers: int = 0, mode: str | None = None):
        self.query, self.count = _query_weights(batch)
        self.layer, self.rollout = layer, rollout
        self.mask = batch.attention_mask.to(torch.float32)
        self.positions = batch.query.any(0).nonzero().flatten()
        self.sums: dict[int, torch.Tensor] = {}
        self.values = None
        self.product = Rollout(*self.mask.shape, layers, mode)
        self.mode = self.product.mode

    def wants(self, index, module=None):
        return "all" if self.rollout else self.positions

    def take(self, index, module, rows, probs, values):
        probs = probs.float().to(self.mask.device)  # a model dispatched over devices: the batch's
        rows_sum = torch.einsum("bq,bhqt->bht", self.query[:, rows], probs)
        self.sums[index] = rows_sum if index not in self.sums else self.sums[index] + rows_sum
        if index == self.layer and self.values is None:
            self.values = values.float().to(self.mask.device)
        if not self.rollout:
            return
        a = probs.mean(1) * self.mask[:, rows, None] * self.mask[:, None, :]  # (B, r, T)
        local = torch.arange(a.shape[1], device=a.device)
        a[:, local, local + rows.start] += self.mask[:, local + rows.start]
        self.product.rows(rows, a / a.sum(-1, keepdim=True).clamp_min(1e-30))

    def done(self, index):
        if self.rollout:
            self.product.done()

    def maps(self, batch, layers: int) -> ForwardMaps:
        missing = sorted(set(range(layers)) - set(self.sums))
        if missing or self.values is None:
            raise ValueError(f"the streamed forward missed the layers {missing}")
        head_rows = self.sums[self.layer] / self.count.view(-1, 1, 1)
        layer_rows = torch.stack([self.sums[i].mean(1) / self.count.view(-1, 1) for i in range(layers)], 1)
        rolled = self.product.query_rows(self.query / self.count.view(-1, 1)) if self.rollout else None
        return ForwardMaps(head_rows=head_rows, layer_rows=layer_rows, rollout=rolled, values=self.values)


def _recorded_maps(record: list, batch, layer: int, rollout: bool) -> ForwardMaps:
    """:class:`ForwardMaps` from a recording forward's full maps (the reference the streamed forward
    is checked against, and the path of the models it does not apply to)."""
    query, count = _query_weights(batch)

    def query_rows(probs):  # (B, H, T, T) → (B, H, T): the query rows, averaged over the rows
        return torch.einsum("bq,bhqt->bht", query, probs.float().to(query.device)) / count.view(-1, 1, 1)

    layer_rows = torch.stack([query_rows(p).mean(1) for _, _, p, _ in record], 1)
    rolled = None
    if rollout:
        matrix = attention_rollout([p.float().to(query.device) for _, _, p, _ in record], batch.attention_mask)
        rolled = torch.einsum("bq,bqt->bt", query, matrix) / count.view(-1, 1)
    return ForwardMaps(head_rows=query_rows(record[layer][2]), layer_rows=layer_rows, rollout=rolled,
                       values=None if record[layer][3] is None else record[layer][3].float().to(query.device))


def streamed_call(adapter, batch, collector: Collector, chunk_rows: int | None = None):
    """One streamed forward of ``batch`` with ``collector`` (module docstring); returns the model's
    output. The unneeded layers use the fused kernel where the adapter checked it."""
    stream = Stream(collector, fused=bool(getattr(adapter, "fused", False)), chunk_rows=chunk_rows)
    out = adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(stream=stream),
                              batch.position_ids)
    if stream.layers != adapter.num_layers:
        raise ValueError(f"{stream.layers} of {adapter.num_layers} attention calls were streamed")
    return out


@torch.no_grad()
def forward_maps(adapter, batch, rollout: bool, streamed: bool | None = None, chunk_rows: int | None = None,
                 mode: str | None = None):
    """``(model output, ForwardMaps)`` of the unmodified forward: streamed (module docstring) where
    :func:`streams` holds for the adapter (or as ``streamed`` says), else from a recording forward.
    ``mode``: how the rollout is kept (:class:`_ForwardCollector`; default by its size)."""
    if streamed is None:
        streamed = streams(adapter)
    if streamed:
        collector = _ForwardCollector(batch, adapter.layer, rollout, adapter.num_layers, mode)
        out = streamed_call(adapter, batch, collector, chunk_rows)
        return out, collector.maps(batch, adapter.num_layers)
    record: list = []
    out = adapter._model_call(batch.input_ids, batch.attention_mask, None, Intervention(record=record),
                              batch.position_ids)
    return out, _recorded_maps(record, batch, adapter.layer, rollout)


# the check's tolerance: float32 rounding of sums taken in another order (probabilities ≤ 1)
CHECK_TOLERANCE = 1e-5


def streams(adapter) -> bool:
    """Whether the adapter's forwards stream their attention (module docstring), checked once per
    adapter after its set-up: a two-text probe (different lengths, so padding is cut too), sliced
    two rows at a time, must give the recording forward's logits, query rows and rollout within
    :data:`CHECK_TOLERANCE` (absolute; logits relative to their scale). The reason is kept in
    ``adapter.streaming_reason``."""
    known = getattr(adapter, "_streaming", None)
    if known is not None:
        return known
    if getattr(adapter, "fused_reason", "not checked yet") == "not checked yet":
        return False  # the adapter's own set-up forwards (its probe) record
    ok, reason = _check(adapter)
    adapter._streaming, adapter.streaming_reason = ok, reason
    return ok


def _check(adapter) -> tuple[bool, str]:
    if getattr(adapter, "own_attention", None):
        return False, "its attention runs in the model's own modules: their maps are recorded whole"
    if not hasattr(adapter, "_model_call") or not hasattr(adapter, "encode"):
        return False, "not a transformers adapter"
    from hf_attn.adapters.transformer_probe import PROBE_TEXT

    try:
        with torch.no_grad():
            batch = adapter.encode([PROBE_TEXT, " ".join(PROBE_TEXT.split()[:4])])
            full_out, full = forward_maps(adapter, batch, True, streamed=False)
            out, maps = forward_maps(adapter, batch, True, streamed=True, chunk_rows=2, mode="product")
            _, means = forward_maps(adapter, batch, True, streamed=True, chunk_rows=3, mode="means")
    except Exception as error:  # noqa: BLE001 - the recording forward stays; the reason is kept
        return False, f"the sliced forward fails on this model ({type(error).__name__}: {str(error)[:160]})"
    pairs = [(out.logits.float(), full_out.logits.float()), (maps.head_rows, full.head_rows),
             (maps.layer_rows, full.layer_rows), (maps.rollout, full.rollout), (means.rollout, full.rollout),
             (maps.values, full.values)]
    for new, old in pairs:
        scale = max(1.0, float(old.abs().max()))
        if new.shape != old.shape or not bool(torch.isfinite(new).all()) or float(
                (new - old).abs().max()) > CHECK_TOLERANCE * scale:
            return False, "the sliced forward differs from the recording forward on the probe texts"
    return True, "checked on the probe texts against the recording forward"


class LayerRows(Collector):
    """One layer's probabilities of the query rows (``batch.query``): ``take`` is forwarded to
    ``reduce(module, positions, probs (B, H, r, T), values)`` for each slice; the other layers are
    not recorded."""

    def __init__(self, batch, layer: int, reduce):
        self.layer, self.reduce = layer, reduce
        self.positions = batch.query.any(0).nonzero().flatten()

    def wants(self, index, module=None):
        return self.positions if index == self.layer else None

    def take(self, index, module, rows, probs, values):
        device = self.positions.device
        self.reduce(module, rows.to(device) if isinstance(rows, torch.Tensor) else rows, probs.float().to(device),
                    values.float().to(device))


def query_row_sums(adapter, batch, layer: int, chunk_rows: int | None = None) -> torch.Tensor:
    """``(B, H, T)``: layer ``layer``'s probabilities averaged over each instance's query rows (a
    streamed forward recording that layer's query rows only)."""
    query, count = _query_weights(batch)
    total: list = []

    def reduce(module, rows, probs, values):
        total.append(torch.einsum("bq,bhqt->bht", query[:, rows], probs))

    streamed_call(adapter, batch, LayerRows(batch, layer, reduce), chunk_rows)
    return torch.stack(total).sum(0) / count.view(-1, 1, 1)


__all__ = ["CHUNK_ROWS", "Collector", "ForwardMaps", "LayerRows", "ROW_ELEMENTS", "Rollout", "Stream", "forward_maps",
           "query_row_sums", "streamed_attention", "streamed_call", "streams"]
