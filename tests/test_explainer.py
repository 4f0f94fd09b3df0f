"""The notebook API (hf_attn.Explainer) on a tiny BERT, a tiny Llama and a trained BiLSTM: the values
it shows are the methods' own (checked against them and against definitions), words merge tokens by
summing, results round-trip through save/load, HTML and pandas views, and bad input is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn import BatteryResult, Explainer
from hf_attn.methods.gradient import attention_fixed_gradient
from hf_attn.methods.leave_one_out import deletion_importance



@pytest.fixture(scope="module", params=["bert", "llama"])
def explainer(request):
    model, tokenizer = tiny_classifier(request.param)
    return Explainer(model, tokenizer, device="cpu")


def test_explain_gives_the_methods_values_per_token_and_word(explainer):
    e = explainer.explain(TEXTS[:3], ig_steps=64, adversary_steps=10, k=2)
    assert len(e) == 3
    adapter = explainer.adapter
    batch = adapter.encode(TEXTS[:3])
    gradient = attention_fixed_gradient(adapter, batch)
    loo = deletion_importance(adapter, batch)
    for i, s in enumerate(e.sentences):
        keep = batch.content[i]
        assert len(s.tokens) == int(keep.sum())
        np.testing.assert_allclose(s.values["gradient"], gradient[i][keep].double().numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(s.values["loo"], loo[i][keep].double().numpy(), rtol=1e-5, atol=1e-7)
        assert sum(s.values["attention"]) == pytest.approx(1.0, abs=1e-5)
        # completeness of IG (Sundararajan et al. §3): the sum of the attributions = f(x) − f(x').
        # Llama's RMSNorm is singular at the zero embedding (its pad row is zero too), where a
        # Riemann sum cannot converge: there the gap is only reported, and it is large.
        if adapter.model_type == "bert":
            assert abs(s.ig_completeness_gap) < 0.02
        else:
            assert np.isfinite(s.ig_completeness_gap)
        # words: a word's value is the sum of its tokens' values
        words = s.word_values("attention")
        assert len(words) == len(s.words) and sum(words) == pytest.approx(1.0, abs=1e-5)
        assert s.adversary_jsd is not None and 0 <= s.adversary_jsd <= np.log(2) + 1e-6
    acting = e[1]
    assert "acting" in acting.words
    w = acting.words.index("acting")
    pieces = [j for j, word in enumerate(acting.word_ids) if word == w]
    assert len(pieces) == 2  # act ##ing
    assert acting.word_values("gradient")[w] == pytest.approx(sum(acting.values["gradient"][j] for j in pieces))
    tokens = e.to_pandas()
    assert len(tokens) == sum(len(s.tokens) for s in e.sentences)
    assert set(["attention", "gradient", "loo", "ig", "rollout"]) <= set(tokens.columns)
    assert len(e.to_pandas("word")) == sum(len(s.words) for s in e.sentences)
    page = e._repr_html_()
    assert page.count('data-row="attention"') == 3 and 'data-row="rollout"' in page


def test_jw_in_memory_round_trips(explainer, tmp_path):
    labels = [0, 1, 2, 0, 1]
    result = explainer.jw(TEXTS, labels, num_permutations=6, k=2, steps=8)
    headline = result.summary()
    assert headline["num_instances"] == 5 and headline["accuracy"] is not None
    assert headline["permutation_median_tvd"] is not None and headline["adversary_eps_max_jsd"] is not None
    frame = result.to_pandas()
    assert len(frame) == 5 and {"tau_attention_gradient", "eps_max_jsd", "max_attention"} <= set(frame.columns)
    result.save(str(tmp_path / "jw"))
    loaded = BatteryResult.load(str(tmp_path / "jw"))
    assert loaded.summary() == headline and loaded.instances == json.loads(json.dumps(result.instances))
    figure = result.plot(str(tmp_path / "jw.png"))
    assert figure is not None and (tmp_path / "jw.png").stat().st_size > 1000
    assert "jw battery" in result._repr_html_()


def test_wp_and_eraser_in_memory(explainer):
    wp = explainer.wp(TEXTS, [0, 1, 2, 0, 1])
    assert {"base", "uniform", "f1_gap"} <= set(wp.summary())
    assert len(wp.to_pandas()) == 5
    eraser = explainer.eraser(TEXTS, ig_steps=4)
    measures = set(eraser.to_pandas()["measure"])
    assert {"attention", "rollout", "gradient", "loo", "ig", "random"} <= measures


def test_papers_model_through_the_same_api(trained_model_dir, tmp_path):
    """A trained BiLSTM: the same calls; jw equals the BiLSTM battery's own numbers."""
    from hf_attn.batteries.jw.battery import run_jw_battery
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.models.loading import load_model_folder

    ex = Explainer.from_pretrained(trained_model_dir)
    texts = ["a gripping , beautifully acted film", "the plot is dull and the acting is worse", "fun"]
    e = ex.explain(texts, ig_steps=32, adversary_steps=10, k=2)
    assert e[0].values["rollout"] is None  # one attention layer: no rollout
    assert sum(e[0].values["attention"]) == pytest.approx(1.0, abs=1e-5)
    result = ex.jw(texts, [1, 0, 1], num_permutations=5, k=2, steps=5)
    model, tokenizer = load_model_folder(trained_model_dir)
    _, summary = run_jw_battery(JWSettings().adapter(model, tokenizer), texts, [1, 0, 1], JWSettings(num_permutations=5, k=2, steps=5),
                                progress=False)
    assert result.summary()["tau_gradient"] == pytest.approx(summary["tau_gradient"]["overall"]["mean"])
    with pytest.raises(ValueError, match="run on the CPU"):
        Explainer.from_pretrained(trained_model_dir, device="cuda")


def test_from_pretrained_and_bad_input(tmp_path):
    model, tokenizer = tiny_classifier("distilbert")
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    ex = Explainer.from_pretrained(str(tmp_path / "m"), device="cpu")
    assert ex.describe()["model_type"] == "distilbert" and ex.describe()["name"] == "m"
    from datasets import Dataset

    column = Dataset.from_dict({"text": TEXTS[:2]})["text"]
    assert len(ex.explain(column, adversary=False, ig_steps=2)) == 2
    with pytest.raises(ValueError, match=r"texts\[1\] is a int"):
        ex.explain(["fine", 3])
    with pytest.raises(ValueError, match="texts is empty"):
        ex.explain([])
    with pytest.raises(ValueError, match="5 texts but 2 labels"):
        ex.jw(TEXTS, [0, 1])
    with pytest.raises(ValueError, match="unknown jw setting"):
        ex.jw(TEXTS, steps_per_epoch=3)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"broken/config.json is not valid JSON"):
        Explainer.from_pretrained(str(tmp_path / "broken"))


def test_faithfulness_table_in_memory(explainer):
    result = explainer.faithfulness(TEXTS[:3], methods=("attention", "saliency", "leave_one_out", "random"),
                                    naopc_beam=0, soft_draws=1, soft_max_draws=1)
    frame = result.to_pandas()
    assert len(frame) and set(result.methods) == {"attention", "saliency", "leave_one_out", "random"}
    with pytest.raises(ValueError, match="unknown faithfulness setting"):
        explainer.faithfulness(TEXTS, method="attention")


def test_attributions_side_by_side_are_the_methods_own(explainer):
    """Explainer.attributions: per text and content token, each method's scores equal the method
    function called on the adapter (the battery's rows); bad arguments are refused by name."""
    from hf_attn.methods.gradient_x_input import gradient_x_input
    from hf_attn.methods.raw_attention import raw_attention

    side = explainer.attributions(TEXTS[:3], methods=["attention", "gradient_x_input", "leave_one_out"])
    batch = explainer.adapter.encode(TEXTS[:3])
    assert side.methods == ["attention", "gradient_x_input", "leave_one_out"] and not side.skipped
    for name, function in (("attention", raw_attention), ("gradient_x_input", gradient_x_input)):
        reference = function(explainer.adapter, batch)
        for i in range(3):
            np.testing.assert_allclose(side.values[name][i], reference[i][batch.content[i]].double().numpy(),
                                       atol=1e-6, err_msg=name)
    for i in range(3):  # leave-one-out by deleting each token and running the model again
        ids = batch.input_ids[i][batch.attention_mask[i].bool()].tolist()
        content = batch.content[i][batch.attention_mask[i].bool()].tolist()
        full = explainer.adapter.logits(explainer.adapter.from_token_lists([ids])).softmax(-1)[0]
        c = int(full.argmax())
        expected = [float(full[c] - explainer.adapter.logits(explainer.adapter.from_token_lists(
            [ids[:t] + ids[t + 1:]])).softmax(-1)[0, c]) for t in range(len(ids)) if content[t]]
        np.testing.assert_allclose(side.values["leave_one_out"][i], expected, atol=1e-5)
        assert len(side.tokens[i]) == len(expected)
    assert len(side.to_pandas()) == sum(len(t) for t in side.tokens)
    with pytest.raises(ValueError, match="methods must be a list of method names"):
        explainer.attributions(TEXTS, methods="attention")
    with pytest.raises(ValueError, match="methods must be a non-empty subset"):
        explainer.attributions(TEXTS, methods=["telepathy"])
    with pytest.raises(ValueError, match="unknown attribution setting"):
        explainer.attributions(TEXTS, steps=3)
