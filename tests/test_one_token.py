"""Texts of one token: every method and metric either defines the value or leaves it undefined with
a reason, by one rule (hf_attn.methods.one_token) that Explainer.explain, Explainer.attributions,
the ERASER battery (also through ``hf-attn eraser``) and the faithfulness table all follow. An
undefined row never fails a table, and the other rows are the same as in a run without it. Tiny
random models of tests/architectures.py: GPT-2 (its tokenizer adds no special tokens: no empty
input), Llama (``<s>``) and BERT (``[CLS] … [SEP]``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from architectures import tiny_classifier
from hf_attn import Explainer
from hf_attn.batteries.faithfulness import METHODS
from hf_attn.methods.one_token import NO_EMPTY_INPUT, NO_RANKING, ONE_TOKEN_RULES, rule

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ONE = "dull"
LONGER = ["the good movies", "a boring film and a dull plot"]
BATCH = [LONGER[0], ONE, LONGER[1]]
CAPTUM = ("kernel_shap", "deeplift")


@pytest.fixture(scope="module", params=["gpt2", "llama", "bert"])
def explainer(request):
    model, tokenizer = tiny_classifier(request.param)
    return request.param, Explainer(model, tokenizer, device="cpu")


def _methods() -> list[str]:
    try:
        import captum.attr  # noqa: F401
    except ImportError:
        return [m for m in METHODS if m not in CAPTUM and m != "random"]
    return [m for m in METHODS if m != "random"]


def _empty_input_probabilities(explainer) -> torch.Tensor | None:
    """ŷ of the model's empty input, by hand: the tokenizer's specials around nothing (None: none)."""
    ids = explainer.tokenizer("", add_special_tokens=True)["input_ids"]
    if not ids:
        return None
    with torch.no_grad():
        return explainer.model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0].double()


def _probabilities(explainer, text: str) -> torch.Tensor:
    with torch.no_grad():
        ids = explainer.tokenizer(text)["input_ids"]
        return explainer.model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0].double()


def test_every_method_and_metric_has_a_rule():
    for name in list(METHODS) + ["gradient", "loo", "ig", "ig_abs", "comprehensiveness", "sufficiency",
                                 "soft_comprehensiveness", "soft_sufficiency", "naopc_comprehensiveness",
                                 "naopc_sufficiency", "tau_loo", "agreement"]:
        status, meaning = rule(name)
        assert status in ("defined", "empty input", "undefined") and meaning, name
    assert rule("leave_one_out")[0] == rule("loo")[0] == rule("comprehensiveness")[0] == "empty input"
    assert set(ONE_TOKEN_RULES) >= set(METHODS)


def test_explain_and_attributions_agree_on_a_one_token_text(explainer):
    """Alone and inside a batch of longer texts: every method gives a one-token text the same value
    (or the same reason) in both places, and explain and attributions agree: leave-one-out on both
    runs the model on the same empty input (the specials alone; GPT-2 has none: both undefined
    with the same reason), attention over one token without specials is 1 in both."""
    name, ex = explainer
    methods = _methods()
    alone = ex.attributions([ONE], methods=methods, ig_steps=4, shap_samples=8)
    inside = ex.attributions(BATCH, methods=methods, ig_steps=4, shap_samples=8)
    assert alone.methods == inside.methods
    for method in alone.methods:
        a, b = alone.values[method][0], inside.values[method][1]
        assert len(a) == len(b) == 1, method
        why_a, why_b = alone.undefined.get(method, {}).get(0), inside.undefined.get(method, {}).get(1)
        assert why_a == why_b, method
        if why_a is None:
            assert math.isfinite(a[0]), (name, method)
            assert a[0] == pytest.approx(b[0], rel=1e-3, abs=1e-4), (name, method)
        else:
            assert math.isnan(a[0]) and math.isnan(b[0]), method
        for i in (0, 2):  # the longer texts: every value defined
            assert np.isfinite(inside.values[method][i]).all(), (name, method, i)
    explained = ex.explain(BATCH, ig_steps=4, adversary=False, num_permutations=0)
    alone_explained = ex.explain([ONE], ig_steps=4, adversary=False, num_permutations=0)[0]
    sentence = explained[1]
    assert sentence.undefined.get("loo") == alone_explained.undefined.get("loo")
    assert sentence.undefined.get("kendall") == NO_RANKING
    empty = _empty_input_probabilities(ex)
    full = _probabilities(ex, ONE)
    c = int(full.argmax())
    if empty is None:  # GPT-2: no special tokens, so no empty input
        assert name == "gpt2"
        assert np.isnan(sentence.loo).all() and sentence.undefined["loo"] == NO_EMPTY_INPUT
        assert inside.undefined["leave_one_out"] == {1: NO_EMPTY_INPUT}
        assert alone.undefined["leave_one_out"] == {0: NO_EMPTY_INPUT}
        assert sentence.attention[0] == pytest.approx(1.0) and inside.values["attention"][1][0] == pytest.approx(1.0)
        assert "undefined" in sentence.summary() and "nan" not in sentence.summary().split("Kendall")[0]
    else:  # the same empty input: TVD in explain, the drop of ŷ_c in attributions
        assert "loo" not in sentence.undefined and "leave_one_out" not in inside.undefined
        assert sentence.loo[0] == pytest.approx(float(0.5 * (full - empty).abs().sum()), abs=1e-5)
        assert inside.values["leave_one_out"][1][0] == pytest.approx(float(full[c] - empty[c]), abs=1e-5)
    assert "loo" not in explained[0].undefined and np.isfinite(explained[0].loo).all()
    assert json.dumps(sentence.to_dict(), allow_nan=False)  # NaN → null


def test_one_player_shapley_is_the_difference_of_the_two_forwards(explainer):
    """Kernel SHAP (and Shapley sampling) of one token: exactly f(x) − f(x'), x' the token's
    embedding zeroed, checked against two forwards written out here (captum's Kernel SHAP raised
    on a one-token GPT-2 text before)."""
    pytest.importorskip("captum")
    from hf_attn.methods.captum_attributions import captum_attribution

    name, ex = explainer
    adapter = ex.adapter
    batch = adapter.encode([ONE])
    embeddings = adapter.embeddings(batch).detach()
    baseline = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
    with torch.no_grad():
        f_x = adapter.logits_from_embeddings(batch, embeddings).softmax(-1)[0]
        f_base = adapter.logits_from_embeddings(batch, baseline).softmax(-1)[0]
    c = int(f_x.argmax())
    for method in ("kernel_shap", "shapley_sampling"):
        values = captum_attribution(adapter, batch, method, n_samples=8)
        assert values[batch.content].item() == pytest.approx(float(f_x[c] - f_base[c]), abs=1e-6), (name, method)
        assert torch.all(values[~batch.content] == 0)
    ig = ex.attributions([ONE], methods=["integrated_gradients"], ig_steps=16).values["integrated_gradients"][0][0]
    assert ig == pytest.approx(float(f_x[c] - f_base[c]), abs=0.02 * abs(float(f_x[c] - f_base[c])) + 1e-4)


def _table(ex, texts):
    methods = tuple(m for m in ("attention", "saliency", "integrated_gradients", "leave_one_out", "kernel_shap",
                                "random") if m in _methods() + ["random"])
    return ex.faithfulness(texts, methods=methods, ig_steps=4, shap_samples=8, naopc_exact_max=4,
                           naopc_beam_max=8, soft_draws=2, soft_max_draws=2)


def test_the_faithfulness_table_reports_the_row_undefined_and_keeps_the_others(explainer, tmp_path):
    name, ex = explainer
    result = _table(ex, BATCH)
    without = _table(ex, LONGER)
    for method in result.methods:
        if method == "random":  # its draws depend on the batches
            continue
        for metric, values in result.per_instance[method].items():
            np.testing.assert_allclose(np.asarray(values)[[0, 2]], without.per_instance[method][metric],
                                       atol=1e-6, err_msg=f"{name} {method} {metric}")
    reasons = result.undefined_reasons
    for method in result.methods:  # the one-token row: rankings undefined, counted with the reason
        assert math.isnan(result.per_instance[method]["naopc_comprehensiveness"][1])
        assert "one-token text" in next(iter(reasons[method]["naopc_comprehensiveness"]))
    if name == "gpt2":  # no empty input: leave-one-out and every comprehensiveness undefined on that row
        assert result.undefined["leave_one_out"] == [None, NO_EMPTY_INPUT, None]
        for method in result.methods:
            assert math.isnan(result.per_instance[method]["comprehensiveness"][1])
            assert result.table[method]["comprehensiveness"]["undefined"] == 1
            said = reasons[method]["comprehensiveness"]
            assert said == ({f"leave_one_out: {NO_EMPTY_INPUT}": 1} if method == "leave_one_out"
                            else {NO_EMPTY_INPUT: 1}), method
            assert result.table[method]["comprehensiveness"]["mean"] == pytest.approx(
                without.table[method]["comprehensiveness"]["mean"], abs=1e-6)
        assert math.isnan(result.per_instance["leave_one_out"]["sufficiency"][1])
        assert result.per_instance["attention"]["sufficiency"][1] == pytest.approx(0.0, abs=1e-6)
    else:  # the empty input is the specials: comprehensiveness defined, the same for every method
        comp = {m: result.per_instance[m]["comprehensiveness"][1] for m in result.methods}
        assert np.isfinite(list(comp.values())).all() and np.ptp(list(comp.values())) < 1e-6
        assert all(result.per_instance[m]["sufficiency"][1] == pytest.approx(0.0, abs=1e-6) for m in result.methods)
    folder = result.save(str(tmp_path / "table"))
    saved = json.loads((tmp_path / "table" / "results.json").read_text())
    assert saved["per_instance"]["attention"]["naopc_comprehensiveness"][1] is None  # JSON null
    assert saved["undefined_reasons"] == json.loads(json.dumps(reasons))
    assert "one-token text" in "\n".join(type(result).load(folder).coverage())


def test_the_eraser_battery_keeps_the_dataset_and_counts_the_row(explainer):
    name, ex = explainer
    result = ex.eraser(BATCH, ig_steps=4)
    without = ex.eraser(LONGER, ig_steps=4)
    for measure, row in result.data["measures"].items():
        assert row["num_instances"] == 3
        if name == "gpt2":  # every comprehensiveness leaves the row out, with the reason
            assert row["undefined"]["comprehensiveness"] == 1
            reason = next(iter(row["undefined_reasons"]["comprehensiveness"]))
            assert reason.endswith(NO_EMPTY_INPUT)
            if measure != "random":  # random draws depend on the batch's shape
                assert row["comprehensiveness_aopc"] == pytest.approx(
                    without.data["measures"][measure]["comprehensiveness_aopc"], abs=1e-6)
        else:
            assert "undefined" not in row and row["comprehensiveness_aopc"] is not None
    if name == "gpt2":
        loo = result.data["measures"]["loo"]
        assert loo["undefined"] == {"comprehensiveness": 1, "sufficiency": 1} and loo["sufficiency_n"] == 2
        assert loo["sufficiency_aopc"] == pytest.approx(without.data["measures"]["loo"]["sufficiency_aopc"], abs=1e-6)


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_cli_eraser_takes_a_dataset_with_a_one_token_line(name, tmp_path):
    """``hf-attn eraser`` on a JSON-lines file with a one-token line completes (it refused the whole
    dataset before on a decoder); results.json and eraser.md say which rows are undefined and why,
    and the other rows' comprehensiveness is that of a run without the line."""
    from architectures import saved_classifier
    from hf_attn.cli import main

    folder, data = saved_classifier(name, tmp_path)
    lines = data.read_text().splitlines()
    assert any(json.loads(line)["text"] == ONE for line in lines)
    shorter = tmp_path / "without.jsonl"
    shorter.write_text("".join(line + "\n" for line in lines if json.loads(line)["text"] != ONE))
    measures = ["attention", "gradient", "loo", "ig"]
    runs = {}
    for tag, path in (("with", data), ("without", shorter)):
        out = tmp_path / tag
        assert main(["eraser", str(folder), "--dataset", str(path), "--output-dir", str(out), "--device", "cpu",
                     "--ig-steps", "2", "--measures", *measures, "--quiet"]) == 0
        runs[tag] = json.loads((out / "results.json").read_text())
    assert runs["with"]["num_instances"] == len(lines)
    for measure in measures:
        row = runs["with"]["measures"][measure]
        if name == "gpt2":
            assert row["undefined"]["comprehensiveness"] == 1
            assert row["comprehensiveness_aopc"] == pytest.approx(
                runs["without"]["measures"][measure]["comprehensiveness_aopc"], abs=1e-6)
        else:
            assert "undefined" not in row
    if name == "gpt2":
        text = (tmp_path / "with" / "eraser.md").read_text()
        assert "undefined" in text and "[PAD]" in text


def test_papers_model_reads_one_pad_as_its_empty_input_everywhere():
    """hf_attn's own models (no special tokens) read one [PAD], whose embedding they zero, as the
    empty input: explain's leave-one-out (TVD), attributions' and the table's (the drop of ŷ_c) of a
    one-token text all come from that one forward, and none is undefined."""
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    texts = ["a good movie", "good", "bad bad film"]
    tokenizer = build_tokenizer(texts, max_length=24)
    config = AttnClassifierConfig(vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, hidden_size=4, num_labels=2,
                                  max_tokens=24, pad_token_id=0, unk_token_id=1, mask_token_id=2)
    torch.manual_seed(0)
    model = AttnClassifierForSequenceClassification(config).eval()
    ex = Explainer(model, tokenizer)
    with torch.no_grad():
        full = model(input_ids=torch.tensor([tokenizer("good")["input_ids"]])).logits.softmax(-1)[0].double()
        empty = model(input_ids=torch.tensor([[tokenizer.pad_token_id]])).logits.softmax(-1)[0].double()
    c = int(full.argmax())
    sentence = ex.explain(texts, ig=False, adversary=False, num_permutations=0)[1]
    assert "loo" not in sentence.undefined
    assert sentence.loo[0] == pytest.approx(float(0.5 * (full - empty).abs().sum()), abs=1e-6)
    attributions = ex.attributions(texts, methods=["leave_one_out", "attention"])
    assert attributions.undefined == {}
    assert attributions.values["leave_one_out"][1][0] == pytest.approx(float(full[c] - empty[c]), abs=1e-6)
    table = ex.faithfulness(texts, methods=("attention", "leave_one_out"), naopc_beam=0, soft_draws=1,
                            soft_max_draws=1)
    assert table.attributions["leave_one_out"][1][0] == pytest.approx(float(full[c] - empty[c]), abs=1e-6)
    assert not any(table.undefined["leave_one_out"])
    assert table.per_instance["attention"]["comprehensiveness"][1] == pytest.approx(float(full[c] - empty[c]),
                                                                                     abs=1e-6)


def test_a_method_failing_on_one_text_leaves_only_that_text_undefined(monkeypatch):
    """A method that raises on one text of a batch is rerun text by text: that text is undefined with
    the error as its reason, the others keep their values, and the table completes."""
    from hf_attn.batteries.faithfulness import methods as fm_methods
    from hf_attn.methods.saliency import saliency

    model, tokenizer = tiny_classifier("bert")
    ex = Explainer(model, tokenizer, device="cpu")
    original = fm_methods._method_function

    def fragile(name, settings):
        if name != "saliency":
            return original(name, settings)

        def function(adapter, batch):
            if bool((batch.content.sum(1) == 1).any()):
                raise ValueError("cannot score one token")
            return saliency(adapter, batch)
        return function

    monkeypatch.setattr(fm_methods, "_method_function", fragile)
    texts = [LONGER[0], ONE, LONGER[1]]
    reference = ex.attributions(LONGER, methods=["saliency"]).values["saliency"]
    settings_batch = fm_methods.FaithfulnessSettings(methods=("saliency",), batch_tokens=4096)
    batch = ex.adapter.encode(texts)
    groups = [np.arange(3)]  # one batch holding the one-token text: the failure is the batch's
    run = fm_methods.run_methods(ex.adapter, batch, settings_batch, groups=groups)
    assert run.undefined == {"saliency": {1: "ValueError: cannot score one token"}}
    content = [batch.content[i][batch.attention_mask[i].bool()].numpy() for i in range(3)]
    assert np.isnan(run.scores["saliency"][1][content[1]]).all()
    for i, j in ((0, 0), (2, 1)):
        np.testing.assert_allclose(run.scores["saliency"][i][content[i]], reference[j], rtol=1e-4, atol=1e-6)
    table = ex.faithfulness(texts, methods=("attention", "saliency"), naopc_beam=0, soft_draws=1, soft_max_draws=1)
    assert math.isnan(table.per_instance["saliency"]["sufficiency"][1])
    assert table.undefined["saliency"] == [None, "ValueError: cannot score one token", None]
    assert np.isfinite(table.per_instance["saliency"]["sufficiency"][[0, 2]]).all()
    with pytest.raises(ValueError, match="cannot score one token"):  # failing on every text: the method's error
        ex.faithfulness([ONE], methods=("attention", "saliency"), naopc_beam=0, soft_draws=1, soft_max_draws=1)
