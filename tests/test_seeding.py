"""hf_attn.core.seeding: a text's seed is a function of its token ids (array or tensor alike) and the
other parts, in 63 bits, and differs when a token does."""

import numpy as np
import torch

from hf_attn.core.seeding import seed_of, text_hash, token_hash


def test_a_seed_is_the_texts_own():
    ids = [101, 2023, 7, 102]
    assert token_hash(np.array(ids)) == token_hash(torch.tensor(ids)) == token_hash(ids)
    assert token_hash(ids) != token_hash([101, 2023, 8, 102])
    seed = seed_of([0, text_hash("random"), token_hash(ids)])
    assert seed == seed_of([0, text_hash("random"), token_hash(ids)]) and 0 <= seed < 2 ** 63
    assert seed != seed_of([1, text_hash("random"), token_hash(ids)])
    torch.manual_seed(seed)  # what torch takes
