"""The faithfulness battery (hf_attn.batteries.faithfulness) on tiny random models: the table's
shape and its save/load round trip, ERASER cells against a full recomputation, the NAOPC search
against every ordering, the skipping of methods a model cannot run (with the reason)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from architectures import TEXTS, saved_classifier, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import (METRICS, FaithfulnessResult, FaithfulnessSettings, _aopc_bounds,
                                            _Instance, _ProbabilityCache, run_faithfulness)
from hf_attn.methods.eraser import tokens_per_fraction

FAST = dict(ig_steps=4, soft_seeds=(0, 1), shap_samples=16, batch_tokens=64)


@pytest.fixture(scope="module", params=["bert", "llama", "distilbert"])
def table(request):
    model, tokenizer = tiny_classifier(request.param)
    adapter = adapter_for(model, tokenizer, device="cpu")
    return adapter, run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**FAST))


def test_table_has_every_method_and_metric(table, tmp_path):
    adapter, result = table
    expected = {"attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing", "saliency",
                "gradient_x_input", "integrated_gradients", "leave_one_out", "random"}
    assert expected <= set(result.methods)
    for method in result.methods:
        assert set(result.table[method]) >= set(METRICS) - ({"tau_loo"} if method == "leave_one_out" else set())
        assert result.cost[method]["seconds_per_sentence"] > 0
    frame = result.to_pandas()
    assert list(frame.index) == result.methods and "comprehensiveness_low" in frame
    assert result.forwards["unique"] < result.forwards["requested"]  # identical inputs shared
    ig = result.cost["integrated_gradients"]  # the completeness gap of the run, recomputed here
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution
    direct = integrated_gradients_attribution(adapter, adapter.encode(TEXTS), FAST["ig_steps"])
    assert ig["completeness_gap_mean_abs"] == pytest.approx(float(direct.completeness_gap.abs().mean()), abs=1e-5)
    share = float(np.mean(direct.completeness_gap.abs().numpy()
                          <= 0.01 * (direct.target_input - direct.target_baseline).abs().numpy()))
    # the table's batches are trimmed to their own width: a sentence right at the 1 % line may fall either side
    assert abs(ig["completeness_within_1pct_share"] - share) <= 1 / len(TEXTS) + 1e-9
    assert "completeness gap" in result.summary()
    text = result.summary()
    assert "raw attention has mean rank" in text and "| attention |" in text
    result.save(str(tmp_path))
    again = FaithfulnessResult.load(str(tmp_path))
    assert again.methods == result.methods
    for method in result.methods:
        for metric, cell in result.table[method].items():
            for key, value in cell.items():
                assert value == again.table[method][metric][key] or (math.isnan(value) and
                                                                     math.isnan(again.table[method][metric][key]))
    for method in result.methods:
        for a, b in zip(again.attributions[method], result.attributions[method]):
            np.testing.assert_array_equal(a, b)
    assert result.plot(str(tmp_path / "faithfulness.png")) is not None and (tmp_path / "faithfulness.png").exists()


def test_eraser_cells_match_full_recomputation(table):
    adapter, result = table
    model = adapter.model
    fractions = result.settings["fractions"]
    comp = []
    for i, text in enumerate(TEXTS):
        batch = adapter.encode([text])
        real = batch.attention_mask[0].bool()
        tokens = batch.input_ids[0][real].tolist()
        content = result.content[i]
        scores = result.attributions["attention"][i]
        with torch.no_grad():
            full = model(input_ids=torch.tensor([tokens])).logits.softmax(-1)[0]
        c = int(full.argmax())
        positions = [t for t in range(len(tokens)) if content[t]]
        ranking = sorted(positions, key=lambda t: (-scores[t], t))
        drops = []
        for f in fractions:
            k = min(len(positions), max(1, math.ceil(round(f * len(positions), 9))))
            kept = [tok for t, tok in enumerate(tokens) if t not in ranking[:k]]
            with torch.no_grad():
                drops.append(float(full[c] - model(input_ids=torch.tensor([kept])).logits.softmax(-1)[0, c]))
        comp.append(np.mean(drops))
    np.testing.assert_allclose(result.per_instance["attention"]["comprehensiveness"], comp, atol=1e-5)


def test_naopc_search_with_a_wide_beam_is_every_ordering():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    batch = adapter.encode(["the good movies", "a dull plot"])
    instances = [_Instance(batch.input_ids[b][batch.attention_mask[b].bool()].numpy(),
                           batch.content[b][batch.attention_mask[b].bool()].numpy()) for b in range(2)]
    cache = _ProbabilityCache(adapter, 512)
    full = cache.get([tuple(i.tokens.tolist()) for i in instances])
    predicted = full.argmax(1)
    p_full = full[np.arange(2), predicted]
    fractions = (0.3, 0.6, 1.0)
    counts = tokens_per_fraction([int(i.content.sum()) for i in instances], fractions)
    for keep in (False, True):
        low, high = _aopc_bounds(cache, instances, p_full, predicted, counts, 0, beam=1000, keep=keep)
        greedy_low, greedy_high = _aopc_bounds(cache, instances, p_full, predicted, counts, 0, beam=1, keep=keep)
        for i, inst in enumerate(instances):
            n = int(inst.content.sum())
            values = []
            for order in itertools.permutations(range(n)):
                drops = []
                for k in counts[i]:
                    chosen = np.zeros(n, bool)
                    chosen[list(order[:k])] = True
                    content = np.flatnonzero(inst.content)
                    mask = ~inst.content.copy()
                    mask[content[chosen if keep else ~chosen]] = True
                    with torch.no_grad():
                        p = model(input_ids=torch.tensor([inst.tokens[mask].tolist()])).logits.softmax(-1)[0]
                    drops.append(p_full[i] - float(p[predicted[i]]))
                values.append(np.mean(drops))
            assert abs(low[i] - min(values)) < 1e-6 and abs(high[i] - max(values)) < 1e-6
            assert min(values) - 1e-6 <= greedy_low[i] and greedy_high[i] <= max(values) + 1e-6


class ContractOnly:
    """An adapter that keeps the contract and nothing else (what the BiLSTM adapter offers)."""

    def __init__(self, inner):
        self._inner = inner
        for name in ("device", "spec", "num_layers", "num_heads", "pad_id", "token_budget"):
            setattr(self, name, getattr(inner, name))

    def __getattr__(self, name):
        if name in ("encode", "from_token_lists", "forward", "logits", "logits_under", "embeddings",
                    "logits_from_embeddings", "tokens"):
            return getattr(self._inner, name)
        raise AttributeError(name)


def test_methods_needing_internals_are_skipped_with_the_reason():
    model, tokenizer = tiny_classifier("bert")
    adapter = ContractOnly(adapter_for(model, tokenizer, device="cpu"))
    result = run_faithfulness(adapter, TEXTS[:3], FaithfulnessSettings(**FAST | {"naopc_beam": 0}))
    for method in ("attention_flow", "attention_norm", "alti", "value_zeroing"):
        assert method not in result.methods and "needs the layers of a transformers model" in result.skipped[method]
    assert {"attention", "saliency", "integrated_gradients", "leave_one_out"} <= set(result.methods)
    assert "skipped alti" in result.summary()
    # DeepLift needs the model's modules for captum's hooks (or captum is missing: the install hint)
    assert any(reason in result.skipped["deeplift"] for reason in ("adapter.model", "pip install"))


def test_settings_are_validated():
    with pytest.raises(ValueError, match="methods must be"):
        FaithfulnessSettings(methods=("attention", "telepathy"))
    with pytest.raises(ValueError, match="fractions"):
        FaithfulnessSettings(fractions=(0.0,))
    with pytest.raises(ValueError, match="naopc_beam"):
        FaithfulnessSettings(naopc_beam=-1)
    with pytest.raises(ValueError, match="texts"):
        run_faithfulness(None, [], FaithfulnessSettings())


def test_chosen_metrics_and_gradient_options_give_the_full_tables_cells(table):
    """``metrics`` computes only the chosen columns, with the same values as the full table;
    ``gradient_target="logit"`` / ``ig_baseline="pad"`` give the methods' own logit/pad results."""
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution
    from hf_attn.methods.gradient_x_input import gradient_x_input

    adapter, full = table
    chosen = ("comprehensiveness", "sufficiency", "tau_loo")
    settings = FaithfulnessSettings(**FAST | {"methods": ("gradient_x_input", "leave_one_out"), "metrics": chosen})
    result = run_faithfulness(adapter, TEXTS, settings)
    for method in result.methods:
        assert set(result.table[method]) == set(chosen) - ({"tau_loo"} if method == "leave_one_out" else set())
        for metric, cell in result.table[method].items():
            assert cell["mean"] == pytest.approx(full.table[method][metric]["mean"], abs=1e-6, nan_ok=True)
    assert result.forwards["requested"] < full.forwards["requested"]
    logit = run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**FAST | {
        "methods": ("gradient_x_input", "integrated_gradients"), "metrics": ("comprehensiveness",),
        "gradient_target": "logit", "ig_baseline": "pad"}))
    batch = adapter.encode(TEXTS)
    expected = {"gradient_x_input": gradient_x_input(adapter, batch, target="logit"),
                "integrated_gradients": integrated_gradients_attribution(
                    adapter, batch, FAST["ig_steps"], target="logit", baseline="pad").attributions}
    for method, values in expected.items():
        for i, row in enumerate(logit.attributions[method]):
            real = batch.attention_mask[i].bool()
            np.testing.assert_allclose(row, values[i][real].double().numpy(), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="metrics must be"):
        FaithfulnessSettings(metrics=("comprehensiveness", "beauty"))
    with pytest.raises(ValueError, match="gradient_target"):
        FaithfulnessSettings(gradient_target="loss")
    with pytest.raises(ValueError, match="ig_baseline"):
        FaithfulnessSettings(ig_baseline="mask")


def test_erasure_scores_of_outside_attributions_equal_the_tables(table):
    from hf_attn.batteries.faithfulness import erasure_scores

    adapter, result = table
    # per text-token scores (content only), as another library would give them
    outside = [row[content] for row, content in zip(result.attributions["saliency"], result.content)]
    scores = erasure_scores(adapter, TEXTS, outside, result.settings["fractions"])
    np.testing.assert_allclose(scores["comprehensiveness"].mean(1), result.per_instance["saliency"]["comprehensiveness"],
                               atol=1e-6)  # float32 forwards batched differently
    with pytest.raises(ValueError, match=r"attributions\[0\] has 1 scores"):
        erasure_scores(adapter, TEXTS[:1], [[0.5]])


def test_cli_faithfulness_battery_with_chosen_metrics_and_logit_gradients(tmp_path, capsys):
    """``hf-attn analyze DIR --battery faithfulness`` with ``--faith-metrics``,
    ``--faith-gradient-target`` and ``--faith-ig-baseline``: the run's table has exactly the chosen
    columns and its settings say what ran; an unknown metric is one line, exit 2."""
    from hf_attn.cli import main

    folder, data = saved_classifier("bert", tmp_path)
    base = ["analyze", str(folder), "--battery", "faithfulness", "--dataset", str(data), "--quiet", "--threads", "1",
            "--faith-methods", "attention,integrated_gradients,leave_one_out", "--faith-ig-steps", "4"]
    out = tmp_path / "out"
    code = main(base + ["--output-dir", str(out), "--faith-metrics", "comprehensiveness,tau_loo",
                        "--faith-gradient-target", "logit", "--faith-ig-baseline", "pad"])
    assert code == 0, capsys.readouterr().err
    result = FaithfulnessResult.load(str(out))
    assert result.methods == ["attention", "integrated_gradients", "leave_one_out"]
    assert set(result.table["attention"]) == {"comprehensiveness", "tau_loo"}
    assert result.settings["gradient_target"] == "logit" and result.settings["ig_baseline"] == "pad"
    assert "completeness_gap_mean_abs" in result.cost["integrated_gradients"]
    capsys.readouterr()
    code = main(base + ["--output-dir", str(tmp_path / "bad"), "--faith-metrics", "beauty"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "metrics must be" in err[0]
