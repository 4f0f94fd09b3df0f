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
from hf_attn.batteries.faithfulness import (METRICS, FaithfulnessResult, FaithfulnessSettings, _Instance,
                                            run_faithfulness)

FAST = dict(ig_steps=4, ig_target=None, soft_draws=2, soft_max_draws=2, shap_samples=16, batch_tokens=64)


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
    # the sentence is rebuilt from results.json alone (the paired tests it rests on are stored)
    import json
    payload = json.loads((tmp_path / "results.json").read_text())
    payload.pop("per_instance")
    assert FaithfulnessResult.from_payload(payload).sentence() == result.sentence()
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


def _brute_force_naopc(model, instance, p_full, c):
    """Every ordering of the instance's tokens, each deletion a plain model call: the lowest and
    highest AOPC over every k (Edin et al. 2024 §3) and the drop of each deleted set."""
    content = np.flatnonzero(instance.content)
    n = len(content)
    drops = {}

    def drop(deleted):
        key = frozenset(deleted)
        if key not in drops:
            keep = np.ones(len(instance.tokens), bool)
            keep[content[list(key)]] = False
            tokens = instance.tokens[keep].tolist() or [0]
            with torch.no_grad():
                p = model(input_ids=torch.tensor([tokens])).logits.softmax(-1)[0, c]
            drops[key] = p_full - float(p)
        return drops[key]

    values = [np.mean([drop(order[:k]) for k in range(1, n + 1)]) for order in itertools.permutations(range(n))]
    return min(values), max(values), drop


def test_naopc_bounds_and_values_equal_every_ordering():
    """The table's exact bounds (dynamic programming) and beam search of full width are the extremes
    over every ordering, and each method's NAOPC is its own ordering's AOPC rescaled by them."""
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    texts = ["the good movies", "a dull plot , sadly", "not very fun"]
    for exact_max, beam in ((10, 1), (0, 1000)):
        settings = FaithfulnessSettings(**FAST | {"methods": ("attention", "leave_one_out", "random"),
                                                  "metrics": ("naopc_comprehensiveness", "naopc_sufficiency"),
                                                  "naopc_exact_max": exact_max, "naopc_beam": beam})
        result = run_faithfulness(adapter, texts, settings)
        details = result.metric_details["naopc"]
        assert details["bounds"] == ({"exact": 3, "beam": 0, "orderings": 0} if exact_max else
                                     {"exact": 0, "beam": 3, "orderings": 0})
        batch = adapter.encode(texts)
        for i in range(len(texts)):
            real = batch.attention_mask[i].bool()
            instance = _Instance(batch.input_ids[i][real].numpy(), batch.content[i][real].numpy())
            with torch.no_grad():
                full = model(input_ids=torch.tensor([instance.tokens.tolist()])).logits.softmax(-1)[0]
            c = int(full.argmax())
            low, high, drop = _brute_force_naopc(model, instance, float(full[c]), c)
            assert details["aopc_min"][i] == pytest.approx(low, abs=1e-6)
            assert details["aopc_max"][i] == pytest.approx(high, abs=1e-6)
            scores = result.attributions["attention"][i][instance.content]
            n = len(scores)
            for metric, order in (("naopc_comprehensiveness", np.argsort(-scores, kind="stable")),
                                  ("naopc_sufficiency", np.argsort(scores, kind="stable"))):
                aopc = np.mean([drop(tuple(order[:k])) for k in range(1, n + 1)])
                assert result.per_instance["attention"][metric][i] == pytest.approx((aopc - low) / (high - low),
                                                                                     abs=1e-6)


def test_naopc_long_sentences_use_the_tables_orderings_and_mask_option():
    """Beyond the beam's length the bounds are the extremes of the table's own orderings (recorded);
    the mask-token perturbation replaces instead of deleting, and needs a mask token."""
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = FaithfulnessSettings(**FAST | {"methods": ("attention", "random"), "metrics": ("naopc_comprehensiveness",),
                                              "naopc_exact_max": 2, "naopc_beam_max": 3})
    result = run_faithfulness(adapter, TEXTS, settings)
    lengths = [int(c.sum()) for c in result.content]
    expected = ["exact" if n <= 2 else "beam" if n <= 3 else "orderings" for n in lengths]
    assert result.metric_details["naopc"]["bound_method"] == expected
    values = result.per_instance["attention"]["naopc_comprehensiveness"]
    for i, how in enumerate(expected):  # with the table's orderings as bounds one method sits at 0 or 1
        if how == "orderings" and np.isfinite(values[i]):
            other = result.per_instance["random"]["naopc_comprehensiveness"][i]
            assert {round(values[i], 9), round(other, 9)} & {0.0, 1.0}
    # over naopc_every_k_max tokens the AOPC averages an even grid of k's (counted in the summary)
    from hf_attn.batteries.faithfulness import naopc_sizes
    assert naopc_sizes(5, 8).tolist() == [1, 2, 3, 4, 5] and naopc_sizes(9, 3).tolist() == [1, 5, 9]
    gridded = run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**FAST | {
        "methods": ("attention", "random"), "metrics": ("naopc_comprehensiveness",), "naopc_exact_max": 2,
        "naopc_beam_max": 3, "naopc_every_k_max": 3}))
    assert gridded.metric_details["naopc"]["k_grid_sentences"] == sum(n > 3 for n in lengths)
    assert "evenly spaced k's" in gridded.summary()
    with pytest.raises(ValueError, match="naopc_every_k_max"):
        FaithfulnessSettings(naopc_beam_max=40, naopc_every_k_max=32)
    masked = run_faithfulness(adapter, TEXTS[:2], FaithfulnessSettings(**FAST | {
        "methods": ("attention",), "metrics": ("naopc_comprehensiveness",), "naopc_perturbation": "mask"}))
    assert masked.metric_details["naopc"]["perturbation"] == "mask"
    tokenizer.mask_token = None
    with pytest.raises(ValueError, match="mask token"):
        run_faithfulness(adapter_for(model, tokenizer, device="cpu"), TEXTS[:2], FaithfulnessSettings(**FAST | {
            "methods": ("attention",), "metrics": ("naopc_comprehensiveness",), "naopc_perturbation": "mask"}))


def test_soft_metrics_do_not_depend_on_the_other_texts_their_order_or_the_batch():
    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = dict(FAST | {"methods": ("attention", "integrated_gradients"),
                            "metrics": ("soft_comprehensiveness", "soft_sufficiency"), "soft_draws": 3,
                            "soft_max_draws": 3})
    texts = TEXTS + ["an unexpectedly moving and funny story"]
    base = run_faithfulness(adapter, texts, FaithfulnessSettings(**settings))
    order = [4, 2, 0, 5, 1, 3]
    again = run_faithfulness(adapter, [texts[i] for i in order], FaithfulnessSettings(**settings | {"batch_tokens": 9}))
    alone = run_faithfulness(adapter, [texts[3]], FaithfulnessSettings(**settings))
    for method in base.methods:  # within float32 noise: the rows share other batches (1e-5 after ÷ 1 − S(x, ŷ, 0))
        for metric in ("soft_comprehensiveness", "soft_sufficiency"):
            np.testing.assert_allclose(again.per_instance[method][metric],
                                       base.per_instance[method][metric][order], atol=1e-5, equal_nan=True)
            np.testing.assert_allclose(alone.per_instance[method][metric], base.per_instance[method][metric][3:4],
                                       atol=1e-5, equal_nan=True)
            values = base.per_instance[method][metric]
            assert np.all((values[np.isfinite(values)] >= 0) & (values[np.isfinite(values)] <= 1))  # clipped


def test_soft_metrics_equal_a_slow_reference_from_the_paper():
    """Soft-NC / Soft-NS of one sentence rebuilt by hand: the BERT embedding module's output times
    a Bernoulli mask (the table's per-sentence draws), the encoder, pooler and classifier called
    directly; the null input every id 0; Zhao & Aletras's normalisation and clipping."""
    from hf_attn.batteries.faithfulness import _sentence_generator
    from hf_attn.core.faithfulness import soft_keep_probabilities

    model, tokenizer = tiny_classifier("bert")
    adapter = adapter_for(model, tokenizer, device="cpu")
    settings = FaithfulnessSettings(**FAST | {"methods": ("attention",), "soft_draws": 2, "soft_max_draws": 2,
                                              "metrics": ("soft_comprehensiveness", "soft_sufficiency")})
    result = run_faithfulness(adapter, TEXTS, settings)
    batch = adapter.encode(TEXTS)
    reference = tiny_classifier("bert")[0].eval()
    reference.load_state_dict(model.state_dict())
    for i in range(len(TEXTS)):
        real = batch.attention_mask[i].bool()
        ids = batch.input_ids[i][real][None]
        content = batch.content[i][real].numpy()
        with torch.no_grad():
            full = reference(input_ids=ids).logits.softmax(-1)[0]
            c = int(full.argmax())
            null = float(reference(input_ids=torch.zeros_like(ids)).logits.softmax(-1)[0, c])
            embedded = reference.bert.embeddings(input_ids=ids)

            def through(hidden):
                encoded = reference.bert.encoder(hidden)[0]
                return reference.classifier(reference.bert.pooler(encoded)).softmax(-1)[0, c]
            denominator = max(0.0, float(full[c]) - null)
            if denominator <= 1e-12:  # ŷ(x) ≤ ŷ(0): undefined, counted
                assert np.isnan(result.per_instance["attention"]["soft_sufficiency"][i])
                continue
            scores = result.attributions["attention"][i][content]
            p = np.ones(len(content))
            p[content] = soft_keep_probabilities(scores[None], np.ones((1, len(scores)), bool))[0]
            nc, ns = [], []
            for draw in range(2):
                kept = []
                for kind, probability in (("kept", p), ("removed", np.where(content, 1 - p, 1.0))):
                    generator = _sentence_generator(settings, "attention", ids[0].numpy(), kind, draw)
                    mask = torch.bernoulli(torch.as_tensor(probability).float()[:, None].expand(-1, embedded.shape[-1]),
                                           generator=generator)
                    kept.append(float(through(embedded * mask)))
                s_null = 1 - denominator
                ns.append(min(max(((1 - max(0.0, float(full[c]) - kept[0])) - s_null) / denominator, 0.0), 1.0))
                nc.append(min(max(max(0.0, float(full[c]) - kept[1]) / denominator, 0.0), 1.0))
        assert result.per_instance["attention"]["soft_sufficiency"][i] == pytest.approx(np.mean(ns), abs=1e-5)
        assert result.per_instance["attention"]["soft_comprehensiveness"][i] == pytest.approx(np.mean(nc), abs=1e-5)


def test_integrated_gradients_reaches_its_completeness_target():
    model, tokenizer = tiny_classifier("gpt2")
    adapter = adapter_for(model, tokenizer, device="cpu")
    base = dict(FAST | {"methods": ("integrated_gradients",), "metrics": ("comprehensiveness",)})
    fixed = run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**base | {"ig_steps": 2, "ig_target": None}))
    adaptive = run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**base | {"ig_steps": 2, "ig_target": 0.01,
                                                                                "ig_max_steps": 512}))
    ig_fixed, ig = fixed.cost["integrated_gradients"], adaptive.cost["integrated_gradients"]
    assert ig_fixed["ig_steps_max"] == 2 and "ig_target_missed" not in ig_fixed
    assert ig["ig_target_missed"] == 0 and ig["completeness_within_1pct_share"] == 1.0
    assert ig["ig_steps_max"] > 2 and ig["completeness_gap_mean_abs"] < ig_fixed["completeness_gap_mean_abs"]
    capped = run_faithfulness(adapter, TEXTS, FaithfulnessSettings(**base | {"ig_steps": 1, "ig_max_steps": 2,
                                                                              "ig_target": 0.01}))
    missed = capped.cost["integrated_gradients"]["ig_target_missed"]
    assert capped.cost["integrated_gradients"]["ig_steps_max"] == 2 and missed > 0
    assert f"{missed} sentences missed the target at 2 nodes" in capped.summary()


def test_rankings_share_ties_leave_undefined_out_and_refuse_to_rank_alike_methods():
    from hf_attn.batteries.faithfulness import FaithfulnessResult

    def result(values, per_instance=None):
        table = {m: {"comprehensiveness": {"mean": v, "low": math.nan, "high": math.nan, "n": 3, "median": v,
                                           "undefined": 0}} for m, v in values.items()}
        return FaithfulnessResult(methods=list(values), table=table, cost={}, skipped={}, agreement={},
                                  per_instance=per_instance or {}, attributions={}, content=[], settings={},
                                  num_instances=3)
    tied = result({"attention": 0.2, "saliency": 0.2, "random": 0.1, "rollout": math.nan})
    assert tied.ranks("comprehensiveness") == {"attention": 1.5, "saliency": 1.5, "random": 3.0,
                                               "rollout": pytest.approx(math.nan, nan_ok=True)}
    assert tied.ranking("comprehensiveness") == ["attention", "saliency", "random"]
    alike = result({"attention": 0.3, "saliency": 0.3, "random": 0.3})
    assert "cannot rank" in alike.sentence() and "mean rank" not in alike.sentence()
    # a difference the paired test cannot carry is not claimed
    per = {"attention": {"comprehensiveness": np.array([0.3, 0.1, 0.2])},
           "saliency": {"comprehensiveness": np.array([0.31, 0.12, 0.2])},
           "random": {"comprehensiveness": np.array([0.1, 0.3, 0.2])}}
    close = result({"attention": 0.2, "saliency": 0.21, "random": 0.2}, per)
    assert "do not differ significantly" in close.sentence() and "not distinguishable" in close.sentence()


class ContractOnly:
    """An adapter that keeps the contract and nothing else (what the BiLSTM adapter offers)."""

    def __init__(self, inner):
        self._inner = inner
        for name in ("device", "spec", "num_layers", "num_heads", "pad_id", "token_budget"):
            setattr(self, name, getattr(inner, name))

    def __getattr__(self, name):
        if name in ("encode", "from_token_lists", "forward", "logits", "logits_under", "embeddings",
                    "logits_from_embeddings", "logits_with_embedding_output", "tokens"):
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
    for bad in ({"ig_target": 0.0}, {"ig_target": float("nan")}, {"soft_stderr": 2.0}, {"soft_variant": "noise"},
                {"naopc_exact_max": 30}, {"naopc_perturbation": "blank"}, {"ig_max_steps": 2, "ig_steps": 4},
                {"soft_draws": 0}, {"methods": ("attention", "attention")}, {"flow_normalise": 1}):
        with pytest.raises(ValueError):
            FaithfulnessSettings(**bad)
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
    for flag, value, message in (("--faith-methods", "attention,attention", "lists an item twice"),
                                 ("--faith-metrics", "comprehensiveness,comprehensiveness", "lists an item twice"),
                                 ("--faith-ig-target", "2", "ig_target"),
                                 ("--faith-soft-draws", "0", "argument --faith-soft-draws: must be >= 1")):
        try:  # counts are refused by argparse (a SystemExit), the others by the settings
            code = main(base + ["--output-dir", str(tmp_path / "bad2"), flag, value])
        except SystemExit as exit:
            code = exit.code
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and message in err[0], (flag, err)
