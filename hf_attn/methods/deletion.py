"""Leave-one-out by deletion, printed as LOO-drop (Li, Monroe & Jurafsky 2016, "Understanding Neural Networks through
Representation Erasure", §3, Eq. 1: the importance of a unit is the drop of the model's score when
it is erased; Jain & Wallace 2019 §4.1 use the same deletions with a TVD).

importance_t = ŷ_c(x) − ŷ_c(x₋t), x₋t the text with token t **deleted** (the sequence shortened,
special tokens kept: the same removal as the ERASER metrics), c the class predicted for x; signed
(positive: the token supports c). Every deletion of the batch is built with index tensors and
scored in length-sorted batches of the adapter's token budget, each padded to its longest row (the
adapter's ``from_token_lists`` pads them its way; its ``logits`` splits them into its forwards).
"""

from __future__ import annotations

import torch

from hf_attn.core import deadline
from hf_attn.core.batching import length_batches
from hf_attn.methods.kept_logits import keep as keep_logits_of


@torch.no_grad()
def leave_one_out_deletion(adapter, batch, target_class: torch.Tensor | None = None,
                           foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` ŷ_c(x) − ŷ_c(x₋t) for every text token t (module docstring); 0 on pads and special
    tokens. ``foil_class``: the contrastive erasure (ŷ_c − ŷ_f)(x) − (ŷ_c − ŷ_f)(x₋t) (Yin & Neubig
    2022 §2.2, probabilities as their code's ``erasure_scores``). A text of one token: ŷ_c(x) minus ŷ_c of the model's empty input (the specials alone;
    hf_attn's own models without markers: one [PAD]); NaN where there is none (a tokenizer that adds
    no special tokens leaves zero tokens: :func:`hf_attn.methods.one_token.empty_input_refusal`)."""
    from hf_attn.methods.one_token import empty_input_refusal

    logits = adapter.logits(batch)
    keep_logits_of(batch, logits)
    probabilities = logits.softmax(-1)
    if target_class is None:
        target_class = probabilities.argmax(-1)
    real = batch.attention_mask.bool()
    instance, position = batch.content.nonzero(as_tuple=True)  # one deletion per text token
    keep = real[instance].clone()
    keep[torch.arange(len(instance), device=keep.device), position] = False
    ids = batch.input_ids[instance]
    # kept tokens first, in order (a stable sort of 0 = kept / 1 = dropped), then cut at each length
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
    ids = ids.gather(1, order).tolist()
    lengths = keep.sum(1).tolist()
    pad = getattr(adapter, "pad_id", 0)
    no_empty_input = empty_input_refusal(adapter) is not None
    undefined = torch.tensor([n == 0 and no_empty_input for n in lengths], dtype=torch.bool, device=instance.device)
    sequences = [row[:n] if n else [pad] for row, n in zip(ids, lengths)]
    if bool(undefined.any()):  # nothing left to run the model on: undefined (NaN), the other rows as they are
        sequences = [s for s, u in zip(sequences, undefined.tolist()) if not u]
    # length-sorted batches, each padded to its own longest row (padding all the deletions to the
    # batch's longest one cost up to twice the FLOPs on mixed lengths); rows are independent
    deleted = torch.empty(len(sequences), probabilities.shape[-1], dtype=probabilities.dtype,
                          device=probabilities.device)
    for group in deadline.paced(length_batches([len(s) for s in sequences], getattr(adapter, "token_budget", 8192))):
        rows = torch.as_tensor(group, device=deleted.device)
        deleted[rows] = adapter.logits(adapter.from_token_lists([sequences[i] for i in group])).softmax(-1).to(
            deleted.dtype)
    defined = ~undefined
    c = target_class[instance[defined]]
    drop = probabilities[instance[defined], c] - deleted.gather(1, c[:, None]).squeeze(1)
    if foil_class is not None:
        f = foil_class.to(c.device)[instance[defined]]
        drop = drop - (probabilities[instance[defined], f] - deleted.gather(1, f[:, None]).squeeze(1))
    out = torch.zeros(real.shape, dtype=torch.float32, device=real.device)
    out[instance[defined], position[defined]] = drop.float()
    out[instance[undefined], position[undefined]] = float("nan")
    return out


__all__ = ["leave_one_out_deletion"]
