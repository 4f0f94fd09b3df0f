"""Leave-one-out importance (Jain & Wallace 2019, §4.1 and Alg. 1).

Δŷ_t = TVD(ŷ(x₋t), ŷ(x)): x₋t is x with token t removed (the sequence gets shorter and attention
renormalises over the remaining tokens). :func:`leave_one_out` runs every deletion of a padded batch
as padded forwards, with exact shortcuts for token-local (Average) encoders and one-layer BiLSTMs;
:func:`pair_leave_one_out` deletes premise tokens of a sentence pair, the hypothesis unchanged.

Shapes: B instances, T tokens (right-padded), N deletions, C classes, U hypothesis tokens.
"""

from __future__ import annotations

import torch

from hf_attn.core.measures import tvd
from hf_attn.methods.masks import attended_mask, input_mask
from hf_attn.models.modeling_hf_attn import AdditiveAttention, masked_softmax, reverse_within_length


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
    mask = input_mask(attention_mask, input_ids)
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
    mask = input_mask(attention_mask, input_ids)
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


@torch.no_grad()
def pair_leave_one_out(model, input_ids, attention_mask, hypothesis_input_ids,
                       hypothesis_attention_mask, token_budget: int = 32768,
                       probabilities: torch.Tensor | None = None) -> torch.Tensor:
    """Δŷ_t = TVD(ŷ(x₋t, hyp), ŷ(x, hyp)) for every premise token t ``(B, T)`` (premise shortened;
    the hypothesis unchanged). Premise ids and mask ``(B, T)``, hypothesis ``(B, U)``; all deletions
    run in chunks of at most ``token_budget`` padded premise + hypothesis tokens; ``probabilities``
    ``(B, C)`` = ŷ(x, hyp) if already computed. Pads 0; single-token premises NaN (skipped
    downstream)."""
    mask = attention_mask.bool()
    hyp_mask = hypothesis_attention_mask.bool()
    model.eval()
    if probabilities is None:
        probabilities = model(input_ids=input_ids, attention_mask=mask,
                              hypothesis_input_ids=hypothesis_input_ids,
                              hypothesis_attention_mask=hyp_mask).logits.softmax(-1)
    ids, new_mask, instance, position = deletion_batch(input_ids, mask)
    result = torch.zeros(mask.shape, dtype=probabilities.dtype, device=input_ids.device)
    result[mask.sum(1) == 1] = float("nan")
    result[~mask] = 0.0
    if len(instance) == 0:
        return result
    width = ids.shape[1] + hypothesis_input_ids.shape[1]
    rows_per_chunk = max(1, token_budget // max(width, 1))
    lengths, hyp_lengths = new_mask.sum(1), hyp_mask.sum(1)
    for start in range(0, len(instance), rows_per_chunk):
        sl = slice(start, start + rows_per_chunk)
        rows = instance[sl]
        chunk_width, hyp_width = int(lengths[sl].max()), int(hyp_lengths[rows].max())
        out = model(input_ids=ids[sl, :chunk_width], attention_mask=new_mask[sl, :chunk_width],
                    hypothesis_input_ids=hypothesis_input_ids[rows, :hyp_width],
                    hypothesis_attention_mask=hyp_mask[rows, :hyp_width])
        result[rows, position[sl]] = tvd(out.logits.softmax(-1), probabilities[rows])
    return result


__all__ = ["deletion_batch", "leave_one_out", "pair_leave_one_out"]
