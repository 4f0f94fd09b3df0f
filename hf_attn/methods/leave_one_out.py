"""Leave-one-out importance (Jain & Wallace 2019, §4.1 and Alg. 1), printed as LOO-TVD.

Δŷ_t = TVD(ŷ(x₋t), ŷ(x)): x₋t is x with token t removed (the sequence gets shorter and attention
renormalises over the remaining tokens). :func:`leave_one_out` runs every deletion of a padded batch
as padded forwards, with exact shortcuts for token-local (Average) encoders and one-layer BiLSTMs;
:func:`pair_leave_one_out` deletes premise tokens of a sentence pair, the hypothesis unchanged.

Shapes: B instances, T tokens (right-padded), N deletions, C classes, U hypothesis tokens.
"""

from __future__ import annotations

import torch

from hf_attn.adapters.pair import PairBatch
from hf_attn.core.measures import tvd
from hf_attn.models.masks import attended_mask, input_mask
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
                  method: str = "auto") -> torch.Tensor:
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
      and the backward run before t are recomputed, every deletion of a chunk of sentences in one
      batched recurrence (``_lstm_leave_one_out``): half the LSTM work, and the input half of the
      gates computed once per token.
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
        _lstm_leave_one_out(model, input_ids, mask, instance, position, probabilities, result, token_budget)
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


def _gate_inputs(lstm: torch.nn.LSTM, inputs: torch.Tensor) -> torch.Tensor:
    """The input half of a one-layer ``nn.LSTM``'s gates, W_ih x_t + b_ih + b_hh ``(B, T, 4H)``:
    one matmul over every token. Every rerun of a deletion reads the same tokens, so this part is
    computed once and only the recurrent half runs per deletion (it is ~70 % of the LSTM's
    multiply-adds at the papers' 300-d inputs and H = 128)."""
    return torch.nn.functional.linear(inputs, lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0)


def _lstm_cell_states(lstm: torch.nn.LSTM, gate_inputs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """Cell states ``(B, T, H)`` of a one-layer ``nn.LSTM`` that produced outputs ``hidden``
    ``(B, T, H)`` (zero initial state) from gate inputs ``(B, T, 4H)`` (:func:`_gate_inputs`). The
    gates at every step follow from h_{t−1} in one matmul; only c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t is
    sequential (one op per step)."""
    previous = torch.nn.functional.pad(hidden[:, :-1], (0, 0, 1, 0))
    gates = gate_inputs + previous @ lstm.weight_hh_l0.t()
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


def _lstm_step(gates: torch.Tensor, cell: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """One LSTM step from pre-activations ``gates`` ``(n, 4H)`` (PyTorch's order i, f, g, o; the
    tensor is overwritten): updates ``cell`` ``(n, H)`` in place, writes h ``(n, H)`` to ``out``."""
    i, f, g, o = gates.chunk(4, dim=1)
    g = g.tanh()
    gates.sigmoid_()  # i, f, o (the g slot was read above)
    cell.mul_(f).addcmul_(i, g)
    return torch.mul(o, cell.tanh(), out=out)


def _deletion_runs(lstm: torch.nn.LSTM, gate_inputs: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                   readout: torch.Tensor, forward: bool, columns: slice) -> torch.Tensor:
    """The LSTM reruns of the deletion columns ``columns`` (a block [c₀, c₁)) of a chunk of sentences
    at once, projected by ``readout`` ``(R, H)``.

    ``gate_inputs`` ``(T, n, 4H)``: W_ih x_t + b (time-major, :func:`_gate_inputs`); ``h0``, ``c0``
    ``(T, n, H)``: the start state of deletion column i (forward: the state at i−1; backward: at
    i+1). Forward: column i runs over tokens i+1, i+2, … and its step s lands on position i+s of
    x₋i; backward: over tokens i−1, i−2, … and step s lands on position i−1−s. At step s the
    running columns are a contiguous block (forward: i < T−1−s reading tokens i+1+s; backward:
    i > s reading tokens i−1−s), so each step is one matmul over block × sentences with the input
    gates read as a slice, no gather. Columns past a short sentence's end run on padding and are
    never read (the batch is length-sorted, so this is little work).

    Returns ``(c₁−c₀, T−1, n, R)``: entry [i − c₀, q] = M h of deletion i at position q of x₋i,
    valid for q ≥ i (forward) or q < i (backward); a strided view over the step-ordered outputs.
    """
    steps, count, _ = gate_inputs.shape
    width = steps - 1
    first, last = columns.start, columns.stop
    blocks = last - first
    rows = readout.shape[0]
    unit = count * rows
    # [column, step (backward: reversed)], with room before and after for the skewed view below
    buffer = gate_inputs.new_empty((first + blocks * width + width) * unit)
    outputs = buffer[first * unit:(first + blocks * width) * unit].view(blocks, width, count, rows)
    if width == 0:
        return outputs
    recurrent, readout_t = lstm.weight_hh_l0.t().contiguous(), readout.t().contiguous()
    hidden, cell = h0[columns].clone(), c0[columns].clone()
    for s in range(width):
        if forward:  # columns i < T−1−s still run
            begin, end = first, min(last, width - s)
        else:  # columns i > s still run
            begin, end = max(first, s + 1), last
        n = end - begin
        if n <= 0:
            if forward:
                break
            continue
        block = slice(begin - first, end - first)
        read = slice(begin + 1 + s, end + 1 + s) if forward else slice(begin - 1 - s, end - 1 - s)
        gates = torch.addmm(gate_inputs[read].reshape(n * count, -1),
                            hidden[block].reshape(n * count, -1), recurrent)
        h = _lstm_step(gates, cell[block].view(n * count, -1), out=hidden[block].view(n * count, -1))
        outputs[block, s if forward else width - 1 - s] = (h @ readout_t).view(n, count, rows)
    strides = ((width - 1) * unit, unit, rows, 1)
    if forward:  # [i − c₀, q] = outputs[i − c₀, q − i]
        return buffer.as_strided((blocks, width, count, rows), strides, buffer.storage_offset())
    # [i − c₀, q] = outputs[i − c₀, width − 1 − (i − 1 − q)] = outputs[i − c₀, width − i + q]
    return buffer.as_strided((blocks, width, count, rows), strides, buffer.storage_offset() + width * unit)


def _lstm_leave_one_out(model, input_ids, mask, instance, position, probabilities, result,
                        token_budget: int) -> None:
    """Exact LOO for a one-layer BiLSTM (fills ``result`` at (``instance``, ``position``); J&W
    Alg. 1 leave-one-out).

    Deleting token i of a sentence of length L leaves its forward states before i and backward
    states after i unchanged; x₋i's other forward states are a forward run over x_{i+1..L−1} from
    (h→, c→)_{i−1}, its other backward states a backward run over x_{i−1..0} from (h←, c←)_{i+1}.
    Only these runs are computed (:func:`_deletion_runs`: every deletion column of a chunk of
    sentences in one batched recurrence; half the LSTM work of re-encoding every x₋i, and the
    input half of the gates, W_ih x, is computed once per token). Attention and decoder act on
    h' = [h→; h←] (+ e) through linear maps M (:func:`_readout`), so M h' = M→h→ + M←h← (+ M_e e):
    unchanged halves come from the sentence's own projections, rerun halves are projected as they
    are computed; only φ's tanh and the softmax run per deletion position. Chunks hold at most
    ``token_budget`` deletion positions (sentences × deletion columns × (T−1)); a sentence longer
    than √budget is split into blocks of deletion columns.
    """
    encoder = model.encoder
    forward_lstm, backward_lstm = encoder.forward_layers[0], encoder.backward_layers[0]
    size = forward_lstm.hidden_size
    dtype = probabilities.dtype
    readout, bias, num_attention = _readout(model)
    readout, bias = readout.to(dtype), bias.to(dtype)
    readout_fwd, readout_bwd = readout[:, :size].contiguous(), readout[:, size:2 * size].contiguous()
    variant_embedding = model.config.variant in ("concat", "residual")  # h' also holds e_t
    readout_emb = None
    if variant_embedding:
        readout_emb = readout[:, 2 * size:] if model.config.variant == "concat" else readout
    lengths = mask.sum(1)
    wanted = torch.zeros_like(mask)
    wanted[instance, position] = True
    # sentences in length order (the caller's batch may not be); chunks of ≤ token_budget positions.
    # Each chunk computes its own sentences' states and tables (memory bounded by the chunk, not
    # the batch: every per-token table is at most ~token_budget / (T − 1) tokens).
    order = torch.argsort(lengths, descending=True, stable=True)
    order = order[wanted[order].any(1)]
    begin = 0
    while begin < len(order):
        width = int(lengths[order[begin]])
        count = max(1, token_budget // max(width * (width - 1), 1))
        rows = order[begin:begin + count]
        begin += len(rows)
        if width < 2:
            continue
        inputs, tf, tb, te = _chunk_tables(model, forward_lstm, backward_lstm, input_ids[rows, :width],
                                           mask[rows, :width], readout_fwd, readout_bwd, bias, readout_emb)
        new_mask = torch.arange(width - 1, device=mask.device) < (lengths[rows] - 1).unsqueeze(1)  # (n, T−1)
        attended = attended_mask(model, new_mask).unsqueeze(0)
        # a long sentence alone exceeds the budget: its deletion columns go in blocks
        per_block = max(1, token_budget // (len(rows) * (width - 1)))
        for first in range(0, width, per_block):
            columns = slice(first, min(width, first + per_block))
            fwd = _deletion_runs(forward_lstm, *inputs[:3], readout_fwd, forward=True, columns=columns)
            bwd = _deletion_runs(backward_lstm, *inputs[3:], readout_bwd, forward=False, columns=columns)
            # (columns, n, T−1, R): deletion column i, sentence, position q of x₋i. Position q < i
            # keeps the forward half (token q) and takes the backward rerun; q ≥ i takes the forward
            # rerun and keeps the backward half (token q + 1); a slice per column, no masked double work
            projected = tf.new_empty(columns.stop - first, len(rows), width - 1, tf.shape[-1])
            by_position = projected.permute(0, 2, 1, 3)  # (columns, T−1, n, R) view
            for k, i in enumerate(range(first, columns.stop)):
                torch.add(tf[:i], bwd[k, :i], out=by_position[k, :i])
                torch.add(fwd[k, i:], tb[i + 1:], out=by_position[k, i:])
                if te is not None:  # the kept token's own M_e e: token q before i, q + 1 after
                    by_position[k, :i] += te[:i]
                    by_position[k, i:] += te[i + 1:]
            decoder_units = projected[..., num_attention:].clone()  # before the scores overwrite it
            attention = masked_softmax(_scores_from_readout(model, projected, num_attention), attended)
            units = torch.einsum("int,intk->ink", attention, decoder_units)
            deleted = model.expand_logits(units).softmax(-1)  # (columns, n, C)
            change = tvd(deleted, probabilities[rows].unsqueeze(0)).t()  # (n, columns)
            chunk_wanted = wanted[rows, columns]
            result[rows, columns] = torch.where(chunk_wanted, change.to(result.dtype), result[rows, columns])


def _chunk_tables(model, forward_lstm, backward_lstm, input_ids, mask, readout_fwd, readout_bwd, bias,
                  readout_emb):
    """What the deletion runs of a chunk of sentences ``(n, T)`` start from, time-major: the input
    gates and start states of every deletion column, ``[gates→, h0→, c0→, gates←, h0←, c0←]``
    (``(T, n, 4H)`` and ``(T, n, H)``; column i starts forward from the state at i−1, backward
    from the state at i+1, zero at the ends), and the sentence's own halves projected,
    ``M→h→_t + bias`` and ``M←h←_t + bias`` ``(T, n, R)`` (bias once), plus ``M_e e_t`` for the
    concat / residual variants (else None)."""
    dtype = readout_fwd.dtype
    size = forward_lstm.hidden_size
    embeddings = model.get_input_embeddings()(input_ids) * mask.unsqueeze(-1).to(dtype)
    h_fwd, _ = forward_lstm(embeddings)
    h_bwd_run, _ = backward_lstm(reverse_within_length(embeddings, mask))  # run order: token L−1 first
    gates_fwd, gates_bwd = _gate_inputs(forward_lstm, embeddings), _gate_inputs(backward_lstm, embeddings)
    c_fwd = _lstm_cell_states(forward_lstm, gates_fwd, h_fwd)
    c_bwd = reverse_within_length(_lstm_cell_states(
        backward_lstm, reverse_within_length(gates_bwd, mask), h_bwd_run), mask)
    keep = mask.unsqueeze(-1).to(dtype)
    h_bwd = reverse_within_length(h_bwd_run, mask) * keep  # token positions; 0 past the end
    c_bwd = c_bwd * keep
    zero = h_fwd.new_zeros(mask.shape[0], 1, size)
    h_fwd0, c_fwd0 = torch.cat([zero, h_fwd[:, :-1]], 1), torch.cat([zero, c_fwd[:, :-1]], 1)
    h_bwd0, c_bwd0 = torch.cat([h_bwd[:, 1:], zero], 1), torch.cat([c_bwd[:, 1:], zero], 1)

    def time_major(x):  # (n, T, ·) → (T, n, ·)
        return x.transpose(0, 1).contiguous()

    inputs = [time_major(x) for x in (gates_fwd, h_fwd0, c_fwd0, gates_bwd, h_bwd0, c_bwd0)]
    table_fwd = time_major(h_fwd @ readout_fwd.t() + bias)
    table_bwd = time_major(h_bwd @ readout_bwd.t() + bias)
    table_emb = time_major(embeddings @ readout_emb.t()) if readout_emb is not None else None
    return inputs, table_fwd, table_bwd, table_emb


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


def deletion_rows(batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every single-token deletion of a batch: ``(ids (N, T−1), mask (N, T−1), instance (N,),
    position (N,))``, one row per content position, the token removed and the rest shifted towards
    the removed slot (left- and right-padded rows alike keep their padding side)."""
    instance, position = batch.content.nonzero(as_tuple=True)
    steps = batch.input_ids.shape[1]
    j = torch.arange(steps - 1, device=batch.input_ids.device).unsqueeze(0)
    source = j + (j >= position.unsqueeze(1)).long()  # skip the deleted position
    return (batch.input_ids[instance].gather(1, source), batch.attention_mask[instance].gather(1, source),
            instance, position)


def deletion_reference(adapter, forward_probabilities: torch.Tensor) -> torch.Tensor | None:
    """The ŷ(x) to give :func:`deletion_importance` when a recording forward (``adapter.forward``)
    has computed them: those, for hf_attn's own models (one arithmetic for every forward); ``None``
    for other adapters, so that ŷ(x) is computed on the deletions' own path (``adapter.logits``: the
    fused attention kernel where the adapter checked it, while a recording forward runs the eager
    arithmetic) and each TVD compares like with like."""
    return forward_probabilities if getattr(adapter, "exact_model_methods", False) else None


@torch.no_grad()
def deletion_importance(adapter, batch, probabilities: torch.Tensor | None = None,
                        token_budget: int | None = None) -> torch.Tensor:
    """Leave-one-out over an adapter (J&W Alg. 1, §4.1): Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) ``(B, T)`` for
    each content token t (0 elsewhere), x₋t the sequence without t (one shorter). Every deletion of
    the batch runs in length-sorted chunks of at most ``token_budget`` padded tokens (default the
    adapter's), each chunk trimmed to its longest row. An adapter over hf_attn's own models
    (``adapter.exact_model_methods``, the BiLSTM/Average models) gets the exact :func:`leave_one_out`
    of its model.

    Deleting a text's only token leaves nothing to run the model on when the tokenizer adds no
    special tokens (e.g. GPT-2): that Δŷ is undefined and comes back as NaN (a one-token text has
    no ranking for τ either)."""
    if getattr(adapter, "exact_model_methods", False):
        if isinstance(batch, PairBatch):  # a sentence pair: premise tokens deleted, the hypothesis unchanged
            values = pair_leave_one_out(adapter.model, batch.input_ids, batch.attention_mask,
                                        batch.hypothesis_input_ids, batch.hypothesis_attention_mask,
                                        token_budget or adapter.token_budget, probabilities)
        else:
            values = leave_one_out(adapter.model, batch.input_ids, batch.attention_mask,
                                   token_budget or adapter.token_budget, probabilities)
        return torch.nan_to_num(values, nan=0.0) * batch.content
    if probabilities is None:
        probabilities = adapter.logits(batch).softmax(-1)
    ids, mask, instance, position = deletion_rows(batch)
    out = torch.zeros(batch.content.shape, dtype=torch.float32, device=batch.input_ids.device)
    if len(ids) == 0:
        return out
    budget = token_budget or adapter.token_budget
    lengths = mask.sum(1)
    empty = lengths == 0
    if empty.any():  # nothing left to run the model on: undefined
        out[instance[empty], position[empty]] = float("nan")
        ids, mask, instance, position, lengths = ids[~empty], mask[~empty], instance[~empty], position[~empty], lengths[~empty]
        if len(ids) == 0:
            return out
    order = lengths.argsort()
    rows = max(1, budget // max(int(lengths.max()), 1))
    for start in range(0, len(order), rows):
        chunk = order[start:start + rows]
        sub = adapter.batch_from_tensors(ids[chunk], mask[chunk])
        p = adapter.logits(sub).softmax(-1)
        out[instance[chunk], position[chunk]] = tvd(p, probabilities[instance[chunk]]).float()
    return out
