"""Read-out pruning: the last layer computed for the one row the classification head reads.

A ``[CLS]``-pooled encoder's head reads the first row of the last layer's output, a decoder's head
its last real token; every other row of that layer is computed and thrown away. The last layer
needs the keys and values of every position, but its query, the attention over the keys, the output
projection, the residual, the normalisation and the feed-forward block only at the row read. So a
forward that only wants the logits runs in two calls of the model's own modules:

1. **capture**: the model runs up to the last layer's attention call, where the
   registered attention function (:func:`hf_attn.adapters.interface.intervened_attention`) keeps
   that layer's keys and values ``(B, H_kv, T, d)`` (positions already applied, as the architecture
   applied them), the attention mask's row of the read position, and the layer's input ``(B, T, D)``
   (a pre-hook on the layer), then stops the forward (:class:`Captured`);
2. **replay**: the model runs on the read token alone, the layers before the last one returning
   that row of the kept input instead of computing (the adapter's layer replay), and the last
   layer's attention call runs the architecture's own attention function for its one query over the
   kept keys, values and mask row. The rest of the layer and the head run for one row instead of T.

The logits are the whole forward's up to rounding and the gradients to the input embeddings flow
through both calls (the kept tensors are in the graph), so the same forward serves the
no-gradient scorers (leave-one-out, erasure, NAOPC, the soft metrics) and the gradient methods
(saliency, gradient × input, integrated gradients). The adapter checks it on every model when it is
built (:meth:`hf_attn.adapters.transformer_probe.TransformersProbe._check_readout`: logits and
gradients of a padded batch against the whole forward) and uses it only where it agrees; models
whose head reads every row (mean pooling), whose layers are not one list, that compute attention in
their own modules or that are encoder–decoders keep the whole forward, with the reason in the
adapter's ``describe()``. A model dispatched across devices by a ``device_map`` is pruned too: the
capture call stops inside the last layer, before accelerate's hooks of the modules it is in can put
an offloaded layer's weights back, and the replay then runs that layer through its hooks again,
which loads and puts them back.

Saved work, per text of T tokens and a last layer with model size D and feed-forward size F:
(T − 1)·(D² + 2·D·F) multiply–adds of the output projection and the feed-forward block and
2·(T − 1)·T·D of the attention's two products, less the replay's query, key and value projections
of the read row (3·D²): the capture call runs those projections for every row, as they come before
the attention call in the model's own code; for MiniLM-L6 (D = 384, F = 1536) on 50 tokens, 12 % of
a forward.

Two adapters over one model share one lock (:func:`model_lock`): the replay swaps the forwards of
the model's layers, and the layers are the model's, not an adapter's.

Shapes: B instances, T positions, H_kv key/value heads, d head size, D model size.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from dataclasses import dataclass

import torch

_REPLAYING: contextvars.ContextVar = contextvars.ContextVar("hf_attn_readout_replay", default=False)


class Captured(BaseException):
    """Raised by the last layer's attention call in the capture call: the forward stops there (a
    ``BaseException``, so that no ``except Exception`` in a model's code can swallow it)."""


def replaying() -> bool:
    """Whether this thread is in the replay call of a pruned forward: hooks that rewrite the embedding
    layer's output for a whole batch (``logits_with_embedding_output``) leave the read token alone
    then (its embedding is not used: the layers before the last one are replayed)."""
    return _REPLAYING.get()


@contextlib.contextmanager
def _replay_block():
    token = _REPLAYING.set(True)
    try:
        yield
    finally:
        _REPLAYING.reset(token)


_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(model: torch.nn.Module) -> threading.RLock:
    """The one re-entrant lock of ``model``, shared by every adapter over it: the forwards that swap
    the model's layer forwards or its config's pad id (the replays, ``_last_position_pooling``) hold
    it, so two adapters over one model cannot undo each other's swaps. Kept beside the model (a weak
    map), not on it: a model stays picklable."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


def read_rows(mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """``(B,)`` the row each instance's head reads: its first real position (``pooling="first"``) or
    its last (``"last"``)."""
    real = mask.bool()
    steps = mask.shape[1]
    positions = torch.arange(steps, device=mask.device).expand_as(real)
    if pooling == "first":
        return torch.where(real, positions, steps).min(-1).values
    if pooling == "last":
        return torch.where(real, positions, -1).max(-1).values
    raise ValueError(f"read-out pruning needs a head that reads one row, not pooling={pooling!r}")


def _mask_row(attention_mask, rows: torch.Tensor):
    """The mask row ``(B, 1|H, 1, T)`` of each instance's read position, from the mask the layer's
    attention call got (``None``, ``(B|1, 1|H, T, T)`` or ``(B|1, 1|H, 1, T)``)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 4:
        raise ValueError(f"an attention mask of shape {tuple(attention_mask.shape)} is not (batch, heads, queries, keys)")
    if attention_mask.shape[-2] == 1:
        return attention_mask.expand(rows.shape[0], -1, -1, -1)
    mask = attention_mask.expand(rows.shape[0], -1, -1, -1)
    index = rows.to(mask.device).view(-1, 1, 1, 1).expand(-1, mask.shape[1], 1, mask.shape[-1])
    return mask.gather(2, index)


@dataclass
class Readout:
    """The state of one pruned forward, carried by its :class:`~hf_attn.adapters.interface.Intervention`
    (``readout``): ``layer`` the last attention call, ``rows`` ``(B,)`` the read positions; filled by
    the capture call: ``hidden`` the last layer's input ``(B, T, D)``, ``key``/``value``
    ``(B, H_kv, T, d)`` and ``mask`` the read rows of its attention mask."""

    layer: int
    rows: torch.Tensor
    hidden: torch.Tensor | None = None
    key: torch.Tensor | None = None
    value: torch.Tensor | None = None
    mask: torch.Tensor | None = None

    def attend(self, iv, module, eager, query, key, value, attention_mask, args, kwargs):
        """One attention call of a pruned forward (see the module docstring); ``eager`` the
        architecture's own attention function, or transformers' fused kernel where ``iv.fused``."""
        index = iv.calls
        iv.calls += 1
        if iv.fused:
            from transformers.integrations.sdpa_attention import sdpa_attention_forward

            eager = sdpa_attention_forward
        if index != self.layer:
            return eager(module, query, key, value, attention_mask, *args, **kwargs)
        if self.key is None:
            self.key, self.value, self.mask = key, value, _mask_row(attention_mask, self.rows)
            raise Captured
        if query.shape[2] != 1:
            raise ValueError(f"the replay call of a pruned forward has {query.shape[2]} query rows, not 1")
        return eager(module, query, self.key, self.value, self.mask, *args, **kwargs)


def pruned_model_call(adapter, input_ids, mask, embeds, intervention, position_ids):
    """The model output of ``adapter._model_call(input_ids, mask, embeds, intervention, position_ids)``
    with its last layer computed for the read rows only (the module docstring); its ``logits`` are
    the whole forward's. ``intervention`` is ``None`` or the adapter's plain one (fused or not).
    Returns ``None`` where the replay's one-token input could be read differently by the head (a
    last-token head whose read token is the pad id: it would skip it) or a row has no real token, so
    the caller runs the whole forward. Every pruned forward is counted in ``adapter.readout_calls``."""
    from hf_attn.adapters.interface import Intervention

    if intervention is not None and intervention != Intervention(fused=intervention.fused):
        raise ValueError("a pruned forward takes no intervention but the plain one: it would be dropped")
    if not bool(mask.bool().any(1).all()):
        return None
    last = adapter.num_layers - 1
    rows = read_rows(mask, adapter.pooling)
    index = torch.arange(len(rows), device=rows.device)
    read_ids = input_ids[index, rows].unsqueeze(1)
    fused = bool(intervention is not None and intervention.fused)
    readout = Readout(layer=last, rows=rows)
    owner = threading.get_ident()

    def keep_input(module, args, kwargs):
        if threading.get_ident() == owner:  # another thread's forward through the same model runs as it is
            readout.hidden = args[0] if args else kwargs["hidden_states"]

    with adapter._lock:  # the model's lock: its config's pad id is read here and set by _last_position_pooling
        pad = getattr(adapter.model.config, "pad_token_id", None)
        if adapter.pooling == "last" and pad is not None and bool((read_ids == pad).any()):
            return None
        adapter.readout_calls += 1
        handle = adapter.layers[last].register_forward_pre_hook(keep_input, with_kwargs=True)
        try:
            adapter._model_call(input_ids, mask, embeds, Intervention(fused=fused, readout=readout), position_ids)
        except Captured:
            pass
        finally:
            handle.remove()
        if readout.key is None or readout.hidden is None:
            raise RuntimeError(f"{type(adapter.model).__name__}: the pruned forward's capture call ended without "
                               "reaching its last layer's attention")
        hidden = readout.hidden
        hidden = hidden[index.to(hidden.device), rows.to(hidden.device)].unsqueeze(1)  # (B, 1, D)
        if position_ids is not None:
            positions = position_ids[index, rows].unsqueeze(1)
        else:
            positions = rows.unsqueeze(1) if adapter._takes_position_ids() else None
        replay = Intervention(fused=fused, readout=readout, calls=last)  # the replayed layers make no call
        with adapter._replayed(hidden, upto=last, size=adapter.readout_tuple), _replay_block():
            return adapter._model_call(read_ids, torch.ones_like(read_ids), None, replay, positions)
