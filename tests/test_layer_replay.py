"""The layer replay: where the query-only fast path does not apply (attention computed in a model's
own modules, e.g. MPNet, DeBERTa-v2), logits under replaced rows skip the layers before the explained
one — their output is cached by the unmodified forward — and must equal whole forwards exactly, in
value and in gradient, so the J&W adversary finds the same rows."""

import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters.transformer import TransformersAdapter, _Prefix
from hf_attn.methods.adversary import adversarial_rows


def _random_rows(adapter, batch, rows=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand((len(batch), rows, adapter.num_heads, batch.input_ids.shape[1]), generator=generator)
    noise = noise * batch.attention_mask[:, None, None, :]
    return noise / noise.sum(-1, keepdim=True)


@pytest.mark.parametrize("name", ["mpnet", "deberta-v2"])
def test_replay_equals_whole_forwards_in_value_and_gradient(name):
    model, tokenizer = tiny_classifier(name, layers=3)
    adapter = TransformersAdapter(model, tokenizer)
    described = adapter.describe()
    assert not described["fast_path"] and described["layer_replay"], described["layer_replay_reason"]
    batch = adapter.encode(TEXTS[:5])
    forward = adapter.forward(batch)
    assert isinstance(forward.cache, _Prefix)
    assert forward.cache.hidden.shape[:2] == batch.input_ids.shape
    weights = _random_rows(adapter, batch).requires_grad_(True)
    replayed = adapter.logits_under(batch, weights, per_head=True, forward=forward)
    (grad_replayed,) = torch.autograd.grad(replayed.square().sum(), weights)
    whole = adapter._full_logits(batch, weights, per_head=True)
    (grad_whole,) = torch.autograd.grad(whole.square().sum(), weights)
    assert torch.allclose(replayed, whole, rtol=0, atol=1e-6)
    assert torch.allclose(grad_replayed, grad_whole, rtol=0, atol=1e-6)
    # rows that differ change the logits (the replay does not hide the intervention)
    assert float((replayed[:, 0] - replayed[:, 1]).detach().abs().max()) > 1e-4


def test_the_adversary_finds_the_same_rows_with_and_without_the_replay():
    model, tokenizer = tiny_classifier("mpnet", layers=3)
    adapter = TransformersAdapter(model, tokenizer)
    batch = adapter.encode(TEXTS[:3])
    results = []
    for replay in (True, False):
        adapter.replay_path = replay
        forward = adapter.forward(batch)
        assert isinstance(forward.cache, _Prefix) == replay
        results.append(adversarial_rows(adapter, batch, forward, k=2, steps=15,
                                        generator=torch.Generator().manual_seed(0)))
    assert torch.allclose(results[0].attention, results[1].attention, rtol=0, atol=1e-5)
    assert torch.allclose(results[0].jsd, results[1].jsd, rtol=0, atol=1e-5)


def test_the_replay_says_why_it_does_not_apply():
    model, tokenizer = tiny_classifier("bloom", layers=3)
    described = TransformersAdapter(model, tokenizer).describe()
    assert not described["layer_replay"]
    assert "not its hidden states alone" in described["layer_replay_reason"]
    model, tokenizer = tiny_classifier("bert", layers=3)
    described = TransformersAdapter(model, tokenizer).describe()
    assert described["fast_path"] and not described["layer_replay"]
    assert "fast path applies" in described["layer_replay_reason"]
    model, tokenizer = tiny_classifier("mpnet", layers=1)
    described = TransformersAdapter(model, tokenizer).describe()
    assert not described["layer_replay"] and "first one" in described["layer_replay_reason"]
