"""The faithfulness evaluate modules (soft_faithfulness, normalized_aopc, attribution_agreement):
their README examples run (doctest), they compute what hf_attn.core.faithfulness computes, they
refuse bad inputs naming the argument, and they import nothing but the evaluate stack and their
generated copy of the shared measures (``_hf_attn_measures.py``)."""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import evaluate
import numpy as np
import pytest

import hf_attn.hub.push as hub
from hf_attn.core import faithfulness as fm

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["soft_faithfulness", "normalized_aopc", "attribution_agreement"]


@pytest.fixture(scope="module")
def metrics():
    return {name: evaluate.load(str(ROOT / "hf_attn" / "metrics" / name)) for name in MODULES}


@pytest.mark.parametrize("name", MODULES)
def test_readme_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "hf_attn" / "metrics" / name / "README.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_modules_are_self_contained(name):
    folder = ROOT / "hf_attn" / "metrics" / name
    imports = hub._evaluate_imports(folder / f"{name}.py")
    assert {m for kind, m, _ in imports if kind == "library"} <= {"datasets", "evaluate", "numpy", "scipy"}
    assert [(kind, m) for kind, m, _ in imports if kind != "library"] == [("internal", "_hf_attn_measures")]
    assert (folder / "_hf_attn_measures.py").is_file()
    assert f'with_name("{name}.py")' in (folder / "app.py").read_text()


def test_modules_equal_the_library(metrics):
    rng = np.random.default_rng(3)
    n, seeds = 30, 3
    full = rng.uniform(0.5, 1.0, n)
    null = rng.uniform(0.0, 0.9, n)
    removed, kept = rng.uniform(0, 1, (seeds, n)), rng.uniform(0, 1, (seeds, n))
    out = metrics["soft_faithfulness"].compute(full_probability=full, null_probability=null,
                                              soft_removed_probability=removed.T.tolist(),
                                              soft_kept_probability=kept.T.tolist())
    nc = fm.soft_normalised_comprehensiveness(full, removed, null)  # clipped, as the module's default
    ns = fm.soft_normalised_sufficiency(full, kept, null)
    with np.errstate(invalid="ignore"):
        for key, values in (("soft_comprehensiveness", nc), ("soft_sufficiency", ns)):
            instance_means = np.array([np.nanmean(c) if np.isfinite(c).any() else np.nan for c in values.T])
            expected = fm.mean_ci(instance_means)
            assert math.isclose(out[key], expected["mean"], rel_tol=1e-12)
            assert math.isclose(out[f"{key}_low"], expected["low"], rel_tol=1e-12)
            assert math.isclose(out[f"{key}_seed_high"], fm.mean_ci_over_seeds(values)["high"], rel_tol=1e-12)
    assert out["num_undefined"] == int((full <= null).sum())

    aopc, low, high = rng.uniform(0, 1, n), rng.uniform(-0.5, 0, n), rng.uniform(1, 2, n)
    got = metrics["normalized_aopc"].compute(aopc=aopc, aopc_min=low, aopc_max=high)
    assert math.isclose(got["naopc"], float(np.mean(fm.normalised_aopc(aopc, low, high))), rel_tol=1e-12)
    with pytest.raises(ValueError, match="instance 0 .* outside its bounds"):
        metrics["normalized_aopc"].compute(aopc=[3.19], aopc_min=[0.0], aopc_max=[1.0])

    lengths = rng.integers(1, 12, n)
    a = [rng.normal(size=k).round(1) for k in lengths]
    b = [rng.normal(size=k).round(1) for k in lengths]
    got = metrics["attribution_agreement"].compute(attributions=[x.tolist() for x in a],
                                                  references=[x.tolist() for x in b])
    width = int(lengths.max())
    dense_a, dense_b, mask = np.zeros((n, width)), np.zeros((n, width)), np.zeros((n, width), bool)
    for i, (x, y) in enumerate(zip(a, b)):
        dense_a[i, :len(x)], dense_b[i, :len(y)], mask[i, :len(x)] = x, y, True
    tau = fm.rank_agreement(dense_a, dense_b, mask)
    assert math.isclose(got["kendall_tau"], float(np.nanmean(tau)), rel_tol=1e-9)
    assert got["num_undefined"] == int(np.isnan(tau).sum())
    assert math.isclose(got["top_k_agreement"], float(np.mean(fm.top_k_agreement(dense_a, dense_b, mask))),
                        rel_tol=1e-12)


def test_bad_inputs_name_the_argument(metrics):
    with pytest.raises(ValueError, match="full_probability"):
        metrics["soft_faithfulness"].compute(full_probability=[1.5], null_probability=[0.1],
                                             soft_removed_probability=[[0.1]], soft_kept_probability=[[0.1]])
    with pytest.raises(ValueError, match="aopc_min must not exceed aopc_max"):
        metrics["normalized_aopc"].compute(aopc=[0.3], aopc_min=[0.6], aopc_max=[0.5])
    with pytest.raises(ValueError, match="instance 0"):
        metrics["attribution_agreement"].compute(attributions=[[0.1, 0.2]], references=[[0.1]])
    with pytest.raises(ValueError, match="top_k_fraction"):
        metrics["attribution_agreement"].compute(attributions=[[0.1, 0.2]], references=[[0.1, 0.3]], top_k_fraction=0)
