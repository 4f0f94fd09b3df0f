"""Gradient importance (Jain & Wallace 2019, §4.1 and Alg. 1; sentence pairs: appendix B).

g_t = |Σ_dims (∂ŷ/∂e_t) · e_t| for the input embeddings e_t, ŷ the predicted class's probability,
with the computation graph cut at the attention weights α (J&W §4.1: "we disconnect the
computation graph at the attention module"), so the gradient flows only through the encoder states.
Alg. 1 writes the gradient w.r.t. the one-hot input times the one-hot, which is the embedding
gradient · e_t (gradient × input).

Shapes: B instances, T tokens (right-padded; for pairs, premise tokens), U hypothesis tokens.
"""

from __future__ import annotations

import torch

from hf_attn.adapters.pair import PairBatch
from hf_attn.models.masks import input_mask


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                        method: str = "auto") -> torch.Tensor:
    """J&W Alg. 1 gradient importance ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t|, 0 on pads.

    ``input_ids``, ``attention_mask``: ``(B, T)`` (mask None: every token real). ŷ is the
    predicted class's probability; α is detached (``detach_attention=True``). Instances are
    independent, so one backward of Σ_b ŷ_b gives every instance's gradient at once.

    ``method="auto"`` takes an exact shortcut for one-layer BiLSTMs whose embeddings are at least as
    wide as the hidden size (:func:`_lstm_gradient_importance`: a hand-written backward through the
    recurrence that never forms ∂ŷ/∂e_t nor weight gradients; what it saves grows with d, and with
    d < H PyTorch's fused LSTM backward is as fast: measured 1.2–1.35× faster at the papers' 300-d,
    H = 128, ~0.9× at GloVe-50d, ``scripts/bench/methods.py``); ``"generic"`` is autograd
    through the model, ``"bptt"`` forces the shortcut (tests compare them).
    """
    if method not in ("auto", "generic", "bptt"):
        raise ValueError(f"method must be 'auto', 'generic' or 'bptt', got {method!r}")
    from hf_attn.methods.leave_one_out import _single_layer_lstm

    mask = input_mask(attention_mask, input_ids)
    was_training = model.training
    model.eval()
    try:
        wide = model.config.embedding_dim >= model.config.hidden_size
        if (method == "bptt" or (method == "auto" and wide)) and _single_layer_lstm(model):
            return _lstm_gradient_importance(model, input_ids, mask)
        if method == "bptt":
            raise ValueError("method='bptt' needs a one-layer BiLSTM with a known attention module")
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask, detach_attention=True)
            probabilities = out.logits.softmax(-1)
            predicted = probabilities.max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


@torch.no_grad()
def _lstm_gradient_importance(model, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exact J&W gradient importance ``(B, T)`` for a one-layer BiLSTM, without autograd through it.

    e_t enters each direction's LSTM only through its input gates a_t = W_ih e_t (+ b), so
    (∂ŷ/∂e_t)·e_t = Σ_directions (∂ŷ/∂a_t)·(W_ih e_t): the gate gradients are enough and neither
    ∂ŷ/∂e_t (a d-wide matmul per token) nor weight gradients are formed. ∂ŷ/∂h'_t comes from
    autograd through the attention-weighted decoder only (α detached); the gate gradients from
    backpropagation through time over both directions at once (one batched matmul per step), with
    every factor that does not depend on the recurrence precomputed over all steps. ``concat`` /
    ``residual`` variants add the direct path of e_t into h'_t.
    """
    from hf_attn.methods.leave_one_out import _gate_inputs
    from hf_attn.models.modeling_hf_attn import reverse_within_length

    encoder = model.encoder
    lstms = (encoder.forward_layers[0], encoder.backward_layers[0])
    size = lstms[0].hidden_size
    keep = mask.unsqueeze(-1).to(model.get_input_embeddings().weight.dtype)
    embeddings = model.get_input_embeddings()(input_ids) * keep
    runs = (embeddings, reverse_within_length(embeddings, mask))  # each direction in its run order
    batch, steps = mask.shape
    # forward pass of both directions at once, time-major (T, 2, B, ·), keeping what BPTT needs:
    # the input half of the gates in one matmul per direction, then one batched matmul per step
    a = torch.stack([_gate_inputs(lstm, x).transpose(0, 1) for lstm, x in zip(lstms, runs)], dim=1)
    recurrent = torch.stack([lstm.weight_hh_l0 for lstm in lstms])  # (2, 4H, H)
    recurrent_t = recurrent.transpose(1, 2).contiguous()
    gates = torch.empty_like(a)  # activations i, f, g, o
    h = a.new_empty(steps, 2, batch, size)
    cells = a.new_empty(steps, 2, batch, size)
    h_prev, c_prev = a.new_zeros(2, batch, size), a.new_zeros(2, batch, size)
    for t in range(steps):
        pre = torch.baddbmm(a[t], h_prev, recurrent_t, out=gates[t])
        i, f, g, o = pre.chunk(4, dim=-1)
        g.tanh_()
        i.sigmoid_(), f.sigmoid_(), o.sigmoid_()
        c_prev = torch.addcmul(torch.mul(i, g), f, c_prev, out=cells[t])
        h_prev = torch.mul(o, c_prev.tanh(), out=h[t])
    states = [h[:, 0].transpose(0, 1), h[:, 1].transpose(0, 1)]  # (B, T, H) run order
    encoder_states = torch.cat([states[0], reverse_within_length(states[1], mask)], -1) * keep
    hidden = model.apply_variant(encoder_states, embeddings, mask)
    with torch.enable_grad():
        hidden.requires_grad_(True)
        attention = model.attend(hidden, mask).detach()
        predicted = model.decode(hidden, attention).softmax(-1).max(-1).values
        (d_hidden,) = torch.autograd.grad(predicted.sum(), hidden)
    direct = torch.zeros_like(mask, dtype=embeddings.dtype)
    if model.config.variant == "concat":
        direct = (d_hidden[..., 2 * size:] * embeddings).sum(-1)
    elif model.config.variant == "residual":
        direct = (d_hidden * embeddings).sum(-1)

    def time_major(pair):  # two directions (B, T, ·) → (T, 2, B, ·): each step's slice is contiguous
        return torch.stack([x.transpose(0, 1) for x in pair], dim=1)

    d_states = time_major([d_hidden[..., :size], reverse_within_length(d_hidden[..., size:2 * size], mask)])
    i, f, g, o = gates.chunk(4, dim=-1)
    previous_c = torch.nn.functional.pad(cells[:-1], (0, 0, 0, 0, 0, 0, 1, 0))
    tanh_c = cells.tanh_()  # the cell states themselves are not needed any more
    # ∂pre = [dc·g·i(1−i), dc·c_{t−1}·f(1−f), dc·i·(1−g²), dh·tanh(c)·o(1−o)], written in place
    factor = a.new_empty(steps, 2, batch, 4, size)
    torch.addcmul(i, i, i, value=-1, out=factor[..., 0, :]).mul_(g)
    torch.addcmul(f, f, f, value=-1, out=factor[..., 1, :]).mul_(previous_c)
    torch.mul(g, g, out=factor[..., 2, :]).neg_().add_(1).mul_(i)
    torch.addcmul(o, o, o, value=-1, out=factor[..., 3, :]).mul_(tanh_c)
    through_cell = tanh_c.mul_(tanh_c).neg_().add_(1).mul_(o)  # dc += dh · o(1 − tanh²c)
    d_pre = torch.empty_like(factor)
    d_h = d_states.new_zeros(2, batch, size)
    d_c = d_states.new_zeros(2, batch, size)
    for t in range(steps - 1, -1, -1):
        d_h += d_states[t]  # d_h held ∂ŷ/∂h_t through h_{t+1}
        d_c.addcmul_(d_h, through_cell[t])
        torch.mul(d_c.unsqueeze(2), factor[t, :, :, :3], out=d_pre[t, :, :, :3])
        torch.mul(d_h, factor[t, :, :, 3], out=d_pre[t, :, :, 3])
        d_h = torch.bmm(d_pre[t].view(2, batch, 4 * size), recurrent)
        d_c.mul_(f[t])
    biases = torch.stack([lstm.bias_ih_l0 + lstm.bias_hh_l0 for lstm in lstms])  # (2, 4H)
    d_pre = d_pre.view(steps, 2, batch, -1)
    # ∂ŷ/∂a_t · W_ih e_t = ∂ŷ/∂a_t · a_t − ∂ŷ/∂a_t · b  (T, 2, B)
    contribution = (d_pre * a).sum(-1) - torch.einsum("tdbk,dk->tdb", d_pre, biases)
    contribution = contribution.permute(1, 2, 0)  # (2, B, T), run order
    total = contribution[0] + reverse_within_length(contribution[1].unsqueeze(-1), mask).squeeze(-1) + direct
    return total.abs() * mask


def pair_gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                             hypothesis_input_ids: torch.Tensor,
                             hypothesis_attention_mask: torch.Tensor) -> torch.Tensor:
    """J&W Alg. 1 over the premise ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t| for the premise
    embeddings e_t (premise ``(B, T)``, hypothesis ``(B, U)`` ids and masks), ŷ the predicted
    class probability, α detached; 0 on premise pads. The hypothesis is held fixed."""
    mask = attention_mask.bool()
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask,
                        hypothesis_input_ids=hypothesis_input_ids,
                        hypothesis_attention_mask=hypothesis_attention_mask, detach_attention=True)
            predicted = out.logits.softmax(-1).max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


__all__ = ["gradient_importance", "pair_gradient_importance"]


def attention_fixed_gradient(adapter, batch) -> torch.Tensor:
    """J&W Alg. 1 over an adapter: g_t = |Σ_d (∂ŷ/∂e_t,d) · e_t,d| ``(B, T)`` for the input
    embeddings e_t (the embedding table's rows), ŷ the predicted class's probability, with the
    explained attention rows detached (J&W §4.1 "we disconnect the computation graph at the
    attention module"); 0 outside ``batch.content``. One backward for the batch (instances are
    independent). An adapter over hf_attn's own models (``adapter.exact_model_methods``, the one-layer
    BiLSTM) gets the exact :func:`gradient_importance` of its model (a sentence pair's batch,
    :class:`hf_attn.adapters.pair.PairBatch`: :func:`pair_gradient_importance`, the hypothesis fixed)."""
    if getattr(adapter, "exact_model_methods", False):
        if isinstance(batch, PairBatch):
            return pair_gradient_importance(adapter.model, batch.input_ids, batch.attention_mask,
                                            **batch.hypothesis()) * batch.content.to(torch.float32)
        return gradient_importance(adapter.model, batch.input_ids, batch.attention_mask) * batch.content.to(torch.float32)
    with torch.enable_grad():
        embeddings = adapter.embeddings(batch).detach().requires_grad_(True)
        probabilities = adapter.logits_from_embeddings(batch, embeddings, detach_attention=True).softmax(-1)
        predicted = probabilities.detach().argmax(-1, keepdim=True)
        (grad,) = torch.autograd.grad(probabilities.gather(1, predicted).sum(), embeddings)
    return (grad * embeddings.detach()).sum(-1).abs().float() * batch.content.to(torch.float32)
