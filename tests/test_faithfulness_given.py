"""Anyone's attributions on the faithfulness table (hf_attn.batteries.faithfulness.given): a given row
equal to one of the table's methods gets exactly that method's cells; word-level scores reach each
word's tokens; captum's and inseq's outputs go in as they come; the CLI reads JSON and the table's own .npz;
bad rows are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import FaithfulnessResult, FaithfulnessSettings, run_faithfulness
from hf_attn.batteries.faithfulness.given import token_scores
from hf_attn.batteries.faithfulness.inputs import _instances

# NAOPC bounds exact on every text (no text over 12 tokens): a row's NAOPC then depends on its own scores only
SETTINGS = FaithfulnessSettings(methods=("attention", "gradient_x_input", "random"), naopc_beam=2, naopc_exact_max=12,
                                naopc_beam_max=12, naopc_every_k_max=12, soft_draws=2, soft_max_draws=4)
# the columns a row's own scores decide (soft draws are seeded by the row's name, agreement by the other rows)
OWN = ("comprehensiveness", "sufficiency", "naopc_comprehensiveness", "naopc_sufficiency")


@pytest.fixture(scope="module")
def adapter():
    model, tokenizer = tiny_classifier("bert")
    return adapter_for(model, tokenizer, device="cpu")


@pytest.fixture(scope="module")
def table(adapter):
    return run_faithfulness(adapter, TEXTS, SETTINGS)


def test_a_given_copy_of_a_method_gets_that_methods_cells(adapter, table):
    """The table's own attention, given back as scores over every real position and over the text's
    tokens only: both rows equal the attention row on every metric and every sentence."""
    every = [np.asarray(r) for r in table.attributions["attention"]]
    own = [r[c] for r, c in zip(every, table.content)]
    result = run_faithfulness(adapter, TEXTS, SETTINGS, attributions={"mine": every, "mine_content": own})
    assert result.methods == ["attention", "gradient_x_input", "mine", "mine_content", "random"]
    for name in ("mine", "mine_content"):
        for metric in OWN:
            values = result.per_instance["attention"][metric]
            np.testing.assert_allclose(result.per_instance[name][metric], values, atol=1e-12, equal_nan=True,
                                       err_msg=f"{name} {metric}")
        assert result.table[name]["comprehensiveness"]["vs_random"]["p"] == pytest.approx(
            result.table["attention"]["comprehensiveness"]["vs_random"]["p"])
        assert result.cost[name]["given"].startswith("scores given by the caller")
    assert result.agreement["mine"]["attention"] == pytest.approx(1.0)


def test_word_scores_reach_every_token_of_their_word(adapter):
    texts = ["not very fun acting , but a great story", "the good movies, dull"]
    instances = _instances(adapter, adapter.encode(texts))
    words = [np.arange(9, dtype=float), np.array([3.0, 2.0, 5.0, 1.0])]
    rows = token_scores(adapter, texts, instances, {"w": words}, "word")["w"]
    # [CLS] not very fun act ##ing , but a great story [SEP]: acting's two tokens share its score
    assert rows[0].tolist() == [0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 0]
    assert rows[1].tolist() == [0, 3, 2, 5, 5, 5, 1, 0]  # movie ##s , all belong to "movies,"
    result = run_faithfulness(adapter, texts, SETTINGS, attributions={"w": words}, attributions_level="word")
    assert result.table["w"]["comprehensiveness"]["n"] == 2


def test_captums_output_goes_in_as_it_comes(adapter):
    """captum's LayerIntegratedGradients on the embeddings returns (1, T, D) per text: summed over D it is
    a (1, T) row over every token the model reads, which the table takes as it is."""
    captum = pytest.importorskip("captum.attr")
    import torch

    model, tokenizer = adapter.model, adapter.tokenizer
    rows = []
    for text in TEXTS:
        encoded = tokenizer(text, return_tensors="pt")
        forward = lambda ids: model(input_ids=ids).logits.softmax(-1)[:, 0]  # noqa: E731
        lig = captum.LayerIntegratedGradients(forward, model.bert.embeddings)
        attributions = lig.attribute(encoded["input_ids"], baselines=torch.zeros_like(encoded["input_ids"]),
                                     n_steps=8)
        rows.append(attributions.sum(-1))  # (1, T), a tensor: taken as it comes
    result = run_faithfulness(adapter, TEXTS, SETTINGS, attributions={"captum_ig": rows})
    assert "captum_ig" in result.methods and np.isfinite(result.table["captum_ig"]["comprehensiveness"]["mean"])


def test_inseqs_output_goes_in_as_it_comes():
    """inseq explains generation only (its models are causal and seq2seq language models; a classifier's
    (B, C) logits are refused): a decoder classifier goes through it as the causal LM on the same body
    whose head row for a label word is the classifier's row of that class, so the logit inseq explains
    at the text's last token is the classifier's z_c. Its input × gradient, summed over the embedding
    dimension, is then hf_attn's gradient_x_input under ``gradient_target="logit"``: the same scores and
    the same erasure cells."""
    inseq = pytest.importorskip("inseq")
    import dataclasses

    import torch
    from transformers import LlamaForCausalLM

    model, tokenizer = tiny_classifier("llama")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = dataclasses.replace(SETTINGS, methods=("gradient_x_input", "random"), gradient_target="logit")
    table = run_faithfulness(adapter, TEXTS, settings)

    words = ["bad", "dull", "good"]  # class c is the word words[c]
    lm = LlamaForCausalLM(model.config).eval()
    lm.model = model.model
    with torch.no_grad():
        lm.lm_head.weight.zero_()
        lm.lm_head.weight[tokenizer.convert_tokens_to_ids(words)] = model.score.weight
    explainer = inseq.load_model(lm, "input_x_gradient", tokenizer=tokenizer)
    rows = []
    for text in TEXTS:
        with torch.no_grad():
            c = int(model(**tokenizer(text, return_tensors="pt")).logits.argmax(-1))
        out = explainer.attribute(text, f"{text} {words[c]}", attributed_fn="logit", show_progress=False)
        grid = out.sequence_attributions[0].target_attributions  # (T + 1, 1 step, D): the label word's own row is NaN
        rows.append(grid[:-1, 0].sum(-1))  # (T,) over every token the model reads, <s> included
    result = run_faithfulness(adapter, TEXTS, settings, attributions={"inseq_ixg": rows})
    for row, own, content in zip(rows, table.attributions["gradient_x_input"], table.content):
        np.testing.assert_allclose(row.numpy()[content], np.asarray(own)[content], rtol=1e-4, atol=1e-6)
    assert np.isfinite(result.table["inseq_ixg"]["comprehensiveness"]["mean"])
    for metric in OWN:
        np.testing.assert_allclose(result.per_instance["inseq_ixg"][metric],
                                   table.per_instance["gradient_x_input"][metric], atol=1e-12, equal_nan=True,
                                   err_msg=metric)


@pytest.mark.parametrize("attributions, level, message", [
    ({"attention": [[1.0]] * 5}, "token", "has the name of one of the table's methods"),
    ({"x": [[1.0]] * 4}, "token", "4 score arrays for 5 texts"),
    ({"x": [[1.0, 2.0]] * 5}, "token", "text 0: 2 token scores, but the model reads 4 tokens of the text (6 with its special tokens)"),
    ({"x": [[1.0]] * 5}, "word", "text 0: 1 word scores but the text has 3 whitespace words"),
    ({"x": [np.ones((2, 3))] * 5}, "token", "expected one score per token or word, got shape (2, 3)"),
    ({"x": [[1.0, 1.0, 1.0]] * 5}, "letters", "attributions_level must be one of"),
])
def test_bad_rows_are_refused_in_one_line(adapter, attributions, level, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_faithfulness(adapter, TEXTS, SETTINGS, attributions=attributions, attributions_level=level)


def test_the_cli_takes_json_and_the_tables_own_npz(trained_model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    base = ["analyze", trained_model_dir, "--battery", "faithfulness", "--quiet", "--threads", "1",
            "--faith-methods", "attention,random", "--faith-naopc-beam", "0",
            "--faith-metrics", "comprehensiveness,sufficiency", "--faith-max-instances", "6"]
    first = tmp_path / "first"
    assert main(base + ["--output-dir", str(first)]) == 0, capsys.readouterr().err
    again = tmp_path / "again"  # the first table's attention, read back from its attributions.npz
    assert main(base + ["--faith-methods", "random", "--faith-attributions", str(first / "attributions.npz"),
                        "--output-dir", str(again)]) == 0, capsys.readouterr().err
    one, two = FaithfulnessResult.load(str(first)), FaithfulnessResult.load(str(again))
    assert two.methods == ["given_attention", "given_random", "random"]
    np.testing.assert_allclose(two.per_instance["given_attention"]["comprehensiveness"],
                               one.per_instance["attention"]["comprehensiveness"], atol=1e-12)
    scores = {"mine": [r.tolist() for r in one.attributions["attention"]] + [[0.0]]}  # one extra row: unused
    (tmp_path / "scores.json").write_text(json.dumps(scores))
    assert main(base + ["--faith-attributions", str(tmp_path / "scores.json"), "--output-dir",
                        str(tmp_path / "json")]) == 0, capsys.readouterr().err
    mine = FaithfulnessResult.load(str(tmp_path / "json"))
    np.testing.assert_allclose(mine.per_instance["mine"]["comprehensiveness"],
                               one.per_instance["attention"]["comprehensiveness"], atol=1e-12)
    capsys.readouterr()
    (tmp_path / "bad.json").write_text("{")
    for path, message in ((tmp_path / "none.json", "no such file"), (tmp_path / "bad.json", "not a JSON file")):
        code = main(base + ["--faith-attributions", str(path), "--output-dir", str(tmp_path / "bad")])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and message in err[0], err
