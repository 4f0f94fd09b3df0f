"""The faithfulness table's plausibility columns (hf_attn.batteries.faithfulness.plausibility): tokens
mapped to whitespace words by hand-checked cases, every cell against a slow reference written from
ERASER's definitions with scikit-learn's precision-recall curve, the two-axes verdicts on designed
values, the battery with a rationale data set, and the refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import auc, precision_recall_curve

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import FaithfulnessResult, FaithfulnessSettings, run_faithfulness
from hf_attn.batteries.faithfulness.inputs import _instances
from hf_attn.batteries.faithfulness.plausibility import content_word_ids, text_word_scores

FAST = dict(ig_steps=4, ig_target=None, shap_samples=16, batch_tokens=64, naopc_beam=0)
# one mark per whitespace word of TEXTS; the third text ("dull") marked entirely, the fifth not at all
RATIONALES = [[0, 1, 0], [1, 0, 0, 0, 0, 0, 0, 1, 0], [1], [0, 1, 0, 0, 0, 1, 1], [0, 0, 0]]


def test_word_scores_sum_a_words_pieces_and_rank_unread_words_last():
    assert text_word_scores([1.0, 2.0, 3.0], [0, 0, 1], 2).tolist() == [3.0, 3.0]
    assert text_word_scores([0.5, -1.0, 2.0, 4.0], [0, None, 1, 1], 3).tolist() == [0.5, 6.0, -0.5]
    assert text_word_scores([-2.0], [0], 3).tolist() == [-2.0, -3.0, -3.0]


@pytest.mark.parametrize("name", ["bert", "llama", "gpt2"])
def test_tokens_map_to_the_whitespace_words_they_spell(name):
    """WordPiece pieces (``act ##ing``) and a comma written apart or attached belong to the
    whitespace word whose characters they cover; special tokens are not content."""
    model, tokenizer = tiny_classifier(name)
    adapter = adapter_for(model, tokenizer, device="cpu")
    texts = ["not very fun acting , but a great story", "the good movies, dull"]
    ids = content_word_ids(adapter, texts, _instances(adapter, adapter.encode(texts)))
    assert ids[0] == [0, 1, 2, 3, 3, 4, 5, 6, 7, 8]  # not very fun act ##ing , but a great story
    assert ids[1] == [0, 1, 2, 2, 2, 3]  # the good movie ##s , dull


def test_a_text_cut_by_the_length_limit_ranks_its_unread_words_last():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu", max_length=5)  # [CLS] + 3 tokens + [SEP]
    texts = ["not very fun acting , but a great story"]
    with pytest.warns(Warning, match="cut"):
        result = run_faithfulness(adapter, texts, FaithfulnessSettings(methods=("attention", "random"), **FAST),
                                  rationales=[[1, 0, 0, 0, 0, 0, 0, 1, 1]])
    details = result.metric_details["plausibility"]
    assert details["cut_by_length_limit"] == [0]
    scores = np.asarray(result.attributions["attention"][0])[result.content[0]]
    words = text_word_scores(scores, [0, 1, 2], 9)
    assert words[3:].tolist() == [min(scores) - 1.0] * 6
    precision, recall, _ = precision_recall_curve([1, 0, 0, 0, 0, 0, 0, 1, 1], words)
    assert result.per_instance["attention"]["auprc"][0] == pytest.approx(auc(recall, precision), abs=1e-12)


def _slow_word_scores(tokenizer, text: str, content_scores) -> np.ndarray:
    """Each whitespace word the sum of the scores of the tokens starting inside it (offsets read
    token by token, words found by walking the characters)."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    word_of_char, word, inside = [], -1, False
    for ch in text:
        if ch.isspace():
            inside = False
            word_of_char.append(None)
        else:
            if not inside:
                word, inside = word + 1, True
            word_of_char.append(word)
    out = np.zeros(len(text.split()))
    for (start, _), score in zip(encoded["offset_mapping"], content_scores):
        out[word_of_char[start]] += score
    return out


def _slow_text_values(words, truth, k_fraction):
    """ERASER's per-text values from their definitions: scikit-learn's PR curve and trapezoids; the
    top-k words' F1; span IOU matching at 0.5."""
    truth = np.asarray(truth)
    if not truth.any():
        return math.nan, math.nan, math.nan
    precision, recall, _ = precision_recall_curve(truth, words)
    area = auc(recall, precision)
    k = int(k_fraction * len(truth))
    top = sorted(range(len(words)), key=lambda i: (-words[i], i))[:k]
    hard = np.zeros(len(truth), int)
    hard[top] = 1
    hit = int((hard & truth).sum())
    p, r = (hit / hard.sum() if hard.sum() else 0.0), hit / truth.sum()
    token_f1 = 0.0 if hit == 0 else 2 * p * r / (p + r)

    def runs(mask):
        out, start = [], None
        for i, m in enumerate(list(mask) + [0]):
            if m and start is None:
                start = i
            if not m and start is not None:
                out.append(set(range(start, i)))
                start = None
        return out

    predicted, human = runs(hard), runs(truth)
    matched = sum(1 for s in predicted if max(len(s & h) / len(s | h) for h in human) >= 0.5)
    ip, ir = (matched / len(predicted) if predicted else 0.0), matched / len(human)
    return area, token_f1, (0.0 if matched == 0 else 2 * ip * ir / (ip + ir))


@pytest.fixture(scope="module")
def table():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = FaithfulnessSettings(methods=("attention", "saliency", "gradient_x_input", "random"),
                                    metrics=("comprehensiveness", "auprc", "token_f1", "iou_f1"), **FAST)
    return tokenizer, run_faithfulness(adapter, TEXTS, settings, rationales=RATIONALES)


def test_every_plausibility_cell_equals_the_slow_reference(table):
    tokenizer, result = table
    details = result.metric_details["plausibility"]
    shares = [np.mean(r) for r in RATIONALES if any(r)]
    assert details["k_fraction"] == pytest.approx(np.mean(shares))  # the rationales' own share by default
    assert details["without_rationale"] == [4] and details["fully_marked"] == [2]
    for method in result.methods:
        rows = []
        for i, text in enumerate(TEXTS):
            scores = np.asarray(result.attributions[method][i])[result.content[i]]
            rows.append(_slow_text_values(_slow_word_scores(tokenizer, text, scores), RATIONALES[i],
                                          details["k_fraction"]))
        rows = np.array(rows)
        for j, metric in enumerate(("auprc", "token_f1", "iou_f1")):
            np.testing.assert_allclose(result.per_instance[method][metric], rows[:, j], atol=1e-12, equal_nan=True)
            cell = result.table[method][metric]
            assert cell["n"] == 4 and cell["undefined"] == 1
            assert cell["mean"] == pytest.approx(np.nanmean(rows[:, j]))
            if method != "random":
                assert "vs_random" in cell
        eraser = details["eraser"][method]  # ERASER's data-set values: AUPRC and token F1 are the text means
        assert eraser["auprc"] == pytest.approx(np.nanmean(rows[:, 0]))
        assert eraser["token_f1"] == pytest.approx(np.nanmean(rows[:, 1]))
        assert eraser["without_rationale"] == [4]
    assert result.undefined_reasons["attention"]["auprc"] == {"the human rationale marks no word": 1}
    assert any(line.startswith("auprc: 4–4 of 5 sentences (up to 1 undefined: the human rationale marks no word")
               for line in result.coverage())


def test_the_table_saves_and_reloads_its_plausibility(table, tmp_path):
    _, result = table
    result.save(str(tmp_path))
    again = FaithfulnessResult.load(str(tmp_path))
    assert again.table["attention"]["auprc"]["mean"] == pytest.approx(result.table["attention"]["auprc"]["mean"])
    assert again.sentence() == result.sentence()
    assert "plausibility AUPRC" in result.summary() and "- plausibility: word scores" in result.summary()
    frame = result.tidy()
    assert set(frame.metric) == {"comprehensiveness", "auprc", "token_f1", "iou_f1"}


def _designed_result(n: int = 24) -> FaithfulnessResult:
    """Four methods beside the random floor, built so the paired tests split them: ``a`` above the
    floor on both axes, ``f`` on comprehensiveness only, ``p`` on AUPRC only, ``z`` on neither."""
    rng = np.random.default_rng(0)
    floor = {"comprehensiveness": rng.uniform(0.0, 0.1, n), "auprc": rng.uniform(0.4, 0.5, n)}
    up = {"comprehensiveness": 0.3, "auprc": 0.3}
    shifts = {"a": ("comprehensiveness", "auprc"), "f": ("comprehensiveness",), "p": ("auprc",), "z": ()}
    per_instance = {"random": floor}
    for method, raised in shifts.items():
        per_instance[method] = {k: floor[k] + (up[k] if k in raised else 0.0) + rng.normal(0, 1e-3, n) * (k in raised)
                                for k in floor}
    table = {m: {k: {"mean": float(v.mean()), "low": float(v.mean() - 0.01), "high": float(v.mean() + 0.01),
                     "n": n} for k, v in d.items()} for m, d in per_instance.items()}
    methods = ["a", "f", "p", "z", "random"]
    return FaithfulnessResult(methods=methods, table=table, cost={}, skipped={}, agreement={},
                              per_instance=per_instance, attributions={}, content=[], settings={"confidence": 0.95},
                              num_instances=n)


def test_two_axes_put_each_method_in_the_quadrant_its_tests_carry(tmp_path):
    result = _designed_result()
    axes = result.two_axes()
    assert {m: r["quadrant"] for m, r in axes.items()} == {"a": "both", "f": "faithful only",
                                                           "p": "plausible only", "z": "neither"}
    assert axes["a"]["faithful_p"] < 0.05 and axes["z"]["plausible"] is False
    sentence = result.plausibility_sentence()
    assert "both: a; faithful only: f; plausible only: p; neither: z" in sentence
    result.plot_axes(str(tmp_path / "axes.png"))
    assert (tmp_path / "axes.png").stat().st_size > 10_000
    without = FaithfulnessResult(methods=["a", "random"], table={"a": {}, "random": {}}, cost={}, skipped={},
                                 agreement={}, per_instance={}, attributions={}, content=[], settings={})
    assert without.two_axes() == {} and without.plausibility_sentence() == ""
    with pytest.raises(ValueError, match="figure needs the .comprehensiveness. and .auprc. columns"):
        without.plot_axes()


@pytest.mark.parametrize("rationales, settings, message", [
    ([[0, 1]] + RATIONALES[1:], {}, "rationale 0 has 2 marks but text 0 has 3 whitespace words"),
    ([[0, 2, 0]] + RATIONALES[1:], {}, "rationale 0 holds a value other than 0 or 1"),
    (RATIONALES[:2], {}, "2 rationales for 5 texts"),
    (RATIONALES, {"metrics": ("comprehensiveness",)}, "leave out every plausibility column"),
    (None, {"metrics": ("comprehensiveness", "auprc")}, "plausibility columns: they need rationales"),
])
def test_bad_rationales_are_refused_in_one_line(rationales, settings, message):
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    with pytest.raises(ValueError, match=message):
        run_faithfulness(adapter, TEXTS, FaithfulnessSettings(methods=("attention",), **FAST | settings),
                         rationales=rationales)
    with pytest.raises(ValueError, match="rationale_k_fraction must be <= 1"):
        FaithfulnessSettings(rationale_k_fraction=1.5)


def test_the_battery_scores_plausibility_on_a_rationale_data_set(trained_model_dir, tmp_path, capsys):
    """``hf-attn analyze DIR --battery faithfulness --faith-rationales sst_rationales``: the texts
    are the rationale data's split, k from its train split, the two-axes figure is written; a
    wrong rationale name or two sources of texts are one line, exit 2."""
    import hf_attn
    from hf_attn.batteries.faithfulness.plausibility import k_fraction_of
    from hf_attn.cli import main

    data = hf_attn.datasets.load("sst_rationales")
    base = ["analyze", trained_model_dir, "--battery", "faithfulness", "--quiet", "--threads", "1",
            "--faith-methods", "attention,gradient_x_input,random", "--faith-naopc-beam", "0",
            "--faith-metrics", "comprehensiveness,auprc,token_f1,iou_f1", "--faith-max-instances", "12"]
    out = tmp_path / "out"
    assert main(base + ["--faith-rationales", "sst_rationales", "--output-dir", str(out)]) == 0, \
        capsys.readouterr().err
    payload = json.loads((out / "results.json").read_text())
    assert payload["texts"] == data.texts("test")[:12]
    assert payload["metric_details"]["plausibility"]["k_fraction"] == pytest.approx(
        k_fraction_of(data.rationales("train")))
    assert payload["plausibility_figure"] == "faithfulness_plausibility.png"
    assert (out / "faithfulness_plausibility.png").exists()
    assert "Against the human rationales" in payload["sentence"]
    capsys.readouterr()
    for extra, message in ((["--faith-rationales", "movies"], "give sst_rationales, or FORMAT:PATH"),
                           (["--faith-rationales", "eraser:" + str(tmp_path / "none")], "none"),
                           (["--faith-rationales", "sst_rationales", "--dataset", "sst"], "give one")):
        code = main(base + extra + ["--output-dir", str(tmp_path / "bad")])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and message in err[0], (extra, err)


def test_a_decoder_keeping_the_end_of_a_cut_text_maps_its_tokens_to_the_last_words():
    """gpt2 keeps the last tokens of a text over its limit: they are the last words, not the first."""
    model, tokenizer = tiny_classifier("gpt2")
    adapter = adapter_for(model, tokenizer, device="cpu", max_length=8)
    text = " ".join(["good"] * 10)
    with pytest.warns(Warning, match="cut"):
        instances = _instances(adapter, adapter.encode([text]))
    cut = []
    ids = content_word_ids(adapter, [text], instances, cut)
    assert ids[0] == list(range(10 - len(ids[0]), 10)) and cut == [0]


def test_pair_texts_and_rationales_marking_nothing_are_refused_before_any_method_runs():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    with pytest.raises(ValueError, match="text 0 is a tuple: plausibility takes single texts"):
        run_faithfulness(adapter, [("a premise", "a hypothesis")], FaithfulnessSettings(**FAST), rationales=[[1]])
    with pytest.raises(ValueError, match="none of the 5 rationales marks a word"):
        run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**FAST), rationales=[[0] * len(t.split()) for t in TEXTS])
