"""Two leave-one-out measures, two names: J&W's LOO-TVD (TVD(ŷ(x₋t), ŷ(x)), §4.1) and the
faithfulness table's LOO-drop (ŷ_c(x) − ŷ_c(x₋t), Li et al. 2016 §3). Every output says which one
it holds: the results files (``measure_definitions``), the console summaries, the markdown, the
explanation object's renderings, the ERASER table and the documentation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from architectures import TEXTS, saved_classifier, tiny_classifier
from hf_attn.core.measure_names import (FAITHFULNESS_MEASURES, JW_MEASURES, LOO_DROP, LOO_DROP_DEFINITION,
                                        LOO_TVD, LOO_TVD_DEFINITION)

ROOT = Path(__file__).resolve().parents[1]
JW_LABEL, TABLE_LABEL = f"τ(attention, {LOO_TVD})", f"τ with {LOO_DROP}"


def test_the_names_and_their_definitions_differ():
    assert LOO_TVD != LOO_DROP
    assert "TVD(ŷ(x₋t), ŷ(x))" in LOO_TVD_DEFINITION and "§4.1" in LOO_TVD_DEFINITION
    assert "ŷ_c(x) − ŷ_c(x₋t)" in LOO_DROP_DEFINITION and "2016 §3" in LOO_DROP_DEFINITION
    assert JW_MEASURES["tau_loo"] != FAITHFULNESS_MEASURES["tau_loo"]
    assert LOO_TVD in JW_MEASURES["tau_loo"] and LOO_DROP not in JW_MEASURES["tau_loo"]
    assert LOO_DROP in FAITHFULNESS_MEASURES["tau_loo"] and LOO_DROP in FAITHFULNESS_MEASURES["leave_one_out"]


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    """``hf-attn analyze`` of one tiny BERT, J&W and faithfulness batteries: (folder, stdout) each."""
    import contextlib
    import io

    from hf_attn.cli import main

    root = tmp_path_factory.mktemp("measure_names")
    folder, data = saved_classifier("bert", root)
    out = {}
    for battery, flags in (("jw", ["--jw-permutations", "2", "--jw-adversaries", "2", "--jw-steps", "2"]),
                           ("faithfulness", ["--faith-methods", "attention,leave_one_out,random",
                                             "--faith-metrics", "comprehensiveness,tau_loo", "--faith-ig-steps", "2",
                                             "--faith-naopc-beam", "0"])):
        target = root / battery
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["analyze", str(folder), "--battery", battery, "--dataset", str(data), "--output-dir",
                         str(target), "--threads", "1", *flags])
        assert code == 0
        out[battery] = (target, printed.getvalue())
    return out


def test_jw_run_folder_names_its_leave_one_out_loo_tvd(analyses):
    folder, printed = analyses["jw"]
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert results["measure_definitions"] == JW_MEASURES
    assert "tau_loo" in results["summary"]  # the key stays: old folders and the report read it
    assert JW_LABEL in printed and f"τ(gradient, {LOO_TVD})" in printed
    assert LOO_TVD_DEFINITION in " ".join(printed.split())  # wrapped to the console's 100 characters
    assert "τ(attention, LOO)" not in printed and LOO_DROP + ":" not in printed


def test_faithfulness_run_folder_names_its_leave_one_out_loo_drop(analyses):
    folder, printed = analyses["faithfulness"]
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert results["measure_definitions"] == FAITHFULNESS_MEASURES
    assert LOO_DROP in results["settings"]["descriptions"]["leave_one_out"]
    page = (folder / "faithfulness.md").read_text(encoding="utf-8")
    for text in (printed, page):
        header = next(line for line in text.splitlines() if line.startswith("| method |"))
        assert f"tau_loo ({TABLE_LABEL}) ↑" in header and "| tau_loo ↑" not in header
        assert f"| leave_one_out ({LOO_DROP}) |" in text
        assert LOO_DROP_DEFINITION in text
        assert JW_LABEL not in text and LOO_TVD_DEFINITION not in text


def test_the_two_folders_print_different_names_for_their_tau(analyses):
    jw, table = analyses["jw"][1], analyses["faithfulness"][1]
    assert JW_LABEL in jw and JW_LABEL not in table
    assert TABLE_LABEL in table and TABLE_LABEL not in jw


def test_committed_records_without_definitions_still_print_the_names():
    """Results files written before ``measure_definitions`` existed are read as they are."""
    from hf_attn.batteries.faithfulness import FaithfulnessResult
    from hf_attn.batteries.jw.common import format_summary

    jw = json.loads((ROOT / "docs" / "bert_family" / "jw_results.json").read_text(encoding="utf-8"))
    assert "measure_definitions" not in jw
    assert JW_LABEL in format_summary(jw)
    table = json.loads((ROOT / "docs" / "faithfulness" / "bilstm_sst.json").read_text(encoding="utf-8"))
    assert "measure_definitions" not in table
    result = FaithfulnessResult.from_payload(table)
    text = result.summary()
    assert f"| leave_one_out ({LOO_DROP}) |" in text and TABLE_LABEL in text and JW_LABEL not in text
    assert f"Kendall τ with the leave-one-out drop ({LOO_DROP})" in result.sentence()
    assert result.measure_definitions() == FAITHFULNESS_MEASURES


def test_explanation_and_method_comparison_say_which_leave_one_out(tmp_path):
    from hf_attn.explainer import Explainer
    from hf_attn.explanation.render import heatmap_html, methods_heatmap_html, summary_markdown

    model, tokenizer = tiny_classifier("bert")
    ex = Explainer(model, tokenizer, device="cpu")
    e = ex.explain(TEXTS[1], ig=False, adversary=False, num_permutations=0)[0]
    text = e.summary()
    header = next(line for line in text.splitlines() if line.startswith("token "))
    assert LOO_TVD in header.split() and "loo" not in header.split()
    assert LOO_TVD_DEFINITION in text and f"attention vs {LOO_TVD}" in text
    assert f"attention vs {LOO_TVD}" in summary_markdown(e) and f"{LOO_TVD} Δŷ/ΣΔŷ" in heatmap_html(e, shares=True)
    assert e.to_dict()["measure_definitions"]["loo"] == LOO_TVD_DEFINITION
    compared = ex.attributions([TEXTS[1]], methods=["attention", "leave_one_out"])
    assert LOO_DROP in methods_heatmap_html(compared)
    jw = ex.jw(TEXTS, num_permutations=2, k=2, steps=2)
    assert f"tau_loo (τ with {LOO_TVD})" in jw._repr_html_()
    jw.save(str(tmp_path))
    assert json.loads((tmp_path / "results.json").read_text())["measure_definitions"] == JW_MEASURES


def test_eraser_table_prints_loo_as_loo_tvd():
    from hf_attn.batteries.eraser.battery import MEASURE_DESCRIPTIONS, format_eraser_table

    row = {"comprehensiveness_aopc": 0.1, "comprehensiveness_aopc_stderr": 0.01, "sufficiency_aopc": 0.2,
           "sufficiency_aopc_stderr": 0.02, "comprehensiveness": [0.1], "sufficiency": [0.2]}
    text = format_eraser_table({"parameters": {"fractions": [0.5]}, "num_instances": 3,
                                "measures": {"attention": row, "loo": row}})
    assert f"| loo ({LOO_TVD}) |" in text and LOO_TVD_DEFINITION in text
    assert MEASURE_DESCRIPTIONS["loo"].startswith(LOO_TVD)


# a τ against an unnamed leave-one-out, e.g. "τ(attention, LOO)", "τ(att, LOO)" or "τ with LOO ["
UNNAMED = re.compile(r"τ\([^)|]*\bLOO\)|τ with (LOO|leave-one-out)\b(?![- ]?(TVD|drop|\())|\| tau_loo ↑")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "faithfulness").glob("*.md")),
        ROOT / "docs" / "bert_family" / "README.md", ROOT / "spaces_app" / "README.md",
        *sorted((ROOT / "hf_attn" / "metrics").glob("*/README.md"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_every_leave_one_out_tau(path):
    lines = [f"{i}: {line}" for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if UNNAMED.search(line)]
    assert not lines, "a τ with an unnamed leave-one-out (say LOO-TVD or LOO-drop):\n" + "\n".join(lines)


def test_docs_define_both_measures_with_their_paper_sections():
    text = (ROOT / "docs" / "faithfulness.md").read_text(encoding="utf-8")
    assert "**LOO-drop** ŷ_c(x) − ŷ_c(x₋t)" in text and "Li et al. 2016 §3, Eq. 1" in text
    assert "**LOO-TVD** TVD(ŷ(x₋t), ŷ(x))" in text and "J&W 2019 §4.1, Alg. 1" in text
    outputs = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    assert "`measure_definitions`" in outputs and "**LOO-TVD** Δŷ_t = TVD(ŷ(x₋t), ŷ(x))" in outputs
