"""No silent wrong answer, whatever model, text, label or option arrives: the model contract at the
door (regression and multi-label heads refused), the length contract (every cut reported, decoders
keep the end their head reads, the position table respected), one validation of settings and labels
shared by the Python API and the evaluate modules, texts that hold nothing to explain."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification

from architectures import tiny_config, word_tokenizer
from hf_attn import Explainer
from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.contract import TruncationWarning

LONG = "the good movie " * 13 + "dull"  # 40 words


def tiny(name: str = "bert", **config):
    """A tiny random classifier of ``name`` with ``config`` overrides, and its word tokenizer."""
    tokenizer = word_tokenizer("none" if name in ("gpt2", "qwen2") else ("bos" if name == "llama" else "cls"))
    cfg = tiny_config(name, len(tokenizer))
    for key, value in config.items():
        setattr(cfg, key, value)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(cfg, attn_implementation="eager").eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def bert():
    return Explainer(*tiny("bert"), device="cpu")


# ----------------------------------------------------------------------------------------------
# the model contract


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("config, pattern", [
    ({"num_labels": 1}, "regression model"),
    ({"problem_type": "regression"}, "regression model"),
    ({"problem_type": "multi_label_classification"}, "multi-label model")])
def test_regression_and_multi_label_models_are_refused_at_the_door(name, config, pattern):
    model, tokenizer = tiny(name, **config)
    with pytest.raises(UnsupportedModelError, match=pattern) as info:
        Explainer(model, tokenizer, device="cpu")
    assert "\n" not in str(info.value)


def test_cli_refuses_a_regression_model_in_one_line(tmp_path, capsys):
    import json

    from hf_attn.cli import main

    model, tokenizer = tiny("bert", num_labels=1)
    model.save_pretrained(tmp_path / "reg")
    tokenizer.save_pretrained(tmp_path / "reg")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                            for i, t in enumerate(["the good movie", "a bad film", "dull plot"])))
    capsys.readouterr()
    code = main(["analyze", str(tmp_path / "reg"), "--battery", "jw", "--output-dir", str(tmp_path / "out"),
                 "--dataset", str(data), "--quiet", "--jw-steps", "1", "--jw-permutations", "2",
                 "--jw-adversaries", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "regression model" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_describe_says_which_row_is_read():
    encoder = Explainer(*tiny("bert"), device="cpu").describe()["text"]
    decoder = Explainer(*tiny("gpt2"), device="cpu").describe()["text"]
    assert "first" in encoder and "last" in decoder


# ----------------------------------------------------------------------------------------------
# length


def _cut_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, TruncationWarning)]


def test_position_table_respected_and_every_cut_reported():
    """max_position_embeddings=16 and a 42-token text: no transformers RuntimeError, one warning per
    call naming how many tokens were dropped and which end was kept."""
    ex = Explainer(*tiny("bert", max_position_embeddings=16), device="cpu")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        explanation = ex.explain([LONG, "the good movie"], adversary=False, ig_steps=2)
        attributions = ex.attributions([LONG], methods=["gradient_x_input"])
        jw = ex.jw([LONG], steps=1, num_permutations=2, k=1)
    messages = _cut_warnings(record)
    assert len(messages) == 3
    assert all("text 0: 26 token(s) dropped" in m and "start of each text was kept" in m for m in messages)
    assert len(explanation[0].tokens) == 14 and explanation[0].words[:2] == ["the", "good"]
    assert attributions.tokens[0][0] == "the" and len(jw.instances[0]["tokens"]) == 14


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decoders_keep_the_end_of_a_long_text(name):
    """The head of a decoder reads the last token: the end of the text is what must be kept."""
    limit = {"gpt2": {"n_positions": 16}, "llama": {"max_position_embeddings": 16}}[name]
    ex = Explainer(*tiny(name, **limit), device="cpu")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        explanation = ex.explain([LONG], adversary=False, ig_steps=2)
        jw = ex.jw([LONG], steps=1, num_permutations=2, k=1)
    messages = _cut_warnings(record)
    assert len(messages) == 2 and all("end of each text was kept" in m for m in messages)
    assert explanation[0].words[-1] == "dull" and jw.instances[0]["tokens"][-1] == "dull"
    assert explanation[0].words[0] != ""  # words numbered from what was kept


def test_text_numbers_in_the_warning_count_across_batches():
    ex = Explainer(*tiny("bert", max_position_embeddings=16), device="cpu")
    with pytest.warns(TruncationWarning, match="text 2: 26 token"):
        ex.explain(["the good", "bad", LONG], adversary=False, ig_steps=2, batch_size=2)


def test_token_lists_longer_than_the_position_table_are_refused():
    ex = Explainer(*tiny("bert", max_position_embeddings=16), device="cpu")
    with pytest.raises(ValueError, match="longer than the model's limit of 16"):
        ex.adapter.from_token_lists([list(range(5, 30))])


# ----------------------------------------------------------------------------------------------
# settings: one validation


@pytest.mark.parametrize("settings, name", [
    ({"eps": -1}, "eps"), ({"eps": math.nan}, "eps"), ({"lam": math.inf}, "lam"), ({"alpha": 5}, "alpha"),
    ({"alpha": 0}, "alpha"), ({"k": 0}, "k"), ({"batch_size": 0}, "batch_size"), ({"lr": 0}, "lr"),
    ({"num_permutations": 0}, "num_permutations"), ({"steps": -1}, "steps")])
def test_jw_settings_out_of_range_are_refused_naming_them(bert, settings, name):
    with pytest.raises(ValueError, match=f"^{name} must"):
        bert.jw(["the good movie", "a bad film"], **({"steps": 1, "num_permutations": 2, "k": 1} | settings))


@pytest.mark.parametrize("settings, name", [
    ({"batch_size": -1}, "batch_size"), ({"batch_size": 0}, "batch_size"), ({"k": 0}, "k"),
    ({"ig_steps": 0}, "ig_steps"), ({"eps": math.nan}, "eps"), ({"adversary_steps": -3}, "adversary_steps"),
    ({"ig_baseline": "one"}, "ig_baseline")])
def test_explain_settings_out_of_range_are_refused_naming_them(bert, settings, name):
    with pytest.raises(ValueError, match=f"^{name} must"):
        bert.explain(["the good", "bad"], **settings)


def test_papers_settings_share_the_checks():
    from hf_attn.batteries.jw.common import JWSettings

    for bad in ({"eps": math.nan}, {"lam": -1.0}, {"alpha": 1.5}, {"k": 0}):
        with pytest.raises(ValueError, match=f"^{next(iter(bad))} must"):
            JWSettings(**bad)


# ----------------------------------------------------------------------------------------------
# labels


@pytest.mark.parametrize("labels, pattern", [
    ([5, 1], r"labels\[0\] = 5 is outside the model's 3 classes"),
    ([-1, 1], r"labels\[0\] = -1 is outside"),
    ([0.7, 1], r"labels\[0\] = 0.7 is not a whole class id"),
    (["neg", 1], r"labels\[0\] = 'neg' is not one of the model's classes"),
    ([0], "2 texts but 1 labels")])
def test_labels_are_checked_against_the_models_classes(bert, labels, pattern):
    with pytest.raises(ValueError, match=pattern):
        bert.jw(["the good movie", "a bad film"], labels, steps=1, num_permutations=2, k=1)
    with pytest.raises(ValueError, match=pattern):
        bert.wp(["the good movie", "a bad film"], labels)


def test_label_names_of_the_model_and_whole_floats_are_accepted(bert):
    names = bert._label_names()
    result = bert.jw(["the good movie", "a bad film"], [names[2], 1.0], steps=1, num_permutations=2, k=1)
    assert [row["label"] for row in result.instances] == [2, 1]


# ----------------------------------------------------------------------------------------------
# texts


@pytest.mark.parametrize("texts, pattern", [
    ({"the good movie": 1, "bad": 0}, "got a dict"),
    ("\u200b\ufeff", "invisible characters"), ("\ufeff", "invisible characters"),
    (["fine", "\u200d\u2060 "], r"texts\[1\] holds only invisible"), ([b"bytes"], "not a string")])
def test_texts_with_nothing_to_explain_are_refused(bert, texts, pattern):
    with pytest.raises(ValueError, match=pattern):
        bert.explain(texts, adversary=False)


# ----------------------------------------------------------------------------------------------
# evaluate modules (through the shared NumPy source they ship)


def test_measures_refuse_degenerate_settings_before_allocating():
    from hf_attn.core import numpy_measures as m

    tvd, jsd = [[0.001, 0.2]], [[0.3, 0.5]]
    for eps in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="^eps must"):
            m.adversary_summary(tvd, jsd, [0.5], [0], eps=eps)
    with pytest.raises(ValueError, match="no adversaries"):
        m.adversary_summary([[]], [[]], [0.5], [0])
    attention, importance = [[0.5, 0.3, 0.2]], [[0.4, 0.4, 0.2]]
    for alpha in (5, 0, 1, math.nan):
        with pytest.raises(ValueError, match="^alpha must"):
            m.correlation_summary(attention, importance, [0], alpha=alpha)
    with pytest.raises(ValueError, match=r"num_classes must be in \[1, 100000\]"):
        m.correlation_summary(attention, importance, [0], num_classes=10 ** 9)
    with pytest.raises(ValueError, match="num_classes must"):
        m.check_class_ids("predictions", [0], 10 ** 9)
    base = [[0.5, 0.5]]
    with pytest.raises(ValueError, match="labels: instance 0 has class 7"):
        m.seed_variance_summary(base, [[[0.5, 0.5], [0.4, 0.6]]], [[0.5, 0.5]], [[[0.5, 0.5], [0.4, 0.6]]],
                                labels=[7])
    with pytest.raises(ValueError, match="^lam must"):
        m.consistent_adversary_loss(np.ones((1, 2)) / 2, np.ones((1, 2)) / 2, base, base,
                                    np.ones((1, 2), bool), math.nan)


@pytest.fixture(scope="module")
def load_metric():
    import os

    import evaluate

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = os.path.join(os.path.dirname(__file__), "..", "hf_attn", "metrics")
    return lambda name: evaluate.load(os.path.abspath(os.path.join(root, name)))


def test_evaluate_modules_refuse_and_agree_on_null(load_metric):
    adversary = load_metric("jw_adversary")
    for eps in (-1.0, math.nan):
        with pytest.raises(ValueError, match="eps must"):
            adversary.compute(adversary_tvd=[[0.001]], adversary_jsd=[[0.3]], max_attention=[0.5], predictions=[0],
                              eps=eps)
    correlation = load_metric("jw_correlation")
    with pytest.raises(ValueError, match="alpha must"):
        correlation.compute(attention=[[0.5, 0.3, 0.2]], importance=[[0.4, 0.4, 0.2]], predictions=[0], alpha=5)
    with pytest.raises(ValueError, match="num_classes must"):
        correlation.compute(attention=[[0.5, 0.3, 0.2]], importance=[[0.4, 0.4, 0.2]], predictions=[0],
                            num_classes=10 ** 9)
    seeds = load_metric("wp_seed_variance")
    arguments = dict(base_attention=[[0.5, 0.5]], seed_attentions=[[[0.5, 0.5], [0.4, 0.6]]],
                     base_probabilities=[[0.5, 0.5]], seed_probabilities=[[[0.5, 0.5], [0.4, 0.6]]])
    with pytest.raises(ValueError, match="class 7"):
        seeds.compute(labels=[7], **arguments)
    out = seeds.compute(labels=[1], **arguments)
    import json

    json.dumps(out, allow_nan=False)  # undefined values are null here too, never NaN, each with its reason
    assert out["undefined"] and all("in this bin" in why for why in out["undefined"].values())


# ----------------------------------------------------------------------------------------------
# weights and the Space


def _saved(tmp_path, name="bert", pickled=False, **config):
    model, tokenizer = tiny(name, **config)
    folder = tmp_path / f"{name}-{'bin' if pickled else 'st'}-{len(config)}"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if pickled:  # what older transformers wrote: a pickle of the state dict
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    return folder


def test_pickled_weights_only_are_refused_everywhere(tmp_path, capsys):
    """The docs promise weights are never unpickled: the Explainer, the CLI and the Space refuse a
    folder with only pytorch_model.bin in one line."""
    from hf_attn.cli import main
    from hf_attn.app.space import ExplainError, load_model

    folder = _saved(tmp_path, pickled=True)
    assert (folder / "pytorch_model.bin").is_file() and not (folder / "model.safetensors").exists()
    with pytest.raises(ValueError, match="only pickled weights"):
        Explainer.from_pretrained(str(folder))
    with pytest.raises(ExplainError, match="only pickled weights"):
        load_model(str(folder))
    capsys.readouterr()
    code = main(["analyze", str(folder), "--battery", "jw", "--output-dir", str(tmp_path / "out"), "--dataset",
                 "sst", "--quiet", "--jw-max-instances", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "only pickled weights" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_space_refuses_a_regression_model_with_the_reason_and_logs_one_line(tmp_path, caplog):
    import logging

    from hf_attn.app.space import ExplainError, load_model

    folder = _saved(tmp_path, num_labels=1)
    with caplog.at_level(logging.WARNING, logger="hf_attn.app"):
        with pytest.raises(ExplainError, match="regression model"):
            load_model(str(folder))
    assert caplog.records and all("\n" not in r.getMessage() and not r.exc_info for r in caplog.records)


@pytest.mark.parametrize("name, row", [("bert", "first token's row"), ("gpt2", "last token's row")])
def test_the_space_says_which_row_is_explained_from_the_adapter(name, row):
    """GPT-2 is not described as "BERT-family … [CLS] attention": the wording comes from the adapter."""
    from hf_attn.app.space import explain_sentence, explained_attention
    from hf_attn.explanation.render import summary_markdown

    model, tokenizer = tiny(name)
    text = explained_attention(model, tokenizer)
    assert row in text and "[CLS]" not in text
    explanation = explain_sentence(model, tokenizer, "the good movie", steps=2, num_permutations=2)
    assert row in summary_markdown(explanation) and "[CLS]" not in summary_markdown(explanation)


def test_visitor_errors_print_no_traceback(monkeypatch):
    pytest.importorskip("gradio")
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "space_app", pathlib.Path(__file__).resolve().parents[1] / "spaces_app" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    from hf_attn.app.space import ExplainError

    def visitor_mistake():
        raise ExplainError("Please type a sentence")

    def bug():
        raise RuntimeError("/srv/secret/path")

    for handler in (visitor_mistake, bug):
        with pytest.raises(app.gr.Error) as info:
            app.visitor_errors(handler)()
        assert info.value.print_exception is False


# ----------------------------------------------------------------------------------------------
# the data's labels against the model's classes (hf-attn analyze on a transformers classifier)


def _jsonl(path, rows):
    import json

    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    return path


def test_cli_refuses_data_with_more_classes_or_other_names_than_the_model(tmp_path, capsys):
    from hf_attn.cli import main

    folder = _saved(tmp_path, num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
    texts = ["the good movie", "a bad film", "dull plot", "fun story", "very good acting"]
    five = _jsonl(tmp_path / "five.jsonl", [(t, i) for i, t in enumerate(texts)])
    named = _jsonl(tmp_path / "named.jsonl", [(t, ["negative", "positive"][i % 2]) for i, t in enumerate(texts)])
    # integer labels are the model's class ids: the first beyond its 2 classes is refused with its line
    for data, pattern in ((five, "five.jsonl, line 3: label 2 is outside the model's 2 classes"),
                          (named, "'negative' is not a class of the model")):
        capsys.readouterr()
        code = main(["analyze", str(folder), "--battery", "jw", "--output-dir", str(tmp_path / data.stem),
                     "--dataset", str(data), "--quiet", "--jw-steps", "1", "--jw-permutations", "2",
                     "--jw-adversaries", "1"])
        err = capsys.readouterr().err
        assert code == 2 and pattern in err and len(err.strip().splitlines()) == 1


def test_data_named_like_the_model_is_matched_by_name(tmp_path, capsys):
    """Names the model has are matched by name, not by sort order: 'pos' before 'neg' in id2label."""
    import json

    from hf_attn.cli import main

    folder = _saved(tmp_path, num_labels=2, id2label={0: "pos", 1: "neg"}, label2id={"pos": 0, "neg": 1})
    data = _jsonl(tmp_path / "d.jsonl", [("the good movie", "pos"), ("a bad film", "neg"), ("fun", "pos")])
    capsys.readouterr()
    assert main(["analyze", str(folder), "--battery", "jw", "--output-dir", str(tmp_path / "out"), "--dataset",
                 str(data), "--quiet", "--jw-steps", "1", "--jw-permutations", "2", "--jw-adversaries", "1"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = [json.loads(line) for line in (tmp_path / "out" / "instances.jsonl").read_text().splitlines()]
    assert results["label_names"] == ["pos", "neg"]
    assert [r.get("label") for r in rows] == [0, 1, 0]
