"""Seeds of one text: a generator's seed derived from the text's own token ids (and any other
parts), never from its place in a batch, so whatever is drawn for a text is the same alone, in any
batch and beside any other texts."""

from __future__ import annotations

import zlib

import numpy as np


def token_hash(tokens) -> int:
    """CRC-32 of a text's token ids (an array or tensor of integers, as int64 bytes)."""
    if hasattr(tokens, "cpu"):  # a torch tensor
        tokens = tokens.cpu().numpy()
    return zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes())


def text_hash(text: str) -> int:
    """CRC-32 of a string (a method's or a draw's name)."""
    return zlib.crc32(text.encode())


def seed_of(entropy: list[int]) -> int:
    """A non-negative 63-bit seed (what ``torch.manual_seed`` takes) from ``entropy``, through NumPy's
    ``SeedSequence``."""
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> 1)
