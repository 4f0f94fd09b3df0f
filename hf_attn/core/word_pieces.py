"""Word-piece values → word values: the one rule (a word's value is the **sum** of its pieces' values)
used wherever a tokenizer's pieces are shown or scored as words — the transformer adapters' word
display (:mod:`hf_attn.adapters.transformer_attention` re-exports these) and plausibility against
human rationales (:func:`hf_attn.core.plausibility.word_scores`). NumPy only."""

from __future__ import annotations

import numpy as np


def merge_word_pieces(values, word_ids) -> np.ndarray:
    """Word-level values from word-piece values: the value of a word is the **sum** of the values of
    its pieces (the pieces are the positions with the same ``word_ids`` entry of the fast tokenizer;
    special tokens, ``None``, are dropped). Summing keeps a distribution a distribution (attention
    over pieces → attention over words, the same total) and an additive importance additive.

    ``values``: ``(T,)`` or ``(..., T)`` (e.g. ``(k, T)`` adversaries); ``word_ids``: length T.
    Returns ``(..., W)``, W = number of words (max word id + 1): one matrix product with
    :func:`piece_to_word_matrix`."""
    values = np.asarray(values, dtype=np.float64)
    ids = list(word_ids)
    if values.shape[-1] != len(ids):
        raise ValueError(f"{values.shape[-1]} values but {len(ids)} word ids")
    return values @ piece_to_word_matrix(ids)


def piece_to_word_matrix(word_ids) -> np.ndarray:
    """``(T, W)`` 0/1 matrix: entry (t, w) is 1 when piece t belongs to word w (``word_ids[t] == w``);
    special tokens (None) have an all-zero row. ``values @ M`` sums pieces into words."""
    ids = list(word_ids)
    words = [w for w in ids if w is not None]
    matrix = np.zeros((len(ids), max(words) + 1 if words else 0), dtype=np.float64)
    for t, w in enumerate(ids):
        if w is not None:
            matrix[t, w] = 1.0
    return matrix


__all__ = ["merge_word_pieces", "piece_to_word_matrix"]
