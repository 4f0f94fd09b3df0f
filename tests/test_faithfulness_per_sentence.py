"""Every per-sentence value of the faithfulness table is a function of that sentence alone: one
sentence scored alone and inside a crowd of 120 other texts of other lengths (so it shares batches,
padding and draw rounds with them) gets the same values — the ERASER AOPCs, NAOPC, Soft-NC /
Soft-NS with their draw counts and standard errors, the null input's probability, the random
floor's scores and every method's scores, and τ with the LOO-drop — on tiny random BERT, GPT-2 and
Llama classifiers, with the tokenizer set to pad on either side (the adapter pads decoders on the
left itself).

Tolerance: exact for what is drawn (the random floor's scores, the soft metrics' draw counts, the
soft metrics of the constant-score method); otherwise float32 batching noise — a row's forward in
another batch (other padding, other rows) sums in another order — ``ATOL`` = 1e-5 on values in
[0, 1] after the ratios that divide by ŷ(x) − ŷ(0) or AOPC_max − AOPC_min."""

from __future__ import annotations

import math

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness

ATOL = 1e-5
PER_SENTENCE = ("comprehensiveness", "sufficiency", "soft_comprehensiveness", "soft_sufficiency",
                "naopc_comprehensiveness", "naopc_sufficiency", "tau_loo")
# small counts, with what varies per sentence exercised: integrated gradients' nodes doubled per
# sentence, soft draws that stop at different counts, NAOPC bounds exact, by beam search and from the
# orderings, AOPCs over every k and over a grid of k's; the fast test runs one method of each kind,
# the slow one every method of the table on these models but the captum extras (their own test below)
SETTINGS = dict(methods=("attention", "saliency", "integrated_gradients", "leave_one_out", "random"),
                ig_steps=4, ig_max_steps=16, soft_draws=2, soft_max_draws=16, soft_stderr=0.05,
                naopc_exact_max=5, naopc_beam_max=8, naopc_every_k_max=10, naopc_beam=2, batch_tokens=96)
EVERY_METHOD = ("attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing", "saliency",
                "gradient_x_input", "integrated_gradients", "leave_one_out", "random")
SENTENCE = TEXTS[1]  # "not very fun acting , but a great story"
WORDS = ["the", "a", "good", "bad", "movie", "film", "not", "very", "fun", "plot", "dull", "great", "boring", "and",
         "but", "story", "is", "gripping", "wonderful", "acted", ","]


def crowd(count: int = 120, seed: int = 0) -> list[str]:
    """``count`` texts of 1 to 14 words, the sentence among them in the middle."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 15)))) for _ in range(count)]
    texts = [t for t in texts if t != SENTENCE]
    texts[len(texts) // 2] = SENTENCE
    return texts


def table_pair(name: str, side: str, settings: dict, texts: list[str]):
    model, tokenizer = tiny_classifier(name)
    tokenizer.padding_side = side
    adapter = adapter_for(model, tokenizer, device="cpu")
    chosen = FaithfulnessSettings(**settings)
    at = texts.index(SENTENCE)
    return run_faithfulness(adapter, [SENTENCE], chosen), run_faithfulness(adapter, texts, chosen), at


def assert_same_sentence(alone, among, at: int) -> None:
    assert alone.methods == among.methods
    for method in alone.methods:
        np.testing.assert_allclose(alone.attributions[method][0], among.attributions[method][at], rtol=ATOL,
                                   atol=ATOL, err_msg=f"{method}'s scores")  # some methods' scores are unbounded
        for metric in PER_SENTENCE:
            if metric in alone.per_instance[method]:
                a, b = alone.per_instance[method][metric][0], among.per_instance[method][metric][at]
                assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= ATOL, (method, metric, a, b)
    # the random floor: drawn from the sentence's own tokens, exactly the same scores
    np.testing.assert_array_equal(alone.attributions["random"][0], among.attributions["random"][at])
    soft_a, soft_b = alone.metric_details["soft"], among.metric_details["soft"]
    assert soft_a["null_probability"][0] == pytest.approx(soft_b["null_probability"][at], abs=1e-6)
    for method in alone.methods:  # each sentence stops drawing on its own standard error
        assert soft_a["draws"][method][0] == soft_b["draws"][method][at], method
        for metric, errors in soft_a["stderr"][method].items():
            a, b = errors[0], soft_b["stderr"][method][metric][at]
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= ATOL, (method, metric, a, b)
    naopc_a, naopc_b = alone.metric_details["naopc"], among.metric_details["naopc"]
    assert naopc_a["bound_method"][0] == naopc_b["bound_method"][at]
    for key in ("aopc_min", "aopc_max"):
        assert naopc_a[key][0] == pytest.approx(naopc_b[key][at], abs=ATOL)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_a_sentence_scores_the_same_alone_and_in_a_crowd(name, side):
    alone, among, at = table_pair(name, side, SETTINGS, crowd())
    assert among.num_instances > 100
    draws = np.array(among.metric_details["soft"]["draws"]["attention"])
    assert len(set(draws[draws > 0].tolist())) > 1  # cells stopped at different draw counts
    assert set(among.metric_details["naopc"]["bound_method"]) == {"exact", "beam", "orderings"}
    assert_same_sentence(alone, among, at)


@pytest.mark.slow
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_every_method_scores_a_sentence_the_same_alone_and_in_a_crowd(name, side):
    alone, among, at = table_pair(name, side, SETTINGS | {"methods": EVERY_METHOD}, crowd())
    assert_same_sentence(alone, among, at)


def test_the_null_input_is_read_at_the_last_token_of_a_decoder():
    """GPT-2 with pad id 0: the null input (every id 0) alone and in a left-padded batch beside a
    longer text gives the probability of reading the sentence's last position, the token the head
    reads on the sentence itself."""
    import torch

    from hf_attn.batteries.faithfulness.soft import _soft_null

    model, tokenizer = tiny_classifier("gpt2", seed=2)
    adapter = adapter_for(model, tokenizer, device="cpu")
    assert adapter.pad_id == 0 and adapter.left_padding
    alone = _soft_null(adapter, adapter.encode([TEXTS[0]]), "reference")[0]
    beside = _soft_null(adapter, adapter.encode([TEXTS[0], TEXTS[1] + " " + TEXTS[3]]), "reference")[0]
    ids = adapter.encode([TEXTS[0]]).input_ids
    with torch.no_grad():
        hidden = model.base_model(input_ids=torch.zeros_like(ids)).last_hidden_state
        expected = model.score(hidden[:, -1]).softmax(-1)[0]
    torch.testing.assert_close(alone, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(beside, expected, atol=1e-6, rtol=0)


def test_the_soft_cells_record_each_sentences_draws_and_standard_error():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = FaithfulnessSettings(methods=("attention", "random"), metrics=("soft_comprehensiveness",
                                                                               "soft_sufficiency"),
                                    soft_draws=2, soft_max_draws=32, soft_stderr=0.05)
    texts = crowd(30)
    result = run_faithfulness(adapter, texts, settings)
    soft = result.metric_details["soft"]
    for method in result.methods:
        draws = np.array(soft["draws"][method])
        for metric in ("soft_comprehensiveness", "soft_sufficiency"):
            values = result.per_instance[method][metric]
            errors = np.array(soft["stderr"][method][metric])
            defined = np.isfinite(values)
            assert (draws[~defined] == 0).all() and (draws[defined] >= 2).all()
            # a sentence stops at the target, or at the cap; below the cap its last doubling missed it
            met = errors[defined] <= settings.soft_stderr
            assert (met | (draws[defined] == settings.soft_max_draws)).all()
            cell = result.table[method][metric]
            expected = math.sqrt(float(np.sum(errors[defined] ** 2))) / int(defined.sum())
            assert cell["mc_stderr"] == pytest.approx(expected)
            assert cell["draws_max"] == draws[defined].max()
            assert cell["draws_mean"] == pytest.approx(draws[defined].mean())
    assert "Bernoulli draws per sentence and method" in result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_captum_methods_score_a_sentence_the_same_alone_and_in_a_crowd(name):
    """Kernel SHAP samples its coalitions from a seed of the sentence's own tokens (optional extra)."""
    pytest.importorskip("captum")
    settings = dict(methods=("kernel_shap", "random"), metrics=("comprehensiveness", "sufficiency"), shap_samples=16,
                    naopc_beam=0)
    alone, among, at = table_pair(name, "right", settings, crowd())
    for method in alone.methods:
        np.testing.assert_allclose(alone.attributions[method][0], among.attributions[method][at], rtol=ATOL,
                                   atol=ATOL)
        for metric in ("comprehensiveness", "sufficiency"):
            assert alone.per_instance[method][metric][0] == pytest.approx(among.per_instance[method][metric][at],
                                                                          abs=ATOL)


def test_kernel_shap_leaves_the_global_generator_as_it_found_it():
    """Kernel SHAP seeds captum's draws per sentence inside ``fork_rng``: the caller's torch generator
    state is the same after the call."""
    pytest.importorskip("captum")
    import torch

    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    explainer = Explainer(model, tokenizer, device="cpu")
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    explainer.attributions([SENTENCE, "a dull plot"], methods=["kernel_shap"], shap_samples=16)
    assert torch.equal(torch.rand(3), expected)
