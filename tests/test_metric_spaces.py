"""Metric Spaces that work where hf_attn is not installed.

``evaluate.load("USER/<metric>")`` downloads ``<metric>.py`` named after the *repo* and the files the
script imports relatively (``from ._hf_attn_measures import ...``), nothing else; hf_attn is on no
package index. So every module script imports only the evaluate stack, NumPy (SciPy / scikit-learn
where needed) and ``_hf_attn_measures.py``, the NumPy copy of the library's measures shipped beside
it. Checked here:

* every module folder holds the same ``_hf_attn_measures.py`` as ``hf_attn/metrics/``, and each of
  its functions returns what the library function it copies returns (in-process, many inputs);
* ``build_metric_space_folder`` renames the script to the repo's name, points app.py at it, writes
  requirements without hf_attn, and refuses what evaluate could not load;
* from the loopback Hub, in a fresh interpreter where ``import hf_attn`` fails: ``evaluate.load`` of
  every module (and of one pushed under another name, with the CLI) computes the library's values;
  each Space snapshot copied into a folder named ``app`` (as a Space runs it) builds its Gradio app,
  whose compute equals the library; the renamed Space starts with ``python app.py`` and answers a
  gradio_client query.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

import hf_attn.hub.push as hub
from hf_attn.hub import metric_space
from hf_attn.core import metric_copies
from hf_attn.hub.push import HubError, build_metric_space_folder
from conftest import SPACE_EXTRA, needs_space
from hub_server import HubServer
from remote_code import BLOCK_HF_ATTN

REPO_ROOT = Path(__file__).resolve().parents[1]
METRICS = REPO_ROOT / "hf_attn" / "metrics"
CANONICAL = REPO_ROOT / "hf_attn" / "core" / "numpy_measures.py"  # heads every copy but plausibility's
SOURCES = metric_copies.SOURCES  # numpy_primitives.py (re-exported by numpy_measures.py), numpy_measures.py,
# plausibility.py (the plausibility module's code)
# the modules that ship the shared NumPy measures: every module (the faithfulness modules need only the
# bounds check and report_undefined; their own tests: tests/test_faithfulness_modules.py)
FAITHFULNESS = ("attribution_agreement", "normalized_aopc", "soft_faithfulness")
MODULES = [p.name for p in metric_copies.module_folders(METRICS) if p.name not in FAITHFULNESS]
# one module is also pushed under a repo name that differs from the module name (with a dash)
RENAMED = {"attention-tau": "jw_correlation"}
REPOS = {**{name: name for name in MODULES}, **RENAMED}  # repo name -> module


def test_there_are_ten_modules_with_the_shared_measures():
    assert [p.name for p in metric_copies.module_folders(METRICS)] == sorted(MODULES + list(FAITHFULNESS))
    assert sorted(p.name for p in METRICS.iterdir() if p.is_dir() and not p.name.startswith("_")) == sorted(
        MODULES + list(FAITHFULNESS))  # every module: undefined values are None with a reason (report_undefined)
    assert MODULES == ["eraser_faithfulness", "jw_adversary", "jw_correlation", "jw_permutation", "plausibility",
                       "ts_fragility", "ts_mutual_information", "ts_token_probability", "wp_consistent_adversary",
                       "wp_seed_variance"]


# ------------------------------------------------------------------------------------------------
# inputs: hand-computed cases first, then random ones
def _dirichlet(rng, n):
    return rng.dirichlet(np.ones(n)).tolist()


def module_cases() -> dict[str, list[dict]]:
    rng = np.random.default_rng(14)
    lengths = [1, 2, 3, 5, 8, 13, 21, 34, 40]
    attention = [_dirichlet(rng, n) for n in lengths]
    importance = [(np.asarray(a) + rng.normal(scale=0.1, size=len(a))).round(2).tolist() for a in attention]
    importance[3][1] = None  # undefined → skipped
    predictions = rng.integers(0, 2, len(lengths)).tolist()
    max_att = [max(a) for a in attention]
    binary_logits = [rng.normal(size=(n, 1)).round(3).tolist() for n in lengths]
    three_logits = [rng.normal(size=(n, 3)).tolist() for n in lengths]
    short = lengths[:6]
    base = [_dirichlet(rng, n) for n in short]
    seeds = [[_dirichlet(rng, n) for _ in range(3)] for n in short]
    bp = rng.dirichlet([1, 1], size=len(short)).tolist()
    sp = [rng.dirichlet([1, 1], size=3).tolist() for _ in short]
    adversary = [_dirichlet(rng, n) for n in short]
    adversary[1] = [1.0, 0.0]  # a zero in the adversary attention: 0·log 0
    e, h = rng.standard_normal((80, 4)), rng.standard_normal((80, 6))
    return {
        "jw_correlation": [
            dict(attention=[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], importance=[[0.9, 0.05, 0.3], [0.2, 0.1, 0.8]],
                 predictions=[1, 0]),
            dict(attention=attention, importance=importance, predictions=predictions, alpha=0.1)],
        "jw_permutation": [
            dict(permutation_tvd=[[0.01, 0.02, 0.0], [0.3, 0.1, 0.2]], max_attention=[0.4, 0.9], predictions=[1, 0]),
            dict(permutation_tvd=(rng.uniform(size=(9, 7)) * 0.2).tolist(), max_attention=max_att,
                 predictions=predictions, num_classes=3)],
        "jw_adversary": [
            dict(adversary_tvd=[[0.005, 0.02], [0.03, 0.04]], adversary_jsd=[[0.6, 0.69], [0.5, 0.4]],
                 max_attention=[0.3, 0.8], predictions=[1, 0]),
            dict(adversary_tvd=rng.uniform(0, 0.02, size=(9, 4)).tolist(),
                 adversary_jsd=rng.uniform(0, 0.69, size=(9, 4)).tolist(), max_attention=max_att,
                 predictions=predictions, eps=0.012)],
        "ts_fragility": [
            dict(token_logits=[[[2.0], [-1.0]], [[0.5], [0.3], [-3.0]]], attentions=[[0.9, 0.1], [0.2, 0.2, 0.6]],
                 references=[1, 0], seed=0, permutation_draws=1),
            dict(token_logits=binary_logits, attentions=attention, references=predictions, seed=3,
                 permutation_draws=7),
            dict(token_logits=three_logits, attentions=attention, references=rng.integers(0, 3, 9).tolist(),
                 seed=11, permutation_draws=4)],
        "ts_token_probability": [
            dict(token_logits=[[[2.0], [-1.0]], [[0.5], [0.3], [-3.0]]], attentions=[[0.9, 0.1], [0.2, 0.2, 0.6]],
                 references=[1, 0]),
            dict(token_logits=binary_logits, attentions=attention, references=predictions),
            dict(token_logits=three_logits, attentions=attention, references=rng.integers(0, 3, 9).tolist())],
        "ts_mutual_information": [
            dict(input_vectors=[[0, 0], [0, 0.1], [5, 5], [5, 5.1]], hidden_vectors=[[1, 1], [1, 1.1], [-4, 2], [-4, 2.1]],
                 n_clusters=2, seed=0),
            dict(input_vectors=e.tolist(), hidden_vectors=h.tolist(), n_clusters=7, batch_size=16, seed=2)],
        "wp_seed_variance": [
            dict(base_attention=[[0.5, 0.5]], seed_attentions=[[[0.5, 0.5]]], base_probabilities=[[0.3, 0.7]],
                 seed_probabilities=[[[0.3, 0.7]]], labels=[1]),
            dict(base_attention=base, seed_attentions=seeds, base_probabilities=bp, seed_probabilities=sp,
                 labels=predictions[:6]),
            dict(base_attention=base, seed_attentions=seeds, base_probabilities=bp, seed_probabilities=sp,
                 labels=predictions[:6], statistic="median")],
        "wp_consistent_adversary": [
            dict(adversary_attention=[[1.0, 0.0]], base_attention=[[0.5, 0.5]], adversary_probabilities=[[0.2, 0.8]],
                 base_probabilities=[[0.1, 0.9]]),
            dict(adversary_attention=adversary, base_attention=base, adversary_probabilities=[s[0] for s in sp],
                 base_probabilities=bp, lam=0.1)],
        "eraser_faithfulness": [
            dict(comprehensiveness=[[0.2, 0.4]], sufficiency=[[0.1, 0.3]], fractions=[0.1, 0.5]),
            dict(comprehensiveness=rng.uniform(-0.2, 1, (12, 5)).tolist(),
                 sufficiency=rng.uniform(-0.2, 1, (12, 5)).tolist()),
            dict(comprehensiveness=rng.uniform(-1, 1, (5, 3)).tolist(), sufficiency=rng.uniform(-1, 1, (5, 3)).tolist(),
                 fractions=[0.2, 0.4, 1.0], include_zero_bin=True)],
        "plausibility": [
            dict(predictions=[[0.9, 0.1, 0.8, 0.2], [0.3, 0.1]], references=[[1, 0, 1, 0], [0, 0]], k_fraction=0.5),
            dict(predictions=[rng.normal(size=n).round(1).tolist() for n in lengths],  # rounded: ties
                 references=[(rng.uniform(size=n) < 0.4).astype(int).tolist() for n in lengths[:-1]] + [[1] * 40]),
            dict(predictions=[rng.uniform(size=n).tolist() for n in lengths[2:]],
                 references=[[int(i % 3 == 0) for i in range(n)] for n in lengths[2:]], per_instance_k=True,
                 iou_threshold=0.3)],
    }


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# what the first (hand-computed) case of each module must give, beside the library's value
HAND = {
    # τ: 2 concordant and 1 discordant pair of 3 → 1/3; exact p: 2·P(≤ 1 inversion of 3) = 2·3/6 = 1
    "jw_correlation": lambda out: (out["tau"] == pytest.approx([1 / 3, 1 / 3])
                                   and out["pvalue"] == pytest.approx([1.0, 1.0])),
    "jw_permutation": lambda out: out["median_tvd"] == pytest.approx([0.01, 0.2]),
    "jw_adversary": lambda out: out["eps_max_jsd"] == pytest.approx([0.6, 0.0]),
    # z = 0.9·2 − 0.1·1 = 1.7 > 0 → 1, z = 0.1 + 0.06 − 1.8 < 0 → 0; uniform gives the same: F1 100
    "ts_fragility": lambda out: (out["f1_trained"], out["delta_uniform"]) == (100.0, 0.0),
    "ts_token_probability": lambda out: out["token_probability"] == pytest.approx(
        ((sigmoid(2.0) + sigmoid(-1.0)) / 2 + (3 - sigmoid(0.5) - sigmoid(0.3) - sigmoid(-3.0)) / 3) / 2, rel=1e-6),
    "ts_mutual_information": lambda out: out["mutual_information"] == pytest.approx(math.log(2)),
    "wp_seed_variance": lambda out: out["mean_max_jsd"] == 0.0 and out["mean_max_tvd"] == 0.0,
    # m = (0.75, 0.25): JSD = ½·ln(4/3) + ¼·ln(4/3); KL((1, 0) ‖ (½, ½)) = ln 2
    "wp_consistent_adversary": lambda out: (out["jsd"] == pytest.approx([0.75 * math.log(4 / 3)])
                                            and out["tvd"] == pytest.approx([0.1])
                                            and out["objective"] == pytest.approx(0.1 - 0.001 * math.log(2))),
    "eraser_faithfulness": lambda out: (out["comprehensiveness_aopc"] == pytest.approx(0.3)
                                        and out["sufficiency_aopc"] == pytest.approx(0.2)),
    # both marked words ranked first, the top int(0.5 · 4) = 2 words are they; the unmarked text left out
    "plausibility": lambda out: (out["auprc"] == out["token_f1"] == out["iou_f1"] == 1.0
                                 and out["without_rationale"] == [1]),
}
# float32 softmax in the library, float64 in the copy
TOLERANCE = {"ts_token_probability": 1e-6}


def library_value(module: str, kw: dict):
    """What hf_attn's own function returns for the arguments of ``metric.compute(**kw)``."""
    from hf_attn.batteries.ts import battery as ts
    from hf_attn.batteries.wp import battery as wp
    from hf_attn.batteries.jw.summary import adversary_summary, correlation_summary, jsonable, permutation_summary
    from hf_attn.batteries.eraser.battery import DEFAULT_FRACTIONS, summarize_eraser
    from hf_attn.core.plausibility import plausibility

    if module == "jw_correlation":
        importance = [[float("nan") if v is None else v for v in row] for row in kw["importance"]]
        return jsonable(correlation_summary(kw["attention"], importance, kw["predictions"], kw.get("num_classes"),
                                            kw.get("alpha", 0.05)))
    if module == "jw_permutation":
        return jsonable(permutation_summary(kw["permutation_tvd"], kw["max_attention"], kw["predictions"],
                                            kw.get("num_classes")))
    if module == "jw_adversary":
        return jsonable(adversary_summary(kw["adversary_tvd"], kw["adversary_jsd"], kw["max_attention"],
                                          kw["predictions"], kw.get("eps", 0.01), kw.get("num_classes")))
    if module == "ts_fragility":
        return ts.fragility_from_token_logits(kw["token_logits"], kw["attentions"], kw["references"],
                                              seed=kw.get("seed", 0), permutation_draws=kw.get("permutation_draws", 10))
    if module == "ts_token_probability":
        return ts.token_probability_from_token_logits(kw["token_logits"], kw["attentions"], kw["references"])
    if module == "ts_mutual_information":
        inputs = np.asarray(kw["input_vectors"], dtype=np.float32)
        return {"mutual_information": ts.clustered_mutual_information(
                    inputs, np.asarray(kw["hidden_vectors"], dtype=np.float32), kw.get("n_clusters", 1000),
                    kw.get("batch_size", 100), kw.get("seed", 0)),
                "occurrences": len(inputs)}
    if module == "wp_seed_variance":
        return wp.seed_variance_summary(kw["base_attention"], kw["seed_attentions"], kw["base_probabilities"],
                                        kw["seed_probabilities"], kw["labels"], kw.get("statistic", "max"))
    if module == "wp_consistent_adversary":
        return wp.consistent_adversary_summary(kw["adversary_attention"], kw["base_attention"],
                                               kw["adversary_probabilities"], kw["base_probabilities"],
                                               kw.get("lam", 0.001))
    if module == "eraser_faithfulness":
        fractions = kw.get("fractions")
        return summarize_eraser(kw["comprehensiveness"], kw["sufficiency"],
                                DEFAULT_FRACTIONS if fractions is None else fractions, kw.get("include_zero_bin", False))
    if module == "plausibility":
        return plausibility(kw["predictions"], kw["references"], kw.get("k_fraction"), kw.get("per_instance_k", False),
                            kw.get("iou_threshold", 0.5)).to_dict()
    raise KeyError(module)


def comparable(module: str, kw: dict, got: dict) -> tuple[dict, dict]:
    """``(the module's result without its "undefined" reasons, the library's value)``: the reasons
    are the module's own (tests/test_undefined_values.py); one instance has no standard error, so
    eraser_faithfulness says None (with the reason) where the library's summary gives 0."""
    got = dict(got)
    assert isinstance(got.pop("undefined"), dict)
    want = library_value(module, kw)
    if module == "eraser_faithfulness" and len(kw["comprehensiveness"]) == 1:
        want = {**want, "comprehensiveness_aopc_stderr": math.nan, "sufficiency_aopc_stderr": math.nan}
    return got, want


def assert_same(got, want, rel: float = 1e-9, where: str = "") -> None:
    """Equal structure, equal ints / bools / strings / None, floats within ``rel`` (NaN == NaN)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == {str(k) for k in want}, (where, got, want)
        for key, value in want.items():
            assert_same(got[str(key)], value, rel, f"{where}.{key}")
    elif isinstance(want, (list, tuple, np.ndarray)):
        want = list(want)
        assert isinstance(got, (list, tuple, np.ndarray)) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, rel, f"{where}[{i}]")
    elif isinstance(want, (bool, np.bool_)) or want is None or isinstance(want, str):
        assert got == want, (where, got, want)
    elif isinstance(want, (int, np.integer)):
        assert got == want and not isinstance(got, bool), (where, got, want)
    else:
        if math.isnan(want):
            assert got is None or math.isnan(got), (where, got, want)
        else:
            assert got == pytest.approx(float(want), rel=rel, abs=1e-300), (where, got, want)


# ------------------------------------------------------------------------------------------------
# the shipped copy: one file, self-contained, equal to the library
@pytest.fixture(scope="module")
def measures():
    spec = importlib.util.spec_from_file_location("_hf_attn_measures_under_test", CANONICAL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_every_module_ships_the_self_contained_measures_it_uses():
    """Each copy is what the generator writes for its folder: the definitions its script imports and
    what they use, each as the source writes it (nothing else of the source), and it runs on its own."""
    assert SOURCES[1] == CANONICAL and [p.name for p in SOURCES] == ["numpy_primitives.py", "numpy_measures.py",
                                                                     "plausibility.py"]
    source_text = {node.name: ast.get_source_segment(path.read_text(), node) for path in SOURCES
                   for node in ast.parse(path.read_text()).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    for name in MODULES:
        copy = METRICS / name / "_hf_attn_measures.py"
        assert not copy.is_symlink() and copy.read_text() == metric_copies.copy_text(METRICS / name), (
            f"hf_attn/metrics/{name}/_hf_attn_measures.py is stale: run `python scripts/generate_metric_copies.py`")
        text = copy.read_text()
        defined = {node.name: ast.get_source_segment(text, node) for node in ast.parse(text).body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert all(source_text[d] == segment for d, segment in defined.items()), name
        assert len(defined) < len(source_text), name  # only what the module uses
        namespace = {"__name__": f"copy_of_{name}"}
        sys.modules[namespace["__name__"]] = types.ModuleType(namespace["__name__"])  # dataclasses look it up
        try:
            exec(compile(text, str(copy), "exec"), namespace)
        finally:
            sys.modules.pop(namespace["__name__"])
        assert set(metric_copies.imported_names(METRICS / name)) <= set(namespace), name
        imports = hub._evaluate_imports(METRICS / name / f"{name}.py")
        assert {m for kind, m, _ in imports if kind != "library"} == {"_hf_attn_measures"}, name
        assert {m for kind, m, _ in imports if kind == "library"} <= {"datasets", "evaluate", "numpy", "scipy",
                                                                      "sklearn"}, name
        assert f'with_name("{name}.py")' in (METRICS / name / "app.py").read_text(), name
        assert "hf_attn" not in {m for _, m, _ in hub._evaluate_imports(METRICS / name / "app.py")}, name
        assert not re.search(r"^\s*(?:from|import)\s+hf_attn", text, flags=re.M), name
    # the copies import nothing from hf_attn, torch or the Trainer stack, not even inside functions: the
    # sources import only these, numpy_measures.py imports numpy_primitives.py's names (inlined in a copy), and
    # plausibility.py's word-piece helper, which no copy holds, its merge rule
    imported = {path.name: {node.module if isinstance(node, ast.ImportFrom) else alias.name
                            for node in ast.walk(ast.parse(path.read_text()))
                            if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
                for path in SOURCES}  # every import statement, inside functions too (docstrings are no imports)
    assert imported == {"numpy_primitives.py": {"__future__", "math", "dataclasses", "functools", "numpy",
                                                "scipy.special"},
                        "numpy_measures.py": {"__future__", "math", "warnings", "numpy", "hf_attn.core.numpy_primitives",
                                              "sklearn.cluster", "sklearn.metrics"},
                        "plausibility.py": {"__future__", "re", "collections.abc", "dataclasses", "numpy",
                                            "hf_attn.core.word_pieces"}}, imported


def test_generator_check_fails_on_a_stale_copy_and_rewrites_it(tmp_path):
    """scripts/generate_metric_copies.py --check passes on the checkout; on a copy of the metrics
    folder with one edited copy and one symlink it fails naming both, and the generator fixes them."""
    script = REPO_ROOT / "scripts" / "generate_metric_copies.py"
    check = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    metrics = tmp_path / "metrics"
    for name in ("jw_correlation", "ts_fragility"):
        (metrics / name).mkdir(parents=True)
        (metrics / name / f"{name}.py").write_text("import evaluate\nfrom ._hf_attn_measures import aopc\n")
    (metrics / "jw_correlation" / "_hf_attn_measures.py").write_text(
        metric_copies.copy_text(metrics / "jw_correlation") + "# edited\n")
    (metrics / "ts_fragility" / "_hf_attn_measures.py").symlink_to(CANONICAL)
    stale = metric_copies.stale_copies(metrics)
    assert [p.parent.name for p in stale] == ["jw_correlation", "ts_fragility"]
    assert metric_copies.write_copies(metrics) == stale
    assert metric_copies.stale_copies(metrics) == []
    assert not (metrics / "ts_fragility" / "_hf_attn_measures.py").is_symlink()
    written = (metrics / "ts_fragility" / "_hf_attn_measures.py").read_text()
    assert "def aopc(" in written and "def kendall_tau(" not in written  # only what the script imports
    assert "import numpy as np" in written and "import math" not in written  # and the imports it needs


def test_a_copy_holds_the_transitive_dependencies_and_their_imports(tmp_path):
    """kendall_per_instance needs kendall_tau, which needs merge_near_ties, _inversion_cdf, KendallResult
    and the imports they use (dataclass, lru_cache, numpy); nothing of the faithfulness summaries."""
    module = tmp_path / "only_tau"
    module.mkdir()
    (module / "only_tau.py").write_text("import evaluate\nfrom ._hf_attn_measures import kendall_per_instance\n")
    text = metric_copies.copy_text(module)
    for needed in ("def kendall_per_instance(", "def kendall_tau(", "def merge_near_ties(", "def _inversion_cdf(",
                   "class KendallResult", "from dataclasses import dataclass", "from functools import lru_cache",
                   "import numpy as np"):
        assert needed in text, needed
    assert "def summarize_eraser(" not in text and "def jsd(" not in text and "import warnings" not in text
    (module / "only_tau.py").write_text("from ._hf_attn_measures import no_such_measure\n")
    with pytest.raises(ValueError, match="defines no no_such_measure"):
        metric_copies.copy_text(module)


def _two_sources(tmp_path, second: str) -> tuple[Path, Path]:
    low, top = tmp_path / "low.py", tmp_path / "top.py"
    low.write_text('"""Low."""\n\nimport math\n\nBASE = 2\n\n\ndef double(x):\n    return BASE * x\n\n\n'
                   'def unused():\n    return math.pi\n')
    top.write_text('"""Top."""\n\nfrom __future__ import annotations\n\nimport numpy as np\n\n' + second)
    return low, top


def test_a_copy_inlines_what_a_later_source_imports_from_an_earlier_one(tmp_path):
    """The top source imports ``double`` from the lower one (as numpy_measures.py imports from
    numpy_primitives.py): the copy holds ``double`` and ``BASE`` in their own text, no hf_attn import,
    and the names are found across both sources; a name defined twice, or imported from hf_attn and
    defined by no source, is refused."""
    sources = _two_sources(tmp_path, "from hf_attn.core.low import double  # noqa: F401\n\n\n"
                                     "def quad(x):\n    return double(double(x))\n")
    module = tmp_path / "uses_quad"
    module.mkdir()
    (module / "uses_quad.py").write_text("from ._hf_attn_measures import quad\n")
    text = metric_copies.copy_text(module, sources)
    assert "hf_attn" not in text.split('"""Top."""')[1] and "import numpy" not in text and "import math" not in text
    assert text.index("BASE = 2") < text.index("def double(") < text.index("def quad(") and "def unused(" not in text
    namespace: dict = {}
    exec(compile(text, "copy", "exec"), namespace)
    assert namespace["quad"](3) == 12  # 2 * (2 * 3)
    twice = _two_sources(tmp_path, "def double(x):\n    return x\n")
    with pytest.raises(ValueError, match="double is defined twice"):
        metric_copies.copy_text(module, twice)
    nowhere = _two_sources(tmp_path, "from hf_attn.core.elsewhere import triple\n\n\n"
                                     "def quad(x):\n    return triple(x)\n")
    with pytest.raises(ValueError, match="imports triple from hf_attn.core.elsewhere, which no source defines"):
        metric_copies.copy_text(module, nowhere)


def test_the_library_does_not_import_the_metric_modules():
    """hf_attn/core (and the rest of the library) never imports hf_attn.metrics: the modules copy
    the library's code, not the other way round."""
    library = REPO_ROOT / "hf_attn"
    for path in library.rglob("*.py"):
        if "metrics" in path.relative_to(library).parts:
            continue
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+hf_attn\.metrics\b", text, flags=re.M), path
    assert not any(p.is_symlink() for p in library.rglob("*"))


def test_evaluate_imports_parse_like_evaluate(tmp_path):
    """hub._evaluate_imports (what push-metric checks) == evaluate.loading.get_imports (what
    evaluate.load acts on), on every module script and on tricky lines."""
    from evaluate.loading import get_imports

    tricky = tmp_path / "tricky.py"
    tricky.write_text(textwrap.dedent('''\
        """Docstring with
        import not_a_dependency
        """
        import numpy as np
        import scipy.special
        from sklearn.metrics import f1_score
        from ._helpers import a, b
        from ._helpers import c
        from .other import (x,
            y)
        import .c4_utils
        from .remote import z  # From: https://example.com/remote.py
        import pkg_from_git  # From: git+https://example.com/pkg
        x = """one line docstring"""
            import indented_is_ignored
        '''))
    scripts = [METRICS / n / f"{n}.py" for n in MODULES] + [METRICS / n / "app.py" for n in MODULES] + [tricky]
    for script in scripts:
        assert [tuple(i[:3]) for i in get_imports(str(script))] == hub._evaluate_imports(script), script


def test_validation_copies_give_the_library_messages(measures):
    from hf_attn.core import validation

    good = [[0.2, 0.8], [0.1, 0.3, 0.6]]
    for name in ("check_finite", "check_distributions"):
        assert all(np.array_equal(a, b) for a, b in zip(getattr(measures, name)("x", good),
                                                        getattr(validation, name)("x", good)))
    calls = [
        ("check_finite", ("attention", [[0.5, float("nan")]])),
        ("check_finite", ("importance", [[1.0, float("inf")]], True)),
        ("check_finite", ("importance", [["a", 1.0]])),
        ("check_distributions", ("attention", [[0.9, 0.9]])),
        ("check_distributions", ("attention", [[1.2, -0.2]])),
        ("check_distributions", ("attention", [[]])),
        ("check_range", ("tvd", [[0.1, 3.0]], 0.0, 1.0)),
        ("check_class_ids", ("references", [0, 5], 2)),
        ("check_class_ids", ("references", [0, -1])),
        ("check_class_ids", ("references", [0.5, 1])),
        ("check_same_shapes", ("a", [[1, 2]], "b", [[1, 2, 3]])),
        ("check_same_shapes", ("a", [[[1], [2]]], "b", [[1, 2, 3]], 0)),
        ("check_distributions", (None, None)),
    ]
    for name, args in calls:
        messages = []
        for implementation in (measures, validation):
            with pytest.raises(ValueError) as info:
                getattr(implementation, name)(*args)
            messages.append(str(info.value))
        assert messages[0] == messages[1], (name, messages)
    for kwargs in (dict(a=[1, 2], b=[1]), dict(a=[], b=[])):
        messages = []
        for implementation in (measures, validation):
            with pytest.raises(ValueError) as info:
                implementation.check_same_count(**kwargs)
            messages.append(str(info.value))
        assert messages[0] == messages[1]
    assert measures.check_class_ids("p", [0, 1.0, 2], 3).tolist() == validation.check_class_ids("p", [0, 1.0, 2], 3).tolist()


def test_distances_and_kendall_equal_the_library(measures):
    from hf_attn.core import measures as library

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(7), size=(4, 5))
    q = rng.dirichlet(np.ones(7), size=(4, 5))
    p[0, 0, :3] = 0.0
    q[1, 1, 2] = 0.0  # p > 0 = q: KL is infinite in both
    mask = rng.uniform(size=(4, 5, 7)) > 0.2
    for args in ((p, q), (p, q, mask)):
        np.testing.assert_allclose(measures.kl_divergence(*args), library.kl_divergence(*args).numpy(), rtol=1e-12)
        np.testing.assert_allclose(measures.jsd(*args), library.jsd(*args).numpy(), rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(measures.tvd(p, q), library.tvd(p, q).numpy(), rtol=1e-12)
    assert measures.jsd([1.0, 0.0], [0.0, 1.0]) == library.jsd([1.0, 0.0], [0.0, 1.0]).item() == math.log(2)
    for length, width in ((2, 1), (5, 40), (33, 8), (34, 8), (60, 4)):
        x = rng.normal(size=(width, length)).round(1)  # ties: the normal approximation with tie terms
        y = x + rng.normal(scale=0.5, size=x.shape)
        x[0] = 1.0  # a constant ranking: not valid
        m = rng.uniform(size=x.shape) > 0.1
        for xs, ys in ((x, y), (rng.permutation(length) * np.ones((width, 1)), rng.normal(size=(width, length)))):
            got, want = measures.kendall_tau(xs, ys, m), library.kendall_tau(xs, ys, m)
            for field in ("tau", "pvalue", "valid", "length"):
                np.testing.assert_array_equal(getattr(got, field), getattr(want, field))


def test_jw_wp_eraser_summaries_equal_the_library(measures):
    for module in ("jw_correlation", "jw_permutation", "jw_adversary", "wp_seed_variance",
                   "wp_consistent_adversary", "eraser_faithfulness"):
        for kw in module_cases()[module]:
            kw = dict(kw)
            if module == "jw_correlation":
                importance = [[float("nan") if v is None else v for v in row] for row in kw["importance"]]
                got = measures.jsonable(measures.correlation_summary(kw["attention"], importance, kw["predictions"],
                                                                     None, kw.get("alpha", 0.05)))
            elif module == "jw_permutation":
                got = measures.jsonable(measures.permutation_summary(kw["permutation_tvd"], kw["max_attention"],
                                                                     kw["predictions"], kw.get("num_classes")))
            elif module == "jw_adversary":
                got = measures.jsonable(measures.adversary_summary(kw["adversary_tvd"], kw["adversary_jsd"],
                                                                   kw["max_attention"], kw["predictions"],
                                                                   kw.get("eps", 0.01)))
            elif module == "wp_seed_variance":
                got = measures.seed_variance_summary(kw["base_attention"], kw["seed_attentions"],
                                                     kw["base_probabilities"], kw["seed_probabilities"], kw["labels"],
                                                     kw.get("statistic", "max"))
            elif module == "wp_consistent_adversary":
                got = measures.consistent_adversary_summary(kw["adversary_attention"], kw["base_attention"],
                                                            kw["adversary_probabilities"], kw["base_probabilities"],
                                                            kw.get("lam", 0.001))
            else:
                got = measures.summarize_eraser(kw["comprehensiveness"], kw["sufficiency"],
                                                kw.get("fractions") or measures.DEFAULT_FRACTIONS,
                                                kw.get("include_zero_bin", False))
            if module.startswith("wp_"):  # NumPy ports of torch code: equal up to summation order
                assert_same(got, library_value(module, kw), 1e-12, module)
            else:  # copies: bit-identical
                assert got == library_value(module, kw), module


def test_ts_ports_equal_the_library(measures):
    """The T&Š functions are NumPy ports: the same permutations as torch's generator for a seed,
    the same F1 as scikit-learn, the same fragility; token probability within float32 rounding."""
    from hf_attn.batteries.ts import battery as ts

    for seed in (0, 1, 2, 12345, 2 ** 31 + 7, 2 ** 32 - 1):
        for shape in ((1,), (3, 4, 17), (2, 40)):
            want = torch.rand(shape, generator=torch.Generator().manual_seed(seed)).numpy()
            np.testing.assert_array_equal(measures.torch_uniform_keys(seed, shape), want)
    rng = np.random.default_rng(5)
    mask = np.arange(12)[None, :] < rng.integers(1, 13, size=(6, 1))
    attention = np.where(mask, rng.dirichlet(np.ones(12), size=6), 0.0).astype(np.float32)
    want = ts.permute_attention(torch.from_numpy(attention), torch.from_numpy(mask),
                                torch.Generator().manual_seed(9), 5).numpy()
    np.testing.assert_array_equal(measures.permute_attention(attention, mask, 9, 5), want)
    for num_labels in (2, 3, 5):
        for _ in range(20):
            n = int(rng.integers(1, 30))
            labels, predictions = rng.integers(0, num_labels, n), rng.integers(0, num_labels, n)
            assert measures.f1_score_of(predictions, labels, num_labels) == ts.f1_score_of(predictions, labels, num_labels)
    assert measures.f1_score_of([0, 0], [0, 0], 2) == ts.f1_score_of(np.array([0, 0]), np.array([0, 0]), 2) == 0.0
    for kw in module_cases()["ts_fragility"]:
        got = measures.fragility_from_token_logits(kw["token_logits"], kw["attentions"], kw["references"],
                                                   kw["seed"], kw["permutation_draws"])
        assert got == library_value("ts_fragility", kw)
    for kw in module_cases()["ts_token_probability"]:
        got = measures.token_probability_from_token_logits(kw["token_logits"], kw["attentions"], kw["references"])
        assert_same(got, library_value("ts_token_probability", kw), 1e-6)
    for kw in module_cases()["ts_mutual_information"]:
        got = measures.clustered_mutual_information(np.asarray(kw["input_vectors"], np.float32),
                                                    np.asarray(kw["hidden_vectors"], np.float32),
                                                    kw["n_clusters"], kw.get("batch_size", 100), kw["seed"])
        assert got == library_value("ts_mutual_information", kw)["mutual_information"]


def test_local_modules_equal_the_library():
    """Each module loaded from its folder (what the library's users and tests do) computes the
    library's values on every case."""
    import evaluate

    for module, cases in module_cases().items():
        metric = evaluate.load(str(METRICS / module))
        for kw in cases:
            assert_same(*comparable(module, kw, metric.compute(**kw)), TOLERANCE.get(module, 1e-9), module)


# ------------------------------------------------------------------------------------------------
# the folder push-metric uploads
def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_built_folders_are_self_contained(tmp_path):
    for name in MODULES:
        out = build_metric_space_folder(METRICS / name, tmp_path / name, f"me/{name}", vendor_package=False)
        assert files_of(out) == {f"{name}.py", "_hf_attn_measures.py", "app.py", "README.md", "requirements.txt"}
        requirements = (out / "requirements.txt").read_text().split()
        names = {r.split("=")[0].split(">")[0].lower() for r in requirements}
        assert {"evaluate", "datasets", "numpy"} <= names <= {"evaluate", "datasets", "numpy", "scipy", "scikit-learn"}
        assert ("scipy" in names) == (name == "jw_correlation")
        assert ("scikit-learn" in names) == (name == "ts_mutual_information")
        assert "evaluate==0.4.6" in requirements  # hf_attn's own pins
        readme = (out / "README.md").read_text()
        assert f'evaluate.load("me/{name}")' in readme and "sdk: gradio" in readme and "app_file: app.py" in readme
    # under another repo name: the script takes the repo's name, app.py follows it
    out = build_metric_space_folder(METRICS / "ts_fragility", tmp_path / "renamed", "me/fragility-of-attention",
                                    vendor_package=False)
    assert files_of(out) == {"fragility-of-attention.py", "_hf_attn_measures.py", "app.py", "README.md",
                             "requirements.txt"}
    assert (out / "fragility-of-attention.py").read_bytes() == (METRICS / "ts_fragility" / "ts_fragility.py").read_bytes()
    app = (out / "app.py").read_text()
    assert 'with_name("fragility-of-attention.py")' in app and "ts_fragility.py" not in app
    assert 'evaluate.load("me/fragility-of-attention")' in (out / "README.md").read_text()


def _module(tmp_path: Path, name: str, script: str, app: str | None = None, files: dict | None = None) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    (folder / f"{name}.py").write_text(script)
    (folder / "app.py").write_text(app if app is not None else f'import evaluate\nm = evaluate.load("{name}.py")\n')
    for file, text in (files or {}).items():
        (folder / file).write_text(text)
    return folder


def test_build_refuses_what_evaluate_could_not_load(tmp_path, monkeypatch):
    plain = "import evaluate\nfrom ._helpers import f\n"
    refusals = [
        (_module(tmp_path / "a", "uses_lib", "import evaluate\nfrom hf_attn.core.measures import jsd\n"), "me/uses_lib",
         r"imports hf_attn, which is on no package index.*pip install hf_attn"),
        (_module(tmp_path / "b", "needs_helper", plain), "me/needs_helper", r"imports \._helpers, but .* has no _helpers\.py"),
        (_module(tmp_path / "c", "dotted", "import evaluate\n"), "me/dotted.metric", r"without dots"),
        (_module(tmp_path / "d", "named_app", "import evaluate\n"), "me/app", r"taken \(the Space app\)"),
        (_module(tmp_path / "e", "clash", plain, files={"_helpers.py": "def f(): pass\n"}), "me/_helpers",
         r"needs the script as _helpers\.py, and that name is taken"),
        (_module(tmp_path / "f", "dir_app", "import evaluate\n",
                 app="import os, evaluate\nm = evaluate.load(os.path.dirname(__file__))\n"), "me/other_name",
         r"app\.py does not load \"dir_app\.py\" by that quoted file name.*push it as USER/dir_app"),
        (_module(tmp_path / "h", "commented", "import evaluate\nfrom ._helpers import f  # the helper\n",
                 files={"_helpers.py": "def f(): pass\n"}), "me/commented",
         r"reads the comment after `from \._helpers import \.\.\.` as the URL"),
        (_module(tmp_path / "g", "needs_lib", "import evaluate\n", files={"requirements.txt": "numpy\nhf-attn==0.1\n"}),
         "me/needs_lib", r"requires hf_attn"),
    ]
    for folder, repo_id, pattern in refusals:
        with pytest.raises(HubError, match=pattern):
            build_metric_space_folder(folder, tmp_path / "out", repo_id, vendor_package=False)
        assert not (tmp_path / "out").exists()  # refused before anything is written
    # a module folder of hf_attn whose copy of the measures is out of date
    metrics = tmp_path / "metrics"
    stale = _module(metrics, "stale", "import evaluate\nfrom ._hf_attn_measures import jsd\n",
                    files={"_hf_attn_measures.py": "jsd = 1\n"})
    monkeypatch.setattr(metric_space, "METRICS_DIR", metrics)
    with pytest.raises(HubError, match=r"stale/_hf_attn_measures\.py is stale.*generate_metric_copies"):
        build_metric_space_folder(stale, tmp_path / "out", "me/stale", vendor_package=False)
    (stale / "_hf_attn_measures.py").write_text(metric_copies.copy_text(stale))
    built = build_metric_space_folder(stale, tmp_path / "out", "me/stale", vendor_package=False)
    assert (built / "requirements.txt").read_text() == "evaluate==0.4.6\n"


# ------------------------------------------------------------------------------------------------
# from the loopback Hub, without hf_attn
def client_env(hub_server: HubServer, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "GRADIO_SERVER"))}
    env.update(HF_ENDPOINT=hub_server.endpoint, HF_TOKEN="hf_loopback_token", HF_HUB_DISABLE_XET="1",
               HF_HOME=str(work / "hf_home"), HF_MODULES_CACHE=str(work / "modules"), HF_UPDATE_DOWNLOAD_COUNTS="0",
               HF_HUB_DISABLE_TELEMETRY="1", GRADIO_ANALYTICS_ENABLED="False", TOKENIZERS_PARALLELISM="false",
               HF_HUB_DISABLE_PROGRESS_BARS="1", OMP_NUM_THREADS="1")
    return env


def run_client(script: str, hub_server: HubServer, work: Path, block_hf_attn: bool, cwd: Path | None = None) -> dict:
    source = (BLOCK_HF_ATTN if block_hf_attn else "") + textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                            env=client_env(hub_server, work), cwd=cwd or work, timeout=600)
    assert result.returncode == 0, f"{result.stderr[-5000:]}\nserver requests: {hub_server.state.requests[-10:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def hub_server(hub):  # conftest's loopback Hub, under this module's name for it
    return hub


@pytest.fixture(scope="module")
def published(hub_server, tmp_path_factory):
    """Every module pushed as tester/<module> (push_metric, no vendored hf_attn) and jw_correlation
    once more as tester/attention-tau with the CLI's defaults."""
    work = tmp_path_factory.mktemp("metric-spaces")
    run_client(f"""
        import json
        from hf_attn.cli import main
        from hf_attn.hub.push import push_metric
        for name in {MODULES!r}:
            push_metric({str(METRICS)!r} + "/" + name, "tester/" + name, vendor_package=False)
        for repo, name in {RENAMED!r}.items():
            assert main(["push-metric", {str(METRICS)!r} + "/" + name, "--repo-id", "tester/" + repo]) == 0
        print(json.dumps({{}}))
    """, hub_server, work, block_hf_attn=False)
    return work


def test_spaces_hold_a_self_contained_module(hub_server, published):
    for repo, module in REPOS.items():
        files = hub_server.state.repos[("space", f"tester/{repo}")].resolve("main").files
        assert {f"{repo}.py", "_hf_attn_measures.py", "app.py", "README.md", "requirements.txt"} <= set(files), repo
        assert files[f"{repo}.py"].content == (METRICS / module / f"{module}.py").read_bytes()
        assert files["_hf_attn_measures.py"].content.decode() == metric_copies.copy_text(METRICS / module)
        requirements = files["requirements.txt"].content.decode().lower()
        assert not any(bad in requirements for bad in ("hf_attn", "hf-attn", "torch", "transformers")), requirements
        assert f'with_name("{repo}.py")' in files["app.py"].content.decode()
    assert "jw_correlation.py" not in hub_server.state.repos[("space", "tester/attention-tau")].resolve("main").files


@pytest.fixture(scope="module")
def from_hub(hub_server, published):
    """One interpreter where ``import hf_attn`` fails: evaluate.load every repo and compute every
    case; then copy each Space snapshot into a folder named ``app`` and build its app there, calling
    its compute with the interface's default inputs (the kwargs it passes to the metric recorded)."""
    cases = {repo: module_cases()[module] for repo, module in REPOS.items()}
    (published / "cases.json").write_text(json.dumps(cases))
    return run_client(f"""
        import importlib.util, json, shutil, sys
        from pathlib import Path
        try:
            import hf_attn
            raise SystemExit("hf_attn is importable")
        except ModuleNotFoundError:
            pass
        import evaluate
        from huggingface_hub import snapshot_download

        work = Path({str(published)!r})
        cases = json.loads((work / "cases.json").read_text())
        out = {{"hub": {{}}, "app": {{}}, "modules": {{}}}}
        for repo, kwargs in cases.items():
            metric = evaluate.load("tester/" + repo)
            out["modules"][repo] = type(metric).__module__
            out["hub"][repo] = [metric.compute(**kw) for kw in kwargs]
        for i, repo in enumerate(cases if {SPACE_EXTRA!r} else ()):  # the apps need the space extra
            snapshot = snapshot_download("tester/" + repo, repo_type="space", local_dir=work / "snapshots" / repo)
            app_dir = work / "spaces" / repo / "app"
            shutil.copytree(snapshot, app_dir, ignore=shutil.ignore_patterns(".cache"))
            spec = importlib.util.spec_from_file_location(f"space_app_{{i}}", app_dir / "app.py")
            app = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(app)
            calls = []
            compute = app.metric.compute
            def recording(_compute=compute, **kw):
                calls.append(kw)
                return _compute(**kw)
            app.metric.compute = recording
            output = app.compute(*[c.value for c in app.demo.input_components])
            out["app"][repo] = {{"kwargs": calls[0], "output": output, "blocked": "hf_attn" not in sys.modules}}
        print(json.dumps(out))
    """, hub_server, published, block_hf_attn=True)


@pytest.mark.parametrize("repo", list(REPOS))
def test_evaluate_load_from_hub_without_hf_attn(from_hub, repo):
    module = REPOS[repo]
    assert from_hub["modules"][repo].startswith("evaluate_modules.metrics.tester--"), from_hub["modules"][repo]
    cases = module_cases()[module]
    for kw, got in zip(cases, from_hub["hub"][repo], strict=True):
        assert_same(*comparable(module, kw, got), TOLERANCE.get(module, 1e-9), repo)
    assert HAND[module](from_hub["hub"][repo][0]), (repo, from_hub["hub"][repo][0])


@pytest.mark.parametrize("repo", list(REPOS))
@needs_space
def test_space_app_from_app_folder_without_hf_attn(from_hub, repo):
    module = REPOS[repo]
    result = from_hub["app"][repo]
    assert result["blocked"]
    assert_same(*comparable(module, result["kwargs"], result["output"]), TOLERANCE.get(module, 1e-9), repo)


@needs_space
def test_renamed_space_starts_like_a_space(hub_server, published, from_hub):
    """``python app.py`` in the Space's ``app/`` folder (hf_attn blocked) serves the metric on
    127.0.0.1; a gradio_client query returns the library's value."""
    from gradio_client import Client

    from hf_attn.batteries.jw.summary import correlation_summary, jsonable

    repo = "attention-tau"
    app_dir = published / "spaces" / repo / "app"
    with socket_port() as port:
        pass
    env = {**client_env(hub_server, published), "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    log = published / "app.log"
    source = BLOCK_HF_ATTN + "import runpy\nrunpy.run_path('app.py', run_name='__main__')\n"
    with open(log, "w") as stream:
        process = subprocess.Popen([sys.executable, "-c", source], cwd=app_dir, env=env, stdout=stream,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.time() > deadline:
                pytest.fail(f"the Space app did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        payload = {"attention": [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.4, 0.6]],
                   "importance": [[0.9, 0.05, 0.3], [0.2, 0.1, 0.8], [0.1, 0.2]], "predictions": [1, 0, 1]}
        got = Client(url, verbose=False).predict(json.dumps(payload), 0.1, api_name="/compute")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    want = jsonable(correlation_summary(payload["attention"], payload["importance"], payload["predictions"], None, 0.1))
    assert got.pop("undefined") == {}
    assert_same(got, want, 1e-12, repo)
    assert got["overall"]["count"] == 3 and got["alpha"] == 0.1
    assert "hf_attn" not in log.read_text()


class socket_port:
    """A free 127.0.0.1 port (``with socket_port() as port``)."""

    def __enter__(self) -> int:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        return self.socket.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.socket.close()
