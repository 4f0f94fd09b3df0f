"""One settings object for the three views (``ExplainSettings``): its checks, the views' defaults read
from it (``Explainer.explain``, ``hf-attn explain``, the Space), and the short one-line reprs of the
explainer and its results."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from architectures import tiny_classifier

from hf_attn.explanation.settings import DEFAULT_SETTINGS, ExplainSettings

TEXT = "the film is great"


@pytest.fixture(scope="module")
def explainer():
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    return Explainer(model, tokenizer, device="cpu")


def test_defaults_are_the_jw_batterys():
    from hf_attn.batteries.jw.common import JWSettings

    s = ExplainSettings()
    assert (s.k, s.adversary_steps, s.eps, s.lam, s.lr, s.num_permutations) == (5, 500, 0.01, 500.0, 0.01, 100)
    jw = JWSettings()
    assert (s.k, s.adversary_steps, s.eps, s.lam, s.lr, s.num_permutations) == (
        jw.k, jw.steps, jw.eps, jw.lam, jw.lr, jw.num_permutations)
    assert (s.ig, s.ig_steps, s.ig_baseline, s.adversary, s.seed) == (True, 20, "zero", True, 0)


@pytest.mark.parametrize("changes, message", [
    ({"k": 0}, "k must be >= 1, got 0"),
    ({"adversary_steps": -1}, "adversary_steps must be >= 0, got -1"),
    ({"adversary_steps": 2.5}, "adversary_steps must be a whole number, got 2.5"),
    ({"num_permutations": 100_001}, "num_permutations must be <= 100000"),
    ({"ig_steps": 0}, "ig_steps must be >= 1, got 0"),
    ({"eps": -0.1}, "eps must be >= 0, got -0.1"),
    ({"eps": float("nan")}, "eps must be a finite number"),
    ({"lam": -1.0}, "lam must be >= 0, got -1.0"),
    ({"lr": 0.0}, "lr must be > 0, got 0.0"),
    ({"seed": -1}, "seed must be >= 0, got -1"),
    ({"batch_size": 0}, "batch_size must be >= 1, got 0"),
    ({"ig_baseline": "ones"}, "ig_baseline must be 'zero', 'pad' or 'mean', got 'ones'"),
    ({"ig": "yes"}, "ig must be True or False, got 'yes'"),
    ({"adversary": 1}, "adversary must be True or False, got 1"),
])
def test_every_field_is_checked_with_its_name(changes, message):
    with pytest.raises(ValueError) as raised:
        ExplainSettings(**changes)
    assert message in str(raised.value)


def test_settings_are_frozen_plain_and_updated_by_name():
    s = ExplainSettings(k=np.int64(3), eps=np.float32(0.5))
    assert type(s.k) is int and s.k == 3 and type(s.eps) is float and s.eps == 0.5
    with pytest.raises(AttributeError):
        s.k = 4
    assert s.updated(adversary_steps=7).adversary_steps == 7 and s.adversary_steps == 500
    with pytest.raises(ValueError, match=r"unknown explain setting\(s\) \['steps'\]"):
        s.updated(steps=7)


def test_the_views_defaults_come_from_the_settings():
    """The CLI's option defaults, the Space's request defaults (check_settings, explain_sentence, the
    page's handler) and Explainer.explain's all equal ExplainSettings'."""
    from hf_attn.app import space
    from hf_attn.cli import command_parser
    from hf_attn.cli.explain import settings_of

    parsed = command_parser("explain").parse_args(["folder", TEXT])
    assert settings_of(parsed) == DEFAULT_SETTINGS and parsed.shares is False and parsed.json is False
    checked = space.check_settings()
    assert checked == {"ig": True, "num_permutations": 100, "k": 5, "lam": 500.0, "eps": 0.01, "steps": 500,
                       "lr": 0.01, "seed": 0, "ig_steps": 20, "max_tokens": None}
    defaults = {name: p.default for name, p in inspect.signature(space.explain_sentence).parameters.items()
                if p.default is not inspect.Parameter.empty}
    assert {k: defaults[k] for k in checked if k != "max_tokens"} == {k: v for k, v in checked.items()
                                                                      if k != "max_tokens"}
    # every default is inside the Space's (stricter) bounds for visitors
    for name, (low, high) in space.INT_LIMITS.items():
        if name in checked and checked[name] is not None:
            assert low <= checked[name] <= high, name


def test_explain_takes_a_settings_object_or_keywords(explainer):
    by_object = explainer.explain(TEXT, ExplainSettings(adversary_steps=3, num_permutations=4, ig_steps=5, seed=2))
    by_keywords = explainer.explain(TEXT, adversary_steps=3, num_permutations=4, ig_steps=5, seed=2)
    both = explainer.explain(TEXT, ExplainSettings(adversary_steps=3, num_permutations=4), ig_steps=5, seed=2)
    for other in (by_keywords, both):
        assert other.settings == by_object.settings
        for name in ("attention", "gradient", "loo", "ig", "permutation_tvd", "adversary_attention"):
            np.testing.assert_array_equal(getattr(other[0], name), getattr(by_object[0], name))
    assert by_object.settings["adversary_steps"] == 3 and len(by_object[0].permutation_tvd) == 4
    assert explainer.explain(TEXT, ig=False, adversary=False, num_permutations=0)[0].ig is None
    with pytest.raises(ValueError, match=r"unknown explain setting\(s\) \['steps'\]"):
        explainer.explain(TEXT, steps=3)
    with pytest.raises(ValueError, match="settings must be an ExplainSettings, got dict"):
        explainer.explain(TEXT, {"k": 2})
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        explainer.explain(TEXT, k=0)


def test_reprs_are_one_short_line(explainer, trained_model_dir):
    from hf_attn import Explainer

    assert repr(explainer) == ("Explainer(model='BertForSequenceClassification', kind='transformers "
                               "BertForSequenceClassification', device='cpu', attention='layer -1, mean of heads')")
    own = Explainer.from_pretrained(trained_model_dir, device="cpu")
    config = own.model.config
    assert repr(own) == (f"Explainer(model='{trained_model_dir.rstrip('/').split('/')[-1]}', kind='hf_attn "
                         f"{config.encoder} encoder, {config.attention} attention', device='cpu', "
                         "attention='layer -1, mean of heads')")
    explanation = explainer.explain([TEXT, "dull"], adversary_steps=3, num_permutations=2)
    s = explanation[0]
    label = s.label_names[s.predicted]
    assert repr(s) == (f"SentenceExplanation('the film is great', prediction='{label}' "
                       f"({s.probabilities[s.predicted]:.2f}), 4 tokens, methods: attention, gradient, loo, ig, "
                       f"rollout; adversary JSD {s.eps_max_jsd:.3f})")
    assert str(s) == repr(s) and "array" not in repr(s) and "\n" not in repr(s)
    assert repr(explanation) == f"Explanation(2 texts of 'BertForSequenceClassification'; first: {s!r})"
    quiet = explainer.explain("dull", adversary=False, num_permutations=0, ig=False)[0]
    assert repr(quiet).endswith("1 token, methods: attention, gradient, loo, rollout)")
    long = explainer.explain("word " * 30, adversary=False, num_permutations=0, ig=False)[0]
    assert len(repr(long)) < 200 and "..." in repr(long)
    attributions = explainer.attributions([TEXT], methods=["attention", "saliency"])
    assert repr(attributions) == "MethodAttributions(1 text, methods: attention, saliency)"
    jw = explainer.jw([TEXT, "dull"], [0, 1], num_permutations=2, k=1, steps=2)
    text = repr(jw)
    assert text.startswith("BatteryResult('jw', model='BertForSequenceClassification', 2 instances; accuracy=")
    assert "\n" not in text and "adversary_eps_max_jsd=" in text and len(text) < 400


def test_space_explains_with_integrated_gradients_unless_switched_off():
    """The Space's main view computes integrated gradients within its request budget (the same values
    as Explainer.explain) and leaves them out when asked; a budget overrun names IG as a knob."""
    from hf_attn import Explainer
    from hf_attn.app.space import ExplainError, check_settings, explain_sentence

    model, tokenizer = tiny_classifier("bert")
    with_ig = explain_sentence(model, tokenizer, TEXT, steps=3, num_permutations=2)
    reference = Explainer(model, tokenizer, device="cpu").explain(TEXT, adversary_steps=3, num_permutations=2)[0]
    np.testing.assert_allclose(with_ig.ig, reference.ig, rtol=1e-6, atol=1e-9)
    assert with_ig.ig_completeness_gap == pytest.approx(reference.ig_completeness_gap, abs=1e-9)
    assert explain_sentence(model, tokenizer, TEXT, steps=3, num_permutations=2, ig=False).ig is None
    with pytest.raises(ExplainError, match=r"ig_steps must be from 1 to 200 \(got 201\)"):
        check_settings(ig_steps=201)
    with pytest.raises(ExplainError, match="ig .integrated gradients. must be on or off"):
        check_settings(ig="yes")
    with pytest.raises(ExplainError, match="lower the optimisation steps or switch off integrated gradients"):
        explain_sentence(model, tokenizer, TEXT, seconds=1e-9)
