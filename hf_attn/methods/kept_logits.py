"""The logits of the unperturbed texts that the methods compute anyway, kept for the caller.

Saliency, gradient × input, integrated gradients and leave-one-out each run the model on the texts
as they are (the forward their gradient or their differences start from). A caller that also wants
the model's prediction — :meth:`hf_attn.Explainer.attributions` returns the probabilities beside
the scores — reads them here instead of running one more forward over every text::

    with keep_logits() as kept:
        scores = saliency(adapter, batch)
    kept[text_key(ids)]  # (C,) float32 logits of the text whose real token ids are ``ids``

Nothing is kept outside the ``with`` block (no global state)."""

from __future__ import annotations

import contextlib
import contextvars

import torch

_KEPT: contextvars.ContextVar[dict | None] = contextvars.ContextVar("hf_attn_kept_logits", default=None)


@contextlib.contextmanager
def keep_logits():
    """A dict filled, while the block runs, with ``text_key(ids) → (C,) logits`` of every text a
    method ran unperturbed."""
    store: dict = {}
    token = _KEPT.set(store)
    try:
        yield store
    finally:
        _KEPT.reset(token)


def text_key(ids) -> tuple[int, ...]:
    """The key of one text: its real token ids (pads left out), as a tuple."""
    return tuple(int(i) for i in ids)


def keep(batch, logits: torch.Tensor) -> None:
    """Keep ``logits`` ``(B, C)`` of ``batch``'s texts, run unperturbed, when a caller asked for them."""
    store = _KEPT.get()
    if store is None:
        return
    ids, mask = batch.input_ids.cpu(), batch.attention_mask.cpu().bool()
    values = logits.detach().float().cpu()
    for i in range(len(ids)):
        store[text_key(ids[i][mask[i]].tolist())] = values[i]


__all__ = ["keep", "keep_logits", "text_key"]
