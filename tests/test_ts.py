"""Tutek & Šnajder battery: fast paths against full forwards / explicit loops, MI against hand values
and sklearn, word-set selection, evaluate modules == library functions, grid, battery smoke run."""

import json
from dataclasses import asdict
import math
import os
from collections import Counter

import evaluate
import numpy as np
import pytest
import torch
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import mutual_info_score

from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification
from hf_attn.batteries.ts import battery as ts
from hf_attn.runs.grid import grid_runs, train_grid
from hf_attn.training.engine import TrainSettings

METRICS = os.path.join(os.path.dirname(__file__), "..", "hf_attn", "metrics")
VOCAB = 40


def tiny_model(variant="base", attention="additive", num_labels=2, seed=0):
    torch.manual_seed(seed)
    config = AttnClassifierConfig(vocab_size=VOCAB, embedding_dim=8, hidden_size=4, variant=variant,
                                  attention=attention, num_labels=num_labels)
    return AttnClassifierForSequenceClassification(config).eval()


def ragged_ids(n=23, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, size=int(rng.integers(1, 12))).tolist() for _ in range(n)]


def states(model, ids):
    return list(ts.model_states(model, ids, batch_size=7))


@pytest.mark.parametrize("num_labels", [2, 3])
@pytest.mark.parametrize("variant", ["base", "residual"])
def test_fragility_fast_path_equals_full_forward_with_attention_override(num_labels, variant):
    model = tiny_model(variant, num_labels=num_labels)
    for b in states(model, ragged_ids()):
        generator = torch.Generator().manual_seed(3)
        preds = ts.fragility_predictions(model, b.token_logits, b.attention, b.mask, generator, 4)
        with torch.no_grad():
            full = model(input_ids=b.input_ids, attention_mask=b.mask.long())
            uniform = model(input_ids=b.input_ids, attention_mask=b.mask.long(),
                            attention_weights=ts.uniform_attention(b.mask))
            permuted_alpha = ts.permute_attention(b.attention, b.mask,
                                                  torch.Generator().manual_seed(3), 4)
            permuted = [model(input_ids=b.input_ids, attention_mask=b.mask.long(),
                              attention_weights=a).logits.argmax(-1) for a in permuted_alpha]
        assert torch.equal(preds["trained"], full.logits.argmax(-1))
        assert torch.equal(preds["uniform"], uniform.logits.argmax(-1))
        assert torch.equal(preds["permuted"], torch.stack(permuted))
        assert torch.allclose(model.logits_from_token_logits(b.token_logits, b.attention),
                              full.logits, atol=1e-5)


def test_permutation_is_a_uniform_random_permutation_within_real_tokens():
    attention = torch.tensor([[0.5, 0.3, 0.2, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    draws = ts.permute_attention(attention, mask, torch.Generator().manual_seed(0), 6000)
    assert torch.equal(draws[:, :, 3], torch.zeros(6000, 2))
    assert torch.equal(draws[:, 1], attention[1].expand(6000, -1))
    assert torch.allclose(draws[:, 0, :3].sort(-1).values, attention[0, :3].sort().values.expand(6000, -1))
    counts = Counter(tuple(row.tolist()) for row in draws[:, 0, :3])
    assert len(counts) == 6 and all(850 < c < 1150 for c in counts.values())  # 6 perms, ~1000 each
    again = ts.permute_attention(attention, mask, torch.Generator().manual_seed(0), 6000)
    assert torch.equal(draws, again)


def test_fragility_scores_hand_computed():
    labels = np.array([1, 1, 0, 0])
    # trained perfect (F1 100); uniform predicts all 1 (P=0.5, R=1, F1=2/3); permuted: two draws
    out = ts.fragility_scores(labels, labels, np.ones(4, int), np.array([[1, 0, 0, 0], [1, 1, 0, 0]]), 2)
    assert out["f1_trained"] == pytest.approx(100)
    assert out["delta_uniform"] == pytest.approx(100 * 2 / 3 - 100)
    assert out["f1_permuted"] == pytest.approx((100 * 2 / 3 + 100) / 2)
    with pytest.raises(ValueError):
        ts.fragility_scores(labels, labels[:3], labels, labels[None], 2)


@pytest.mark.parametrize("num_labels", [2, 3])
def test_per_token_probability_equals_explicit_token_loop(num_labels):
    model = tiny_model("tying", num_labels=num_labels, seed=1)
    ids = ragged_ids(15, seed=2)
    labels = np.random.default_rng(0).integers(0, num_labels, len(ids))
    values, correct = np.empty(len(ids)), np.empty(len(ids), bool)
    for b in states(model, ids):
        probs = ts.token_class_probabilities(model, b.token_logits)
        predicted = b.logits.argmax(-1)
        values[b.index] = ts.per_token_prediction_probability(probs, predicted, b.mask).numpy()
        correct[b.index] = predicted.numpy() == labels[b.index]
    expected = []
    with torch.no_grad():
        for i, row in enumerate(ids):
            x = torch.tensor([row])
            out = model(input_ids=x, output_hidden_states=True)
            pred = int(out.logits.argmax(-1))
            per_token = []
            for t in range(len(row)):  # decoder on h_t alone = the full model with α = one-hot(t)
                one_hot = torch.zeros(1, len(row))
                one_hot[0, t] = 1.0
                logits = model(input_ids=x, attention_weights=one_hot).logits
                per_token.append(float(logits.softmax(-1)[0, pred]))
            assert values[i] == pytest.approx(np.mean(per_token), abs=1e-6)
            if pred == labels[i]:
                expected.append(np.mean(per_token))
    score = ts.token_probability_score(values, correct)
    assert score["token_probability"] == pytest.approx(np.mean(expected), abs=1e-6)
    assert score["correct_instances"] == len(expected)


def test_mutual_information_hand_computed_and_equal_to_sklearn():
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=np.float32)
    labels = np.repeat(np.arange(4), 50)
    x = centres[labels] + 0.01 * rng.standard_normal((200, 2)).astype(np.float32)
    y = 3 * centres[labels] + 0.01 * rng.standard_normal((200, 2)).astype(np.float32)
    # identical partitions into 4 equal clusters: MI = H = log 4
    assert ts.clustered_mutual_information(x, y, n_clusters=4, batch_size=100) == pytest.approx(math.log(4))
    # two blobs each side with contingency [[60, 40], [40, 60]]:
    # MI = 2·0.3·log(0.3/0.25) + 2·0.2·log(0.2/0.25)
    a = np.repeat([0, 1], 100)
    b = np.concatenate([np.repeat([0, 1], [60, 40]), np.repeat([0, 1], [40, 60])])
    two = np.array([[0, 0], [10, 0]], dtype=np.float32)
    xa = two[a] + 0.01 * rng.standard_normal((200, 2)).astype(np.float32)
    yb = two[b] + 0.01 * rng.standard_normal((200, 2)).astype(np.float32)
    hand = 0.6 * math.log(0.3 / 0.25) + 0.4 * math.log(0.2 / 0.25)
    assert ts.clustered_mutual_information(xa, yb, 2, 100) == pytest.approx(hand)
    # arbitrary data: the same as sklearn called directly
    a, b = rng.standard_normal((500, 5)), rng.standard_normal((500, 3))
    direct = mutual_info_score(
        MiniBatchKMeans(n_clusters=20, batch_size=100, random_state=7, n_init="auto").fit_predict(a.astype(np.float32)),
        MiniBatchKMeans(n_clusters=20, batch_size=100, random_state=7, n_init="auto").fit_predict(b.astype(np.float32)))
    assert ts.clustered_mutual_information(a, b, 20, 100, seed=7) == pytest.approx(direct)
    with pytest.raises(ValueError):
        ts.clustered_mutual_information(a, b[:10], 20)


def test_word_sets_most_frequent_and_seeded_unigram_power_sample():
    counts = np.array([0, 0, 0, 5, 50, 7, 7, 0, 1, 30])
    assert ts.select_word_types(counts, 3, "MF").tolist() == [4, 5, 9]  # 50, 30, then 7 (id 5 < 6)
    assert ts.select_word_types(counts, 100, "MF").tolist() == [3, 4, 5, 6, 8, 9]
    rs = ts.select_word_types(counts, 4, "RS", seed=1)
    assert len(set(rs.tolist())) == 4 and set(rs.tolist()) <= {3, 4, 5, 6, 8, 9}
    assert np.array_equal(rs, ts.select_word_types(counts, 4, "RS", seed=1))
    # one draw per seed: frequencies ∝ count^0.75
    draws = Counter(int(ts.select_word_types(counts, 1, "RS", seed=s)[0]) for s in range(4000))
    present = np.array([3, 4, 5, 6, 8, 9])
    expected = counts[present] ** 0.75 / (counts[present] ** 0.75).sum()
    observed = np.array([draws[i] for i in present]) / 4000
    assert np.abs(observed - expected).max() < 0.03
    with pytest.raises(ValueError):
        ts.select_word_types(counts, 3, "XX")


def test_collect_occurrences_and_model_mi():
    model = tiny_model("residual")
    ids = ragged_ids(40, seed=4)
    counts = ts.count_token_ids(ids, VOCAB, exclude=[0, 1, 2])
    words = ts.select_word_types(counts, 5, "MF")
    e, h, tokens = ts.collect_occurrences(model, ids, words)
    assert len(tokens) == counts[words].sum() and set(tokens.tolist()) == set(words.tolist())
    assert np.allclose(e, model.embedding.weight.detach().numpy()[tokens])
    capped = ts.collect_occurrences(model, ids, words, max_occurrences=10, seed=0)
    assert len(capped[2]) == 10
    mi = ts.mutual_information(model, ids, [0, 1, 2], num_words=5, n_clusters=5, seed=0)
    assert 0 <= mi["MF"]["mi"] <= math.log(5) + 1e-9 and mi["RS"]["types"] == 5


def test_evaluate_modules_equal_library_functions():
    model = tiny_model()
    b = states(model, ragged_ids(12))[0]
    token_logits = [b.token_logits[i, :int(m.sum())].tolist() for i, m in enumerate(b.mask)]
    attentions = [b.attention[i, :int(m.sum())].tolist() for i, m in enumerate(b.mask)]
    refs = [int(i % 2) for i in range(len(token_logits))]
    fragility = evaluate.load(os.path.abspath(os.path.join(METRICS, "ts_fragility")))
    got = fragility.compute(token_logits=token_logits, attentions=attentions, references=refs, seed=2,
                            permutation_draws=3)
    assert got.pop("undefined") == {}  # why each null is null: tests/test_undefined_values.py
    assert got == pytest.approx(
        ts.fragility_from_token_logits(token_logits, attentions, refs, seed=2, permutation_draws=3))
    probability = evaluate.load(os.path.abspath(os.path.join(METRICS, "ts_token_probability")))
    got = probability.compute(token_logits=token_logits, attentions=attentions, references=refs)
    assert got.pop("undefined") == {}
    assert got == pytest.approx(
        ts.token_probability_from_token_logits(token_logits, attentions, refs))
    # and the list-level function equals the batched model path
    preds = ts.fragility_predictions(model, b.token_logits, b.attention, b.mask,
                                     torch.Generator().manual_seed(2), 3)
    assert ts.fragility_from_token_logits(token_logits, attentions, refs, 2, 3) == pytest.approx(
        ts.fragility_scores(np.array(refs), preds["trained"].numpy(), preds["uniform"].numpy(),
                            preds["permuted"].numpy(), 2))
    rng = np.random.default_rng(0)
    e, h = rng.standard_normal((60, 4)), rng.standard_normal((60, 6))
    mi = evaluate.load(os.path.abspath(os.path.join(METRICS, "ts_mutual_information")))
    out = mi.compute(input_vectors=e.tolist(), hidden_vectors=h.tolist(), n_clusters=6, seed=1)
    assert out["mutual_information"] == pytest.approx(ts.clustered_mutual_information(e, h, 6, 100, 1), abs=1e-6)


def test_grid_runs_order_equal_footing_and_resume(tmp_path):
    runs = grid_runs(TrainSettings(), ["base", "tying"], ["additive", "dot"], seeds=2)
    assert [r for r, _ in runs][:4] == ["base-additive/seed0", "base-dot/seed0",
                                        "tying-additive/seed0", "tying-dot/seed0"]
    assert {s.hidden_size for _, s in runs} == {25} and {s.seed for _, s in runs} == {0, 1}
    with pytest.raises(ValueError):
        grid_runs(TrainSettings(hidden_size=30), ["tying"], ["dot"], 1)
    # finished runs are skipped (train returns metrics.json as is)
    for relative, settings in runs[:2]:
        os.makedirs(tmp_path / relative)
        (tmp_path / relative / "run.json").write_text(json.dumps({"settings": asdict(settings)}))
        (tmp_path / relative / "metrics.json").write_text(json.dumps({"test_f1": 0.5}))
    summary = train_grid(runs[:2], str(tmp_path), task=object(), progress=False)
    assert [r["status"] for r in summary["runs"]] == ["finished before"] * 2
    assert json.loads((tmp_path / "grid.json").read_text())["num_runs"] == 2


def test_battery_smoke_on_trained_model(trained_model_dir, tmp_path):
    settings = ts.TSSettings(split="test", seed=0, progress=False, permutation_draws=2, mi_split="test",
                             mi_max_occurrences=3000, mi_words=30, mi_clusters=10, adversary_limit=20)
    from hf_attn.runs.ts import run_battery

    results = run_battery(trained_model_dir, str(tmp_path), settings)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["fragility"]["instances"] == 1821
    # (the fixture was trained on small SST; the battery reads the run's dataset, full SST)
    assert 0 < saved["fragility"]["f1_trained"] <= 100
    assert 0.5 <= saved["token_probability"]["token_probability"] <= 1
    assert 0 <= saved["mutual_information"]["MF"]["mi"] <= math.log(10) + 1e-9
    assert results["jw_adversary"]["status"] in ("ok", "unavailable")
    assert (tmp_path / "token_probability.png").stat().st_size > 1000


@pytest.mark.parametrize("variant", ["base", "concat", "residual", "tying", "mlm"])
def test_variant_states_follow_ts_equations_2_3(variant):
    """T&Š Eq. 2 h = [rnn(e); e], Eq. 3 h = e + rnn(e); tying / MLM attend over rnn(e) itself."""
    model = tiny_model(variant)
    ids, mask = ts.length_sorted_batches(ragged_ids(5), 5).__next__()[1:]
    with torch.no_grad():
        e = model.embedding(ids) * mask.unsqueeze(-1)
        rnn = model.encoder(e, mask) * mask.unsqueeze(-1)
        expected = {"concat": torch.cat([rnn, e], -1), "residual": rnn + e}.get(variant, rnn)
        assert torch.allclose(model.encode(model.embedding(ids), mask), expected, atol=1e-6)


def test_settings_are_validated():
    with pytest.raises(ValueError, match="permutation_draws"):
        ts.analyze_model(None, None, None, permutation_draws=0)


def test_model_selection_picks_best_dev_f1_per_cell_and_the_grid_uses_it(tmp_path):
    """T&Š §3.1: tying over every δ and MLM over every η (seed 0, per attention), the best dev F1 chosen
    (the first of equal values); the grid's regularised cells then train with the chosen value."""
    from hf_attn.runs.grid import read_selection, select_regularisers, selection_runs, with_selection

    runs = selection_runs(TrainSettings(), ["additive", "dot"], deltas=(1.0, 10.0, 20.0), weights=(0.3, 1.0))
    assert [r for r, _ in runs][:4] == ["tying-additive/tying_delta-1", "tying-additive/tying_delta-10",
                                        "tying-additive/tying_delta-20", "tying-dot/tying_delta-1"]
    assert len(runs) == 2 * 3 + 2 * 2 and {s.seed for _, s in runs} == {0}
    dev = {"tying-additive": [0.70, 0.80, 0.75], "tying-dot": [0.82, 0.82, 0.70],
           "mlm-additive": [0.60, 0.61], "mlm-dot": [0.90, 0.50]}
    seen: dict = {}
    for relative, settings in runs:  # finished runs with the dev F1 above (train returns them as they are)
        cell = relative.split("/")[0]
        f1 = dev[cell][seen.setdefault(cell, 0)]
        seen[cell] += 1
        os.makedirs(tmp_path / relative)
        (tmp_path / relative / "run.json").write_text(json.dumps({"settings": asdict(settings)}))
        (tmp_path / relative / "metrics.json").write_text(json.dumps({"test_f1": 0.5, "dev_f1": f1}))
    chosen = select_regularisers(runs, str(tmp_path), task=object())
    assert {cell: entry["chosen"] for cell, entry in chosen.items()} == {
        "tying-additive": 10.0, "tying-dot": 1.0, "mlm-additive": 1.0, "mlm-dot": 0.3}
    assert chosen["tying-additive"]["dev_f1"] == {"1": 0.70, "10": 0.80, "20": 0.75}
    assert read_selection(str(tmp_path)) == chosen
    grid = with_selection(grid_runs(TrainSettings(), ["base", "tying", "mlm"], ["additive", "dot"], 1), chosen)
    by_cell = {relative.split("/")[0]: s for relative, s in grid}
    assert by_cell["tying-dot"].tying_delta == 1.0 and by_cell["tying-additive"].tying_delta == 10.0
    assert by_cell["mlm-dot"].mlm_weight == 0.3 and by_cell["base-dot"] == grid[1][1]
    assert with_selection(grid, None) == grid
