"""The public API batches for the caller: ``Explainer.attributions`` groups the texts by length
within the token budget (whatever order and lengths it is given), with values equal to each text
explained alone and little padding."""

from __future__ import annotations

import numpy as np

from architectures import tiny_classifier
from hf_attn import Explainer

METHODS = ("attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing", "saliency",
           "gradient_x_input", "integrated_gradients", "leave_one_out")


def test_attributions_batched_equal_alone_with_little_padding(small_sst):
    model, tokenizer = tiny_classifier("bert")
    # float64: in float32 value zeroing's cosine distance (1 − cos of nearly parallel vectors) turns the
    # rounding of another batch shape into ~1e-5; in float64 batched and alone agree to the last bits
    explainer = Explainer(model.double(), tokenizer, device="cpu")
    texts = list(small_sst.splits["test"]["text"][:40])
    settings = {"ig_steps": 8, "ig_target": None}
    together = explainer.attributions(texts, methods=METHODS, **settings)
    assert together.methods == list(METHODS)
    lengths = [len(t) + 2 for t in together.tokens]
    assert together.padding <= 1.1, (together.padding, sorted(lengths))
    worst = 0.0
    for i in range(0, len(texts), 7):  # a sample of texts, each alone
        alone = explainer.attributions([texts[i]], methods=METHODS, **settings)
        assert alone.padding == 1.0
        for method in METHODS:
            worst = max(worst, float(np.max(np.abs(np.subtract(together.values[method][i], alone.values[method][0])))))
        np.testing.assert_allclose(together.probabilities[i], alone.probabilities[0], atol=1e-6)
    assert worst <= 1e-6, worst


def test_a_time_budget_skips_the_remaining_methods_saying_why(monkeypatch):
    """``Explainer.attributions(time_budget=…)`` (the Space's compare view): once the budget is spent
    the remaining methods are listed as not run, with the reason; a bad budget is refused. (A method
    still running when it runs out stops inside: tests/test_deadline.py.)"""
    import time

    import pytest

    from hf_attn.batteries.faithfulness import methods

    model, tokenizer = tiny_classifier("bert")
    explainer = Explainer(model, tokenizer, device="cpu")
    slow = methods._method_function

    def slow_attention(name, settings):
        function = slow(name, settings)
        if name != "attention":
            return function

        def wrapped(adapter, batch):  # finishes, then spends the budget
            values = function(adapter, batch)
            time.sleep(0.3)
            return values
        return wrapped

    monkeypatch.setattr(methods, "_method_function", slow_attention)
    result = explainer.attributions(["a good film"], methods=("attention", "saliency", "rollout"), time_budget=0.1)
    assert result.methods == ["attention"]
    assert set(result.skipped) == {"saliency", "rollout"}
    assert all(reason == "not run: budget: this request's time budget of 0.1 s was spent by the methods before it"
               for reason in result.skipped.values())
    for bad in (0, -1, float("inf"), "10"):
        with pytest.raises(ValueError, match="time_budget"):
            explainer.attributions(["a good film"], methods=("attention",), time_budget=bad)


def test_eraser_says_when_a_text_is_cut_and_keeps_the_end_for_decoders():
    """ERASER on transformers tokenizes on its own path: a text over the limit is cut with the same
    TruncationWarning as everywhere (the tokens dropped, the end kept), decoders keeping the end."""
    import pytest

    from hf_attn.adapters.contract import TruncationWarning
    from hf_attn.batteries.eraser.units import encode

    model, tokenizer = tiny_classifier("bert")
    long = " ".join(["good"] * 30)
    with pytest.warns(TruncationWarning, match="start of each text was kept"):
        ids, mask, units = encode(tokenizer, [long, "a film"], 12)
    assert int(mask[0].sum()) == 12 and int(units[0].sum()) == 10 and int(units[1].sum()) == 2
    reference = tokenizer(["a film"], return_tensors="pt")["input_ids"][0]
    assert ids[1, :len(reference)].tolist() == reference.tolist()
    model, tokenizer = tiny_classifier("gpt2")
    text = " ".join(str(i) for i in range(30))
    with pytest.warns(TruncationWarning, match="end of each text was kept"):
        ids, mask, units = encode(tokenizer, [text], 8, keep="end")
    assert ids[0].tolist() == tokenizer(text)["input_ids"][-8:]


def test_a_decoder_without_a_pad_token_runs_several_rows_as_one():
    """A GPT-2 classifier without a pad token refuses batches of several rows; the adapter pads on the
    left, so it lets the head read every row's last position: several texts (and integrated
    gradients' path points) give each text's own values, and the config is left as it was."""
    model, tokenizer = tiny_classifier("gpt2")
    model.config.pad_token_id = None
    explainer = Explainer(model.double(), tokenizer, device="cpu")
    texts = ["the good movies", "a dull plot , sadly , very", "fun"]
    together = explainer.attributions(texts, methods=("integrated_gradients", "leave_one_out", "saliency"),
                                      ig_steps=8, ig_target=None)
    for i, text in enumerate(texts):
        alone = explainer.attributions([text], methods=("integrated_gradients", "leave_one_out", "saliency"),
                                       ig_steps=8, ig_target=None)
        for method in together.methods:
            np.testing.assert_allclose(together.values[method][i], alone.values[method][0], atol=1e-9)
    assert model.config.pad_token_id is None


def test_probabilities_come_from_the_methods_own_forwards(small_sst):
    """A gradient method runs the model on the texts anyway: ``attributions`` reads its logits for the
    probabilities (no extra forward), and they equal a forward's; a method that runs no unperturbed
    forward (attention) leaves the forward to ``attributions`` itself."""
    import torch

    model, tokenizer = tiny_classifier("bert")
    explainer = Explainer(model, tokenizer, device="cpu")
    texts = list(small_sst.splits["test"]["text"][:12])
    calls = []
    inner = explainer.adapter.logits

    def counting(batch, *args, **kwargs):
        calls.append(len(batch))
        return inner(batch, *args, **kwargs)

    explainer.adapter.logits = counting
    try:
        for method in ("saliency", "integrated_gradients", "leave_one_out", "attention"):
            calls.clear()
            result = explainer.attributions(texts, methods=[method], ig_steps=4, ig_target=None)
            with torch.no_grad():
                expected = inner(explainer.adapter.encode(texts)).float().softmax(-1)
            np.testing.assert_allclose(result.probabilities, expected.numpy(), atol=1e-6)
            assert result.predicted == expected.argmax(-1).tolist()
            if method != "leave_one_out":  # (its forwards of the deleted texts go through adapter.logits)
                assert sum(calls) == (len(texts) if method == "attention" else 0), (method, calls)
    finally:
        del explainer.adapter.logits


def test_integrated_gradients_runs_each_length_apart_without_padding(small_sst):
    """The texts of a mixed-length group are explained per length, cut to it: no path point is a pad,
    and the values equal each text alone."""
    import torch

    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution

    model, tokenizer = tiny_classifier("bert")
    explainer = Explainer(model.double(), tokenizer, device="cpu")
    adapter = explainer.adapter
    texts = list(small_sst.splits["test"]["text"][:6])
    batch = adapter.encode(texts)
    widths = []
    inner = adapter.logits_from_embeddings

    def recording(sub, embeddings, **kwargs):
        widths.append((embeddings.shape[1], int(sub.attention_mask.sum()), sub.attention_mask.numel()))
        return inner(sub, embeddings, **kwargs)

    adapter.logits_from_embeddings = recording
    try:
        together = integrated_gradients_attribution(adapter, batch, steps=4)
    finally:
        del adapter.logits_from_embeddings
    assert all(real == padded for _, real, padded in widths)  # every forward padding-free
    for i, text in enumerate(texts):
        alone = integrated_gradients_attribution(adapter, adapter.encode([text]), steps=4)
        n = int(batch.attention_mask[i].sum())
        torch.testing.assert_close(together.attributions[i, :n], alone.attributions[0], atol=1e-9, rtol=0)
        assert float(together.attributions[i, n:].abs().sum()) == 0
        torch.testing.assert_close(together.completeness_gap[i], alone.completeness_gap[0], atol=1e-9, rtol=0)
