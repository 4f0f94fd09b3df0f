"""Property-based: whatever tiny model (architecture, problem type, label count, position limit, pad
token), text (lengths around the limit, unicode edge cases) and settings (at and beyond every bound)
arrive, the Explainer gives a correct result or one line of ValueError — never a silent degenerate
value (a one-class "distribution", NaN, an empty result for non-empty input) and never another
exception."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoModelForSequenceClassification

from architectures import WORDS, tiny_config, word_tokenizer
from hf_attn import Explainer

UNICODE_EDGES = ["\u200b", "\ufeff", "\u200d", "\u00ad", "é", "ß", "😀", "\u202e", "\n", "\t", " ", "Ω", "ｇｏｏｄ"]

models = st.fixed_dictionaries({
    "name": st.sampled_from(["bert", "gpt2", "llama"]),
    "num_labels": st.sampled_from([1, 2, 3]),
    "problem_type": st.sampled_from([None, "single_label_classification", "regression",
                                     "multi_label_classification"]),
    "positions": st.sampled_from([12, 16, 40]),
    "pad": st.booleans()})
words = st.sampled_from(WORDS[:12] + UNICODE_EDGES)
texts = st.lists(st.lists(words, min_size=0, max_size=45).map(" ".join), min_size=1, max_size=3)
numbers = st.sampled_from([-1.0, 0.0, 0.01, 0.5, math.nan, math.inf])
counts = st.sampled_from([-1, 0, 1, 2])


def build(spec):
    name = spec["name"]
    tokenizer = word_tokenizer({"gpt2": "none", "llama": "bos"}.get(name, "cls"))
    config = tiny_config(name, len(tokenizer), layers=1 if name != "bert" else 2)
    config.num_labels = spec["num_labels"]
    config.problem_type = spec["problem_type"]
    config.max_position_embeddings = spec["positions"]
    if not spec["pad"]:
        config.pad_token_id = None
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="eager").eval(), tokenizer


def one_line(error: Exception) -> None:
    assert isinstance(error, ValueError), f"{type(error).__name__}: {error}"
    assert str(error) and "\n" not in str(error)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=models, items=texts, eps=numbers, k=counts, batch_size=counts)
def test_explainer_gives_a_correct_result_or_one_line(spec, items, eps, k, batch_size):
    model, tokenizer = build(spec)
    try:
        explainer = Explainer(model, tokenizer, device="cpu")
    except Exception as error:  # noqa: BLE001 - the property: a refusal is one line of ValueError
        one_line(error)
        assert spec["num_labels"] < 2 or spec["problem_type"] in ("regression", "multi_label_classification") \
            or not spec["pad"]
        return
    assert spec["num_labels"] >= 2 and spec["problem_type"] not in ("regression", "multi_label_classification")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            explanation = explainer.explain(items, eps=eps, k=k, batch_size=batch_size, ig_steps=2,
                                            adversary_steps=2)
    except Exception as error:  # noqa: BLE001
        one_line(error)
        bad_setting = not (math.isfinite(eps) and eps >= 0) or k < 1 or batch_size < 1
        nothing = any(not t.strip() or all(not c.isalnum() for c in t) for t in items)
        assert bad_setting or nothing, f"refused valid input: {error}"
        return
    assert math.isfinite(eps) and eps >= 0 and k >= 1 and batch_size >= 1
    assert len(explanation) == len(items)
    for sentence in explanation.sentences:
        p = np.asarray(sentence.probabilities)
        assert len(p) == spec["num_labels"] >= 2 and abs(p.sum() - 1) < 1e-4 and np.isfinite(p).all()
        attention = np.asarray(sentence.values["attention"])
        assert len(sentence.tokens) >= 1 and np.isfinite(attention).all() and abs(attention.sum() - 1) < 1e-4
        assert len(sentence.tokens) <= spec["positions"]
        for name in ("gradient", "ig"):
            assert np.isfinite(np.asarray(sentence.values[name])).all()
        assert sentence.adversary_jsd is not None and 0 <= sentence.adversary_jsd <= math.log(2) + 1e-6


@settings(max_examples=40, deadline=None)
@given(eps=numbers, lam=numbers, alpha=st.sampled_from([-0.5, 0.0, 0.05, 0.999, 1.0, 5.0, math.nan]),
       k=counts, steps=counts, permutations=counts)
def test_jw_settings_are_valid_or_refused_in_one_line(eps, lam, alpha, k, steps, permutations):
    from hf_attn.batteries.jw.common import JWSettings

    valid = (math.isfinite(eps) and eps >= 0 and math.isfinite(lam) and lam >= 0 and 0 < alpha < 1
             and k >= 1 and steps >= 0 and permutations >= 1)  # 0 steps: the adversaries as initialised
    try:
        JWSettings(eps=eps, lam=lam, alpha=alpha, k=k, steps=steps, num_permutations=permutations)
    except ValueError as error:
        one_line(error)
        assert not valid
        return
    assert valid
