"""Class weights of the class-balanced loss (J&W appendix A), shared by the single-text and the
sentence-pair models. A module of its own so that ``training/pair.py`` needs nothing from
the engine's task pieces (``training/pieces.py``, which imports it)."""

from __future__ import annotations

import numpy as np


def class_weights_for(labels: np.ndarray, num_labels: int) -> list[float]:
    """Binary: [1, #neg/#pos] (J&W code's pos_weight); C > 2: N / (C · N_c)."""
    counts = np.bincount(np.asarray(labels), minlength=num_labels).astype(np.float64)
    if (counts == 0).any():
        raise ValueError(f"class(es) {np.flatnonzero(counts == 0).tolist()} have no training examples")
    if num_labels == 2:
        return [1.0, float(counts[0] / counts[1])]
    return (counts.sum() / (num_labels * counts)).tolist()


__all__ = ["class_weights_for"]
