"""ERASER comprehensiveness/sufficiency and integrated gradients (hf_attn.methods.eraser,
hf_attn.methods.integrated_gradients) and the ERASER table (hf_attn.batteries.eraser.battery)."""

import os

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from hf_attn import AttnClassifierForSequenceClassification
from hf_attn.methods.eraser import (aopc, eraser_scores, eraser_scores_slow, erasure_variants, rank_tokens,
                                    summarize_eraser, tokens_per_fraction)
from hf_attn.methods.integrated_gradients import integrated_gradients, integrated_gradients_importance

METRIC_DIR = os.path.join(os.path.dirname(__file__), "..", "hf_attn", "metrics", "eraser_faithfulness")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_and_batch(trained_model_dir, small_sst):
    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(trained_model_dir)
    texts = list(small_sst.splits["test"]["text"])[:24]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    return model, enc["input_ids"], enc["attention_mask"]


# ------------------------------------------------------------------------------------------------
# ERASER

def test_tokens_per_fraction_rounds_up_at_least_one():
    k = tokens_per_fraction([1, 2, 10, 19, 20, 30, 100, 101], (0.01, 0.05, 0.1, 0.2, 0.5))
    expected = [[1, 1, 1, 1, 1],  # n = 1: never more than n
                [1, 1, 1, 1, 1],
                [1, 1, 1, 2, 5],
                [1, 1, 2, 4, 10],  # ceil(1.9) = 2, ceil(3.8) = 4, ceil(9.5) = 10
                [1, 1, 2, 4, 10],
                [1, 2, 3, 6, 15],  # 0.1 · 30 = 3 exactly, not 4 (float noise)
                [1, 5, 10, 20, 50],
                [2, 6, 11, 21, 51]]
    np.testing.assert_array_equal(k, expected)
    with pytest.raises(ValueError, match="fractions"):
        tokens_per_fraction([3], (0.0, 0.5))
    with pytest.raises(ValueError, match="fractions"):
        tokens_per_fraction([3], (1.5,))


def test_rank_tokens_breaks_ties_by_position_and_puts_pads_last():
    importance = torch.tensor([[0.5, 0.9, 0.5, 0.9, 7.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    assert rank_tokens(importance, mask).tolist() == [[2, 0, 3, 1, 4]]


def test_erasure_variants_remove_tokens_and_keep_order():
    ids = torch.tensor([[5, 6, 7, 8], [9, 0, 0, 0]])
    mask = ids > 0
    importance = torch.tensor([[0.1, 0.9, 0.3, 0.2], [1.0, 0, 0, 0]])
    counts = torch.tensor([[1, 2], [1, 1]])
    var_ids, var_mask = erasure_variants(ids, mask, rank_tokens(importance, mask), counts, pad_token_id=0)
    rows = [[int(t) for t, m in zip(r, mk) if m] for r, mk in zip(var_ids[0], var_mask[0])]
    assert rows == [[5, 6, 7, 8], [5, 7, 8], [5, 8], [6], [6, 7]]
    # a one-token instance: removing its only token leaves one real [PAD] token
    rows = [[int(t) for t, m in zip(r, mk) if m] for r, mk in zip(var_ids[1], var_mask[1])]
    assert rows == [[9], [0], [0], [9], [9]]


def test_eraser_matches_slow_per_instance_computation(model_and_batch):
    model, ids, mask = model_and_batch
    with torch.no_grad():
        attention = model(input_ids=ids, attention_mask=mask).attentions
    # coarse random scores: many ties, which both must break by position
    ties = torch.randint(0, 3, ids.shape).double()
    for importance in (attention, ties):
        fast = eraser_scores(model, ids, mask, importance, token_budget=300)
        slow = eraser_scores_slow(model, ids, mask, importance)
        np.testing.assert_allclose(fast.comprehensiveness, slow.comprehensiveness, atol=1e-5)
        np.testing.assert_allclose(fast.sufficiency, slow.sufficiency, atol=1e-5)
        np.testing.assert_array_equal(fast.tokens, slow.tokens)
        np.testing.assert_array_equal(fast.predicted_class, slow.predicted_class)
    # removing nothing-like: sufficiency at 100 % is 0, comprehensiveness at 100 % = p_c(x) − p_c([PAD])
    full = eraser_scores(model, ids, mask, attention, fractions=(1.0,))
    np.testing.assert_allclose(full.sufficiency, 0.0, atol=1e-6)
    summary = fast.summary()
    assert summary["num_instances"] == len(ids)
    np.testing.assert_allclose(summary["comprehensiveness_aopc"], fast.comprehensiveness.mean(), atol=1e-12)


def test_eraser_length_one_and_two_inputs(model_and_batch):
    model, ids, _ = model_and_batch
    short = torch.zeros(3, 2, dtype=torch.long)
    short[0, 0] = ids[0, 0]
    short[1, :] = ids[1, :2]
    short[2, 0] = ids[2, 1]
    mask = short > 0
    importance = torch.tensor([[1.0, 0.0], [0.2, 0.8], [3.0, float("nan")]])  # NaN on a pad is fine
    fast = eraser_scores(model, short, mask, importance)
    slow = eraser_scores_slow(model, short, mask, importance)
    np.testing.assert_allclose(fast.comprehensiveness, slow.comprehensiveness, atol=1e-6)
    np.testing.assert_allclose(fast.sufficiency, slow.sufficiency, atol=1e-6)
    np.testing.assert_allclose(fast.sufficiency[[0, 2]], 0.0, atol=1e-6)  # r_k = the whole input
    assert fast.tokens.tolist() == [[1] * 5, [1] * 5, [1] * 5]


def test_eraser_rejects_bad_importance(model_and_batch):
    model, ids, mask = model_and_batch
    bad = torch.rand(ids.shape)
    bad[3, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        eraser_scores(model, ids, mask, bad)
    with pytest.raises(ValueError, match="shape"):
        eraser_scores(model, ids, mask, torch.rand(ids.shape[0], ids.shape[1] + 1))
    with pytest.raises(ValueError, match="right-padded|real token"):
        eraser_scores(model, ids, torch.zeros_like(mask), torch.rand(ids.shape))


def test_aopc_and_summary_by_hand():
    comp = [[0.1, 0.2, 0.3, 0.4, 0.5], [0.0, 0.0, 0.0, 0.0, 1.0]]
    suff = [[0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 1.0, 0.0, 0.0, 0.0]]
    np.testing.assert_allclose(aopc(comp), [0.3, 0.2])
    np.testing.assert_allclose(aopc(comp, include_zero_bin=True), [1.5 / 6, 1.0 / 6])
    s = summarize_eraser(comp, suff)
    assert s["comprehensiveness_aopc"] == pytest.approx(0.25)
    assert s["sufficiency_aopc"] == pytest.approx(0.35)
    assert s["comprehensiveness"] == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.75])
    with pytest.raises(ValueError, match="bins"):
        summarize_eraser([[0.1, 0.2]], [[0.1, 0.2]])
    with pytest.raises(ValueError, match="NaN"):
        summarize_eraser([[float("nan")] * 5], [[0.0] * 5])


def test_eraser_rejects_fractions_outside_0_1_and_scores_outside_minus1_1(model_and_batch):
    """Fractions and scores are range-checked, not only counted."""
    import evaluate

    scores = [[0.1, 0.2]]
    for fractions in ([0.0, 0.5], [0.5, 1.5], [-0.1, 0.5], [float("nan"), 0.5], []):
        with pytest.raises(ValueError, match=r"fractions must be a non-empty list of numbers in \(0, 1\]"):
            summarize_eraser(scores if fractions else [[]], scores if fractions else [[]], fractions)
    summarize_eraser(scores, scores, [0.5, 1.0])  # 1.0 (every token) is a valid bin
    with pytest.raises(ValueError, match=r"comprehensiveness: instance 1 has values outside \[-1, 1\]"):
        summarize_eraser([[0.1, 0.2], [1.5, 0.0]], [[0.1, 0.2]] * 2, [0.1, 0.5])
    with pytest.raises(ValueError, match=r"sufficiency: instance 0 has values outside \[-1, 1\]"):
        summarize_eraser(scores, [[-1.01, 0.0]], [0.1, 0.5])
    summarize_eraser([[-1.0, 1.0]], [[1.0, -1.0]], [0.1, 0.5])  # the bounds themselves are valid
    metric = evaluate.load(os.path.abspath(METRIC_DIR))
    with pytest.raises(ValueError, match=r"fractions.*2\.0 is not in \(0, 1\]"):
        metric.compute(comprehensiveness=scores, sufficiency=scores, fractions=[0.5, 2.0])
    with pytest.raises(ValueError, match=r"comprehensiveness: instance 0 has values outside"):
        metric.compute(comprehensiveness=[[3.0, 0.1]], sufficiency=scores, fractions=[0.1, 0.5])
    model, ids, mask = model_and_batch
    with pytest.raises(ValueError, match=r"fractions.*1\.5 is not in \(0, 1\]"):
        eraser_scores(model, ids[:2], mask[:2], torch.rand(2, ids.shape[1]), fractions=(0.5, 1.5))


def test_evaluate_module_equals_plain_function():
    import evaluate

    metric = evaluate.load(os.path.abspath(METRIC_DIR))
    rng = np.random.default_rng(0)
    comp, suff = rng.uniform(-0.2, 1, (30, 5)), rng.uniform(-0.2, 1, (30, 5))
    got = metric.compute(comprehensiveness=comp.tolist(), sufficiency=suff.tolist())
    want = summarize_eraser(comp, suff)
    assert got.pop("undefined") == {}  # why each null is null: tests/test_undefined_values.py
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-12)
    got = metric.compute(comprehensiveness=comp[:, :2].tolist(), sufficiency=suff[:, :2].tolist(),
                         fractions=[0.1, 0.5], include_zero_bin=True)
    assert got["comprehensiveness_aopc"] == pytest.approx(comp[:, :2].sum(1).mean() / 3)


# ------------------------------------------------------------------------------------------------
# integrated gradients

def test_ig_completeness_on_real_sentences(model_and_batch):
    model, ids, mask = model_and_batch
    ids, mask = ids[:16], mask[:16]
    result = integrated_gradients(model, ids, mask, steps=50)
    assert result.attributions.shape == ids.shape
    assert float(result.attributions[~mask.bool()].abs().max()) == 0.0
    np.testing.assert_allclose(result.attributions.sum(1) - (result.target_input - result.target_baseline),
                               result.completeness_gap, atol=1e-12)
    assert float(result.completeness_gap.abs().max()) < 1e-2
    with torch.no_grad():
        probs = model(input_ids=ids, attention_mask=mask).logits.softmax(-1)
    np.testing.assert_array_equal(result.target_class, probs.argmax(-1))
    np.testing.assert_allclose(result.target_input, probs.max(-1).values, atol=1e-6)
    logit = integrated_gradients(model, ids[:8], mask[:8], steps=50, target="logit", rule="right")
    scale = (logit.target_input - logit.target_baseline).abs().max()
    assert float(logit.completeness_gap.abs().max()) < 0.05 * float(scale)


def test_ig_one_step_equals_hand_computation(model_and_batch):
    model, ids, mask = model_and_batch
    ids, mask = ids[:5], mask[:5]
    right = integrated_gradients(model, ids, mask, steps=1, rule="right").attributions
    trap = integrated_gradients(model, ids, mask, steps=1, rule="trapezoid").attributions
    for b in range(len(ids)):  # one instance at a time, no padding
        n = int(mask[b].sum())
        emb = model.embedding(ids[b:b + 1, :n]).detach()

        def grad_at(point):
            point = point.clone().requires_grad_(True)
            probs = model(inputs_embeds=point).logits.softmax(-1)
            c = int(model(inputs_embeds=emb).logits.argmax(-1))
            (g,) = torch.autograd.grad(probs[0, c], point)
            return g

        at_input = (grad_at(emb) * emb).sum(-1)[0]
        at_zero = (grad_at(torch.zeros_like(emb)) * emb).sum(-1)[0]
        torch.testing.assert_close(right[b, :n], at_input.double(), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(trap[b, :n], 0.5 * (at_input + at_zero).double(), atol=1e-6, rtol=1e-5)


def test_ig_batched_equals_single_and_budget_split(model_and_batch):
    model, ids, mask = model_and_batch
    ids, mask = ids[:6], mask[:6]
    batched = integrated_gradients(model, ids, mask, steps=8).attributions
    tiny_budget = integrated_gradients(model, ids, mask, steps=8, token_budget=10).attributions
    torch.testing.assert_close(tiny_budget, batched, atol=1e-6, rtol=1e-5)
    for b in range(len(ids)):
        n = int(mask[b].sum())
        single = integrated_gradients(model, ids[b:b + 1, :n], None, steps=8).attributions
        torch.testing.assert_close(single[0], batched[b, :n], atol=1e-6, rtol=1e-5)


def test_ig_options_and_errors(model_and_batch):
    model, ids, mask = model_and_batch
    ids, mask = ids[:4], mask[:4]
    zero = integrated_gradients(model, ids, mask, steps=4)
    pad = integrated_gradients(model, ids, mask, steps=4, baseline="pad")  # [PAD] row is 0 here
    torch.testing.assert_close(zero.attributions, pad.attributions)
    detached = integrated_gradients(model, ids, mask, steps=4, detach_attention=True)
    assert not torch.allclose(detached.attributions, zero.attributions)
    imp = integrated_gradients_importance(model, ids, mask, steps=4)
    torch.testing.assert_close(imp, zero.attributions.abs())
    other = integrated_gradients(model, ids, mask, steps=4, target_class=1 - zero.target_class)
    assert bool((other.target_input - (1 - zero.target_input)).abs().max() < 1e-6)
    with pytest.raises(ValueError, match="steps"):
        integrated_gradients(model, ids, mask, steps=0)
    with pytest.raises(ValueError, match="baseline"):
        integrated_gradients(model, ids, mask, baseline="mean")
    with pytest.raises(ValueError, match="rule"):
        integrated_gradients(model, ids, mask, rule="simpson")
    with pytest.raises(ValueError, match="target_class"):
        integrated_gradients(model, ids, mask, target_class=[0, 1])
    with pytest.raises(ValueError, match="shape"):
        integrated_gradients(model, ids, mask[:, :-1])


# ------------------------------------------------------------------------------------------------
# the table over a model folder

def test_run_eraser_writes_results_and_resumes(trained_model_dir, tmp_path):
    import json

    from hf_attn.cli import main
    from hf_attn.batteries.eraser.battery import MEASURES

    out = tmp_path / "eraser"
    code = main(["eraser", trained_model_dir, "--output-dir", str(out), "--max-instances", "16",
                 "--ig-steps", "4", "--quiet"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results["measures"]) == [m for m in MEASURES if m != "rollout"]  # one attention layer
    for row in results["measures"].values():
        assert row["num_instances"] == 16 and len(row["comprehensiveness"]) == 5
        assert -1 <= row["comprehensiveness_aopc"] <= 1 and -1 <= row["sufficiency_aopc"] <= 1
    assert (out / "eraser.png").stat().st_size > 0 and "| attention |" in (out / "eraser.md").read_text()
    assert results["ig_completeness"]["max_abs_gap"] < 0.1  # 4 steps only
    mtime = (out / "results.json").stat().st_mtime_ns
    main(["eraser", trained_model_dir, "--output-dir", str(out), "--max-instances", "16",
          "--ig-steps", "4", "--quiet"])
    assert (out / "results.json").stat().st_mtime_ns == mtime  # same request: reused


def test_one_eraser_driver_on_a_papers_model_equals_the_slow_definition(trained_model_dir, small_sst):
    """The ERASER driver runs the papers' models through their adapter: its attention and
    leave-one-out rows equal the literal one-instance-at-a-time definition
    (:func:`hf_attn.methods.eraser.eraser_scores_slow`) on the model's own attention and deletion
    importances, and a one-token text emptied reads one [PAD] as the papers' convention says."""
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.eraser.battery import encode_for, eraser_table
    from hf_attn.core.batching import pad_batch
    from hf_attn.methods.eraser import eraser_scores_slow, summarize_eraser
    from hf_attn.methods.leave_one_out import leave_one_out
    from hf_attn.models.loading import load_model_folder

    model, tokenizer = load_model_folder(trained_model_dir)
    adapter = adapter_for(model, tokenizer)
    texts = list(small_sst.splits["test"]["text"])[:10] + ["fun"]
    ids, mask, units = encode_for(adapter, texts)
    fractions = (0.1, 0.5)
    table = eraser_table(adapter, ids, mask, units, ("attention", "loo"), fractions, ig_steps=2)
    plain_ids, plain_mask = pad_batch([tokenizer(t)["input_ids"] for t in texts])
    with torch.no_grad():
        attention = model(input_ids=plain_ids, attention_mask=plain_mask).attentions
        loo = torch.nan_to_num(leave_one_out(model, plain_ids, plain_mask), nan=0.0)
    for name, importance in (("attention", attention), ("loo", loo)):
        slow = eraser_scores_slow(model, plain_ids, plain_mask, importance, fractions)
        expected = summarize_eraser(slow.comprehensiveness, slow.sufficiency, fractions)
        for key in ("comprehensiveness", "sufficiency"):
            np.testing.assert_allclose(table["measures"][name][key], expected[key], atol=1e-6)
