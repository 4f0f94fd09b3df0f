"""The texts as the table scores them: each text's real tokens and content positions, its inputs with
tokens deleted, the shared cache that scores every distinct input once, and batches trimmed to
their longest text."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hf_attn.core.batching import length_batches
from hf_attn.core.seeding import seed_of, text_hash, token_hash


class _ProbabilityCache:
    """ŷ of token-id tuples, each distinct tuple scored once, in length-sorted batched forwards."""

    def __init__(self, adapter, budget: int):
        self.adapter, self.budget = adapter, budget
        self.store: dict[tuple, np.ndarray] = {}
        self.requested = 0

    def get(self, sequences) -> np.ndarray:
        sequences = [tuple(s) for s in sequences]
        self.requested += len(sequences)
        missing = list(dict.fromkeys(s for s in sequences if s not in self.store))
        if missing:
            lengths = np.array([len(s) for s in missing])
            for group in length_batches(lengths, self.budget):
                rows = [list(missing[i]) for i in group]
                with torch.no_grad():
                    probs = self.adapter.logits(self.adapter.from_token_lists(rows)).softmax(-1).double().cpu().numpy()
                for i, p in zip(group, probs):
                    self.store[missing[i]] = p
        return np.stack([self.store[s] for s in sequences])


@dataclass
class _Instance:
    tokens: np.ndarray  # real positions' ids
    content: np.ndarray  # bool over real positions


def _instances(adapter, batch) -> list[_Instance]:
    out = []
    for b in range(len(batch)):
        real = batch.attention_mask[b].bool()
        out.append(_Instance(batch.input_ids[b][real].cpu().numpy(), batch.content[b][real].cpu().numpy()))
    return out


def _real_scores(batch, scores: torch.Tensor) -> list[np.ndarray]:
    return [scores[b][batch.attention_mask[b].bool()].detach().double().cpu().numpy() for b in range(len(batch))]


def _subset(instance: _Instance, keep_content: np.ndarray, pad: int) -> tuple:
    """The instance's tokens with only the content positions in ``keep_content`` (bool over the content
    tokens) kept, special tokens always kept; an empty result is one pad token."""
    keep = ~instance.content.copy()
    keep[np.flatnonzero(instance.content)[keep_content]] = True
    tokens = tuple(int(t) for t in instance.tokens[keep])
    return tokens or (pad,)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Rank (0 = most important) of each content token, ties by position."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=int)
    ranks[order] = np.arange(len(scores))
    return ranks


def _sentence_generator(settings, method: str, tokens: np.ndarray, kind: str, draw: int) -> torch.Generator:
    """A generator seeded by the sentence's own tokens, ``settings.seed``, the method, the kind of
    draw and the draw's number, never by the sentence's place in a batch or the other texts: the
    soft metrics' Bernoulli masks (Zhao & Aletras 2023 §3) and the random floor's scores are each a
    function of the sentence alone."""
    return _draw_generator(_sentence_key(settings, method, tokens, kind), draw)


def _sentence_key(settings, method: str, tokens: np.ndarray, kind: str) -> list[int]:
    """The entropy of :func:`_sentence_generator` before the draw's number (computed once per row)."""
    return [settings.seed, text_hash(method), text_hash(kind), token_hash(tokens)]


def _draw_generator(key: list[int], draw: int) -> torch.Generator:
    """The generator of draw ``draw`` of the sentence whose :func:`_sentence_key` is ``key``."""
    return torch.Generator().manual_seed(seed_of(key + [draw]))


def _trim(batch, width: int, adapter):
    """A batch cut to ``width`` positions (its longest row): right padding keeps the first
    positions, left padding the last (:meth:`hf_attn.adapters.base.Batch.trimmed`)."""
    return batch.trimmed(width, bool(getattr(adapter, "left_padding", False)))
