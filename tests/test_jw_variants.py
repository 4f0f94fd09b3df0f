"""J&W's other encoders and attentions (JW-9, JW-10) on hand-made numbers, tolerances worked out by hand."""

import math

import pytest

from hf_attn.reporting.findings import findings_for
from hf_attn.reporting.findings.jw_variants import _finding_jw9, _finding_jw10, _share_floor


def _results(tau_g, feasible=1.0, count=100):
    return {"summary": {"tau_gradient": {"overall": {"mean": tau_g}},
                        "adversary": {"overall": {"fraction_feasible": feasible, "count": count}}}}


def _data(cnn_f1=0.78, lstm_dot_tau=0.45, feasible_dot=1.0):
    """BiLSTM + additive F1 0.80 with seed spread σ_F1 = 0.01 (tolerance 2·√2·0.01 = 0.0283) and τ_g 0.50
    over the base and two seed models 0.48, 0.52 (σ = 0.02, tolerance 2·√2·0.02 = 0.0566)."""
    seeds = [{"summary": {"tau_gradient": {"overall": {"mean": v}},
                          "adversary": {"overall": {"fraction_feasible": 1.0}}}} for v in (0.48, 0.52)]
    return {"dataset": "agnews",
            "models": {"jw_wp_base": {"test_f1": 0.80}, "jw_average": {"test_f1": 0.81}},
            "wp": {"seed_variance": {"summary": {"f1_std": 0.01}, "seeds": [0, 1, 2]}},
            "jw": {"lstm": _results(0.50), "average": _results(0.70), "seeds": seeds,
                   "extra": {"cnn-additive": {"model": {"test_f1": cnn_f1}, "results": _results(0.40)},
                             "lstm-dot": {"model": {"test_f1": 0.79}, "results": _results(lstm_dot_tau, feasible_dot)}}}}


def _holds(finding):
    return {c["name"]: c["holds"] for c in finding["checks"]}


def test_non_recurrent_encoders_comparable_within_the_f1_seed_spread():
    found = _finding_jw9(_data())
    # CNN 0.78 vs 0.80 (Δ 0.02 ≤ 0.0283), Average 0.81 vs 0.80; dot: CNN and Average + dot not trained
    assert _holds(found) == {"cnn-additive": True, "average-additive": True, "cnn-dot": None, "average-dot": None}
    assert f"≤ {2 * math.sqrt(2) * 0.01:.3f}" in found["sentence"]
    assert found["verdict"] == "reproduced"
    found = _finding_jw9(_data(cnn_f1=0.76))  # Δ 0.04 > 0.0283
    assert _holds(found)["cnn-additive"] is False and found["verdict"] == "partly reproduced"


def test_dot_attention_comparable_per_encoder():
    found = _finding_jw10(_data())
    h = _holds(found)
    assert h["lstm test F1"] is True  # 0.79 vs 0.80
    assert h["lstm mean τ(attention, gradient)"] is True  # 0.45 vs 0.50: Δ 0.05 ≤ 0.0566
    assert h["lstm share with a feasible adversary"] is True
    assert found["verdict"] == "reproduced"
    found = _finding_jw10(_data(lstm_dot_tau=0.10))  # Δ 0.40
    assert _holds(found)["lstm mean τ(attention, gradient)"] is False
    assert found["verdict"] == "partly reproduced"


def test_feasible_share_tolerance_has_a_sampling_floor():
    # the seed models are all feasible (σ = 0): the tolerance is the binomial error of the difference, ≥ 1/n
    assert _share_floor(1.0, 1.0, 100) == pytest.approx(0.01)
    assert _share_floor(0.9, 0.8, 100) == pytest.approx(2 * math.sqrt(2 * 0.85 * 0.15 / 100))
    found = _finding_jw10(_data(feasible_dot=0.97))  # |Δ| 0.03 ≤ 2·√(2·0.985·0.015/100) = 0.0344
    assert _holds(found)["lstm share with a feasible adversary"] is True
    found = _finding_jw10(_data(feasible_dot=0.90))  # 0.10 > 2·√(2·0.95·0.05/100) = 0.0616
    assert _holds(found)["lstm share with a feasible adversary"] is False


def test_variants_not_trained_give_no_finding():
    data = _data()
    data["jw"]["extra"] = {}
    assert _finding_jw9(data) is None and _finding_jw10(data) is None
    ids = [f["id"] for f in findings_for({"dataset": "sst", "models": {"jw_wp_base": None, "jw_average": None},
                                          "jw": {"lstm": None, "average": None, "extra": {}}, "wp": None,
                                          "ts": None, "eraser": {}})]
    assert "JW-9" not in ids and "JW-10" not in ids
