"""Bad input, tried systematically: every case must fail with a clear message naming
the problem, or (where documented) be handled: property tests (hypothesis) for the measures, the
tokenizer and the data loaders, explicit cases for everything else.

Set ``HF_ATTN_BAD_INPUT_LOG=path.json`` to record each case with the message it produced.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.data.tasks import DataError, load_local, load_task
from hf_attn.core.measures import LN2, jsd, kendall_tau, kl_divergence, tvd
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.data.tokenization import build_tokenizer
from hf_attn.core.io import write_json_atomic
from hf_attn.methods import eraser, integrated_gradients
from hf_attn.core.validation import check_class_ids, check_distributions, check_finite, check_same_count

METRICS = os.path.join(os.path.dirname(__file__), os.pardir, "hf_attn", "metrics")
RECORDED: list[dict] = []
HYPOTHESIS = settings(max_examples=60, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def expect_error(case: str, exception, pattern: str, fn, *args, **kwargs) -> str:
    """Call ``fn``; it must raise ``exception`` with a message matching ``pattern``. Recorded."""
    with pytest.raises(exception) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert re.search(pattern, message, flags=re.IGNORECASE), f"{case}: unclear message {message!r}"
    RECORDED.append({"case": case, "error": type(info.value).__name__, "message": message})
    return message


def record(case: str, outcome: str) -> None:
    RECORDED.append({"case": case, "error": None, "message": outcome})


@pytest.fixture(scope="module", autouse=True)
def _write_log():
    yield
    path = os.environ.get("HF_ATTN_BAD_INPUT_LOG")
    if path:
        write_json_atomic(path, RECORDED)


TEXTS = ["a good movie", "a bad film", "great fun", "an awful mess", "good good fun", "bad bad film"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")

@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(TEXTS, max_length=24)


@pytest.fixture(scope="module")
def model(tokenizer):
    config = AttnClassifierConfig(vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, hidden_size=4,
                                  num_labels=2, max_tokens=24, pad_token_id=0, unk_token_id=1,
                                  mask_token_id=2, id2label={0: "negative", 1: "positive"},
                                  label2id={"negative": 0, "positive": 1})
    torch.manual_seed(0)
    return AttnClassifierForSequenceClassification(config).eval()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, model, tokenizer):
    path = str(tmp_path_factory.mktemp("tiny") / "model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ----------------------------------------------------------------------------------------------
# measures: property tests


def _distribution(values, zero_mask):
    v = np.asarray(values, dtype=np.float64) * ~np.asarray(zero_mask[: len(values)])
    if v.sum() == 0:
        v[0] = 1.0
    return v / v.sum()


pairs = st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n),
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n)))


@HYPOTHESIS
@given(pairs)
def test_divergences_bounded_and_never_nan(pair):
    a, b, za, zb = pair
    p, q = _distribution(a, za), _distribution(b, zb)
    d_jsd, d_tvd = float(jsd(p, q)), float(tvd(p, q))
    assert 0.0 <= d_jsd <= LN2 + 1e-12 and 0.0 <= d_tvd <= 1.0 + 1e-12
    assert float(jsd(p, p)) == pytest.approx(0.0, abs=1e-12) and float(tvd(p, p)) == 0.0
    kl = float(kl_divergence(p, q))
    assert not math.isnan(kl) and kl >= -1e-12  # +inf where p > 0 = q (documented)
    assert math.isfinite(float(kl_divergence(p, 0.5 * (p + q))))


@HYPOTHESIS
@given(st.integers(1, 5), st.integers(1, 14), st.data())
def test_kendall_tau_bounds_ties_and_masks(rows, width, data):
    ints = st.lists(st.lists(st.integers(-3, 3), min_size=width, max_size=width), min_size=rows,
                    max_size=rows)
    x, y = np.array(data.draw(ints), float), np.array(data.draw(ints), float)
    lengths = np.array(data.draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows)))
    mask = np.arange(width)[None] < lengths[:, None]
    result = kendall_tau(x, y, mask)
    assert np.all(np.isnan(result.tau[~result.valid])) and np.all(np.isnan(result.pvalue[~result.valid]))
    assert np.all(np.abs(result.tau[result.valid]) <= 1.0)
    assert np.all((result.pvalue[result.valid] >= 0) & (result.pvalue[result.valid] <= 1))
    assert not result.valid[lengths < 2].any()


def test_kendall_tau_rejects_nan_and_mismatched_shapes():
    expect_error("kendall_tau with NaN", ValueError, "NaN or inf", kendall_tau,
                 np.array([[1.0, np.nan]]), np.array([[1.0, 2.0]]))
    expect_error("kendall_tau with shapes (1,2)/(1,3)", ValueError, "same shape", kendall_tau,
                 np.ones((1, 2)), np.ones((1, 3)))


# ----------------------------------------------------------------------------------------------
# tokenizer and model on odd texts


@HYPOTHESIS
@given(st.text(max_size=300))
def test_tokenizer_on_arbitrary_unicode(tokenizer, text):
    ids = tokenizer(text, truncation=True)["input_ids"]
    vocab = len(tokenizer.get_vocab())
    assert all(0 <= i < vocab for i in ids) and len(ids) <= tokenizer.model_max_length
    if ids == []:  # no tokens only for text the loaders reject as empty/whitespace-only
        assert not text.strip()


@pytest.mark.parametrize("text, tokens", [("!!! ... ?", ["[UNK]"] * 7), ("zzz qqqy", ["[UNK]", "[UNK]"]),
                                          ("\u200b\x00", ["[UNK]", "[UNK]"]), ("日本語", ["[UNK]"])])
def test_unknown_or_punctuation_texts_become_unk_tokens(model, tokenizer, text, tokens):
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens  # never an empty sequence
    probabilities = model(input_ids=torch.tensor([ids])).logits.softmax(-1)
    assert torch.isfinite(probabilities).all()
    record(f"text {text!r}", f"tokenised as {tokens}; classified (finite ŷ)")


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_or_whitespace_text_is_rejected_everywhere(model, tokenizer, text):
    from hf_attn.batteries.jw.battery import JWSettings, run_jw_battery
    from hf_attn.app.space import ExplainError, explain_sentence

    expect_error(f"explain_sentence({text!r})", ExplainError, "empty", explain_sentence, model, tokenizer,
                 text)
    expect_error(f"jw battery with text {text!r}", ValueError, "no tokens", run_jw_battery,
                 JWSettings().adapter(model, tokenizer), ["good fun", text], settings=JWSettings(steps=1, num_permutations=2),
                 progress=False)
    ids = torch.tensor([tokenizer(text)["input_ids"]], dtype=torch.long)
    expect_error(f"model forward on {text!r} (0 tokens)", ValueError, "at least one token", model,
                 input_ids=ids)


def test_text_longer_than_the_model_limit(model, tokenizer, caplog):
    """Documented policy: training and batteries truncate to ``max_tokens`` (with a warning in
    training); the interactive explorer refuses with a message; the model's forward refuses more
    than ``config.max_tokens`` real tokens."""
    from datasets import Dataset, DatasetDict

    from hf_attn.batteries.jw.battery import JWSettings, run_jw_battery
    from hf_attn.data.tasks import TaskData
    from hf_attn.app.space import ExplainError, explain_sentence
    from hf_attn.training.engine import tokenize_splits

    long_text = "good fun " * 200  # 400 tokens, limit 24
    expect_error("explain_sentence(400-token text, limit 24)", ExplainError, "too long: 400 tokens",
                 explain_sentence, model, tokenizer, long_text)
    _, summary = run_jw_battery(JWSettings().adapter(model, tokenizer), [long_text], [1],
                                JWSettings(steps=2, num_permutations=2), progress=False)
    assert summary["length"]["max"] == 24
    record("jw battery on a 400-token text (limit 24)", "truncated to 24 tokens (max_tokens)")
    splits = DatasetDict({s: Dataset.from_dict({"text": [long_text, "good"], "label": [1, 0]})
                          for s in ("train", "validation", "test")})
    with caplog.at_level(logging.WARNING, logger="hf_attn.training.engine"):
        encoded = tokenize_splits(TaskData(splits, ["negative", "positive"], "long"), tokenizer, 24)
    assert len(encoded["train"][0]["input_ids"]) == 24
    assert "truncated to max_length=24" in caplog.text
    RECORDED.append({"case": "training on a 400-token text (max_length 24)", "error": "warning",
                     "message": [r.getMessage() for r in caplog.records if r.name == "hf_attn.training.engine"][0]})
    expect_error("model forward on 400 token ids (max_tokens 24)", ValueError,
                 "input_ids has 400 tokens, more than the model's max_tokens=24", model,
                 input_ids=torch.tensor([tokenizer(long_text)["input_ids"]]))
    truncated = tokenizer(long_text, truncation=True, max_length=24)["input_ids"]
    assert torch.isfinite(model(input_ids=torch.tensor([truncated])).logits).all()


# ----------------------------------------------------------------------------------------------
# a single-token text through every analysis


def test_single_token_through_every_analysis(model, tokenizer):
    from hf_attn.batteries.jw import battery as jw
    from hf_attn.app.space import explain_sentence

    ids = torch.tensor([tokenizer("good")["input_ids"]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    out = model(input_ids=ids, output_hidden_states=True)
    hidden, attention = out.hidden_states.detach(), out.attentions.detach()
    assert attention.item() == pytest.approx(1.0)
    assert torch.isfinite(jw.gradient_importance(model, ids, mask)).all()
    assert torch.isnan(jw.leave_one_out(model, ids, mask)).all()  # x₋t would be empty: skipped
    assert torch.equal(jw.permutation_tvd(model, hidden, attention, mask, 5), torch.zeros(1, 5))
    adversary = jw.adversarial_attention(model, hidden, attention, mask, k=3, steps=5)
    assert adversary.eps_max_jsd.item() == 0.0 and torch.allclose(adversary.attention, torch.ones(1, 3, 1))
    _, summary = jw.run_jw_battery(jw.JWSettings().adapter(model, tokenizer), ["good", "good fun"], [1, 1],
                                   jw.JWSettings(steps=3, num_permutations=3), progress=False)
    assert summary["length"]["single_token"] == 1
    assert summary["tau_loo"]["overall"]["skipped"] >= 1
    erased = eraser.eraser_scores(model, ids, mask, torch.ones(1, 1))
    assert np.isfinite(erased.comprehensiveness).all() and np.isfinite(erased.sufficiency).all()
    ig = integrated_gradients.integrated_gradients_importance(model, ids, mask, steps=4)
    assert torch.isfinite(torch.as_tensor(ig)).all()
    explanation = explain_sentence(model, tokenizer, "good", steps=3, num_permutations=3)
    # explain's LOO of a one-token text reads the model's empty input, one [PAD] for these models
    # (hf_attn.methods.one_token: the table's, attributions' and ERASER's removal too); its τ is undefined
    with torch.no_grad():
        empty = model(input_ids=torch.tensor([[tokenizer.pad_token_id]])).logits.softmax(-1)[0]
    full = model(input_ids=ids).logits.softmax(-1)[0].detach()
    assert explanation.tokens == ["good"] and explanation.loo[0] == pytest.approx(
        float(0.5 * (full - empty).abs().sum()), abs=1e-6)
    assert "kendall" in explanation.undefined and "loo" not in explanation.undefined
    assert json.dumps(explanation.to_dict())  # NaN → None, JSON-ready
    record("single-token text through gradient/LOO/permutation/adversary/battery/ERASER/IG/explain",
           "J&W LOO NaN (skipped in τ), explain's LOO against the empty input, permutation Δŷ 0, ε-max JSD 0, "
           "τ skipped")


# ----------------------------------------------------------------------------------------------
# data files


def _write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def _rows(n=20):
    return "".join(f"text number {i} is {'good' if i % 2 else 'bad'},{i % 2}\n" for i in range(n))


@pytest.mark.parametrize("name, content, pattern", [
    ("latin1.csv", b"text,label\n" + b"caf\xe9 au lait,0\n" + _rows().encode(), "not valid UTF-8"),
    ("latin1.jsonl", b'{"text": "caf\xe9", "label": 0}\n' * 20, "not valid UTF-8"),
    ("nolabel.csv", "text,stars\n" + _rows(), r"missing column\(s\) \['label'\]"),
    ("notext.csv", "review,label\n" + _rows(), r"missing column\(s\) \['text'\]"),
    ("emptytext.csv", "text,label\n,0\n" + _rows(), "missing \\(empty\\) text"),
    ("blank.csv", 'text,label\n"   ",0\n' + _rows(), "empty or whitespace-only text"),
    ("nolabelvalue.csv", "text,label\nsome text,\n" + _rows(), "missing label"),
    ("broken.jsonl", '{"text": "hi", "label": 0}\n{"text": \n', "could not parse"),
    ("empty.csv", "", "could not parse"),
    ("headeronly.csv", "text,label\n", "at least 2 classes"),
    ("oneclass.csv", "text,label\n" + "".join(f"text {i},1\n" for i in range(20)), "at least 2 classes"),
    ("data.parquet", "x", "unsupported file type"),
])
def test_bad_data_files(tmp_path, name, content, pattern):
    path = _write(tmp_path, name, content)
    expect_error(f"data file {name}", DataError, pattern, load_task, path)


def test_label_outside_the_label_set_and_extra_columns(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "train.csv").write_text("text,label\n" + "good one,pos\nbad one,neg\n" * 5)
    (folder / "validation.csv").write_text("text,label\ngood one,pos\nmeh one,neutral\n")
    (folder / "test.csv").write_text("text,label\ngood one,pos\n")
    expect_error("validation label 'neutral' not in the train label set", DataError,
                 r"label 'neutral' is not in the label set \['neg', 'pos'\]", load_task, str(folder))
    (folder / "validation.csv").write_text("text,label,source,score\ngood one,pos,x,1\nbad one,neg,y,2\n")
    task = load_task(str(folder))
    assert task.splits["validation"].column_names == ["text", "label"]  # extra columns are dropped
    record("extra columns (source, score)", "ignored: only text and label are kept")
    expect_error("no such data file", FileNotFoundError, "unknown dataset.*no such file", load_task,
                 str(tmp_path / "missing.csv"))
    expect_error("agnews without --data-path", DataError, "needs --data-path", load_task, "agnews")


@HYPOTHESIS
@given(st.lists(st.tuples(st.text(max_size=40), st.sampled_from(["a", "b"])), min_size=2, max_size=30))
def test_csv_loader_round_trips_or_names_the_problem(tmp_path, rows):
    path = tmp_path / "rows.csv"
    pd.DataFrame({"text": [t for t, _ in rows], "label": [lab for _, lab in rows]}).to_csv(path, index=False)
    try:
        task = load_local(str(path), seed=0)
    except DataError as err:
        assert re.search(r"line \d+|row \d+|no rows|at least 2 classes|label|not a string|could not parse",
                         str(err)), str(err)
        return
    texts = sorted(t for s in task.splits.values() for t in s["text"])
    assert len(texts) == len(rows) and all(isinstance(t, str) for t in texts)


# ----------------------------------------------------------------------------------------------
# checkpoints


def test_corrupt_truncated_foreign_and_configless_checkpoints(model_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    weights = os.path.join(model_dir, "model.safetensors")
    for name, content in (("garbage", b"not a safetensors file" * 4),
                          ("truncated", open(weights, "rb").read()[: os.path.getsize(weights) // 2])):
        broken = tmp_path / name
        shutil.copytree(model_dir, broken)
        (broken / "model.safetensors").write_bytes(content)
        expect_error(f"{name} model.safetensors", OSError, "corrupt or truncated",
                     AttnClassifierForSequenceClassification.from_pretrained, str(broken))
    foreign = tmp_path / "foreign"
    shutil.copytree(model_dir, foreign)
    config = json.loads((foreign / "config.json").read_text())
    config["model_type"] = "bert"
    (foreign / "config.json").write_text(json.dumps(config))
    expect_error("config.json of model_type 'bert'", ValueError, "not an hf_attn model",
                 AttnClassifierForSequenceClassification.from_pretrained, str(foreign))
    with pytest.raises(Exception):  # the Auto classes build a BERT from it and fail in BERT's code
        AutoModelForSequenceClassification.from_pretrained(str(foreign))
    configless = tmp_path / "configless"
    shutil.copytree(model_dir, configless)
    os.unlink(configless / "config.json")
    expect_error("model folder without config.json", FileNotFoundError, "no config.json",
                 AttnClassifierForSequenceClassification.from_pretrained, str(configless))


def test_cli_reports_corrupt_model_without_traceback(model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"\x00" * 64)
    (broken / "run.json").write_text(json.dumps({"settings": {"dataset": "sst"}}))
    assert main(["analyze", str(broken), "--battery", "jw", "--output-dir", str(tmp_path / "out"),
                 "--quiet"]) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "corrupt or truncated" in message
    RECORDED.append({"case": "hf-attn analyze on a corrupt model.safetensors", "error": "exit 2",
                     "message": message})
    assert not os.path.exists(tmp_path / "out" / "results.json")  # nothing half-written


# ----------------------------------------------------------------------------------------------
# model inputs


def test_model_rejects_bad_tensors(model):
    ids = torch.tensor([[3, 4, 5]])
    expect_error("attention_weights with NaN", ValueError, "NaN or inf", model, input_ids=ids,
                 attention_weights=torch.tensor([[float("nan"), 0.5, 0.5]]))
    expect_error("attention_weights summing to 2.7", ValueError, "sums to 2.7.*not 1", model,
                 input_ids=ids, attention_weights=torch.tensor([[0.9, 0.9, 0.9]]))
    expect_error("negative attention_weights", ValueError, ">= 0", model, input_ids=ids,
                 attention_weights=torch.tensor([[1.5, -0.5, 0.0]]))
    expect_error("attention_weights of 2 tokens for 3", ValueError, "has shape", model, input_ids=ids,
                 attention_weights=torch.tensor([[0.5, 0.5]]))
    expect_error("token id beyond the vocabulary", ValueError, "outside the vocabulary", model,
                 input_ids=torch.tensor([[10_000]]))
    expect_error("left-padded mask", ValueError, "right-padded|pads must be on the right", model,
                 input_ids=ids, attention_mask=torch.tensor([[0, 1, 1]]))
    expect_error("label 7 for a binary model", ValueError, r"labels must be in \[0, 2\)", model,
                 input_ids=ids, labels=torch.tensor([7]))
    # pads may hold anything: they are zeroed before the check
    model(input_ids=ids, attention_mask=torch.tensor([[1, 1, 0]]),
          attention_weights=torch.tensor([[0.5, 0.5, float("nan")]]))
    # non-finite embeddings, a fractional mask, more tokens than max_tokens (24)
    embeds = model.get_input_embeddings()(ids).detach()
    embeds[0, 1, 0] = float("nan")
    expect_error("inputs_embeds with NaN", ValueError, "inputs_embeds contains NaN or inf", model,
                 inputs_embeds=embeds)
    embeds[0, 1, 0] = float("inf")
    expect_error("inputs_embeds with inf", ValueError, "inputs_embeds contains NaN or inf", model,
                 inputs_embeds=embeds)
    expect_error("attention_mask 1/0.5/0", ValueError, "attention_mask must hold only 0.*and 1.*got 0.5",
                 model, input_ids=ids, attention_mask=torch.tensor([[1.0, 0.5, 0.0]]))
    expect_error("30 token ids for max_tokens 24", ValueError,
                 "input_ids has 30 tokens, more than the model's max_tokens=24", model,
                 input_ids=torch.full((1, 30), 3))


def test_analysis_functions_reject_bad_arrays(model, tokenizer):
    ids = torch.tensor([tokenizer("good fun film")["input_ids"]])
    mask = torch.ones_like(ids)
    expect_error("ERASER importance with NaN", ValueError, "NaN/inf", eraser.eraser_scores, model,
                 ids, mask, torch.tensor([[float("nan"), 1.0, 0.0]]))
    expect_error("ERASER importance of the wrong length", ValueError, "importance has shape",
                 eraser.eraser_scores, model, ids, mask, torch.ones(1, 2))


# ----------------------------------------------------------------------------------------------
# evaluate modules: NaN/inf, attention that does not sum to 1, mismatched lengths


@pytest.fixture(scope="module")
def metric():
    import evaluate

    cache = {}

    def load(name):
        if name not in cache:
            cache[name] = evaluate.load(os.path.abspath(os.path.join(METRICS, name)))
        return cache[name]
    return load


NAN, INF = float("nan"), float("inf")
ATT = [[0.5, 0.5], [0.2, 0.3, 0.5]]
EVALUATE_CASES = [
    ("jw_correlation", "NaN in attention", dict(attention=[[NAN, 0.5], ATT[1]], importance=[[1, 2], [1, 2, 3]],
                                                predictions=[0, 1]), "attention.*instance 0.*finite"),
    ("jw_correlation", "inf in importance", dict(attention=ATT, importance=[[1, INF], [1, 2, 3]],
                                                 predictions=[0, 1]), "importance.*instance 0.*finite"),
    ("jw_correlation", "attention summing to 1.8", dict(attention=[[0.9, 0.9], ATT[1]],
                                                        importance=[[1, 2], [1, 2, 3]], predictions=[0, 1]),
     "sums to 1.8"),
    ("jw_correlation", "rows of 2 vs 3 tokens", dict(attention=ATT, importance=[[1, 2, 3], [1, 2, 3]],
                                                     predictions=[0, 1]), "instance 0"),
    ("jw_correlation", "prediction -1", dict(attention=ATT, importance=[[1, 2], [1, 2, 3]],
                                             predictions=[0, -1]), "class"),
    ("jw_permutation", "NaN TVD", dict(permutation_tvd=[[NAN, 0.1], [0.1, 0.2]], max_attention=[0.5, 0.5],
                                       predictions=[0, 1]), "permutation_tvd.*finite"),
    ("jw_permutation", "TVD 3.0", dict(permutation_tvd=[[3.0, 0.1], [0.1, 0.2]], max_attention=[0.5, 0.5],
                                       predictions=[0, 1]), r"outside \[0, 1\]"),
    ("jw_permutation", "max attention 1.5", dict(permutation_tvd=[[0.1, 0.1], [0.1, 0.2]],
                                                 max_attention=[1.5, 0.5], predictions=[0, 1]), "max_attention"),
    ("jw_permutation", "3 instances of max attention for 2", dict(permutation_tvd=[[0.1, 0.1], [0.1, 0.2]],
                                                                  max_attention=[0.5, 0.5, 0.5],
                                                                  predictions=[0, 1]), "numbers of instances|mismatch in the number"),
    ("jw_adversary", "NaN JSD", dict(adversary_tvd=[[0.0], [0.0]], adversary_jsd=[[NAN], [0.1]],
                                     max_attention=[0.5, 0.5], predictions=[0, 1]), "adversary_jsd.*finite"),
    ("jw_adversary", "JSD 5 > ln 2", dict(adversary_tvd=[[0.0], [0.0]], adversary_jsd=[[5.0], [0.1]],
                                          max_attention=[0.5, 0.5], predictions=[0, 1]), "outside"),
    ("jw_adversary", "k = 2 TVDs vs k = 1 JSDs", dict(adversary_tvd=[[0.0, 0.0], [0.0, 0.0]],
                                                      adversary_jsd=[[0.1], [0.1]], max_attention=[0.5, 0.5],
                                                      predictions=[0, 1]), "instance 0"),
    ("ts_token_probability", "NaN attention", dict(token_logits=[[[0.1], [0.2]]], attentions=[[NAN, 0.5]],
                                                   references=[1]), "attentions.*finite"),
    ("ts_token_probability", "attention summing to 1.8", dict(token_logits=[[[0.1], [0.2]]],
                                                              attentions=[[0.9, 0.9]], references=[1]), "sums to 1.8"),
    ("ts_token_probability", "inf token logits", dict(token_logits=[[[INF], [0.2]]], attentions=[[0.5, 0.5]],
                                                      references=[1]), "token_logits.*finite"),
    ("ts_token_probability", "3 token logits vs 2 weights", dict(token_logits=[[[0.1], [0.2], [0.3]]],
                                                                 attentions=[[0.5, 0.5]], references=[1]),
     "instance 0"),
    ("ts_fragility", "NaN attention", dict(token_logits=[[[0.1], [0.2]]], attentions=[[NAN, 0.5]],
                                           references=[1]), "attentions.*finite"),
    ("ts_fragility", "attention summing to 1.8", dict(token_logits=[[[0.1], [0.2]]], attentions=[[0.9, 0.9]],
                                                      references=[1]), "sums to 1.8"),
    ("wp_consistent_adversary", "NaN adversary attention", dict(
        adversary_attention=[[NAN, 0.5]], base_attention=[[0.5, 0.5]], adversary_probabilities=[[0.5, 0.5]],
        base_probabilities=[[0.5, 0.5]]), "adversary_attention.*finite"),
    ("wp_consistent_adversary", "adversary attention summing to 1.8", dict(
        adversary_attention=[[0.9, 0.9]], base_attention=[[0.5, 0.5]], adversary_probabilities=[[0.5, 0.5]],
        base_probabilities=[[0.5, 0.5]]), "sums to 1.8"),
    ("wp_consistent_adversary", "3 vs 2 tokens", dict(
        adversary_attention=[[0.2, 0.3, 0.5]], base_attention=[[0.5, 0.5]], adversary_probabilities=[[0.5, 0.5]],
        base_probabilities=[[0.5, 0.5]]), "same length|instance 0"),
    ("wp_seed_variance", "NaN base attention", dict(
        base_attention=[[NAN, 0.5]], seed_attentions=[[[0.5, 0.5]]], base_probabilities=[[0.5, 0.5]],
        seed_probabilities=[[[0.5, 0.5]]], labels=[1]), "base_attention.*finite"),
    ("wp_seed_variance", "3 vs 2 tokens", dict(
        base_attention=[[0.2, 0.8]], seed_attentions=[[[0.2, 0.3, 0.5]]], base_probabilities=[[0.5, 0.5]],
        seed_probabilities=[[[0.5, 0.5]]], labels=[1]), "3 tokens, base 2"),
    ("eraser_faithfulness", "inf comprehensiveness", dict(comprehensiveness=[[float("inf"), 0.1, 0.1, 0.1, 0.1]],
                                                          sufficiency=[[0.1] * 5]), "contains inf"),
    ("eraser_faithfulness", "2 bins for 5 fractions", dict(comprehensiveness=[[0.1, 0.1]],
                                                           sufficiency=[[0.1] * 5]), "5 bins"),
    # class ids outside the label set, fractions outside (0, 1], scores outside [-1, 1]
    ("ts_token_probability", "reference class 5 of 2", dict(token_logits=[[[0.1], [0.2]]], attentions=[[0.5, 0.5]],
                                                           references=[5]),
     r"references: instance 0 has class 5, outside \[0, 2\)"),
    ("ts_token_probability", "reference class -1", dict(token_logits=[[[0.1], [0.2]], [[0.3]]],
                                                        attentions=[[0.5, 0.5], [1.0]], references=[1, -1]),
     r"references: instance 1 has class -1"),
    ("ts_token_probability", "reference class 3 of 3", dict(token_logits=[[[0.1, 0.2, 0.3]]], attentions=[[1.0]],
                                                            references=[3]), r"class 3, outside \[0, 3\)"),
    ("eraser_faithfulness", "fraction 0", dict(comprehensiveness=[[0.1, 0.1]], sufficiency=[[0.1, 0.1]],
                                               fractions=[0.0, 0.5]), r"fractions.*0\.0 is not in \(0, 1\]"),
    ("eraser_faithfulness", "fraction 1.5", dict(comprehensiveness=[[0.1, 0.1]], sufficiency=[[0.1, 0.1]],
                                                 fractions=[0.5, 1.5]), r"fractions.*1\.5 is not in \(0, 1\]"),
    ("eraser_faithfulness", "comprehensiveness 5.0", dict(comprehensiveness=[[0.1] * 5, [5.0] * 5],
                                                          sufficiency=[[0.1] * 5] * 2),
     r"comprehensiveness: instance 1 has values outside \[-1, 1\]"),
    ("eraser_faithfulness", "sufficiency -3", dict(comprehensiveness=[[0.1] * 5], sufficiency=[[-3.0] * 5]),
     r"sufficiency: instance 0 has values outside \[-1, 1\]"),
    ("plausibility", "3 scores vs 2 marks", dict(predictions=[[0.1, 0.2, 0.3]], references=[[1, 0]]),
     r"predictions and references: text 0 has 3 scores but 2 rationale marks"),
    ("plausibility", "mark 2", dict(predictions=[[0.1, 0.2]], references=[[1, 2]]),
     r"references: text 0 has the mark 2; rationale marks must be 0 or 1"),
    ("plausibility", "inf score", dict(predictions=[[INF, 0.2]], references=[[1, 0]]),
     r"predictions: text 0 has a score that is not a finite number"),
]


@pytest.mark.parametrize("name, case, arguments, pattern", EVALUATE_CASES,
                         ids=[f"{n}-{c}" for n, c, _, _ in EVALUATE_CASES])
def test_evaluate_modules_reject_bad_arrays(metric, name, case, arguments, pattern):
    expect_error(f"evaluate {name}: {case}", ValueError, pattern, metric(name).compute, **arguments)


# ----------------------------------------------------------------------------------------------
# validation helpers (what the evaluate modules call)


@HYPOTHESIS
@given(st.lists(st.lists(st.floats(-20, 20), min_size=1, max_size=30), min_size=1, max_size=8))
def test_softmax_rows_pass_and_perturbed_rows_fail(scores):
    rows = [torch.tensor(s, dtype=torch.float32).softmax(-1).numpy() for s in scores]
    check_distributions("attention", rows)
    with pytest.raises(ValueError, match="attention: instance 0 sums to"):
        check_distributions("attention", [rows[0] * 1.01 + 0.01] + rows[1:])
    broken = [r.astype(np.float64) for r in rows]
    broken[-1][0] = np.nan
    with pytest.raises(ValueError, match=f"attention: instance {len(rows) - 1} has nan"):
        check_distributions("attention", broken)


def test_validation_messages():
    expect_error("None marks undefined, inf is not", ValueError, "instance 1 has inf", check_finite,
                 "importance", [[1.0, None], [np.inf]], allow_nan=True)
    expect_error("different instance counts", ValueError, "attention has 2, predictions has 3",
                 check_same_count, attention=[1, 2], predictions=[1, 2, 3])
    expect_error("class id 2.5", ValueError, "integer class ids", check_class_ids, "predictions", [0, 2.5])
    expect_error("class id 3 of 2", ValueError, r"class 3, outside \[0, 2\)", check_class_ids,
                 "predictions", [0, 3], 2)


# ----------------------------------------------------------------------------------------------
# CLI arguments out of range


@pytest.mark.parametrize("argv, pattern", [
    (["train", "--epochs", "0"], "--epochs: must be >= 1, got 0"),
    (["train", "--batch-size", "-3"], "--batch-size: must be >= 1"),
    (["train", "--learning-rate", "-1"], "argument --learning-rate: must be > 0, got -1"),
    (["train", "--encoder", "gru"], "invalid choice: 'gru'"),
    (["train", "--max-length", "0"], "--max-length: must be >= 1"),
    (["analyze", "/nonexistent", "--battery", "jw"], "no model folder"),
    (["analyze", "DIR", "--battery", "xx"], "invalid choice: 'xx'"),
    (["analyze", "DIR", "--battery", "jw", "--jw-permutations", "0"], "argument --jw-permutations: must be >= 1, got 0"),
    (["analyze", "DIR", "--battery", "jw", "--jw-eps", "-1"], "argument --jw-eps: must be >= 0, got -1"),
])
def test_cli_arguments_out_of_range(argv, pattern, tmp_path, model_dir, capsys):
    from hf_attn.cli import main

    run = tmp_path / "run"
    shutil.copytree(model_dir, run)
    (run / "run.json").write_text(json.dumps({"settings": {"dataset": "sst"}}))
    argv = [str(run) if a == "DIR" else a for a in argv] + ["--output-dir", str(tmp_path / "out")]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    assert code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(re.escape(pattern), message), message
    RECORDED.append({"case": "hf-attn " + " ".join(a if not a.startswith(str(tmp_path)) else "…" for a in argv),
                     "error": "exit 2", "message": message})
    assert not os.path.exists(tmp_path / "out" / "results.json")


# ----------------------------------------------------------------------------------------------
# nothing half-written


def test_atomic_writes_leave_nothing_behind_on_failure(tmp_path):
    from hf_attn.core.sharding import load_shard, save_shard_atomic

    path = tmp_path / "results.json"
    with pytest.raises(TypeError):
        write_json_atomic(str(path), {"bad": object()})
    assert os.listdir(tmp_path) == []
    write_json_atomic(str(path), {"ok": 1})
    with pytest.raises(TypeError):
        write_json_atomic(str(path), {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": 1} and os.listdir(tmp_path) == ["results.json"]
    shard = tmp_path / "shard.npz"
    with pytest.raises(ValueError, match="object arrays"):
        save_shard_atomic(str(shard), {"x": np.array([object()])})
    assert sorted(os.listdir(tmp_path)) == ["results.json"]
    save_shard_atomic(str(shard), {"x": np.arange(3.0), "ragged": [np.ones(2), np.ones((3, 1))[:, 0]]})
    loaded = load_shard(str(shard))
    assert np.array_equal(loaded["x"], np.arange(3.0)) and [len(r) for r in loaded["ragged"]] == [2, 3]
