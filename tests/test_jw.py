"""Jain & Wallace battery against independent computations: finite differences, explicit token
removal, per-instance loops, autograd of the objective, the evaluate modules, the CLI."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from hf_attn.batteries.jw import battery as jw
from hf_attn.batteries.jw.summary import (adversary_summary, correlation_summary, jsonable,
                                         permutation_summary)
from hf_attn.core.batching import in_row_chunks
from hf_attn.core.measures import merge_near_ties, tvd
from hf_attn.methods import adversary
from hf_attn.methods import leave_one_out as leave_one_out_method

METRICS = os.path.join(os.path.dirname(__file__), "..", "hf_attn", "metrics")


@pytest.fixture(scope="module")
def model_and_batch(trained_model_dir, small_sst):
    from transformers import PreTrainedTokenizerFast

    from hf_attn import AttnClassifierForSequenceClassification

    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(trained_model_dir)
    texts = list(small_sst.splits["test"]["text"])[:12] + ["good", "bad ."]
    encoded = tokenizer(texts)["input_ids"]
    ids, mask = jw.pad_batch(encoded)
    return model, tokenizer, ids, mask


def test_length_batches_respect_budget_and_cover_everything():
    lengths = np.array([5, 1, 40, 7, 7, 3, 100, 2])
    batches = jw.length_batches(lengths, 30)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or len(b) * lengths[b].max() <= 30
    for b in jw.length_batches(lengths, 200, cost="deletions"):
        assert len(b) == 1 or len(b) * lengths[b].max() * (lengths[b].max() - 1) <= 200


def test_gradient_matches_finite_differences_with_attention_fixed(model_and_batch):
    model, _, ids, mask = model_and_batch
    model = model.double()
    try:
        g = jw.gradient_importance(model, ids[:3], mask[:3])
        emb = model.embedding(ids[:3]).detach()
        with torch.no_grad():
            out = model(inputs_embeds=emb, attention_mask=mask[:3])
            alpha, pred = out.attentions, out.logits.argmax(-1)

        def yhat(e, rows):  # attention held fixed at α̂: the graph cut of Alg. 1
            logits = model(inputs_embeds=e, attention_mask=mask[rows], attention_weights=alpha[rows]).logits
            return logits.softmax(-1).gather(1, pred[rows, None]).squeeze(1)

        h = 1e-6
        for b in range(3):  # row t of the batch moves e_t along itself: (∂ŷ/∂e_t)·e_t
            n = int(mask[b].sum())
            rows = torch.full((n,), b)
            direction = torch.zeros(n, *emb.shape[1:], dtype=emb.dtype)
            direction[torch.arange(n), torch.arange(n)] = emb[b, :n]
            with torch.no_grad():
                fd = (yhat(emb[rows] + h * direction, rows) - yhat(emb[rows] - h * direction, rows)) / (2 * h)
            assert torch.allclose(fd.abs(), g[b, :n], rtol=1e-4, atol=1e-9)
        assert (g[~mask[:3]] == 0).all()
    finally:
        model.float()


def test_leave_one_out_matches_explicit_removal(model_and_batch):
    model, _, ids, mask = model_and_batch
    loo = jw.leave_one_out(model, ids, mask, token_budget=50)  # small budget: several chunks
    with torch.no_grad():
        for b in [0, 3, 12, 13]:
            seq = ids[b, : int(mask[b].sum())]
            if len(seq) < 2:
                assert torch.isnan(loo[b, 0])
                continue
            full = model(input_ids=seq[None]).logits.softmax(-1)
            shorter = torch.stack([torch.cat([seq[:t], seq[t + 1:]]) for t in range(len(seq))])
            expected = tvd(model(input_ids=shorter).logits.softmax(-1), full)
            assert torch.allclose(loo[b, : len(seq)], expected, atol=1e-5)
    assert torch.isnan(loo[12, 0]) and (loo[12, 1:] == 0).all()  # "good": a single token


def test_permutations_preserve_weights_and_pads(model_and_batch):
    model, _, ids, mask = model_and_batch
    probs, attention, hidden = jw.predict(model, ids, mask)
    perms = jw.random_permutations(mask, 7, torch.Generator().manual_seed(0))
    permuted = attention.gather(1, perms.flatten(1)).view(perms.shape)
    assert torch.equal(permuted.sort(-1).values, attention.unsqueeze(1).expand_as(permuted).sort(-1).values)
    assert (permuted[~mask.unsqueeze(1).expand_as(permuted)] == 0).all()
    # decoder-only path == full model with the permuted attention as override
    out = jw.permutation_tvd(model, hidden, attention, mask, permutations=perms)
    with torch.no_grad():
        for p in range(7):
            logits = model(input_ids=ids, attention_mask=mask, attention_weights=permuted[:, p]).logits
            assert torch.allclose(out[:, p], tvd(logits.softmax(-1), probs), atol=1e-5)


def test_adversary_closed_form_gradient_matches_autograd(model_and_batch):
    model, _, ids, mask = model_and_batch
    _, attention, hidden = jw.predict(model, ids, mask)
    tok = model.token_logits(hidden).detach().double()
    a = attention.double()
    z = torch.randn(ids.shape[0], 4, ids.shape[1], dtype=torch.float64, requires_grad=True)
    adv = z.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(-1)
    probs = model.logits_from_token_logits(tok, adv).softmax(-1)
    original = model.logits_from_token_logits(tok, a).softmax(-1)
    lam, eps = 500.0, 0.01
    objective = jw.adversary_objective(adv, a, tvd(probs, original.unsqueeze(1)), lam, eps).sum()
    (expected,) = torch.autograd.grad(objective, z)
    with torch.no_grad():
        got = adversary._adversary_logit_gradient(model, z.masked_fill(~mask.unsqueeze(1), -1e4), tok, a.clamp_min(1e-30).unsqueeze(1),
                                           original, lam, eps)
    assert torch.allclose(got, expected, atol=1e-8)


def test_adversaries_feasible_diverse_and_batched_equals_loop(model_and_batch):
    model, _, ids, mask = model_and_batch
    _, attention, hidden = jw.predict(model, ids, mask)
    noise = torch.randn((ids.shape[0], 3, ids.shape[1]), generator=torch.Generator().manual_seed(1))
    kwargs = dict(k=3, steps=60, lr=0.05)
    batched = jw.adversarial_attention(model, hidden, attention, mask, noise=noise, **kwargs)
    assert (batched.attention[~mask.unsqueeze(1).expand_as(batched.attention)] == 0).all()
    assert torch.allclose(batched.attention.sum(-1), torch.ones(ids.shape[0], 3), atol=1e-5)
    accepted = batched.feasible
    assert (batched.tvd[accepted] <= 0.01).all()
    assert torch.equal(batched.eps_max_jsd, torch.where(accepted, batched.jsd, 0.0).max(-1).values)
    multi = mask.sum(1) >= 3
    assert float(batched.eps_max_jsd[multi].median()) > 0.05  # JSD > 0 typical
    for b in [0, 5, 13]:  # per-instance run with the same initial noise
        n = int(mask[b].sum())
        alone = jw.adversarial_attention(model, hidden[b:b + 1, :n], attention[b:b + 1, :n],
                                         mask[b:b + 1, :n], noise=noise[b:b + 1, :, :n], **kwargs)
        assert torch.allclose(alone.attention[0], batched.attention[b, :, :n], atol=1e-5)
        assert torch.allclose(alone.eps_max_jsd[0], batched.eps_max_jsd[b], atol=1e-5)


def test_batched_equals_per_instance_loop(model_and_batch):
    model, _, ids, mask = model_and_batch
    g = jw.gradient_importance(model, ids, mask)
    loo = jw.leave_one_out(model, ids, mask)
    for b in [1, 4, 7]:
        n = int(mask[b].sum())
        one_ids, one_mask = ids[b:b + 1, :n], mask[b:b + 1, :n]
        assert torch.allclose(jw.gradient_importance(model, one_ids, one_mask)[0], g[b, :n], atol=1e-6)
        assert torch.allclose(jw.leave_one_out(model, one_ids, one_mask)[0], loo[b, :n], atol=1e-6)


def test_evaluate_modules_equal_plain_functions():
    import evaluate

    rng = np.random.default_rng(0)
    lengths = [1, 2, 5, 9, 14, 20]
    attention = [rng.dirichlet(np.ones(n)) for n in lengths]
    importance = [a + rng.normal(scale=0.1, size=len(a)) for a in attention]
    predictions = [0, 1, 1, 0, 1, 0]
    metric = evaluate.load(os.path.abspath(os.path.join(METRICS, "jw_correlation")))
    got = metric.compute(attention=[a.tolist() for a in attention],
                         importance=[v.tolist() for v in importance], predictions=predictions)
    assert set(got.pop("undefined")) == {"tau[]", "pvalue[]"}  # the one-token instance: τ undefined, with why
    assert got == jsonable(correlation_summary(attention, importance, predictions))
    assert got["overall"]["skipped"] == 1

    perm = rng.uniform(size=(6, 10)) * 0.1
    max_att = [float(a.max()) for a in attention]
    metric = evaluate.load(os.path.abspath(os.path.join(METRICS, "jw_permutation")))
    got = metric.compute(permutation_tvd=perm.tolist(), max_attention=max_att, predictions=predictions)
    assert isinstance(got.pop("undefined"), dict)  # the empty bins' medians: null with why
    assert got == jsonable(permutation_summary(perm, max_att, predictions))

    tv, js = rng.uniform(0, 0.02, size=(6, 5)), rng.uniform(0, 0.69, size=(6, 5))
    metric = evaluate.load(os.path.abspath(os.path.join(METRICS, "jw_adversary")))
    got = metric.compute(adversary_tvd=tv.tolist(), adversary_jsd=js.tolist(), max_attention=max_att,
                         predictions=predictions, eps=0.01)
    assert isinstance(got.pop("undefined"), dict)
    assert got == jsonable(adversary_summary(tv, js, max_att, predictions, 0.01))
    expected = [js[i][tv[i] <= 0.01].max() if (tv[i] <= 0.01).any() else 0.0 for i in range(6)]
    assert np.allclose(got["eps_max_jsd"], expected)


def test_cli_writes_results_and_figures(trained_model_dir, tmp_path):
    from hf_attn.runs import run_battery

    settings = jw.JWRunSettings(progress=False, max_instances=30,
                                algorithm=jw.JWSettings(steps=20, num_permutations=10, k=3))
    out = tmp_path / "jw"
    run_battery("jw", trained_model_dir, str(out), settings)
    results = json.loads((out / "results.json").read_text())
    summary = results["summary"]
    assert summary["num_instances"] == 30
    assert results["parameters"]["steps"] == 20 and results["parameters"]["k"] == 3
    for key in ("tau_gradient", "tau_loo", "tau_gradient_loo"):
        assert -1 <= summary[key]["overall"]["mean"] <= 1
    assert "versions" in results and results["published"] is not None
    for name in results["figures"].values():
        assert (out / name).stat().st_size > 1000
    assert {"fig1_adversarial_heatmap", "fig2_tau_gradient", "fig3_permutation", "fig4_eps_max_jsd",
            "fig5_eps_max_jsd_vs_max_attention"} <= set(results["figures"])
    assert len((out / "instances.jsonl").read_text().splitlines()) == 30
    assert not (out / "cache").exists()
    # Per-instance Kendall τ (J&W Table 2's statistic) is stored, equal to scipy's τ-b, and the
    # per-class means of results.json are their means.
    from scipy.stats import kendalltau

    rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    checked = 0
    for row in rows:
        tau = row["kendall_tau"]["attention_gradient"]
        if len(row["attention"]) < 2:
            assert tau is None
            continue
        tied = [merge_near_ties(row[k], tolerance=results["parameters"]["tie_tolerance"])
                for k in ("attention", "gradient")]
        expected = kendalltau(*tied).statistic
        assert tau == pytest.approx(expected, abs=1e-9)
        assert 0 <= row["kendall_pvalue"]["attention_gradient"] <= 1
        checked += 1
    assert checked >= 25
    for c, block in summary["tau_loo"]["per_class"].items():
        values = [r["kendall_tau"]["attention_loo"] for r in rows if r["prediction"] == int(c)
                  and r["kendall_tau"]["attention_loo"] is not None]
        assert block["mean"] == pytest.approx(np.mean(values), abs=1e-12)
    # Every field of both files is documented in docs/outputs.md.
    documented = (Path(__file__).resolve().parents[1] / "docs" / "outputs.md").read_text()
    for key in [*results, *(f"summary.{k}" for k in summary if k != "seconds"), *rows[0]]:
        assert f"`{key}`" in documented or f"`{key}," in documented or f", `{key}`" in documented, key


def test_average_encoder_leave_one_out_fast_path_is_exact():
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    torch.manual_seed(0)
    model = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=40, embedding_dim=8, encoder="average", hidden_size=6)).eval()
    ids, mask = jw.pad_batch([[5, 9, 3, 22, 7], [4], [11, 12], [30, 31, 32]])
    fast = jw.leave_one_out(model, ids, mask)
    with torch.no_grad():
        for b in range(4):
            seq = ids[b, : int(mask[b].sum())]
            if len(seq) < 2:
                assert torch.isnan(fast[b, 0]) and (fast[b, 1:] == 0).all()
                continue
            full = model(input_ids=seq[None]).logits.softmax(-1)
            for t in range(len(seq)):
                shorter = torch.cat([seq[:t], seq[t + 1:]])[None]
                expected = tvd(model(input_ids=shorter).logits.softmax(-1), full)
                assert float(fast[b, t]) == pytest.approx(float(expected), abs=1e-6)
            assert (fast[b, len(seq):] == 0).all()


@pytest.mark.parametrize("variant,attention,num_labels", [
    ("base", "additive", 2), ("concat", "additive", 2), ("residual", "dot", 2), ("tying", "uniform", 2),
    ("base", "additive", 3), ("base", "dot", 4)])
def test_bilstm_leave_one_out_shortcut_equals_rerunning_every_deletion(variant, attention, num_labels):
    """The BiLSTM shortcut (rerun only the changed half of each direction, attention and decoder read
    through their linear maps) equals running each x₋t through the whole model, for every variant
    and attention, with tiny chunk budgets so that every chunking branch runs."""
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=40, embedding_dim=8, encoder="lstm", hidden_size=4,
                                  variant=variant, attention=attention, num_labels=num_labels,
                                  attention_hidden_size=5)
    model = AttnClassifierForSequenceClassification(config).eval()
    ids, mask = jw.pad_batch([[5, 9, 3, 22, 7], [4], [11, 12], [30, 31, 32, 33, 34, 35, 36], [8, 8, 8]])
    assert leave_one_out_method._single_layer_lstm(model)
    generic = jw.leave_one_out(model, ids, mask, method="generic")
    for budgets in [dict(), dict(token_budget=13), dict(token_budget=7), dict(token_budget=1)]:  # 13: column blocks of 2
        shortcut = jw.leave_one_out(model, ids, mask, **budgets)
        torch.testing.assert_close(shortcut, generic, rtol=0, atol=1e-6, equal_nan=True)
    assert torch.isnan(generic[1, 0]) and (generic[1, 1:] == 0).all()
    with torch.no_grad():  # and the generic path itself against explicit removal
        seq = ids[3]
        full = model(input_ids=seq[None]).logits.softmax(-1)
        for t in range(len(seq)):
            shorter = torch.cat([seq[:t], seq[t + 1:]])[None]
            assert float(generic[3, t]) == pytest.approx(float(tvd(model(input_ids=shorter).logits.softmax(-1), full)),
                                                         abs=1e-6)
    with pytest.raises(ValueError, match="method"):
        jw.leave_one_out(model, ids, mask, method="fast")


def test_two_layer_bilstm_uses_the_generic_leave_one_out():
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    model = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=40, embedding_dim=8, encoder="lstm", hidden_size=4, num_layers=2)).eval()
    assert not leave_one_out_method._single_layer_lstm(model)
    ids, mask = jw.pad_batch([[5, 9, 3], [11, 12]])
    torch.testing.assert_close(jw.leave_one_out(model, ids, mask), jw.leave_one_out(model, ids, mask, method="generic"))


def test_multiclass_adversary_gradient_matches_autograd():
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    torch.manual_seed(0)
    model = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=40, embedding_dim=8, encoder="lstm", hidden_size=4, num_labels=3)).double().eval()
    ids, mask = jw.pad_batch([[5, 9, 3, 22, 7], [4, 6], [11, 12, 13]])
    _, attention, hidden = jw.predict(model, ids, mask)
    tok = model.token_logits(hidden)
    z = torch.randn(3, 5, ids.shape[1], dtype=torch.float64, requires_grad=True)
    adv = z.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(-1)
    original = model.logits_from_token_logits(tok, attention).softmax(-1)
    probs = model.logits_from_token_logits(tok, adv).softmax(-1)
    for lam, eps in [(500.0, 0.01), (3.0, 0.0)]:
        objective = jw.adversary_objective(adv, attention, tvd(probs, original.unsqueeze(1)), lam, eps).sum()
        (expected,) = torch.autograd.grad(objective, z, retain_graph=True)
        got = adversary._adversary_logit_gradient(model, z.detach().masked_fill(~mask.unsqueeze(1), -1e4), tok,
                                           attention.clamp_min(1e-30).unsqueeze(1), original, lam, eps)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-9)


def test_gradient_in_row_chunks_equals_one_batch(model_and_batch):
    model, _, ids, mask = model_and_batch
    whole = jw.gradient_importance(model, ids, mask)
    for budget in (1, 20, 10_000):
        chunked = in_row_chunks(lambda i, m: jw.gradient_importance(model, i, m), ids, mask, budget)
        torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_amsgrad_ascent_equals_torch_adam(dtype):
    """The adversary's direct fused-kernel stepper does what torch.optim.Adam(amsgrad, maximize) does."""
    torch.manual_seed(0)
    ours = torch.randn(7, 5, 11, dtype=dtype)
    theirs = ours.clone().requires_grad_(True)
    stepper = adversary._AmsgradAscent(ours, 0.01)
    reference = torch.optim.Adam([theirs], lr=0.01, amsgrad=True, maximize=True)
    for i in range(300):
        g = torch.randn(7, 5, 11, dtype=dtype) * (1 + i % 7)
        stepper.step(g.clone())
        theirs.grad = g.clone()
        reference.step()
    torch.testing.assert_close(ours, theirs.detach(), rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-10)


def _with_repeated_token(tokens: list[str], position: int) -> list[str]:
    return tokens[:position + 1] + [tokens[position]] + tokens[position + 1:]


def test_repeated_tokens_are_tied_before_kendall_tau(model_and_batch, small_sst):
    """Through the real model: deleting either of two adjacent identical tokens
    gives the same sentence, so their leave-one-out values are one value; the float32 shortcut
    can return them a few 1e-8 apart. After merging near-ties (tie_tolerance) they are equal and
    the battery's τ is scipy's τ-b of the merged values; without it τ ranks the tie as ordered."""
    from scipy.stats import kendalltau

    model, tokenizer, _, _ = model_and_batch
    sentences = [" ".join(_with_repeated_token(text.split(), p))  # "a a b …", "… b c c d …"
                 for text in list(small_sst.splits["test"]["text"])[:60] if len(text.split()) >= 4
                 for p in (0, 2)]
    encoded = tokenizer(sentences)["input_ids"]
    ids, mask = jw.pad_batch(encoded)
    probabilities, attention, _ = jw.predict(model, ids, mask)
    loo = jw.leave_one_out(model, ids, mask, probabilities=probabilities)
    tolerance = jw.JWSettings().tie_tolerance
    assert tolerance == 1e-6
    att = [attention[b, :len(e)].double().numpy() for b, e in enumerate(encoded)]
    lo = [loo[b, :len(e)].double().numpy() for b, e in enumerate(encoded)]
    predictions = probabilities.argmax(-1).numpy()
    merged = correlation_summary(att, lo, predictions, 2, tie_tolerance=tolerance)
    raw = correlation_summary(att, lo, predictions, 2, tie_tolerance=0.0)
    broken = 0
    for b, e in enumerate(encoded):
        pairs = [t for t in range(len(e) - 1) if e[t] == e[t + 1]]
        assert pairs, sentences[b]
        m_att, m_loo = merge_near_ties(att[b], tolerance=tolerance), merge_near_ties(lo[b], tolerance=tolerance)
        for t in pairs:
            assert abs(lo[b][t] - lo[b][t + 1]) < tolerance  # one sentence, float32 noise only
            assert m_loo[t] == m_loo[t + 1]
        expected = kendalltau(m_att, m_loo)
        assert merged["tau"][b] == pytest.approx(expected.statistic, abs=1e-12)
        assert merged["pvalue"][b] == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-15)
        assert raw["tau"][b] == pytest.approx(kendalltau(att[b], lo[b]).statistic, abs=1e-12)
        if any(lo[b][t] != lo[b][t + 1] for t in pairs):
            broken += 1
            assert raw["tau"][b] != merged["tau"][b]  # the counter-example: the tie ranked as ordered
    assert broken >= 1, "no repeated-token pair whose float32 leave-one-out values differ"


def test_tie_tolerance_is_a_validated_setting_and_cli_option():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--threads", default="auto")
    from hf_attn.runs import jw as jw_run

    jw_run.add_options(parser)
    assert jw_run.settings_from_args(parser.parse_args([])).algorithm.tie_tolerance == 1e-6
    assert jw_run.settings_from_args(parser.parse_args(["--jw-tie-tolerance", "0"])).algorithm.tie_tolerance == 0.0
    for bad in (-1e-6, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="tie_tolerance"):
            jw.JWSettings(tie_tolerance=bad).validate()


def test_single_token_instances_are_skipped_by_every_summary(model_and_batch, small_sst):
    """Instances with fewer than 2 tokens have no τ, and their permutation Δŷ and
    ε-max JSD (0 by construction) are skipped alike, counted in ``skipped``."""
    model, tokenizer, _, _ = model_and_batch
    texts = list(small_sst.splits["test"]["text"])[:10] + ["good", "bad", "dull", "fun"]
    settings = jw.JWSettings(num_permutations=5, k=2, steps=5)
    instances, summary = jw.run_jw_battery(settings.adapter(model, tokenizer), texts, settings=settings, progress=False)
    lengths = np.array([len(a) for a in instances.attention])
    single = lengths < 2
    assert single.sum() == 4 == summary["length"]["single_token"]
    predictions = instances.predictions
    medians = np.median(instances.permutation_tvd, axis=1)
    assert (medians[single] == 0).all() and (instances.eps_max_jsd[single] == 0).all()
    for key in ("tau_gradient", "tau_loo", "tau_gradient_loo", "permutation", "adversary"):
        block = summary[key]
        assert block["overall"]["skipped"] == 4, key
        assert block["overall"]["count"] == int((~single).sum()), key
        for c, stats in block["per_class"].items():
            assert stats["skipped"] == int((single & (predictions == int(c))).sum()), (key, c)
            assert stats["count"] == int((~single & (predictions == int(c))).sum()), (key, c)
    assert summary["permutation"]["overall"]["median"] == pytest.approx(float(np.median(medians[~single])))
    assert summary["adversary"]["overall"]["mean"] == pytest.approx(float(instances.eps_max_jsd[~single].mean()))
    feasible = (instances.adversary_tvd <= settings.eps).any(1)
    assert summary["adversary"]["overall"]["fraction_feasible"] == pytest.approx(float(feasible[~single].mean()))
    for key in ("permutation", "adversary"):  # Figs 3 and 5 bin only the counted instances
        assert sum(row["count"] for row in summary[key]["by_max_attention"]) == int((~single).sum())
    assert np.isnan(summary["permutation"]["median_tvd"][single]).all()
    assert np.isnan(summary["adversary"]["eps_max_jsd"][single]).all()
    # the plain functions without lengths (the evaluate modules' call) count every instance
    every = permutation_summary(instances.permutation_tvd, instances.max_attention, predictions, 2)
    assert every["overall"]["count"] == len(texts) and "skipped" not in every["overall"]
    every = adversary_summary(instances.adversary_tvd, instances.adversary_jsd, instances.max_attention,
                              predictions, settings.eps, 2)
    assert every["overall"]["count"] == len(texts) and "skipped" not in every["overall"]


def _analyze_args(*flags):
    """``hf-attn analyze`` as the command line parses it (the real parser, jw options included)."""
    import argparse

    from hf_attn.cli.analyze import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["analyze", "MODEL", "--battery", "jw", "--output-dir", "OUT", *flags])


def test_jw_flag_defaults_are_the_settings_dataclass_defaults():
    from hf_attn.runs import get_battery

    battery = get_battery("jw")
    assert battery.settings_class is jw.JWRunSettings
    assert battery.settings_from_args(_analyze_args()) == jw.JWRunSettings()
    args = _analyze_args("--jw-permutations", "7", "--jw-adversaries", "2", "--jw-lambda", "3", "--jw-eps", "0.2",
                         "--jw-steps", "9", "--jw-lr", "0.5", "--jw-token-budget", "11",
                         "--jw-gradient-token-budget", "12", "--jw-loo-token-budget", "13",
                         "--jw-tie-tolerance", "0", "--threads", "1", "--jw-max-instances", "5",
                         "--jw-no-cache", "--split", "validation", "--seed", "4", "--quiet")
    expected = jw.JWRunSettings(split="validation", progress=False, max_instances=5, use_cache=False,
                                algorithm=jw.JWSettings(num_permutations=7, k=2, lam=3.0, eps=0.2, steps=9, lr=0.5,
                                                        seed=4, token_budget=11, gradient_token_budget=12,
                                                        loo_token_budget=13, tie_tolerance=0.0, num_threads=1),
                                eps_given=True)
    assert battery.settings_from_args(args) == expected


@pytest.mark.parametrize("variant,attention,num_labels,markers", [
    ("base", "additive", 2, False), ("concat", "additive", 2, False), ("residual", "dot", 2, False),
    ("tying", "uniform", 2, False), ("base", "additive", 3, False), ("base", "dot", 4, True)])
def test_bilstm_gradient_shortcut_equals_autograd(variant, attention, num_labels, markers):
    """The BiLSTM gradient shortcut (hand-written backpropagation through time to the input gates,
    (∂ŷ/∂a_t)·W_ih e_t summed over directions, plus the direct path of e_t for concat/residual)
    equals autograd through the whole model, on a padded batch, with and without J&W's markers."""
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification
    from hf_attn.methods.gradient import gradient_importance

    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=40, embedding_dim=8, encoder="lstm", hidden_size=4,
                                  variant=variant, attention=attention, num_labels=num_labels,
                                  attention_hidden_size=5, attention_exclude_first_last=markers)
    model = AttnClassifierForSequenceClassification(config).eval()
    ids, mask = jw.pad_batch([[5, 9, 3, 22, 7], [4], [11, 12], [30, 31, 32, 33, 34, 35, 36], [8, 8, 8]])
    generic = gradient_importance(model, ids, mask, method="generic")
    shortcut = gradient_importance(model, ids, mask, method="bptt")
    assert generic.abs().max() > 1e-3  # a real signal, not zeros on both sides
    torch.testing.assert_close(shortcut, generic, rtol=1e-5, atol=1e-7)
    assert (shortcut[~mask.bool()] == 0).all()
    with pytest.raises(ValueError, match="method"):
        gradient_importance(model, ids, mask, method="fast")


def test_one_driver_adversary_on_the_papers_models_equals_the_generic_autograd_search(model_and_batch):
    """The adapter driver's adversary (``adversarial_rows``) on a papers' model takes the closed-form
    search over cached states; the same start and objective through the generic per-head autograd
    path (the one every transformer takes) finds the same adversaries."""
    from hf_attn.adapters import adapter_for
    from hf_attn.methods.adversary import adversarial_rows

    model, tokenizer, _, _ = model_and_batch
    exact = adapter_for(model, tokenizer)
    generic = adapter_for(model, tokenizer)
    generic.exact_model_methods = False  # the instance attribute hides the class's shortcut flag
    batch = exact.encode(["a gripping , beautifully acted film", "the plot is dull and the acting is worse", "fun"])
    forward = exact.forward(batch)
    results = [adversarial_rows(a, batch, forward, k=3, steps=40, generator=torch.Generator().manual_seed(5))
               for a in (exact, generic)]
    fast, slow = results
    torch.testing.assert_close(fast.attention, slow.attention, atol=2e-5, rtol=0)
    torch.testing.assert_close(fast.tvd, slow.tvd, atol=2e-5, rtol=0)
    torch.testing.assert_close(fast.jsd, slow.jsd, atol=2e-5, rtol=0)
    torch.testing.assert_close(fast.probabilities, slow.probabilities, atol=2e-5, rtol=0)
    torch.testing.assert_close(fast.jsd_row, fast.jsd)  # one head, all of α on the content tokens


def test_one_driver_runs_the_papers_models_and_transformers_alike(model_and_batch, small_sst):
    """``run_jw_battery`` takes an adapter: on a papers' model its τ values are J&W's Kendall τ of the
    model-level gradient and leave-one-out (computed here slowly, one instance at a time), and it
    writes no rollout or per-layer block for a one-layer model."""
    model, tokenizer, _, _ = model_and_batch
    texts = list(small_sst.splits["test"]["text"])[:8]
    settings = jw.JWSettings(num_permutations=4, k=2, steps=5)
    instances, summary = jw.run_jw_battery(settings.adapter(model, tokenizer), texts, settings=settings,
                                           progress=False)
    assert "tau_rollout" not in summary and "per_layer" not in summary and instances.rollout is None
    for i, text in enumerate(texts):
        ids, mask = jw.pad_batch([tokenizer(text)["input_ids"]])
        _, attention, _ = jw.predict(model, ids, mask)
        gradient = jw.gradient_importance(model, ids, mask)[0].numpy()
        loo = jw.leave_one_out(model, ids, mask)[0].numpy()
        np.testing.assert_allclose(instances.attention[i], attention[0].numpy(), atol=1e-6)
        np.testing.assert_allclose(instances.gradient[i], gradient, atol=1e-6)
        np.testing.assert_allclose(instances.loo[i], loo, atol=1e-6)
        a, g = (merge_near_ties(x[None], tolerance=settings.tie_tolerance)[0] for x in (attention[0].numpy(), gradient))
        assert instances.kendall["attention_gradient"][0][i] == pytest.approx(kendalltau(a, g).statistic, abs=1e-9)
