"""Read-out pruning (hf_attn/adapters/readout.py): forwards that only want the logits run the last
layer for the row the head reads. The reference is the model's own whole forward (the same adapter
with ``prune_readout=False``): logits, gradients to the input embeddings and the embedding-output
hook of the soft metrics must equal it, on every architecture where the check at set-up turns the
pruning on; the last layer's feed-forward block must really see one row; models it cannot serve
keep the whole forward with the reason."""

from __future__ import annotations

import threading

import pytest
import torch

from architectures import DECODERS, ENCODER_DECODERS, ENCODERS, OWN_ATTENTION, TEXTS, tiny_classifier
from hf_attn.adapters.transformer import TransformersAdapter

PRUNED = ["bert", "roberta", "xlm-roberta", "electra", "distilbert", "modernbert"] + DECODERS
LONG = ["the good movies and a great story but not very fun acting , a dull plot and a boring film"] * 2 + TEXTS


def _pair(name, **extra):
    """The adapter that prunes and one over the same weights that does not."""
    model, tokenizer = tiny_classifier(name, **extra)
    whole = TransformersAdapter(model, tokenizer, prune_readout=False)
    pruned = TransformersAdapter(model, tokenizer)
    return pruned, whole


def _assert_close(a, b, what):
    scale = float(b.abs().max()) + 1.0
    assert float((a - b).abs().max()) <= 1e-5 * scale, what


@pytest.mark.parametrize("name", PRUNED)
def test_pruned_forwards_equal_the_whole_forward(name):
    pruned, whole = _pair(name)
    assert pruned.readout_pruning, pruned.readout_reason
    assert not whole.readout_pruning and whole.describe()["readout_pruning_reason"] == "turned off (prune_readout=False)"
    batch = pruned.encode(LONG)
    with torch.no_grad():
        _assert_close(pruned.logits(batch), whole.logits(batch), "logits")
        _assert_close(pruned.logits_at_last_position(batch), whole.logits_at_last_position(batch), "last position")
    grads = []
    for adapter in (pruned, whole):
        embeds = adapter.embeddings(batch).detach().requires_grad_(True)
        logits = adapter.logits_from_embeddings(batch, embeds)
        (grad,) = torch.autograd.grad((logits * torch.linspace(-1, 2, logits.shape[-1])).sum(), embeds)
        grads.append((logits.detach(), grad))
    _assert_close(grads[0][0], grads[1][0], "logits from embeddings")
    _assert_close(grads[0][1], grads[1][1], "gradients to the embeddings")
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn((len(batch), batch.input_ids.shape[1], 64), generator=generator)

    def transform(hidden, rows):  # the soft metrics' perturbation of the embedding layer's output
        return hidden + 0.1 * noise[rows, :, : hidden.shape[-1]].to(hidden.dtype)

    _assert_close(pruned.logits_with_embedding_output(batch, transform),
                  whole.logits_with_embedding_output(batch, transform), "embedding-output hook")


@pytest.mark.parametrize("name", ["bert", "llama", "gpt2"])
def test_the_last_layer_runs_for_one_row(name):
    """Not silently inactive: the last layer's feed-forward input has one row per instance when
    pruned, T rows when not; the other layers always see T rows."""
    pruned, whole = _pair(name)
    batch = pruned.encode(TEXTS)
    steps = batch.input_ids.shape[1]
    for adapter, rows in ((pruned, 1), (whole, steps)):
        seen = []
        linears = [[m for m in layer.modules() if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D"]
                   for layer in adapter.layers]
        handles = [lin[-1].register_forward_hook(lambda m, a, o, i=i: seen.append((i, a[0].shape[-2])))
                   for i, lin in enumerate(linears)]  # the layer's last linear map: the feed-forward's output
        try:
            with torch.no_grad():
                adapter.logits(batch)
        finally:
            for handle in handles:
                handle.remove()
        last = len(adapter.layers) - 1
        assert [r for i, r in seen if i == last] == [rows]
        assert all(r == steps for i, r in seen if i != last)


def test_sliding_windows_are_kept():
    """A last layer with a sliding window narrower than the text (Mistral's window of 3, ModernBERT's
    local layer of 8): the read row sees the keys the whole forward's row sees."""
    for name, extra in (("mistral", {"sliding_window": 3}), ("modernbert", {"layers": 1})):
        pruned, whole = _pair(name, **extra)
        assert pruned.readout_pruning, pruned.readout_reason
        batch = pruned.encode(LONG)
        assert batch.input_ids.shape[1] > 10
        with torch.no_grad():
            _assert_close(pruned.logits(batch), whole.logits(batch), name)
        if name == "mistral":  # the window matters: the same model without it reads other keys
            wide, _ = _pair(name)
            with torch.no_grad():
                assert float((wide.logits(batch) - whole.logits(batch)).abs().max()) > 1e-3


def test_a_pad_valued_read_token_runs_the_whole_forward():
    """A last-token head skips pad ids: a row of pad ids alone (the soft metrics' null input on a
    model whose pad id is 0) cannot be replayed as one token, so it runs whole and gives the whole
    forward's logits."""
    pruned, whole = _pair("llama")
    batch = pruned.encode(TEXTS[:2])
    null = pruned.batch_from_tensors(torch.zeros_like(batch.input_ids), batch.attention_mask)
    with torch.no_grad():
        _assert_close(pruned.logits(null), whole.logits(null), "null input")
        _assert_close(pruned.logits_at_last_position(null), whole.logits_at_last_position(null), "null, last")


@pytest.mark.parametrize("name", ["albert", "bart", "deberta-v2", "bloom"])
def test_models_it_cannot_serve_keep_the_whole_forward(name):
    model, tokenizer = tiny_classifier(name)
    adapter = TransformersAdapter(model, tokenizer)
    described = adapter.describe()
    assert described["readout_pruning"] is False
    assert described["readout_pruning_reason"] in (
        "the layers are not one list of one attention call each, or there is one layer",
        "the attention is computed in the model's own modules")
    assert name in ENCODERS + ENCODER_DECODERS + OWN_ATTENTION


def test_a_mean_pooled_head_keeps_the_whole_forward():
    model, tokenizer = tiny_classifier("modernbert", classifier_pooling="mean")
    adapter = TransformersAdapter(model, tokenizer)
    assert adapter.pooling == "mean"
    assert (adapter.readout_pruning, adapter.readout_reason) == (False, "the head reads every row")


def test_a_broken_replay_is_caught_at_set_up(monkeypatch):
    """The check compares with the whole forward: a replay that reads the wrong row is turned off."""
    from hf_attn.adapters import readout

    real = readout.read_rows
    monkeypatch.setattr(readout, "read_rows", lambda mask, pooling: real(mask, pooling) + 1)
    model, tokenizer = tiny_classifier("bert")
    adapter = TransformersAdapter(model, tokenizer)
    assert adapter.readout_pruning is False
    assert adapter.readout_reason.startswith("the pruned forward's logits differ from the whole one's by")


def _logits_in_threads(adapters, batch, repeats: int, meanwhile=None) -> list:
    """Each of ``adapters`` computes ``batch``'s logits ``repeats`` times in a thread of its own, while
    this thread runs ``meanwhile()``; every result, or the first error raised."""
    results, errors = [], []

    def work(adapter):
        try:
            with torch.no_grad():
                for _ in range(repeats):
                    results.append(adapter.logits(batch))
        except Exception as error:  # noqa: BLE001 — raised below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(a,)) for a in adapters]
    for thread in threads:
        thread.start()
    if meanwhile is not None:
        meanwhile()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def test_another_threads_forward_is_not_captured():
    """The capture hook and the replayed layers answer only the thread of the pruned forward."""
    pruned, whole = _pair("bert")
    batch = pruned.encode(LONG)
    with torch.no_grad():
        expected = whole.logits(batch)

    def unpruned():
        with torch.no_grad():
            for _ in range(5):
                _assert_close(whole.logits(batch), expected, "the unpruned adapter during the pruned ones")

    results = _logits_in_threads([pruned] * 3, batch, 5, unpruned)
    assert len(results) == 15
    for logits in results:
        _assert_close(logits, expected, "threaded")


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_decoder_without_a_pad_id_is_pruned(name):
    """No pad id (GPT-2 and Llama checkpoints as released): the head reads the last position, and
    so does the replay."""
    model, tokenizer = tiny_classifier(name)
    model.config.pad_token_id = None
    whole = TransformersAdapter(model, tokenizer, prune_readout=False)
    pruned = TransformersAdapter(model, tokenizer)
    assert pruned.readout_pruning, pruned.readout_reason
    batch = pruned.encode(LONG)
    with torch.no_grad():
        _assert_close(pruned.logits(batch), whole.logits(batch), name)


def test_a_pad_id_that_ends_a_probe_row_is_still_checked():
    """A decoder whose pad id is the last token of the check's shorter probe row (the probe sentence
    less its last two tokens): the check reads the last position whatever its id, so it runs the
    pruned path rather than its fallback, and the pruned logits equal the whole forward's."""
    from hf_attn.adapters.transformer_probe import PROBE_TEXT

    model, tokenizer = tiny_classifier("llama")
    model.config.pad_token_id = tokenizer(PROBE_TEXT)["input_ids"][-3]
    pruned = TransformersAdapter(model, tokenizer)
    assert pruned.readout_pruning, pruned.readout_reason
    whole = TransformersAdapter(model, tokenizer, prune_readout=False)
    batch = pruned.encode(TEXTS)
    calls = pruned.readout_calls
    with torch.no_grad():
        _assert_close(pruned.logits(batch), whole.logits(batch), "pad id = last token")
    assert pruned.readout_calls > calls


def test_a_row_without_a_real_token_runs_the_whole_forward():
    pruned, whole = _pair("bert")
    batch = pruned.encode(TEXTS[:2])
    mask = batch.attention_mask.clone()
    mask[1] = 0
    empty = pruned.batch_from_tensors(batch.input_ids, mask)
    calls = pruned.readout_calls
    with torch.no_grad():
        _assert_close(pruned.logits(empty), whole.logits(empty), "an all-padding row")
    assert pruned.readout_calls == calls


def test_a_pruned_forward_refuses_an_intervention_it_would_drop():
    from hf_attn.adapters.interface import Intervention

    pruned, _ = _pair("bert")
    batch = pruned.encode(TEXTS[:2])
    with pytest.raises(ValueError, match="would be dropped"):
        pruned._model_call(batch.input_ids, batch.attention_mask, None, Intervention(layer=0, detach=True),
                           prune=True)


def test_two_adapters_over_one_model_in_two_threads():
    """Both adapters swap the forwards of the same layers: they share the model's lock, so neither
    undoes the other's swap mid-forward."""
    model, tokenizer = tiny_classifier("bert")
    first, second = TransformersAdapter(model, tokenizer), TransformersAdapter(model, tokenizer)
    assert first._lock is second._lock
    batch = first.encode(LONG)
    with torch.no_grad():
        expected = TransformersAdapter(model, tokenizer, prune_readout=False).logits(batch)
    results = _logits_in_threads([first, second, first, second], batch, 10)
    assert len(results) == 40
    for logits in results:
        _assert_close(logits, expected, "two adapters")
