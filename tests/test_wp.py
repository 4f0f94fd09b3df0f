"""Wiegreffe & Pinter battery: the §4 objective by hand, the §3.4 guide override, §3.3 statistics by
explicit loops, evaluate modules == plain functions, and a smoke run of the whole battery."""

import json
import math
import os
from types import SimpleNamespace

import evaluate
import numpy as np
import pytest
import torch
from datasets import DatasetDict

from hf_attn.batteries.wp import battery as wp
from hf_attn.runs.wp import run_wp
from hf_attn.core.batching import ragged_to_padded
from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.data.tasks import TaskData
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.training.engine import TrainSettings, classification_metrics, tokenize_splits, train
from hf_attn.methods import consistent_adversary as ca
from hf_attn.training import wp as wpt

METRICS = os.path.join(os.path.dirname(__file__), "..", "hf_attn", "metrics")


def _kl(p, q):
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


def _jsd(p, q):
    m = [(a + b) / 2 for a, b in zip(p, q)]
    return 0.5 * _kl(p, m) + 0.5 * _kl(q, m)


# ---------------------------------------------------------------------------------------------
# §4 objective
def test_consistent_adversary_loss_by_hand_with_pads_and_zeros():
    # row 0: 3 real tokens + 1 pad; row 1: 2 real tokens, the adversary puts 0 on one of them
    a = torch.tensor([[0.2, 0.3, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.4, 0.6, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    pa = torch.tensor([[0.3, 0.7], [0.9, 0.1]], dtype=torch.float64)
    pb = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)
    lam = 0.7
    loss, distance, kl = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, reduction="none")
    expected_kl = [_kl([0.2, 0.3, 0.5], [0.5, 0.25, 0.25]), _kl([1.0, 0.0], [0.4, 0.6])]
    expected_tvd = [0.1, 0.3]
    np.testing.assert_allclose(kl.detach().numpy(), expected_kl, rtol=1e-12)
    np.testing.assert_allclose(distance.numpy(), expected_tvd, rtol=1e-12)
    np.testing.assert_allclose(loss.detach().numpy(),
                               [t - lam * k for t, k in zip(expected_tvd, expected_kl)], rtol=1e-12)
    mean, _, _ = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam)
    mean.backward()
    assert torch.isfinite(a.grad).all()
    # d(−λ KL)/dα_a,t = −λ (log(α_a/α_b) + 1) / B on real tokens with α_a > 0
    assert a.grad[0, 0].item() == pytest.approx(-lam * (math.log(0.2 / 0.5) + 1) / 2, rel=1e-10)
    assert a.grad[0, 3].item() == 0.0  # the pad gets nothing


def test_consistent_adversary_loss_base_zero_on_real_token_is_finite():
    a = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    b = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # underflowed base attention
    p = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    loss, _, kl = ca.consistent_adversary_loss(p, p, a, b, torch.ones(1, 2, dtype=torch.bool), 1.0)
    assert torch.isfinite(loss) and torch.isfinite(kl).all()
    assert kl.item() == pytest.approx(0.5 * math.log(0.5) + 0.5 * math.log(0.5 / ca.BASE_ATTENTION_FLOOR))
    with pytest.raises(ValueError):
        ca.consistent_adversary_loss(p, p, a, b, torch.ones(1, 2, dtype=torch.bool), -1.0)


def _tiny_model(encoder="lstm", **kw):
    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=30, embedding_dim=8, encoder=encoder, hidden_size=6,
                                  num_labels=2, **kw)
    return AttnClassifierForSequenceClassification(config)


def test_adversary_trainer_compute_loss_is_the_objective():
    model = _tiny_model().eval()
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    mask = (ids != 0).long()
    base_att = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.0, 0.0]])
    base_probs = torch.tensor([[0.3, 0.7], [0.6, 0.4]])
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 0]),
              "base_attention": base_att, "base_probs": base_probs}
    fake_self = SimpleNamespace(lam=0.25)
    loss, outputs = wpt.ConsistentAdversaryTrainer.compute_loss(fake_self, model, inputs, return_outputs=True)
    out = model(input_ids=ids, attention_mask=mask)
    probs = out.logits.softmax(-1)
    expected = []
    for i in range(2):
        n = int(mask[i].sum())
        t = 0.5 * (probs[i] - base_probs[i]).abs().sum().item()
        expected.append(t - 0.25 * _kl(out.attentions[i, :n].tolist(), base_att[i, :n].tolist()))
    assert loss.item() == pytest.approx(np.mean(expected), rel=1e-5)
    assert "base_attention" in inputs  # the caller's batch is left intact


# ---------------------------------------------------------------------------------------------
# §3.4 guide override
def test_collator_pads_guides_and_guide_is_used_without_gradient():
    from transformers import PreTrainedTokenizerFast

    from hf_attn.data.tokenization import build_tokenizer

    tokenizer = build_tokenizer(["a b c", "b c d e"], min_count=1, max_length=16)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    collate = wpt.ColumnPaddingCollator(tokenizer, token_columns=("attention_weights",))
    features = [{"input_ids": tokenizer("a b c")["input_ids"], "label": 1, "attention_weights": [0.2, 0.3, 0.5]},
                {"input_ids": tokenizer("b c d e")["input_ids"], "label": 0,
                 "attention_weights": [0.1, 0.1, 0.1, 0.7]}]
    batch = collate(features)
    np.testing.assert_allclose(batch["attention_weights"].numpy(), [[0.2, 0.3, 0.5, 0.0], [0.1, 0.1, 0.1, 0.7]],
                               rtol=1e-6)
    assert not batch["attention_weights"].requires_grad
    with pytest.raises(ValueError, match="values for an instance"):
        collate([{"input_ids": tokenizer("a b c")["input_ids"], "label": 1, "attention_weights": [1.0]}])

    model = _tiny_model("average", average_activation="tanh").train()
    out = model(**batch)
    assert torch.equal(out.attentions, batch["attention_weights"])  # the guide IS the attention
    out.loss.backward()
    # the model's own attention layer is bypassed: no gradient reaches it (nor the fixed guide)
    assert all(p.grad is None for p in model.attention.parameters())
    assert model.encoder.proj.weight.grad is not None
    other = dict(batch, attention_weights=torch.tensor([[0.6, 0.2, 0.2, 0.0], [0.7, 0.1, 0.1, 0.1]]))
    with torch.no_grad():
        assert not torch.allclose(model(**batch).logits, model(**other).logits)


# ---------------------------------------------------------------------------------------------
# §3.3 statistics
def test_seed_variance_statistics_match_explicit_loops():
    rng = np.random.default_rng(0)
    lengths = [1, 3, 5, 2]
    num_seeds, T = 3, max(lengths)
    mask = np.arange(T)[None] < np.array(lengths)[:, None]

    def dist(n):
        x = rng.random(n) ** 3
        return x / x.sum()

    base = np.zeros((4, T))
    seeds = np.zeros((num_seeds, 4, T))
    for i, n in enumerate(lengths):
        base[i, :n] = dist(n)
        for s in range(num_seeds):
            seeds[s, i, :n] = dist(n)
    seeds[0, 2, :5] = [0, 0, 1, 0, 0]  # zeros: exact, no NaN
    bp = rng.dirichlet([1, 1], size=4)
    sp = rng.dirichlet([1, 1], size=(num_seeds, 4))
    stats = wp.seed_variance_statistics(base, seeds, bp, sp, mask)
    for i, n in enumerate(lengths):
        js = [_jsd(seeds[s, i, :n], base[i, :n]) for s in range(num_seeds)]
        tv = [0.5 * np.abs(sp[s, i] - bp[i]).sum() for s in range(num_seeds)]
        assert stats["max_jsd"][i] == pytest.approx(max(js), abs=1e-12)
        assert stats["median_jsd"][i] == pytest.approx(sorted(js)[1], abs=1e-12)
        assert stats["max_tvd"][i] == pytest.approx(max(tv), abs=1e-12)
        assert stats["median_tvd"][i] == pytest.approx(sorted(tv)[1], abs=1e-12)
        assert stats["max_attention"][i] == base[i, :n].max()
    assert stats["max_jsd"][0] == 0.0  # one token: every distribution is the same
    labels = np.array([0, 1, 1, 0])
    rows = wp.binned_summary(stats["max_jsd"], stats["max_attention"], labels)
    for row in rows:
        lo, hi = row["bin"]
        sel = [i for i in range(4) if labels[i] == row["class"] and lo <= stats["max_attention"][i]
               and (stats["max_attention"][i] < hi or hi == 1.0)]
        assert row["count"] == len(sel)
        if sel:
            assert row["mean"] == pytest.approx(np.mean(stats["max_jsd"][sel]))


def test_ordering_check():
    assert wp.ordering_holds(wpt.WP_TABLE3_SST)["holds"]
    assert not wp.ordering_holds({"base": 0.8, "trained": 0.81, "uniform": 0.79, "adversary": 0.5})["holds"]


# ---------------------------------------------------------------------------------------------
# evaluate modules
def test_evaluate_modules_equal_plain_functions():
    rng = np.random.default_rng(1)
    lengths = [2, 4, 3]
    base = [rng.dirichlet(np.ones(n)).tolist() for n in lengths]
    seeds = [[rng.dirichlet(np.ones(n)).tolist() for _ in range(2)] for n in lengths]
    bp = rng.dirichlet([1, 1], size=3).tolist()
    sp = [rng.dirichlet([1, 1], size=2).tolist() for _ in lengths]
    labels = [0, 1, 1]
    metric = evaluate.load(os.path.join(METRICS, "wp_seed_variance"))
    got = metric.compute(base_attention=base, seed_attentions=seeds, base_probabilities=bp,
                         seed_probabilities=sp, labels=labels, statistic="median")
    want = wp.seed_variance_summary(base, seeds, bp, sp, labels, "median")
    assert got["mean_median_jsd"] == pytest.approx(want["mean_median_jsd"])
    assert got["jsd"] == pytest.approx(want["jsd"])
    assert got["by_class_and_max_attention"] == want["by_class_and_max_attention"]

    adv = [rng.dirichlet(np.ones(n)).tolist() for n in lengths]
    metric = evaluate.load(os.path.join(METRICS, "wp_consistent_adversary"))
    got = metric.compute(adversary_attention=adv, base_attention=base, adversary_probabilities=sp[0] + [bp[0]],
                         base_probabilities=bp, lam=0.1)
    want = wp.consistent_adversary_summary(adv, base, sp[0] + [bp[0]], bp, 0.1)
    for key in ("mean_jsd", "mean_tvd", "mean_kl", "objective"):
        assert got[key] == pytest.approx(want[key])
    assert want["objective"] == pytest.approx(np.mean(np.array(want["tvd"]) - 0.1 * np.array(want["kl"])))


# ---------------------------------------------------------------------------------------------
# smoke run of the battery on tiny models
@pytest.fixture(scope="module")
def tiny_task(small_sst):
    s = small_sst.splits
    return TaskData(DatasetDict({"train": s["train"].select(range(160)), "validation": s["validation"].select(range(60)),
                                 "test": s["test"].select(range(80))}), small_sst.label_names, "sst-tiny")


@pytest.fixture
def frozen_gc():
    """accelerate runs gc.collect() after every training; freezing the (large, long-lived) test
    session heap first makes that cheap. Test speed only."""
    import gc

    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_battery_smoke(tmp_path, tiny_task, frozen_gc):
    settings = TrainSettings(embeddings="random", embedding_dim=12, hidden_size=8, epochs=1, batch_size=32)
    base_dir = str(tmp_path / "base")
    train(settings, base_dir, task=tiny_task, progress=False)
    out = str(tmp_path / "wp")
    results = run_wp(base_dir, out, num_seeds=2, lambdas=[0.01], guide_lambda=0.01, task=tiny_task,
                        adversary_steps=5, progress=False)
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["seed_variance"]["seeds"] == [1, 2]
    for name in ("seed_variance.png", "tradeoff.png", "diagnostic_mlp.png"):
        assert os.path.getsize(os.path.join(out, name)) > 1000
    assert set(saved["diagnostic_mlp"]["guides"]) == set(wpt.GUIDES)
    assert saved["per_instance_adversary"]["available"]
    assert results["timing"]["models_trained_this_run"] == 1 + 2 + 1 + 4
    row = saved["consistent_adversary"]["rows"][0]
    assert 0 <= row["mean_jsd"] <= math.log(2) and 0 <= row["mean_tvd"] <= 1 and math.isfinite(row["mean_kl"])

    # the guided MLP used its guide at test time: metrics.json F1 == F1 recomputed with the guide
    runs = os.path.join(out, "models")
    base_model, tokenizer = wpt.load_model(base_dir)
    test = tokenize_splits(tiny_task, tokenizer, 512)["test"]
    guide, _ = wpt.model_outputs(base_model, test)
    mlp, _ = wpt.load_model(wpt.guide_run_dir(runs, "base"))
    assert mlp.config.encoder == "average" and mlp.config.average_activation == "tanh"
    padded, mask = ragged_to_padded(guide)
    ids = torch.zeros(mask.shape, dtype=torch.long)
    for i, x in enumerate(test["input_ids"]):
        ids[i, :len(x)] = torch.tensor(x)
    with torch.no_grad():
        guided = mlp(input_ids=ids, attention_mask=torch.from_numpy(mask).long(),
                     attention_weights=torch.from_numpy(padded).float()).logits.softmax(-1).numpy()
        own = mlp(input_ids=ids, attention_mask=torch.from_numpy(mask).long()).logits.softmax(-1).numpy()
    with open(os.path.join(wpt.guide_run_dir(runs, "base"), "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["test_f1"] == pytest.approx(classification_metrics(guided, np.asarray(test["label"]))["f1"])
    assert not np.allclose(guided, own)

    # one driver: the papers' model is read through its adapter, and its explained attention and
    # probabilities there are the model's own (wpt.model_outputs, the helpers' training reads these)
    from hf_attn.adapters import adapter_for
    from hf_attn.batteries.wp.transformer import split_forward

    outputs = split_forward(adapter_for(base_model, tokenizer), [list(x) for x in test["input_ids"]], 7,
                            uniform=False)
    for i, a in enumerate(guide):
        np.testing.assert_allclose(outputs["attention"][i, :len(a)], a, atol=1e-6)
    np.testing.assert_allclose(outputs["probabilities"], wpt.model_outputs(base_model, test)[1], atol=1e-6)
    assert saved["uniform_baseline"]["intervention"]["variants"]["uniform"]["f1"] is not None
    assert saved["model"] == {"encoder": "lstm", "attention": "additive", "variant": "base"}

    # resumable: everything is reused, nothing retrained
    again = run_wp(base_dir, out, num_seeds=2, lambdas=[0.01], guide_lambda=0.01, task=tiny_task,
                      per_instance_adversary=False, progress=False)
    assert again["timing"]["models_trained_this_run"] == 0
    assert again["seed_variance"]["summary"] == pytest.approx(results["seed_variance"]["summary"])
    assert set(wpt.train_seeds(base_dir, runs, 2, progress=False)) == {1, 2}

    # guide adversary with 2 seeds: exactly one more adversary and one more guided MLP; the ADVERSARY
    # F1 is the mean of the two guided MLPs, each guided by its own adversary
    seeded = run_wp(base_dir, out, num_seeds=2, lambdas=[0.01], guide_lambda=0.01, task=tiny_task,
                       per_instance_adversary=False, guide_seeds=2, progress=False)
    assert seeded["timing"]["models_trained_this_run"] == 2
    adversary = seeded["diagnostic_mlp"]["guides"]["adversary"]
    assert [r["seed"] for r in adversary["seed_runs"]] == [0, 1]
    f1s = [r["test_f1"] for r in adversary["seed_runs"]]
    assert adversary["test_f1"] == pytest.approx(np.mean(f1s)) and adversary["test_f1_std"] == pytest.approx(np.std(f1s))
    assert f1s[0] == pytest.approx(results["diagnostic_mlp"]["guides"]["adversary"]["test_f1"])
    with open(os.path.join(wpt.guide_run_dir(runs, "adversary", 1), "run.json"), encoding="utf-8") as f:
        assert json.load(f)["wp"]["guide_source_dir"] == os.path.abspath(wpt.adversary_run_dir(runs, 0.01, 1))
    with open(os.path.join(wpt.adversary_run_dir(runs, 0.01, 1), "run.json"), encoding="utf-8") as f:
        assert json.load(f)["settings"]["seed"] == 1
    with pytest.raises(ValueError, match="guide_seeds"):
        run_wp(base_dir, out, guide_seeds=0, task=tiny_task, progress=False)


# ---------------------------------------------------------------------------------------------
# W&P's adversary protocol (github.com/sarahwie/attention: ½-TVD, batch-level class weights,
# ≤ 80 epochs with early stopping on the training objective)
def test_wp_protocol_loss_scale_and_class_weights_by_hand():
    # binary, 1 token each so KL = 0 for row 0; row 1: KL([0.5, 0.5] ‖ [0.25, 0.75])
    pa = torch.tensor([[0.3, 0.7], [0.9, 0.1]], dtype=torch.float64)
    pb = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    b = torch.tensor([[1.0, 0.0], [0.25, 0.75]], dtype=torch.float64)
    mask = torch.tensor([[1, 0], [1, 1]], dtype=torch.bool)
    lam = 0.2
    kl1 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    # W&P: batch_tvd = Σ_i ½|σ(z_a) − ŷ_b| (positive class only): ½·0.1, ½·0.3
    wp_tvd = [0.05, 0.15]
    # their loss_orig = Σ_i ½|p−q| − λ Σ_i KL_i; loss = loss_orig · Σ_i w_i, w = y·pos_weight + (1 − y)
    y, pos_weight = [1, 0], 3.0
    w = [yi * pos_weight + (1 - yi) for yi in y]
    wp_batch = (sum(wp_tvd) - lam * (0 + kl1)) * sum(w)
    loss, distance, kl = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, tvd_scale=0.5,
                                                       weights=torch.tensor(w, dtype=torch.float64))
    np.testing.assert_allclose(distance.numpy(), [0.1, 0.3], rtol=1e-12)  # full binary TVD
    np.testing.assert_allclose(kl.numpy(), [0.0, kl1], atol=1e-12)
    # ours = mean(w)·mean(ℓ) = W&P's / B²
    assert loss.item() == pytest.approx(wp_batch / 4, rel=1e-12)
    assert loss.item() == pytest.approx(np.mean(w) * np.mean([0.05 - 0, 0.15 - lam * kl1]), rel=1e-12)
    # scale: ½·TVD − λ·KL = ½·(TVD − 2λ·KL): W&P's λ is the fast protocol's λ/2 (up to the factor ½)
    fast, _, _ = ca.consistent_adversary_loss(pa, pb, a, b, mask, 2 * lam)
    unweighted, _, _ = ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, tvd_scale=0.5)
    assert unweighted.item() == pytest.approx(0.5 * fast.item(), rel=1e-12)
    with pytest.raises(ValueError, match="reduction='mean'"):
        ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, reduction="none", weights=torch.ones(2))
    with pytest.raises(ValueError, match="tvd_scale"):
        ca.consistent_adversary_loss(pa, pb, a, b, mask, lam, tvd_scale=0)


def test_wp_protocol_settings_and_trainer_weights():
    proto = ca.adversary_protocol("wp")
    assert (proto["max_epochs"], proto["patience"], proto["tvd_scale"], proto["class_weighted"],
            proto["selection"]) == (80, 10, 0.5, True, "train_objective")
    assert ca.adversary_protocol("wp", max_epochs=30)["max_epochs"] == 30
    assert ca.protocol_tag("fast") == "" and ca.protocol_tag("wp") == "wp" and ca.protocol_tag("wp", 30) == "wp-e30"
    assert wpt.adversary_run_dir("r", 0.001, 1, "wp") == os.path.join("r", "adversary-lambda-0.001-wp-seed1")
    assert wpt.guide_run_dir("r", "adversary", None, "wp") == os.path.join("r", "mlp-guide-adversary-wp")
    assert wpt.guide_run_dir("r", "base", None, "wp") == os.path.join("r", "mlp-guide-base")
    with pytest.raises(ValueError):
        ca.adversary_protocol("slow")
    with pytest.raises(ValueError):
        ca.adversary_protocol("wp", tvd_scale=-1)
    # the trainer weights each batch by its gold labels' class weights
    model = _tiny_model().eval()
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    mask = (ids != 0).long()
    base_att = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.0, 0.0]])
    base_probs = torch.tensor([[0.3, 0.7], [0.6, 0.4]])
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 0]),
              "base_attention": base_att, "base_probs": base_probs}
    plain = SimpleNamespace(lam=0.25, tvd_scale=0.5)
    weighted = SimpleNamespace(lam=0.25, tvd_scale=0.5, adv_class_weights=torch.tensor([1.0, 3.0]))
    l0 = wpt.ConsistentAdversaryTrainer.compute_loss(plain, model, dict(inputs))
    l1 = wpt.ConsistentAdversaryTrainer.compute_loss(weighted, model, dict(inputs))
    assert l1.item() == pytest.approx(l0.item() * (3.0 + 1.0) / 2, rel=1e-6)


def test_wp_protocol_training_early_stops_on_training_objective(tmp_path, tiny_task, frozen_gc):
    settings = TrainSettings(embeddings="random", embedding_dim=12, hidden_size=8, epochs=1, batch_size=32)
    base_dir = str(tmp_path / "base")
    train(settings, base_dir, task=tiny_task, progress=False)
    out = str(tmp_path / "adv")
    m = wpt.train_consistent_adversary(base_dir, out, 0.01, task=tiny_task, protocol="wp", max_epochs=4,
                                       patience=1, progress=False)
    assert m["protocol"]["name"] == "wp" and m["protocol"]["max_epochs"] == 4
    assert m["protocol"]["class_weights"][0] == 1.0 and m["protocol"]["class_weights"][1] > 0
    assert 1 <= m["epochs_trained"] <= 4
    assert m["test_objective"] == pytest.approx(0.5 * m["mean_tvd_to_base"] - 0.01 * m["mean_kl_to_base"], rel=1e-6)
    with open(os.path.join(out, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    assert run["selection"]["metric"] == "train_objective" and run["wp"]["protocol"]["tvd_scale"] == 0.5
    with pytest.raises(ValueError, match="protocol"):
        wpt.train_consistent_adversary(base_dir, out, 0.01, task=tiny_task, protocol="fast", progress=False)


# ---------------------------------------------------------------------------------------------
# the objective lives in hf_attn.methods.consistent_adversary; every W&P run goes through the engine
def test_objective_names_stay_importable_from_training_wp():
    from hf_attn.training import engine

    for name in ("consistent_adversary_loss", "attention_divergence", "adversary_protocol", "protocol_tag",
                 "ADVERSARY_PROTOCOLS", "ADVERSARY_DIVERGENCES", "BASE_ATTENTION_FLOOR"):
        assert getattr(wpt, name) is getattr(ca, name), name
    assert wpt.ColumnPaddingCollator is engine.ColumnPaddingCollator
    assert not hasattr(wpt, "_train_with_columns") and not hasattr(wpt, "pad_ragged")


def test_distances_to_base_by_explicit_loops():
    attention = [np.array([0.2, 0.3, 0.5]), np.array([1.0, 0.0])]
    base = [np.array([0.5, 0.25, 0.25]), np.array([0.0, 1.0])]  # an underflowed 0 on a real token
    probs, base_probs = np.array([[0.3, 0.7], [0.9, 0.1]]), np.array([[0.2, 0.8], [0.6, 0.4]])
    d = ca.distances_to_base(attention, probs, base, base_probs)
    floored = [b.clip(min=ca.BASE_ATTENTION_FLOOR) for b in base]
    np.testing.assert_allclose(d["kl"], [_kl(a, b) for a, b in zip(attention, floored)], rtol=1e-12)
    np.testing.assert_allclose(d["jsd"], [_jsd(a, b) for a, b in zip(attention, base)], rtol=1e-12)
    np.testing.assert_allclose(d["tvd"], [0.1, 0.3], rtol=1e-12)


def test_adversary_resumes_from_the_last_complete_checkpoint(tmp_path, tiny_task, frozen_gc):
    """A consistent adversary killed after its first epoch (and mid-save of a later checkpoint)
    resumes through the engine's kill-safe ``last_complete_checkpoint`` to the uninterrupted result."""
    settings = TrainSettings(embeddings="random", embedding_dim=12, hidden_size=8, epochs=2, batch_size=32)
    base_dir = str(tmp_path / "base")
    train(settings, base_dir, task=tiny_task, progress=False)
    straight = wpt.train_consistent_adversary(base_dir, str(tmp_path / "straight"), 0.01, task=tiny_task,
                                              progress=False)
    out = tmp_path / "resumed"
    first = wpt.train_consistent_adversary(base_dir, str(out), 0.01, task=tiny_task, epochs=1, progress=False,
                                           keep_checkpoints=True)
    assert first["resumed_from"] is None and (out / "checkpoints").is_dir()
    # what a 2-epoch run killed during its second checkpoint's save leaves behind
    os.remove(out / "metrics.json")
    os.remove(out / "run.json")
    request = json.loads((out / "checkpoints" / "train_request.json").read_text())
    request["settings"]["epochs"] = 2
    (out / "checkpoints" / "train_request.json").write_text(json.dumps(request))
    (out / "checkpoints" / "checkpoint-999").mkdir()
    (out / "checkpoints" / "checkpoint-999" / "trainer_state.json").write_text("")
    resumed = wpt.train_consistent_adversary(base_dir, str(out), 0.01, task=tiny_task, progress=False)
    assert resumed["resumed_from"] == first["best_checkpoint"] and resumed["epochs_trained"] == 2
    for key in ("test_accuracy", "test_roc_auc", "dev_loss", "test_loss", "mean_jsd_to_base", "mean_kl_to_base"):
        assert resumed[key] == straight[key], key
    assert not (out / "checkpoints").exists()  # finished: cleaned up
