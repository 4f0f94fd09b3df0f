"""Jain & Wallace 2019 battery (J&W §4; SPEC §4): gradient importance, leave-one-out, attention
permutation and k-adversary attention, batched over many instances per tensor operation.

Shapes: B instances, T tokens (right-padded), P permutations, k adversaries, K decoder units,
C classes. ŷ is the class-probability vector ``logits.softmax(-1)`` (binary: ``[1 − σ(z), σ(z)]``).

Each analysis is a plain function on one padded batch; :func:`run_jw_battery` walks a whole split
in length-sorted batches bounded by a token budget (so IMDB-length inputs stay bounded in memory)
and :func:`jw_battery_runner` is the ``hf-attn analyze DIR --battery jw`` entry point.
"""

from __future__ import annotations

import argparse

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hf_attn.core.io import write_jsonl_atomic
from hf_attn.core.measures import jsd, tvd
from hf_attn.models.modeling_hf_attn import AdditiveAttention, masked_softmax, reverse_within_length
from hf_attn.analysis import Battery, register_battery

# ----------------------------------------------------------------------------------------------
# batching


def length_batches(lengths, token_budget: int, cost: str = "tokens") -> list[np.ndarray]:
    """Instance indices sorted by length and cut into batches whose padded size stays within
    ``token_budget`` (a batch always holds at least one instance).

    ``cost="tokens"``: a batch of n instances of max length T costs n·T (one forward);
    ``cost="deletions"``: n·T·(T−1) (all T leave-one-out copies of length T−1 of each instance).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    order = np.argsort(lengths, kind="stable")
    per = lengths[order] if cost == "tokens" else lengths[order] * np.maximum(lengths[order] - 1, 1)
    if cost not in ("tokens", "deletions"):
        raise ValueError(f"cost must be 'tokens' or 'deletions', got {cost!r}")
    batches, start = [], 0
    # sorted ascending, so the padded cost of order[start:i+1] is (i+1−start)·per[i]
    while start < len(order):
        count = np.arange(1, len(order) - start + 1) * per[start:]
        stop = start + max(1, int(np.searchsorted(count, token_budget, side="right")))
        batches.append(order[start:stop])
        start = stop
    return batches


def pad_batch(sequences, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """List of 1-D id sequences → right-padded ``input_ids (B, T)`` and bool ``attention_mask``."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    width = int(lengths.max()) if len(sequences) else 0
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    flat = torch.as_tensor(np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]))
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    ids[mask] = flat
    return ids, mask


def _mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    if attention_mask is None:
        return torch.ones(input_ids.shape[:2], dtype=torch.bool, device=input_ids.device)
    return attention_mask.bool()


def attended_mask(model, mask: torch.Tensor) -> torch.Tensor:
    """The positions the model attends over: ``mask`` without J&W's ``<SOS>``/``<EOS>`` markers
    for a model with ``config.attention_exclude_first_last`` (``model.attended_mask``), else
    ``mask`` itself. Every analysis works on these positions: J&W's code computes τ, permutations,
    leave-one-out deletions and adversaries on tokens 1…L−2 only (``Trainers/PlottingBC.py``
    ``[1:L-1]``, ``modelUtils.BatchHolder.generate_permutation``, ``remove_and_run``)."""
    select = getattr(model, "attended_mask", None)
    return mask if select is None else select(mask)


# ----------------------------------------------------------------------------------------------
# 1. gradient importance (Alg. 1)


@torch.no_grad()
def predict(model, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """One forward: ``(probabilities (B, C), attention (B, T), hidden_states (B, T, D))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return out.logits.softmax(-1), out.attentions, out.hidden_states


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                        ) -> torch.Tensor:
    """J&W Alg. 1 gradient importance ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t|, 0 on pads.

    ŷ is the predicted class's probability; the graph is cut at α (``detach_attention=True``,
    J&W §4.1 "we disconnect the computation graph at the attention module"), so the gradient flows
    only through the encoder states h. Alg. 1 writes the gradient w.r.t. the one-hot input times the
    one-hot, which is the embedding gradient · e_t (gradient × input). Instances are independent,
    so one backward of Σ_b ŷ_b gives every instance's gradient at once.
    """
    mask = _mask(attention_mask, input_ids)
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask, detach_attention=True)
            probabilities = out.logits.softmax(-1)
            predicted = probabilities.max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


# ----------------------------------------------------------------------------------------------
# 2. leave-one-out


def deletion_batch(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   deletable: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """All single-token deletions of a padded batch as one padded batch.

    Returns ``ids (N, T−1)``, ``mask (N, T−1)``, ``instance (N,)`` and ``position (N,)``: row n is
    instance ``instance[n]`` with its token ``position[n]`` removed (sequence shortened, J&W x₋t);
    N = Σ_b (L_b) over instances with L_b ≥ 2 (deleting the only token leaves nothing).
    ``deletable`` (B, T) restricts the deleted positions (default: every real token), e.g. to the
    attended ones (:func:`attended_mask`: J&W never delete their markers); rows need ≥ 2 of them.
    """
    mask = _mask(attention_mask, input_ids)
    batch, steps = mask.shape
    lengths = mask.sum(1)
    t = torch.arange(max(steps - 1, 0), device=input_ids.device)
    j = torch.arange(steps, device=input_ids.device)
    source = t.unsqueeze(0) + (t.unsqueeze(0) >= j.unsqueeze(1)).long()  # (T, T−1): skip position j
    if deletable is None:
        keep = (j.unsqueeze(0) < lengths.unsqueeze(1)) & (lengths.unsqueeze(1) >= 2)  # (B, T)
    else:
        deletable = deletable.bool() & mask
        keep = deletable & (deletable.sum(1, keepdim=True) >= 2)
    instance, position = keep.nonzero(as_tuple=True)
    ids = input_ids[instance.unsqueeze(1), source[position]]
    new_mask = t.unsqueeze(0) < (lengths[instance] - 1).unsqueeze(1)
    return ids * new_mask, new_mask, instance, position


@torch.no_grad()
def leave_one_out(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  token_budget: int = 32768, probabilities: torch.Tensor | None = None,
                  method: str = "auto", rnn_token_budget: int = 4096) -> torch.Tensor:
    """Leave-one-out importance ``(B, T)``: Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (J&W Alg. 1, §4.1).

    x₋t is x with token t removed (the sequence gets shorter, attention renormalises over the rest).
    All deletions of the batch run as padded forwards of at most ``token_budget`` tokens each.
    Pads are 0. An instance with a single token has no x₋t: its value is NaN (reported as skipped
    downstream). ``probabilities`` (B, C) = ŷ(x) if already computed. Only attended tokens are
    deleted (:func:`attended_mask`): a model reading J&W's ``<SOS>``/``<EOS>`` keeps them in every
    x₋t and gets 0 there, as J&W's ``remove_and_run`` (it deletes positions 1…L−2).

    ``method="auto"`` takes an exact shortcut where the encoder allows one (``"generic"`` always
    runs every deletion through the whole model; tests compare the two):

    - Average encoder: h'_t depends on token t alone and φ scores each h'_t alone, so x₋t keeps
      every other state and score; only the decoder runs (``_token_local_leave_one_out``).
    - One-layer BiLSTM: deleting token t leaves the forward states before t and the backward
      states after t unchanged, so only the forward run after t (from the original state at t−1)
      and the backward run before t are recomputed (``_lstm_leave_one_out``): half the LSTM work,
      in length-sorted chunks of ``rnn_token_budget`` tokens.
    """
    if method not in ("auto", "generic"):
        raise ValueError(f"method must be 'auto' or 'generic', got {method!r}")
    mask = _mask(attention_mask, input_ids)
    model.eval()
    if method == "auto" and _token_local(model):
        return _token_local_leave_one_out(model, input_ids, mask)
    if probabilities is None:
        probabilities = model(input_ids=input_ids, attention_mask=mask).logits.softmax(-1)
    attended = attended_mask(model, mask)
    ids, new_mask, instance, position = deletion_batch(
        input_ids, mask, None if attended is mask else attended)
    result = torch.zeros(mask.shape, dtype=probabilities.dtype, device=input_ids.device)
    result[(attended.sum(1) == 1)] = float("nan")
    result[~attended] = 0.0
    if len(instance) == 0:
        return result
    if method == "auto" and _single_layer_lstm(model):
        _lstm_leave_one_out(model, input_ids, mask, new_mask, instance, position, probabilities,
                            result, token_budget, rnn_token_budget)
        return result
    # rows are grouped by instance (nonzero is row-major); cut them into chunks by padded tokens
    width = ids.shape[1]
    rows_per_chunk = max(1, token_budget // max(width, 1))
    lengths = new_mask.sum(1)
    for start in range(0, len(instance), rows_per_chunk):
        sl = slice(start, start + rows_per_chunk)
        chunk_width = int(lengths[sl].max())
        out = model(input_ids=ids[sl, :chunk_width], attention_mask=new_mask[sl, :chunk_width])
        result[instance[sl], position[sl]] = tvd(out.logits.softmax(-1), probabilities[instance[sl]])
    return result


def _single_layer_lstm(model) -> bool:
    """True when :func:`_lstm_leave_one_out` applies: one-layer BiLSTM, a known attention module."""
    from hf_attn.models.modeling_hf_attn import AdditiveAttention, DotAttention, UniformAttention

    return (getattr(model.config, "encoder", None) == "lstm" and getattr(model.config, "num_layers", 1) == 1
            and isinstance(getattr(model, "attention", None), (AdditiveAttention, DotAttention, UniformAttention)))


def _lstm_cell_states(lstm: torch.nn.LSTM, inputs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """Cell states ``(B, T, H)`` of a one-layer ``nn.LSTM`` that produced outputs ``hidden``
    ``(B, T, H)`` from ``inputs`` ``(B, T, d)`` (zero initial state). The gates at every step follow
    from h_{t−1} in one matmul; only c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t is sequential (one op per step)."""
    previous = torch.nn.functional.pad(hidden[:, :-1], (0, 0, 1, 0))
    gates = torch.nn.functional.linear(inputs, lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0)
    gates = gates + previous @ lstm.weight_hh_l0.t()
    i, f, g, _ = gates.chunk(4, dim=-1)
    forget = f.sigmoid()
    write = i.sigmoid() * g.tanh()
    cells = torch.empty_like(hidden)
    cells[:, 0] = write[:, 0]
    for t in range(1, hidden.shape[1]):
        torch.addcmul(write[:, t], forget[:, t], cells[:, t - 1], out=cells[:, t])
    return cells


def _readout(model) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The linear maps applied to each h'_t after the encoder, stacked: ``(R, D)`` rows and ``(R,)``
    bias; the first ``A`` rows feed the attention (additive: W of vᵀtanh(W h + b); dot: q/√D;
    uniform: none), the last K are the decoder. Attention and logits of any sequence follow from
    M h'_t alone (the decoder is linear and Σα = 1)."""
    from hf_attn.models.modeling_hf_attn import AdditiveAttention, DotAttention

    attention, decoder = model.attention, model.decoder
    if isinstance(attention, AdditiveAttention):
        rows, bias = attention.proj.weight, attention.proj.bias
    elif isinstance(attention, DotAttention):
        rows = (attention.query * attention.scale).unsqueeze(0)
        bias = rows.new_zeros(1)
    else:
        rows, bias = decoder.weight[:0], decoder.bias[:0]
    return torch.cat([rows, decoder.weight]), torch.cat([bias, decoder.bias]), rows.shape[0]


def _scores_from_readout(model, projected: torch.Tensor, num_attention: int) -> torch.Tensor:
    """φ(h'_t) ``(…)`` from the stacked projections ``M h'_t + bias`` ``(…, R)`` of :func:`_readout`
    (attention part first). Overwrites ``projected``: the additive tanh runs in place over the whole
    contiguous tensor (several times faster than on the strided attention slice)."""
    if isinstance(model.attention, AdditiveAttention):
        return model.attention.v(projected.tanh_()[..., :num_attention]).squeeze(-1)
    if num_attention == 1:  # dot
        return projected[..., 0]
    return projected.new_zeros(projected.shape[:-1])  # uniform


def _rerun(lstm: torch.nn.LSTM, inputs: torch.Tensor, source_rows: torch.Tensor, start: torch.Tensor,
           run_length: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, step: int,
           readout: torch.Tensor, budget: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For each row n, run ``lstm`` over ``inputs[source_rows_n, start_n + step·s]`` for
    s < ``run_length_n`` from state (``h0_n``, ``c0_n``), projected by ``readout`` (R, H).

    Returns ``(outputs (N·S, R), slot (N,))``: output s of row n is ``outputs[slot_n·S + s]``
    (S = max run length). Rows run sorted by run length, in chunks of at most ``budget`` padded
    tokens (cache-sized chunks are fastest on CPU); outputs past a row's run are never read."""
    order = torch.argsort(run_length, descending=True, stable=True)
    lengths = run_length[order]
    longest = max(int(lengths[0]) if len(lengths) else 0, 1)
    outputs = inputs.new_zeros(len(order), longest, readout.shape[0])
    slot = torch.empty_like(order)
    slot[order] = torch.arange(len(order), device=order.device)
    begin, count = 0, int((lengths > 0).sum())
    while begin < count:
        width = int(lengths[begin])
        end = min(count, begin + max(1, budget // width))
        chunk = order[begin:end]
        source = (start[chunk].unsqueeze(1) + step * torch.arange(width, device=inputs.device))
        x = inputs[source_rows[chunk].unsqueeze(1), source.clamp(0, inputs.shape[1] - 1)]
        output, _ = lstm(x, (h0[chunk].unsqueeze(0), c0[chunk].unsqueeze(0)))  # causal: later
        # batch-first outputs are a transposed view: project time-major (one matmul, no copy)
        outputs[begin:end, :width] = torch.nn.functional.linear(output.transpose(0, 1), readout).transpose(0, 1)
        begin = end
    return outputs.view(-1, readout.shape[0]), slot


def _take(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` viewed as ``(−1, R)`` at integer ``index`` (any shape) → ``(*index.shape, R)``
    (index_select: faster than advanced indexing on CPU)."""
    flat = table.reshape(-1, table.shape[-1])
    return flat.index_select(0, index.reshape(-1)).view(*index.shape, flat.shape[1])


def _lstm_leave_one_out(model, input_ids, mask, new_mask, instance, position, probabilities, result,
                        token_budget: int, rnn_token_budget: int) -> None:
    """Exact LOO for a one-layer BiLSTM (fills ``result``; J&W Alg. 1 leave-one-out, SPEC §9).

    Deletion n removes token i of instance b (length L). Its forward states are h→_{b,<i}, then a
    forward run over x_{i+1..L−1} from (h→, c→)_{b,i−1}; its backward states are a backward run
    over x_{i−1..0} from (h←, c←)_{b,i+1}, then h←_{b,>i}. Only the runs are computed (half the
    LSTM work of re-encoding every x₋t). Attention and decoder act on h' = [h→; h←] (+ e) through
    linear maps M (:func:`_readout`), so M h' = M→h→ + M←h← (+ M_e e): the unchanged half of every
    deletion position is gathered from the original sentence's projections and the rerun half is
    projected once as it is computed; only φ's tanh and the softmax run per deletion position.
    """
    encoder = model.encoder
    forward_lstm, backward_lstm = encoder.forward_layers[0], encoder.backward_layers[0]
    size = forward_lstm.hidden_size
    dtype = probabilities.dtype
    readout, bias, num_attention = _readout(model)
    readout, bias = readout.to(dtype), bias.to(dtype)
    readout_fwd, readout_bwd = readout[:, :size].contiguous(), readout[:, size:2 * size].contiguous()
    embeddings = model.get_input_embeddings()(input_ids) * mask.unsqueeze(-1).to(dtype)
    lengths = mask.sum(1)
    batch, steps = mask.shape
    reversed_embeddings = reverse_within_length(embeddings, mask)
    h_fwd, _ = forward_lstm(embeddings)
    h_bwd_run, _ = backward_lstm(reversed_embeddings)  # run order: token L−1 first
    c_fwd = _lstm_cell_states(forward_lstm, embeddings, h_fwd)
    c_bwd = reverse_within_length(_lstm_cell_states(backward_lstm, reversed_embeddings, h_bwd_run), mask)
    h_bwd = reverse_within_length(h_bwd_run, mask)  # back to token positions
    zero = h_fwd.new_zeros(batch, 1, size)
    # run start states: forward at i−1 (index i of *_fwd0), backward at i+1 (zero past the end)
    h_fwd0, c_fwd0 = torch.cat([zero, h_fwd], 1), torch.cat([zero, c_fwd], 1)
    h_bwd0, c_bwd0 = torch.cat([h_bwd, zero], 1), torch.cat([c_bwd, zero], 1)
    # unchanged halves, projected (bias included once): [M→h→_t + bias (t < T) ; M←h←_t + bias]
    table = torch.cat([h_fwd @ readout_fwd.t(), h_bwd @ readout_bwd.t()], 1) + bias  # (B, 2T, R)
    if model.config.variant in ("concat", "residual"):  # h' also holds e_t: M_e e of the kept token
        readout_emb = readout[:, 2 * size:] if model.config.variant == "concat" else readout
        embedding_table = embeddings @ readout_emb.t()  # (B, T, R)
    at_end = position + 1 >= lengths[instance]
    last = lengths[instance] - 1
    q_all = torch.arange(max(steps - 1, 1), device=input_ids.device)
    rows_per_chunk = max(1, token_budget // max(steps - 1, 1))
    for begin in range(0, len(instance), rows_per_chunk):
        sl = slice(begin, begin + rows_per_chunk)
        b, i = instance[sl], position[sl]
        width = int((lengths[b] - 1).max())
        chunk_mask = new_mask[sl, :width]
        q = q_all[:width].unsqueeze(0)
        before = q < i.unsqueeze(1)
        # deletion position q: forward half unchanged before i (table[t=q]), backward half after
        # (table[T + q + 1]); the other half comes from the reruns below
        unchanged = torch.where(before, q, steps + q + 1).clamp(max=2 * steps - 1)
        projected = _take(table, b.unsqueeze(1) * table.shape[1] + unchanged)  # (n, width, R)
        if model.config.variant in ("concat", "residual"):
            kept = (q + (~before).long()).clamp(max=steps - 1)
            projected += _take(embedding_table, b.unsqueeze(1) * steps + kept)
        # forward half after the deletion: tokens i+1, …, L−1 → deletion positions i, …, L−2
        fwd, fwd_slot = _rerun(forward_lstm, embeddings, b, i + 1, last[sl] - i, h_fwd0[b, i],
                               c_fwd0[b, i], +1, readout_fwd, rnn_token_budget)
        # backward half before the deletion: tokens i−1, …, 0 → deletion positions i−1, …, 0
        start = torch.where(at_end[sl], steps, i + 1)  # zero state when i is the last token
        bwd, bwd_slot = _rerun(backward_lstm, embeddings, b, i - 1, i, h_bwd0[b, start],
                               c_bwd0[b, start], -1, readout_bwd, rnn_token_budget)
        fwd_width, bwd_width = fwd.shape[0] // len(b), bwd.shape[0] // len(b)
        fwd_index = fwd_slot.unsqueeze(1) * fwd_width + (q - i.unsqueeze(1)).clamp(0, fwd_width - 1)
        bwd_index = bwd_slot.unsqueeze(1) * bwd_width + (i.unsqueeze(1) - 1 - q).clamp(0, bwd_width - 1)
        projected += torch.where(before.unsqueeze(-1), _take(bwd, bwd_index), _take(fwd, fwd_index))
        decoder_units = projected[..., num_attention:].clone()  # before the scores overwrite it
        attention = masked_softmax(_scores_from_readout(model, projected, num_attention),
                                   attended_mask(model, chunk_mask))
        units = torch.einsum("nt,ntk->nk", attention, decoder_units)
        deleted = model.expand_logits(units).softmax(-1)
        result[b, i] = tvd(deleted, probabilities[b])


def _token_local(model) -> bool:
    """True when each h'_t depends on token t alone (Average encoder: per-token MLP, no context)."""
    return getattr(model.config, "encoder", None) == "average"


def _token_local_leave_one_out(model, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exact LOO for token-local encoders: α(x₋t) = softmax of the unchanged scores over the real
    tokens other than t, logits(x₋t) = Σ_u α_u(x₋t) · token_logits_u; all deletions as one
    ``(B, T, T)`` tensor (row t = deletion of token t)."""
    hidden = model.encode(model.get_input_embeddings()(input_ids), mask)
    scores = model.attention(hidden)  # (B, T) φ(h'_t)
    token_logits = model.token_logits(hidden)  # (B, T, K)
    original = model.logits_from_token_logits(token_logits, model.attend(hidden, mask)).softmax(-1)
    mask = attended_mask(model, mask)  # deletions and the renormalised α: attended tokens only
    steps = mask.shape[1]
    keep = mask.unsqueeze(1) & ~torch.eye(steps, dtype=torch.bool, device=mask.device)  # (B, T, T)
    lengths = mask.sum(1)
    keep = keep & (lengths >= 2).view(-1, 1, 1)
    safe_scores = scores.unsqueeze(1).masked_fill(~keep, float("-inf"))
    alpha = torch.where(keep.any(-1, keepdim=True), safe_scores, torch.zeros_like(safe_scores)).softmax(-1)
    alpha = alpha * keep
    deleted = model.logits_from_token_logits(token_logits, alpha).softmax(-1)  # (B, T, C)
    result = tvd(deleted, original.unsqueeze(1)) * mask
    result[(lengths == 1).unsqueeze(1) & mask] = float("nan")  # the only (attended) token
    return result


# ----------------------------------------------------------------------------------------------
# 3. permutation (Alg. 2)


def random_permutations(attention_mask: torch.Tensor, num_permutations: int,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """``(B, P, T)`` index tensors: row (b, p) permutes the real positions of instance b among
    themselves and maps every pad position to itself. The real positions need not be a prefix:
    with J&W's markers excluded (:func:`attended_mask`) the markers stay in place too."""
    mask = attention_mask.bool()
    batch, steps = mask.shape
    keys = torch.rand((batch, num_permutations, steps), generator=generator, device=mask.device)
    # pads get keys > 1 in increasing order, so they sort after the real tokens and stay in place
    positions = torch.arange(steps, device=mask.device)
    pad_keys = 2.0 + positions.to(keys.dtype)
    keys = torch.where(mask.unsqueeze(1), keys, pad_keys)
    order = keys.argsort(dim=-1)  # the real positions shuffled, then the others in order
    if bool(mask[:, :1].all()) and bool((mask[:, 1:] <= mask[:, :-1]).all()):
        return order  # real positions first (right padding): order is the permutation itself
    # slot j of order belongs at the j-th real position (then the others, in order)
    slots = torch.where(mask, positions, steps + positions).argsort(dim=-1)  # (B, T)
    return torch.empty_like(order).scatter_(-1, slots.unsqueeze(1).expand_as(order), order)


@torch.no_grad()
def permutation_tvd(model, hidden_states: torch.Tensor, attention: torch.Tensor,
                    attention_mask: torch.Tensor, num_permutations: int = 100,
                    generator: torch.Generator | None = None,
                    permutations: torch.Tensor | None = None) -> torch.Tensor:
    """J&W Alg. 2: TVD(ŷ(h, α_p), ŷ(h, α̂)) for ``num_permutations`` random permutations α_p of α̂
    among the real tokens (h unchanged) → ``(B, P)``. Δŷ_med is its median over P.

    All permutations of the batch go through the decoder in one call of
    ``model.logits_from_token_logits`` (exact: the decoder is linear and Σα = 1, SPEC §9).
    ``permutations`` (B, P, T) overrides the random draw (tests, per-instance comparisons).
    """
    mask = attention_mask.bool()
    if permutations is None:
        permutations = random_permutations(mask, num_permutations, generator)
    token_logits = model.token_logits(hidden_states)  # (B, T, K)
    permuted = attention.gather(1, permutations.flatten(1)).view(permutations.shape)  # (B, P, T)
    original = model.logits_from_token_logits(token_logits, attention).softmax(-1)  # (B, C)
    counterfactual = model.logits_from_token_logits(token_logits, permuted).softmax(-1)  # (B, P, C)
    return tvd(counterfactual, original.unsqueeze(1))


# ----------------------------------------------------------------------------------------------
# 4. adversarial attention (Alg. 3, Eq. 1–2)


@dataclass
class AdversaryResult:
    """k adversarial attention distributions per instance (J&W §4.2.2).

    attention: ``(B, k, T)`` adversaries α(i) (0 on pads); tvd: ``(B, k)`` TVD(ŷ(α(i)), ŷ(α̂));
    jsd: ``(B, k)`` JSD(α(i), α̂); eps_max_jsd: ``(B,)`` max JSD over adversaries with TVD ≤ ε
    (0 if none, J&W Alg. 3); feasible: ``(B, k)`` TVD ≤ ε; probabilities: ``(B, k, C)`` ŷ(α(i)).
    """

    attention: torch.Tensor
    tvd: torch.Tensor
    jsd: torch.Tensor
    eps_max_jsd: torch.Tensor
    feasible: torch.Tensor
    probabilities: torch.Tensor


def adversary_objective(adversaries: torch.Tensor, attention: torch.Tensor, output_tvd: torch.Tensor,
                        lam: float = 500.0, eps: float = 0.01) -> torch.Tensor:
    """Relaxed Eq. 1–2 per instance ``(B,)`` (to be maximised), with autograd-friendly ops:
    Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j)) − (λ/k) Σ_i max(0, TVD_i − ε).
    ``adversaries (B, k, T)``, ``attention (B, T)``, ``output_tvd (B, k)``. The reference that the
    closed-form gradient of :func:`adversarial_attention` is tested against."""
    k = adversaries.shape[1]
    to_original = jsd(adversaries, attention.unsqueeze(1)).sum(-1)
    pairwise = jsd(adversaries.unsqueeze(1), adversaries.unsqueeze(2))  # (B, k, k), symmetric
    diversity = torch.triu(pairwise, diagonal=1).sum((-1, -2)) / max(k * (k - 1), 1)
    penalty = (lam / k) * torch.relu(output_tvd - eps).sum(-1)
    return to_original + diversity - penalty


def _divergence_gradient(log_adv: torch.Tensor, adv: torch.Tensor, log_mid0: torch.Tensor) -> torch.Tensor:
    """∂/∂α(i) of Σ_i JSD(α(i), α̂) + c Σ_{i<j} JSD(α(i), α(j)), c = 1/(k(k−1)), ``(B, k, T)``, exact
    up to a per-row constant (which the softmax Jacobian removes). With ∂JSD(p, q)/∂p = ½ log(p/m),
    m = (p + q)/2: ½(log α(i) − log m(i,0)) + c/2 ((k−1) log α(i) − Σ_{j≠i} log(α(i) + α(j))).
    ``log_mid0`` = log(α(i) + α̂) (log 2 is a constant). Each of the k(k−1)/2 pair sums is formed
    and logged once, from slices (no gathers): few ops, since this runs at every Adam step."""
    k = adv.shape[1]
    c = 1.0 / max(k * (k - 1), 1)
    grad = torch.mul(log_adv, 0.5 + 0.5 * c * (k - 1))
    grad.sub_(log_mid0, alpha=0.5)
    if k > 1:
        pairs = adv.new_empty(adv.shape[0], k * (k - 1) // 2, adv.shape[2])
        spans, offset = [], 0
        for d in range(1, k):  # pairs (i, i+d), i < k−d
            torch.add(adv[:, : k - d], adv[:, d:], out=pairs[:, offset: offset + k - d])
            spans.append((d, offset))
            offset += k - d
        pairs.clamp_min_(1e-30).log_()
        for d, offset in spans:
            block = pairs[:, offset: offset + k - d]
            grad[:, : k - d].sub_(block, alpha=0.5 * c)
            grad[:, d:].sub_(block, alpha=0.5 * c)
    return grad


def _adversary_logit_gradient(model, logits: torch.Tensor, token_logits: torch.Tensor,
                              attention_floor: torch.Tensor, original: torch.Tensor, lam: float,
                              eps: float) -> torch.Tensor:
    """∂(relaxed Eq. 1–2 objective)/∂(adversary logits) ``(B, k, T)`` in closed form, from the
    adversaries' logits (B, k, T; pads ≤ −1e4), per-token decoder units (B, T, K),
    α̂ floored at 1e-30 ``(B, 1, T)`` and ŷ ``(B, C)``; tested against autograd on
    :func:`adversary_objective`. The penalty part is −(λ/k)·1[TVD_i > ε]·∂TVD_i/∂α(i) through
    ŷ(i) = softmax(expand(Σ_t α_t tok_t)); the softmax Jacobian maps ∂/∂α to ∂/∂logits."""
    k = logits.shape[1]
    adv, log_adv = logits.softmax(-1), logits.log_softmax(-1)  # (exp of −1e4 pads is slow: no .exp())
    grad = _divergence_gradient(log_adv, adv, (adv + attention_floor).log_())
    output_logits = model.logits_from_token_logits(token_logits, adv)  # (B, k, C)
    if model.config.num_outputs == 1:  # binary, logits [0, z]: TVD = |σ(z) − σ(z₀)|, ∂/∂z = sign·σ(1−σ)
        probability = output_logits[..., 1:].sigmoid()  # (B, k, 1)
        difference = probability - original[:, None, 1:]
        active = (difference.abs() > eps).to(adv.dtype)  # TVD_i > ε
        penalty = difference.sign_().mul_(probability - probability * probability).mul_(active * (lam / k))
    else:
        probabilities = output_logits.softmax(-1)
        difference = probabilities - original.unsqueeze(1)
        over = 0.5 * difference.sign()  # ∂TVD/∂ŷ(i)
        d_logits = probabilities * (over - (probabilities * over).sum(-1, keepdim=True))
        active = (0.5 * difference.abs().sum(-1) > eps).to(adv.dtype) * (lam / k)  # TVD_i > ε
        penalty = d_logits * active.unsqueeze(-1)  # (B, k, K)
    if penalty.shape[-1] == 1:  # one decoder unit: an outer product (batched 1×1 matmuls are slow)
        grad.addcmul_(penalty, token_logits.transpose(1, 2), value=-1.0)
    else:
        grad.baddbmm_(penalty, token_logits.transpose(1, 2), alpha=-1.0)
    return grad.sub_(torch.linalg.vecdot(adv, grad).unsqueeze(-1)).mul_(adv)  # α ⊙ (g − Σ_t α g)


class _AmsgradAscent:
    """J&W's optimiser — Adam with amsgrad (β = 0.9, 0.999, ε = 1e-8) — ascending the objective for
    one tensor of logits. It calls torch's fused Adam kernel directly: on these small tensors
    ``torch.optim``'s per-step bookkeeping costs more than the kernel itself. The arithmetic is
    ``torch.optim.Adam(amsgrad=True, maximize=True, fused=True)``'s, which is the fallback."""

    def __init__(self, parameter: torch.Tensor, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.parameter, self.lr, self.betas, self.eps = parameter, lr, betas, eps
        self.kernel = getattr(torch, "_fused_adam_", None)
        self.moments = [torch.zeros_like(parameter) for _ in range(3)]  # m, v, max v
        self.steps = torch.zeros((), dtype=torch.float32, device=parameter.device)
        self.optimizer = None
        if self.kernel is None or parameter.dtype not in (torch.float32, torch.float64):
            self.optimizer = torch.optim.Adam([parameter.requires_grad_(True)], lr=lr, betas=betas, eps=eps,
                                              amsgrad=True, maximize=True)

    def step(self, gradient: torch.Tensor) -> None:
        if self.optimizer is not None:
            self.parameter.grad = gradient
            self.optimizer.step()
            return
        self.steps += 1
        m, v, v_max = self.moments
        self.kernel([self.parameter], [gradient], [m], [v], [v_max], [self.steps], lr=self.lr,
                    beta1=self.betas[0], beta2=self.betas[1], weight_decay=0.0, eps=self.eps,
                    amsgrad=True, maximize=True)


def _initial_adversary_logits(mask: torch.Tensor, k: int, init_scale: float, noise: torch.Tensor | None,
                              generator: torch.Generator | None, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Adversary logits ``(B, k, T)`` at the start of the search (J&W code): log-uniform plus
    ``init_scale``·N(0, 1) noise over the real tokens, −1e4 on pads (probability exactly 0, and so
    is their gradient). ``noise`` ``(B, k, T)`` overrides the draw (otherwise from ``generator``,
    or a generator seeded with ``seed``)."""
    batch, length = mask.shape
    if noise is None:
        if generator is None:
            generator = torch.Generator(device=mask.device).manual_seed(seed)
        noise = torch.randn((batch, k, length), generator=generator, device=mask.device, dtype=dtype)
    elif noise.shape != (batch, k, length):
        raise ValueError(f"noise must have shape {(batch, k, length)}, got {tuple(noise.shape)}")
    lengths = mask.sum(1, keepdim=True).to(dtype)
    logits = (-lengths.log()).unsqueeze(1) + init_scale * noise.to(dtype)  # log-uniform + noise
    return logits.masked_fill(~mask.unsqueeze(1), -1e4)


def adversarial_attention(model, hidden_states: torch.Tensor, attention: torch.Tensor,
                          attention_mask: torch.Tensor, k: int = 5, lam: float = 500.0,
                          eps: float = 0.01, steps: int = 500, lr: float = 0.01, seed: int = 0,
                          init_scale: float = 3.0, generator: torch.Generator | None = None,
                          noise: torch.Tensor | None = None) -> AdversaryResult:
    """J&W Alg. 3 / Eq. 1–2: k adversarial attention distributions per instance that maximise
    Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j)) − (λ/k) Σ_i max(0, TVD(ŷ(α(i)), ŷ) − ε)
    with h fixed. α(i) = softmax of free logits over the real tokens, initialised at uniform +
    ``init_scale``·N(0, 1) noise in logit space, optimised with Adam (amsgrad) for ``steps`` steps
    (J&W code: λ = 500, lr 0.01, 500 steps, k = 5). ε-max JSD = max JSD over adversaries with
    TVD ≤ ε after the last step (0 if none). ``noise`` ``(B, k, T)`` overrides the N(0, 1) draw
    (otherwise from ``generator``, or a generator seeded with ``seed``).

    Paper vs. code: the J&W code penalises with weight λ (not λ/k) and sums the pairwise term over
    both orders; we follow the paper's Eq. 2 (pass ``lam=500*k`` for the code's penalty weight).

    Every adversary of the batch is one ``(B, k, T)`` tensor optimised together; instances are
    independent (the objective is a sum and Adam is element-wise), so the result equals a
    per-instance run with the same initial noise. The gradient is computed in closed form
    (:func:`_adversary_logit_gradient`, tested against autograd on :func:`adversary_objective`).
    """
    if k < 1 or steps < 0:
        raise ValueError(f"need k >= 1 and steps >= 0, got k={k}, steps={steps}")
    mask = attention_mask.bool()
    dtype = hidden_states.dtype
    with torch.no_grad():
        token_logits = model.token_logits(hidden_states).detach()  # (B, T, K)
        attention = attention.detach().to(dtype)
        original = model.logits_from_token_logits(token_logits, attention).softmax(-1)  # (B, C)
    logits = _initial_adversary_logits(mask, k, init_scale, noise, generator, seed, dtype)
    mask3 = mask.unsqueeze(1)
    optimizer = _AmsgradAscent(logits, lr)
    attention_floor = attention.clamp_min(1e-30).unsqueeze(1)
    with torch.no_grad():
        for _ in range(steps):
            optimizer.step(_adversary_logit_gradient(model, logits, token_logits, attention_floor,
                                                     original, lam, eps))
    return adversary_result(model, logits, mask3, token_logits, attention, original, eps)


@torch.no_grad()
def adversary_result(model, logits: torch.Tensor, mask3: torch.Tensor, token_logits: torch.Tensor,
                     attention: torch.Tensor, original: torch.Tensor, eps: float) -> AdversaryResult:
    """Optimised adversary logits ``(B, k, T)`` → α = softmax over real tokens (``mask3`` (B, 1, T)),
    their ŷ (via ``token_logits``), TVD to the original ŷ ``(B, C)``, JSD to α̂ ``(B, T)`` and the
    ε-max JSD (max JSD over adversaries with TVD ≤ ε, 0 if none). Shared by the single-sequence
    and the sentence-pair adversaries."""
    adv = logits.detach().masked_fill(~mask3, float("-inf")).softmax(-1)
    probabilities = model.logits_from_token_logits(token_logits, adv).softmax(-1)
    output_tvd = tvd(probabilities, original.unsqueeze(1))
    divergence = jsd(adv, attention.unsqueeze(1), mask3)
    feasible = output_tvd <= eps
    eps_max = torch.where(feasible, divergence, torch.zeros_like(divergence)).max(-1).values
    return AdversaryResult(attention=adv, tvd=output_tvd, jsd=divergence, eps_max_jsd=eps_max,
                           feasible=feasible, probabilities=probabilities)


# ----------------------------------------------------------------------------------------------
# the battery over a whole split


@dataclass
class JWSettings:
    """Parameters of :func:`run_jw_battery` (recorded in results.json). Defaults: J&W §4 / code."""

    num_permutations: int = 100
    k: int = 5
    lam: float = 500.0
    eps: float = 0.01
    steps: int = 500
    lr: float = 0.01
    init_scale: float = 3.0
    seed: int = 0
    alpha: float = 0.05  # significance level of the Kendall τ tests
    # Importances of one instance within this (absolute) distance are tied before Kendall τ:
    # attention, gradient and leave-one-out carry float32 noise of up to ~5e-7, enough to order
    # exact ties (two adjacent identical tokens give the same sentence when either is deleted).
    # 0 ranks the raw values. Why 1e-6: hf_attn.analysis.jw.summary.TIE_TOLERANCE.
    tie_tolerance: float = 1e-6
    token_budget: int = 16384  # padded tokens per batch (forward, permutations, adversaries)
    gradient_token_budget: int = 4096  # per forward + backward (cache-sized: faster on CPU)
    loo_token_budget: int = 32768  # padded tokens per chunk of leave-one-out deletions
    max_length: int | None = None  # truncate texts (default: the model's max_tokens)
    num_threads: int | None = None  # torch threads while running (None: leave torch's setting)

    def validate(self) -> None:
        for name in ("num_permutations", "k", "token_budget", "gradient_token_budget", "loo_token_budget"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.steps < 0 or not self.lr > 0 or self.eps < 0 or self.lam < 0:
            raise ValueError("need steps >= 0, lr > 0, eps >= 0, lam >= 0")
        if not (0 <= self.tie_tolerance < float("inf")):
            raise ValueError(f"tie_tolerance must be a finite number >= 0, got {self.tie_tolerance}")


@dataclass
class JWInstances:
    """Per-instance results over a split (N instances; ragged lists hold one array per instance)."""

    input_ids: list = field(default_factory=list)
    labels: np.ndarray | None = None
    probabilities: np.ndarray | None = None  # (N, C)
    predictions: np.ndarray | None = None  # (N,)
    attention: list = field(default_factory=list)  # (L,)
    gradient: list = field(default_factory=list)  # (L,)
    loo: list = field(default_factory=list)  # (L,), NaN for single-token instances
    permutation_tvd: np.ndarray | None = None  # (N, P)
    adversary_attention: list = field(default_factory=list)  # (k, L)
    adversary_probabilities: np.ndarray | None = None  # (N, k, C)
    adversary_tvd: np.ndarray | None = None  # (N, k)
    adversary_jsd: np.ndarray | None = None  # (N, k)
    eps_max_jsd: np.ndarray | None = None  # (N,)
    # Per-instance Kendall τ and its p-value, set by battery_summary: {"attention_gradient":
    # (tau (N,), pvalue (N,)), "attention_loo": …, "gradient_loo": …}; NaN where τ is undefined.
    kendall: dict = field(default_factory=dict)

    @property
    def max_attention(self) -> np.ndarray:
        return np.array([float(a.max()) for a in self.attention])


def _settings_key(settings: JWSettings, model, lengths: np.ndarray) -> str:
    with torch.no_grad():
        weights = sum(float(p.double().sum()) for p in model.parameters())
    payload = json.dumps({"settings": asdict(settings), "params": weights, "lengths": lengths.tolist()},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _in_row_chunks(analysis, ids: torch.Tensor, mask: torch.Tensor, token_budget: int) -> torch.Tensor:
    """``analysis(ids, mask) → (B, T)`` on consecutive row chunks of a length-sorted batch, each of
    at most ``token_budget`` padded tokens and trimmed to its longest row; results re-padded."""
    lengths = mask.sum(1).cpu().numpy()
    out = torch.zeros(mask.shape, dtype=torch.float32, device=ids.device)
    begin = 0
    while begin < len(ids):
        cost = np.arange(1, len(ids) - begin + 1) * np.maximum.accumulate(lengths[begin:])  # nondecreasing
        end = begin + max(1, int(np.searchsorted(cost, token_budget, side="right")))
        width = max(int(lengths[begin:end].max()), 1)
        out[begin:end, :width] = analysis(ids[begin:end, :width], mask[begin:end, :width])
        begin = end
    return out


def _timer(timings: dict):
    """``timed(name, fn)``: run ``fn()`` and add its wall time to ``timings[name]``."""
    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        return value
    return timed


def _adversary_options(settings: JWSettings, batch_seed: int) -> dict:
    """Keyword arguments of the (single or pair) adversary for one batch, seeded by the batch."""
    return dict(k=settings.k, lam=settings.lam, eps=settings.eps, steps=settings.steps, lr=settings.lr,
                init_scale=settings.init_scale, generator=torch.Generator().manual_seed(batch_seed + 1))


def _batch_rows(mask: torch.Tensor, probabilities, attention, gradient, loo, permutation,
                adversary: AdversaryResult, attended: torch.Tensor | None = None) -> dict:
    """One batch's results → numpy, per-token arrays cut to each row's length (shared by the
    single-sequence and the sentence-pair batteries); with ``attended`` (B, T), to each row's
    attended positions (J&W's markers dropped, as their ``[1:L-1]``)."""
    lengths = mask.sum(1).tolist()

    def cut(values):
        if attended is not None:
            keep = attended.numpy()
            return [v[..., k] for v, k in zip(values.double().numpy(), keep)]
        return [v[..., :n] for v, n in zip(values.double().numpy(), lengths)]

    return {"probabilities": probabilities.double().numpy(), "attention": cut(attention),
            "gradient": cut(gradient), "loo": cut(loo), "permutation_tvd": permutation.double().numpy(),
            "adversary_attention": cut(adversary.attention),
            "adversary_probabilities": adversary.probabilities.double().numpy(),
            "adversary_tvd": adversary.tvd.double().numpy(), "adversary_jsd": adversary.jsd.double().numpy(),
            "eps_max_jsd": adversary.eps_max_jsd.double().numpy()}


def _run_batch(model, ids: torch.Tensor, mask: torch.Tensor, settings: JWSettings, batch_seed: int,
               timings: dict) -> dict:
    """Every analysis on one padded batch → per-row numpy results."""
    timed = _timer(timings)
    probabilities, attention, hidden = timed("forward", lambda: predict(model, ids, mask))
    attended = attended_mask(model, mask)  # J&W's markers (if any) out of every analysis
    gradient = timed("gradient", lambda: _in_row_chunks(
        lambda i, m: gradient_importance(model, i, m), ids, mask, settings.gradient_token_budget))
    loo = timed("leave_one_out", lambda: leave_one_out(model, ids, mask, settings.loo_token_budget,
                                                       probabilities))
    generator = torch.Generator().manual_seed(batch_seed)
    perm = timed("permutation", lambda: permutation_tvd(model, hidden, attention, attended,
                                                         settings.num_permutations, generator))
    adv = timed("adversary", lambda: adversarial_attention(
        model, hidden, attention, attended, **_adversary_options(settings, batch_seed)))
    return _batch_rows(mask, probabilities, attention, gradient, loo, perm, adv,
                       None if attended is mask else attended)


def run_jw_battery(model, tokenizer, texts, labels=None, settings: JWSettings | None = None,
                   progress: bool = True, cache_dir: str | None = None
                   ) -> tuple[JWInstances, dict]:
    """Run the whole J&W battery (§4) on ``texts`` → ``(per-instance arrays, summary)``.

    Texts are tokenized, sorted by length and processed in batches of at most
    ``settings.token_budget`` padded tokens; every analysis handles a batch in a few tensor ops.
    With ``cache_dir`` each batch's results are saved there, so a killed run resumes where it
    stopped (the cache is keyed by settings, model weights and the tokenized lengths). Empty texts
    (no tokens) are an error. ``labels`` (optional) only add the accuracy to the summary.
    """
    settings = settings or JWSettings()
    settings.validate()
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to analyse")
    max_length = settings.max_length or int(getattr(model.config, "max_tokens", 512))
    encoded = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    if (lengths == 0).any():
        raise ValueError(f"{int((lengths == 0).sum())} text(s) have no tokens, e.g. index "
                         f"{int(np.flatnonzero(lengths == 0)[0])}: remove empty texts first")
    if (lengths >= max_length).any():  # documented policy: truncate to the model's limit, say so
        import logging

        logging.getLogger(__name__).warning("%d text(s) reached max_length=%d tokens and were truncated",
                                            int((lengths >= max_length).sum()), max_length)
    model.eval()
    previous_threads = torch.get_num_threads()
    if settings.num_threads:  # on an oversubscribed CPU one thread avoids OpenMP barrier stalls
        torch.set_num_threads(settings.num_threads)
    try:
        return _run_all(model, tokenizer, texts, labels, settings, progress, cache_dir, encoded, lengths)
    finally:
        torch.set_num_threads(previous_threads)


def _run_all(model, tokenizer, texts, labels, settings, progress, cache_dir, encoded, lengths):
    from hf_attn.analysis.sharding import run_sharded, scatter_rows

    batches = length_batches(lengths, settings.token_budget)
    key = _settings_key(settings, model, lengths) if cache_dir else None
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def compute(number, rows):  # seeded by the batch number only: the same draws in any process
        ids, mask = pad_batch([encoded[i] for i in rows], tokenizer.pad_token_id or 0)
        return _run_batch(model, ids, mask, settings, settings.seed * 1_000_003 + 2 * number, timings)

    # Batches are cached atomically in cache_dir (a killed run resumes) and, under
    # `accelerate launch`, split between the processes and gathered on every one (hf_attn.analysis.sharding).
    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, progress=progress,
                          desc="J&W battery")
    per_row = scatter_rows(batches, results, len(texts))
    total = time.perf_counter() - started

    keep = _attended_positions(model, lengths)  # J&W's markers dropped from ids and lengths
    instances = JWInstances(
        input_ids=[np.asarray(e) if k is None else np.asarray(e)[k] for e, k in zip(encoded, keep)],
        labels=None if labels is None else np.asarray(list(labels), dtype=np.int64),
        **_instance_fields(per_row))
    if keep[0] is not None:
        lengths = np.array([int(k.sum()) for k in keep], dtype=np.int64)
    summary = battery_summary(instances, lengths, settings, total, timings)
    return instances, summary


def _attended_positions(model, lengths: np.ndarray) -> list:
    """Per instance, the boolean positions of its tokens that the model attends over (None for
    all of them: a model without J&W's markers)."""
    width = int(lengths.max())
    mask = torch.arange(width).unsqueeze(0) < torch.as_tensor(lengths).unsqueeze(1)
    attended = attended_mask(model, mask)
    if attended is mask:
        return [None] * len(lengths)
    return [row[:n] for row, n in zip(attended.numpy(), lengths.tolist())]


def _instance_fields(per_row: list[dict]) -> dict:
    """Per-row results (:func:`_batch_rows` rows, in instance order) → the analysis fields of
    :class:`JWInstances`: ragged per-token lists, stacked fixed-size arrays."""
    ragged = ("attention", "gradient", "loo", "adversary_attention")
    stacked = ("probabilities", "permutation_tvd", "adversary_probabilities", "adversary_tvd",
               "adversary_jsd", "eps_max_jsd")
    return ({name: [r[name] for r in per_row] for name in ragged}
            | {name: np.stack([r[name] for r in per_row]) for name in stacked})


def battery_summary(instances, lengths: np.ndarray, settings, total: float,
                    timings: dict[str, float]) -> dict:
    """Summary of a finished battery from its per-instance results (sets
    ``instances.predictions``): Table 2 per predicted class (τ of attention vs gradient / LOO and
    gradient vs LOO, values within ``settings.tie_tolerance`` tied first), permutation and
    adversary summaries, timings. Shared by the single-sequence and the sentence-pair batteries.

    Instances with fewer than 2 tokens are skipped alike by all five statistics (no τ; a single
    token's permutations and adversaries cannot move its attention, Δŷ = JSD = 0): each block
    counts them in ``skipped``, ``length.single_token`` gives the total."""
    from hf_attn.analysis.jw.summary import TIE_TOLERANCE, adversary_summary, correlation_summary, permutation_summary

    instances.predictions = instances.probabilities.argmax(-1)
    num_classes = instances.probabilities.shape[1]
    predictions, max_attention = instances.predictions, instances.max_attention
    ties = getattr(settings, "tie_tolerance", TIE_TOLERANCE)
    summary = {
        "num_instances": len(lengths), "num_classes": num_classes,
        "length": {"mean": float(lengths.mean()), "max": int(lengths.max()),
                   "single_token": int((lengths < 2).sum())},
        "predicted_class_counts": np.bincount(predictions, minlength=num_classes).tolist(),
        "tau_gradient": correlation_summary(instances.attention, instances.gradient, predictions,
                                            num_classes, settings.alpha, tie_tolerance=ties),
        "tau_loo": correlation_summary(instances.attention, instances.loo, predictions, num_classes,
                                       settings.alpha, tie_tolerance=ties),
        "tau_gradient_loo": correlation_summary(instances.gradient, instances.loo, predictions,
                                                num_classes, settings.alpha, tie_tolerance=ties),
        "permutation": permutation_summary(instances.permutation_tvd, max_attention, predictions,
                                           num_classes, lengths=lengths),
        "adversary": adversary_summary(instances.adversary_tvd, instances.adversary_jsd,
                                       max_attention, predictions, settings.eps, num_classes,
                                       lengths=lengths),
        "seconds": {"total": total, **timings},
    }
    for name, key in (("attention_gradient", "tau_gradient"), ("attention_loo", "tau_loo"),
                      ("gradient_loo", "tau_gradient_loo")):
        block = summary[key]
        valid = np.asarray(block["valid"], dtype=bool)
        instances.kendall[name] = (np.where(valid, block["tau"], np.nan), np.where(valid, block["pvalue"], np.nan))
    # the batched ε-max JSD and the summary's recomputation from (TVD, JSD) must agree
    counted = summary["adversary"]["valid"]
    if not np.allclose(summary["adversary"]["eps_max_jsd"][counted], instances.eps_max_jsd[counted], atol=1e-6):
        raise RuntimeError("inconsistent ε-max JSD between the optimiser and the summary")
    if instances.labels is not None:
        summary["accuracy"] = float((predictions == instances.labels).mean())
    return summary


# ----------------------------------------------------------------------------------------------
# `hf-attn analyze DIR --battery jw`


def load_model_and_split(model_dir: str, split: str = "test"):
    """``(model, tokenizer, texts, labels, label_names, dataset name)`` for a folder written by
    ``hf-attn train`` (its run.json names the dataset)."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import settings_from_run, task_of

    run = settings_from_run(model_dir, needed_by="the jw battery")
    model, tokenizer = load_model_folder(model_dir, "hf_attn")
    task = task_of(run)
    if split not in task.splits:
        raise ValueError(f"split {split!r} not in {list(task.splits)}")
    data = task.splits[split]
    if "text" not in data.column_names:
        raise ValueError(f"the jw battery needs single-text data; {task.name} has {data.column_names}")
    return model, tokenizer, list(data["text"]), list(data["label"]), task.label_names, task.name


def _instance_analysis_row(instances: JWInstances, i: int) -> dict:
    """Instance ``i``'s results as a JSON-ready dict (shared by the single and pair ``instances.jsonl``)."""
    return {"label": None if instances.labels is None else int(instances.labels[i]),
            "prediction": int(instances.predictions[i]),
            "probabilities": instances.probabilities[i].tolist(),
            "attention": instances.attention[i].tolist(), "gradient": instances.gradient[i].tolist(),
            "loo": [None if not np.isfinite(v) else float(v) for v in instances.loo[i]],
            "permutation_tvd_median": float(np.median(instances.permutation_tvd[i])),
            "adversary_tvd": instances.adversary_tvd[i].tolist(),
            "adversary_jsd": instances.adversary_jsd[i].tolist(),
            "eps_max_jsd": float(instances.eps_max_jsd[i]),
            "adversary_attention": instances.adversary_attention[i].tolist(),
            # J&W Table 2's per-instance statistic (null: fewer than 2 tokens or a constant ranking)
            "kendall_tau": {name: _finite_or_none(tau[i]) for name, (tau, _) in instances.kendall.items()},
            "kendall_pvalue": {name: _finite_or_none(p[i]) for name, (_, p) in instances.kendall.items()}}


def _finite_or_none(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def _instance_rows(instances: JWInstances, tokenizer):
    for i in range(len(instances.attention)):
        yield {"index": i, "tokens": tokenizer.convert_ids_to_tokens([int(t) for t in instances.input_ids[i]]),
               **_instance_analysis_row(instances, i)}


def settings_from_options(options) -> JWSettings:
    defaults = JWSettings()
    return JWSettings(
        num_permutations=getattr(options, "jw_permutations", defaults.num_permutations),
        k=getattr(options, "jw_adversaries", defaults.k), lam=getattr(options, "jw_lambda", defaults.lam),
        eps=getattr(options, "jw_eps", defaults.eps), steps=getattr(options, "jw_steps", defaults.steps),
        lr=getattr(options, "jw_lr", defaults.lr), seed=getattr(options, "seed", defaults.seed),
        token_budget=getattr(options, "jw_token_budget", defaults.token_budget),
        gradient_token_budget=getattr(options, "jw_gradient_token_budget", defaults.gradient_token_budget),
        loo_token_budget=getattr(options, "jw_loo_token_budget", defaults.loo_token_budget),
        num_threads=getattr(options, "jw_threads", defaults.num_threads),
        tie_tolerance=getattr(options, "jw_tie_tolerance", defaults.tie_tolerance))


def jw_battery_runner(model_dir: str, output_dir: str, options) -> dict:
    """``hf-attn analyze DIR --battery jw``: run the battery on ``options.split`` and write
    ``OUT/results.json`` (every summary number, parameters, versions; atomic), ``OUT/instances.jsonl``
    (per-instance arrays) and the figures ``OUT/fig*.png``. Batches are cached in ``OUT/cache`` so
    a killed run resumes. Sentence-pair (NLI) models go to :mod:`.jw_pair` (premise attention)."""
    from hf_attn.analysis.jw.pair import is_pair_model_dir, pair_jw_battery_runner

    if is_pair_model_dir(model_dir):
        return pair_jw_battery_runner(model_dir, output_dir, options)
    from hf_attn.training.engine import environment_versions, write_json_atomic
    from hf_attn.analysis.jw.figures import write_jw_figures
    from hf_attn.analysis.jw.summary import PUBLISHED_SST, strip_arrays

    split = getattr(options, "split", "test")
    settings = settings_from_options(options)
    model, tokenizer, texts, labels, label_names, dataset = load_model_and_split(model_dir, split)
    limit = getattr(options, "jw_max_instances", None)
    if limit:
        texts, labels = texts[:limit], labels[:limit]
    os.makedirs(output_dir, exist_ok=True)
    progress = not getattr(options, "quiet", False)
    cache_dir = None if getattr(options, "jw_no_cache", False) else os.path.join(output_dir, "cache")
    instances, summary = run_jw_battery(model, tokenizer, texts, labels, settings, progress=progress,
                                        cache_dir=cache_dir)
    from hf_attn.analysis.sharding import distributed_world_size, is_main_process

    if not is_main_process():  # `accelerate launch`: every process has all results; one writes
        return {"battery": "jw", "main_process": False}
    figures = write_jw_figures(instances, summary, output_dir, tokenizer, label_names,
                               model_name=f"{model.config.encoder}+{model.config.attention}")
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"), _instance_rows(instances, tokenizer))
    results = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4",
        "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": split,
        "label_names": label_names,
        "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                  "variant": model.config.variant},
        "parameters": asdict(settings), "summary": strip_arrays(summary),
        "published": PUBLISHED_SST if dataset == "sst" else None,
        "figures": {name: os.path.basename(path) for name, path in figures.items()},
        "instances_file": "instances.jsonl", "processes": distributed_world_size(),
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    if cache_dir:  # finished: the per-batch cache is only needed to resume
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
    if progress:
        print(format_summary(results))
    return results


def _fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def format_summary(results: dict) -> str:
    """A short human-readable table of results.json."""
    s = results["summary"]
    names = results.get("label_names") or [str(c) for c in range(s["num_classes"])]
    lines = [f"J&W battery: {results['model_dir']} [{results['split']}], {s['num_instances']} instances"
             + (f", accuracy {s['accuracy']:.3f}" if "accuracy" in s else "")]
    for key, title in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO)"),
                       ("tau_gradient_loo", "τ(gradient, LOO)")):
        parts = [f"{names[int(c)]}: {_fmt(v['mean'])}±{_fmt(v['std'], 2)} sig {_fmt(v['fraction_significant'], 2)}"
                 f" (n={v['count']}, skipped {v['skipped']})" for c, v in s[key]["per_class"].items()]
        lines.append(f"  {title:24s} " + "; ".join(parts))
    lines.append("  permutation Δŷ_med        " + "; ".join(
        f"{names[int(c)]}: median {_fmt(v['median'], 4)}" for c, v in s["permutation"]["per_class"].items()))
    lines.append(f"  ε-max JSD (ε={s['adversary']['eps']})     " + "; ".join(
        f"{names[int(c)]}: mean {_fmt(v['mean'])} feasible {_fmt(v['fraction_feasible'], 2)}"
        for c, v in s["adversary"]["per_class"].items()))
    lines.append("  seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in s["seconds"].items()))
    return "\n".join(lines)


def add_options(parser) -> None:
    g = parser.add_argument_group("jw battery (Jain & Wallace 2019 §4)")
    g.add_argument("--jw-permutations", type=int, default=100, help="permutations per instance (Alg. 2)")
    g.add_argument("--jw-adversaries", type=int, default=5, help="k adversaries per instance (Alg. 3)")
    g.add_argument("--jw-lambda", type=float, default=500.0, help="λ of the relaxed Eq. 1")
    g.add_argument("--jw-eps", type=float, default=0.01, help="ε: allowed TVD of an adversary's output")
    g.add_argument("--jw-steps", type=int, default=500, help="Adam steps of the adversary search")
    g.add_argument("--jw-lr", type=float, default=0.01, help="Adam learning rate of the adversary search")
    g.add_argument("--jw-token-budget", type=int, default=16384, help="padded tokens per batch")
    g.add_argument("--jw-gradient-token-budget", type=int, default=4096,
                   help="padded tokens per gradient forward + backward")
    g.add_argument("--jw-loo-token-budget", type=int, default=32768,
                   help="padded tokens per chunk of leave-one-out deletions")
    g.add_argument("--jw-tie-tolerance", type=float, default=1e-6,
                   help="importances within this absolute distance count as tied in Kendall τ "
                        "(float32 noise; 0: rank the raw values)")
    g.add_argument("--jw-threads", type=int, default=None,
                   help="torch threads (1 is much faster on an oversubscribed CPU)")
    g.add_argument("--jw-max-instances", type=int, default=None, help="only the first N instances")
    g.add_argument("--jw-no-cache", action="store_true", help="do not cache batches for resuming")


register_battery(Battery("jw", settings_class=argparse.Namespace, add_options=add_options,
                         settings_from_args=lambda args: args, run=jw_battery_runner))  # TODO(typed settings)
