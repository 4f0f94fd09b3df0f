"""hf_attn.core.batching: hand-computed batches, padding and the ragged round trip."""

import numpy as np
import pytest
import torch

from hf_attn.core.batching import length_batches, pad_batch, ragged_to_padded


def test_length_batches_by_tokens_hand_computed():
    # sorted lengths 2,3,4,5 (indices 2,0,3,1); budget 9: [2,3]→2·3=6 ok, +4→3·4=12 > 9 → cut
    batches = length_batches([3, 5, 2, 4], token_budget=9)
    assert [b.tolist() for b in batches] == [[2, 0], [3], [1]]
    # every instance exactly once, and a too-long instance still gets its own batch
    assert [b.tolist() for b in length_batches([50, 1], token_budget=10)] == [[1], [0]]


def test_length_batches_by_deletions_and_rows():
    # deletions: T·(T−1) per instance: lengths 3,3 → 6 each; budget 12 holds both, 11 only one
    assert [b.tolist() for b in length_batches([3, 3], 12, cost="deletions")] == [[0, 1]]
    assert [b.tolist() for b in length_batches([3, 3], 11, cost="deletions")] == [[0], [1]]
    # rows_per_item multiplies the cost: 2 rows of length 3 → 6 per instance
    assert [b.tolist() for b in length_batches([3, 3], 12, rows_per_item=2)] == [[0, 1]]
    assert [b.tolist() for b in length_batches([3, 3], 11, rows_per_item=2)] == [[0], [1]]
    with pytest.raises(ValueError, match="cost"):
        length_batches([1], 5, cost="flops")
    with pytest.raises(ValueError, match="token_budget"):
        length_batches([1], 0)


def test_pad_batch_and_ragged_to_padded():
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    assert ids.dtype == torch.long
    values, m = ragged_to_padded([np.array([0.5, 1.5]), np.array([2.0])], fill=-1.0)
    assert values.tolist() == [[0.5, 1.5], [2.0, -1.0]]
    assert m.tolist() == [[True, True], [True, False]]
    empty, em = ragged_to_padded([])
    assert empty.shape == (0, 0) and em.shape == (0, 0)


def test_padding_bounded_batches_hand_computed():
    """Longest first; a batch closes when one more instance would pass the token budget or make its
    padded / real tokens exceed 1.1."""
    from hf_attn.core.batching import padding_bounded_batches

    # 30 alone (30·2 > 1.1·40); 10 + 9 (20 ≤ 1.1·19); 5 + 4 would pad 10 for 9 real (> 9.9)
    got = padding_bounded_batches([10, 9, 5, 4, 30], 100)
    assert [b.tolist() for b in got] == [[4], [0, 1], [2], [3]]
    assert [b.tolist() for b in padding_bounded_batches([5] * 5, 12)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="token_budget"):
        padding_bounded_batches([3], 0)
