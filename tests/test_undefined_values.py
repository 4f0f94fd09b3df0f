"""Every evaluate module returns None with a reason wherever a value is undefined: per module, an
input that makes each of its undefined-able values undefined, the value None, its reason in the
result's ``undefined`` map (one helper, ``report_undefined``, shipped in every module's generated
``_hf_attn_measures.py``), and no NaN anywhere in the result. Also the one float32-aware bounds check
of NAOPC and the authors' beam width."""

from __future__ import annotations

import json
import math
from pathlib import Path

import evaluate
import pytest

ROOT = Path(__file__).resolve().parents[1]
METRICS = ROOT / "hf_attn" / "metrics"


def _load(name):
    return evaluate.load(str(METRICS / name))


def _undefined_paths(value, path="", out=None) -> set[str]:
    """The paths of the None values of a result, written as report_undefined names them (keys joined
    by ".", a list's items as "[]"); fails on any NaN or infinity."""
    out = set() if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            if not (path == "" and k == "undefined"):
                _undefined_paths(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _undefined_paths(v, f"{path}[]", out)
    elif value is None:
        out.add(path)
    elif isinstance(value, float):
        assert math.isfinite(value), f"{path} is {value}"
    return out


def _check(out: dict, expected: dict[str, str]) -> None:
    """``expected``: name → a phrase of its reason. Each is None (every item, for a list's "[]") and
    reasoned; every None of the result has a reason; no NaN; strict JSON."""
    json.dumps(out, allow_nan=False)
    reasons = out["undefined"]
    assert isinstance(reasons, dict)
    assert _undefined_paths(out) == set(reasons), (sorted(_undefined_paths(out)), sorted(reasons))
    for name, phrase in expected.items():
        assert name in reasons, (name, reasons)
        assert phrase in reasons[name], (name, reasons[name])


# module → [(compute kwargs, {undefined name: a phrase of its reason})]
CASES = {
    "normalized_aopc": [
        (dict(aopc=[0.2, 0.1], aopc_min=[0.2, 0.1], aopc_max=[0.2, 0.1]),
         {"naopc": "every instance has AOPC_min = AOPC_max", "naopc_low": "2 defined instances, 0 given",
          "naopc_high": "2 defined instances, 0 given"}),
        (dict(aopc=[0.3, 0.2], aopc_min=[0.1, 0.2], aopc_max=[0.5, 0.2]),
         {"naopc_low": "2 defined instances, 1 given", "naopc_high": "2 defined instances, 1 given"})],
    "attribution_agreement": [
        (dict(attributions=[[1.0, 1.0, 1.0], [0.5]], references=[[0.1, 0.2, 0.3], [0.2]]),
         {"kendall_tau": "no instance has a defined tau", "kendall_tau_low": "0 given",
          "kendall_tau_high": "constant score list"}),
        (dict(attributions=[[0.1, 0.3, 0.2]], references=[[0.1, 0.2, 0.3]]),
         {"kendall_tau_low": "1 given", "top_k_agreement_low": "1 given", "top_k_agreement_high": "1 given"})],
    "soft_faithfulness": [
        (dict(full_probability=[0.5, 0.4], null_probability=[0.6, 0.4], soft_removed_probability=[[0.4], [0.3]],
              soft_kept_probability=[[0.4], [0.3]]),
         {name + suffix: why for name in ("soft_comprehensiveness", "soft_sufficiency")
          for suffix, why in (("", "y(x) <= y(0)"), ("_low", "0 given"), ("_high", "0 given"),
                              ("_seed_low", "2 seeds"), ("_seed_high", "2 seeds"))}),
        (dict(full_probability=[0.9, 0.8], null_probability=[0.1, 0.2], soft_removed_probability=[[0.4], [0.3]],
              soft_kept_probability=[[0.8], [0.7]]),
         {"soft_comprehensiveness_seed_low": "1 given", "soft_sufficiency_seed_high": "1 given"})],
    "eraser_faithfulness": [
        (dict(comprehensiveness=[[0.1] * 5], sufficiency=[[0.2] * 5]),
         {"comprehensiveness_aopc_stderr": "2 instances, 1 given", "sufficiency_aopc_stderr": "1 given"})],
    "jw_correlation": [
        (dict(attention=[[0.5, 0.5], [0.2, 0.8], [1.0]], importance=[[1.0, 2.0], [None, 1.0], [0.3]],
              predictions=[0, 1, 0], num_classes=3),
         {"overall.mean": "no instance has a defined τ", "overall.fraction_significant": "constant ranking",
          "per_class.0.mean": "predicted as this class", "per_class.2.std": "predicted as this class",
          "tau[]": "positions 0, 1, 2", "pvalue[]": "missing value"})],
    "jw_permutation": [
        (dict(permutation_tvd=[[0.1, 0.2], [0.3]], max_attention=[0.3, 0.9], predictions=[0, 0], num_classes=2),
         {"per_class.1.mean": "no instance is predicted as this class", "per_class.1.median": "this class",
          "by_max_attention[].median": "in this bin", "by_max_attention[].q25": "positions 0, 1, 3, 4, 5, 7"})],
    "jw_adversary": [
        (dict(adversary_tvd=[[0.001]], adversary_jsd=[[0.2]], max_attention=[0.3], predictions=[0], num_classes=2),
         {"per_class.1.fraction_feasible": "no instance is predicted as this class",
          "by_max_attention[].q75": "in this bin"})],
    "ts_token_probability": [
        (dict(token_logits=[[[1.0], [2.0]]], attentions=[[0.5, 0.5]], references=[0]),
         {"token_probability": "no instance is classified correctly"})],
    "wp_seed_variance": [
        (dict(base_attention=[[0.5, 0.5]], seed_attentions=[[[0.4, 0.6]]], base_probabilities=[[0.3, 0.7]],
              seed_probabilities=[[[0.2, 0.8]]], labels=[1]),
         {"by_class_and_max_attention[].mean": "in this bin", "by_class_and_max_attention[].q25": "positions 0, 1, 3"})],
    # nothing of these can be undefined (F1 with zero_division 0, MI, distances): {} on edge inputs
    "ts_fragility": [(dict(token_logits=[[[1.0], [2.0]]], attentions=[[0.5, 0.5]], references=[0],
                           permutation_draws=2), {})],
    "ts_mutual_information": [(dict(input_vectors=[[0, 0], [0, 0], [1, 1]], hidden_vectors=[[1, 1], [1, 1], [2, 2]],
                                    n_clusters=2, seed=0), {})],
    "wp_consistent_adversary": [(dict(adversary_attention=[[1.0, 0.0]], base_attention=[[1.0, 0.0]],
                                      adversary_probabilities=[[0.0, 1.0]], base_probabilities=[[0.0, 1.0]]), {})],
    # average precision needs a text with marked and unmarked words; a text without a mark is left out, not None
    "plausibility": [
        (dict(predictions=[[0.2, 0.1], [0.5, 0.3]], references=[[1, 1], [0, 0]]),
         {"average_precision": "every scored text is marked entirely"}),
        (dict(predictions=[[0.2, 0.1, 0.4], [0.5]], references=[[1, 0, 0], [0]]), {})],
}


def test_every_module_is_covered():
    assert sorted(CASES) == sorted(p.name for p in METRICS.iterdir() if (p / f"{p.name}.py").is_file())


@pytest.mark.parametrize("name", sorted(CASES))
def test_undefined_values_are_none_with_a_reason(name):
    metric = _load(name)
    for kwargs, expected in CASES[name]:
        out = metric.compute(**kwargs)
        _check(out, expected)
        if not expected:
            assert out["undefined"] == {}


def test_an_instance_without_permutations_is_refused_not_a_null():
    with pytest.raises(ValueError, match="instance 1 has no permutations"):
        _load("jw_permutation").compute(permutation_tvd=[[0.1], []], max_attention=[0.3, 0.9], predictions=[0, 0])


def test_report_undefined_refuses_a_null_without_a_reason():
    from hf_attn.core.numpy_measures import report_undefined

    out = report_undefined({"a": float("nan"), "rows": [{"m": None}, {"m": 1.0}], "b": [1.0, float("inf")]},
                           {"a": "why a", "rows[].*": "why m", "b[]": "why b"})
    assert out == {"a": None, "rows": [{"m": None}, {"m": 1.0}], "b": [1.0, None],
                   "undefined": {"a": "why a", "rows[].m": "why m (positions 0)", "b[]": "why b (positions 1)"}}
    with pytest.raises(RuntimeError, match="c is undefined and no reason"):
        report_undefined({"c": float("nan")}, {})


def test_normalized_aopc_accepts_float32_rounding_and_refuses_more():
    """A float32 AOPC 2e-7 below its bound (measured) is clipped onto it; 0.5 within [0, 0.4] is
    refused naming the value and the bounds, by the module as by the library (one check)."""
    from hf_attn.core.faithfulness import normalised_aopc

    metric = _load("normalized_aopc")
    out = metric.compute(aopc=[0.1 - 2e-7, 0.3], aopc_min=[0.1, 0.1], aopc_max=[0.5, 0.5])
    assert out["naopc"] == pytest.approx(0.25) and out["undefined"] == {}
    for compute in (lambda: metric.compute(aopc=[0.5], aopc_min=[0.0], aopc_max=[0.4]),
                    lambda: normalised_aopc([0.5], [0.0], [0.4])):
        with pytest.raises(ValueError, match=r"of instance 0 \(0.5\) lies outside its bounds \[0, 0.4\]"):
            compute()


def test_naopc_beam_width_defaults_to_the_authors():
    """JoakimEdin/naopc, aopc/aopc/main.py: Aopc.evaluate(..., beam_size=5)."""
    from hf_attn.batteries.faithfulness import FaithfulnessSettings
    from hf_attn.core.naopc import DEFAULT_BEAM_WIDTH
    from hf_attn.runs.faithfulness import add_options
    from hf_attn.cli import OneLineErrorParser

    assert DEFAULT_BEAM_WIDTH == 5 and FaithfulnessSettings().naopc_beam == 5
    parser = OneLineErrorParser()
    add_options(parser)
    assert parser.parse_args([]).faith_naopc_beam == 5
    cached = json.loads((ROOT / "hf_attn" / "cli_help.json").read_text())
    assert "NAOPC beam width (the authors' width; 0: no normalised AOPC) (int ≥ 0, default 5)" in \
        json.dumps(cached, ensure_ascii=False)
