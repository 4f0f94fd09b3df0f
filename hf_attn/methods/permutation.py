"""Attention permutation (Jain & Wallace 2019, §4.2.1 and Alg. 2).

The attention weights α̂ are shuffled among the real tokens with the encoder states h held fixed;
Δŷ = TVD(ŷ(h, α_p), ŷ(h, α̂)) per permutation, and Δŷ_med, its median over the permutations, says
how much the output depends on which token gets which weight. Sentence pairs: the premise
attention is permuted with the hypothesis query Q held fixed (J&W §3).

Shapes: B instances, T tokens (right-padded), P permutations, D hidden size, C classes.
"""

from __future__ import annotations

import torch

from hf_attn.core.measures import tvd
from hf_attn.methods.pair_query import bind_query


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
    among the real tokens (h unchanged) → ``(B, P)``. Δŷ_med is its median over P. ``hidden_states``
    ``(B, T, D)``, ``attention`` α̂ and ``attention_mask`` ``(B, T)`` (the positions permuted).

    All permutations of the batch go through the decoder in one call of
    ``model.logits_from_token_logits`` (exact: the decoder is linear and Σα = 1).
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


def pair_permutation_tvd(model, hidden_states, attention, attention_mask, query,
                         num_permutations: int = 100, generator: torch.Generator | None = None,
                         permutations: torch.Tensor | None = None) -> torch.Tensor:
    """J&W Alg. 2 on the premise attention with the hypothesis query ``query`` ``(B, D)`` fixed →
    ``(B, P)`` TVDs: :func:`permutation_tvd` on the premise states ``(B, T, D)``, α̂ and mask
    ``(B, T)`` of a pair model."""
    return permutation_tvd(bind_query(model, query), hidden_states, attention, attention_mask,
                           num_permutations, generator, permutations)


__all__ = ["pair_permutation_tvd", "permutation_tvd", "random_permutations"]


def content_permutations(content: torch.Tensor, num_permutations: int,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """``(B, P, T)`` index tensors: each row permutes the content positions of its instance among
    themselves (uniformly at random) and maps every other position (special tokens, pads) to
    itself. The draw runs on the generator's device (the CPU by default, so a seed gives the same
    permutations on every device) and the result moves to ``content``'s device."""
    device = content.device
    content = content.cpu()
    batch, steps = content.shape
    keys = torch.rand((batch, num_permutations, steps), generator=generator)
    positions = torch.arange(steps)
    order = torch.where(content.unsqueeze(1), keys, torch.full_like(keys, 2.0)).argsort(-1)  # content first
    slots = torch.where(content, positions, steps + positions).argsort(-1)  # content positions, then the rest
    # the j-th content slot receives the j-th shuffled content position; the rest stay in place
    permutation = positions.expand(batch, num_permutations, steps).clone()
    count = content.sum(1)  # (B,)
    take = positions.unsqueeze(0) < count.unsqueeze(1)  # (B, T): the first `count` slots
    target = slots.unsqueeze(1).expand_as(order)
    permutation.scatter_(-1, target, torch.where(take.unsqueeze(1), order, target))
    return permutation.to(device)


@torch.no_grad()
def permuted_attention_tvd(adapter, batch, forward, num_permutations: int = 100,
                           generator: torch.Generator | None = None,
                           permutations: torch.Tensor | None = None) -> torch.Tensor:
    """J&W Alg. 2 over an adapter: TVD(ŷ(α_p), ŷ) ``(B, P)`` for P random permutations of the
    explained rows over the content tokens, everything else unchanged. With ``heads="mean"`` the
    same permutation is applied to every head's row (so the explained head mean is permuted);
    with one head, only that head's row. Δŷ_med is the median over P. ``permutations`` (B, P, T)
    overrides the draw (:func:`content_permutations`)."""
    if permutations is None:
        permutations = content_permutations(batch.content, num_permutations, generator)
    count, draws, steps = permutations.shape
    rows = forward.head_rows  # (B, H, T)
    if adapter.spec.heads == "mean":
        index = permutations.unsqueeze(2).expand(count, draws, rows.shape[1], steps)
        weights = rows.unsqueeze(1).expand(count, draws, *rows.shape[1:]).gather(-1, index)  # (B, P, H, T)
        per_head = True
    else:
        own = rows[:, int(adapter.spec.heads)]
        weights = own.unsqueeze(1).expand(count, draws, steps).gather(-1, permutations)
        per_head = False
    logits = adapter.logits_under(batch, weights, per_head, forward)
    return tvd(logits.float().softmax(-1), forward.probabilities.unsqueeze(1))
