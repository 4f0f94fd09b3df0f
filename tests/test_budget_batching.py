"""Value zeroing and leave-one-out run their copies of a text as batched forwards within the
adapter's token budget (copies × T ≤ budget per forward): the same numbers whatever the budget
(within float32 rounding of differently padded batches, 1e-5), and as few forwards as the budget
allows. Tiny random llama and BERT of tests/architectures.py."""

from __future__ import annotations

import math

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.methods.leave_one_out import deletion_importance
from hf_attn.methods.value_zeroing import value_zeroing_matrices


@pytest.fixture(scope="module", params=["bert", "llama"])
def setup(request):
    model, tokenizer = tiny_classifier(request.param)
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(TEXTS[:2])
    value_zeroing_matrices(adapter, batch)  # value zeroing's one-off check of its shared forward (4 forwards) first
    return adapter, batch


class _Counted:
    """Counts the adapter's model calls and the largest number of padded tokens of one (a pruned
    forward's capture and one-token replay, hf_attn/adapters/readout.py, are parts of the call that
    made them: only the outermost calls count)."""

    def __init__(self, adapter):
        self.adapter, self.calls, self.largest, self.depth = adapter, 0, 0, 0

    def __enter__(self):
        inner = self.adapter._model_call

        def counted(input_ids, mask, *args, **kwargs):
            if self.depth == 0:
                self.calls += 1
                self.largest = max(self.largest, int(mask.numel()))
            self.depth += 1
            try:
                return inner(input_ids, mask, *args, **kwargs)
            finally:
                self.depth -= 1

        self.adapter._model_call = counted
        return self

    def __exit__(self, *exc):
        del self.adapter._model_call


@pytest.mark.parametrize("copies", [1, 3])
def test_value_zeroing_batches_its_copies_within_the_budget(setup, copies):
    adapter, batch = setup
    steps, layers = batch.input_ids.shape[1], adapter.num_layers
    variants = int(batch.attention_mask.sum())
    saved = adapter.token_budget
    try:
        adapter.token_budget = 10 ** 6  # every variant of a layer in one forward
        with _Counted(adapter) as whole:
            reference = value_zeroing_matrices(adapter, batch)
        assert whole.calls == 1 + layers
        adapter.token_budget = copies * steps
        with _Counted(adapter) as cut:
            scores = value_zeroing_matrices(adapter, batch)
    finally:
        adapter.token_budget = saved
    assert cut.calls == 1 + layers * math.ceil(variants / copies)
    assert cut.largest <= max(copies * steps, len(batch) * steps)  # the first call: the unmodified batch
    torch.testing.assert_close(scores, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("copies", [1, 4])
def test_leave_one_out_batches_its_copies_within_the_budget(setup, copies):
    adapter, batch = setup
    probabilities = adapter.logits(batch).softmax(-1)
    deletions = int(batch.content.sum())
    with _Counted(adapter) as whole:
        reference = deletion_importance(adapter, batch, probabilities, token_budget=10 ** 6)
    assert whole.calls == 1
    longest = int(batch.attention_mask.sum(1).max()) - 1
    with _Counted(adapter) as cut:
        scores = deletion_importance(adapter, batch, probabilities, token_budget=copies * longest)
    assert cut.calls == math.ceil(deletions / copies)
    assert cut.largest <= copies * longest
    torch.testing.assert_close(scores, reference, atol=1e-5, rtol=0)


def test_value_zeroing_on_a_cpu_keeps_each_forward_within_the_cpu_cap(setup):
    """A large adapter budget on a CPU: each forward holds at most CPU_FORWARD_TOKENS padded tokens
    (faster there than one large forward), the same scores as one forward per layer."""
    from hf_attn.core.batching import CPU_FORWARD_TOKENS

    adapter, _ = setup
    batch = adapter.encode([" ".join(TEXTS * 3)])
    steps, layers = batch.input_ids.shape[1], adapter.num_layers
    assert steps * steps > CPU_FORWARD_TOKENS >= steps  # the text's copies do not fit one capped forward
    saved = adapter.token_budget
    try:
        adapter.token_budget = 10 ** 6
        with _Counted(adapter) as capped:
            scores = value_zeroing_matrices(adapter, batch)
        adapter.token_budget = steps  # one copy per forward
        single = value_zeroing_matrices(adapter, batch)
    finally:
        adapter.token_budget = saved
    per_forward = CPU_FORWARD_TOKENS // steps
    assert capped.calls == 1 + layers * math.ceil(steps / per_forward)
    assert capped.largest <= CPU_FORWARD_TOKENS
    torch.testing.assert_close(scores, single, atol=1e-5, rtol=0)


def test_logits_from_embeddings_without_a_gradient_run_in_chunks_of_the_budget(setup):
    """Many perturbed copies of a text (soft metrics' draws, integrated gradients' ends): forwards of
    at most the adapter's budget, the same logits as one forward; with a gradient, one forward."""
    adapter, batch = setup
    copies = batch.select([0, 1] * 6)
    embeddings = adapter.embeddings(copies).detach()
    width = copies.input_ids.shape[1]
    saved = adapter.token_budget
    try:
        adapter.token_budget = 10 ** 6
        with torch.no_grad(), _Counted(adapter) as whole:
            reference = adapter.logits_from_embeddings(copies, embeddings)
        adapter.token_budget = 5 * width
        with torch.no_grad(), _Counted(adapter) as cut:
            chunked = adapter.logits_from_embeddings(copies, embeddings)
        with _Counted(adapter) as graded:
            path = embeddings.clone().requires_grad_(True)
            adapter.logits_from_embeddings(copies, path).sum().backward()
    finally:
        adapter.token_budget = saved
    assert whole.calls == 1 and cut.calls == 3 and cut.largest <= 5 * width and graded.calls == 1
    assert path.grad is not None and path.grad.abs().sum() > 0
    torch.testing.assert_close(chunked, reference, atol=1e-5, rtol=0)
