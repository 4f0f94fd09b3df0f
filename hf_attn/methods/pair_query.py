"""A sentence-pair (NLI) model with its hypothesis query Q fixed, seen as a single-sequence model
(Jain & Wallace 2019, §3: the premise attention is conditioned on the encoded hypothesis Q).

With Q fixed, the pair decoder has the single-sequence contract the permutation and adversary
methods use (``token_logits(h)``, ``logits_from_token_logits``, ``config``), so those methods run
unchanged on the premise attention.
"""

from __future__ import annotations

import torch


class _BoundQuery:
    """The single-sequence decoder contract (``token_logits(h)``, ``logits_from_token_logits``,
    ``config``) for a batch whose hypothesis query Q ``(B, D)`` is fixed."""

    def __init__(self, model, query: torch.Tensor):
        self.model, self.query, self.config = model, query, model.config

    def token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.token_logits(hidden, self.query)

    def logits_from_token_logits(self, token_logits: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        return self.model.logits_from_token_logits(token_logits, attention)


def bind_query(model, query: torch.Tensor) -> _BoundQuery:
    """A view of a pair model with Q ``(B, D)`` fixed, usable by
    :func:`hf_attn.methods.permutation.permutation_tvd` (and, for the ``"linear"`` pair decoder,
    :func:`hf_attn.methods.adversary.adversarial_attention`)."""
    return _BoundQuery(model, query)


__all__ = ["bind_query"]
