"""The architecture sweep (``scripts/architecture_sweep.py``) on a few model types of each kind —
interface-routed, encoder–decoder, hooked in its own modules, refused — and the format of its
record and of the matrix generated from it; the committed record against docs/engine.md."""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import architecture_sweep as sweep  # noqa: E402

ROW_KEYS = {"model_type", "built"}
RUNS_KEYS = {"model_class", "verdict", "layers", "heads", "query", "padding", "fast_path", "explained", "seam",
             "jw", "methods", "declined", "finite", "seconds"}


def _check_record(record: dict) -> None:
    assert set(record) >= {"transformers", "texts", "jw_settings", "attribution_settings", "left_out_methods",
                           "seconds", "totals", "rows"}
    assert record["left_out_methods"] == ["kernel_shap", "deeplift"]
    totals = record["totals"]
    assert totals == sweep.totals(record["rows"])
    assert totals["runs"] + totals["refused"] + totals["error"] == totals["built"]
    for row in record["rows"]:
        assert ROW_KEYS <= set(row), row
        if not row["built"]:
            assert row.get("build_error") or row.get("error")
            continue
        if row["verdict"] == "runs":
            assert RUNS_KEYS <= set(row), row
            assert row["finite"] and row["jw"] == "ran"
            assert "attention" in row["methods"] and "kernel_shap" not in row["methods"]
            if "loads_from_folder" in row:  # the loading path: explained alike from its folder, or why not
                assert row["loads_from_folder"] is True or row["load_error"], row
                assert row["loads_from_folder"] is False or row["folder_max_abs_diff"] <= sweep.FOLDER_TOLERANCE
        elif row["verdict"] == "refused":
            assert row["reason"] and row["reason_lines"] == 1, row
            if "folder_refused" in row:
                assert row["folder_refused"] is True or row["load_error"], row
        else:
            assert row["verdict"] == "error" and row["error"], row


@pytest.mark.slow
def test_sweep_on_a_few_types_writes_its_record_and_matrix(tmp_path):
    record_path = tmp_path / "sweep.json"
    types = ["bert", "gpt2", "bart", "deberta-v2", "mpnet", "xlm", "falcon", "fnet"]
    assert sweep.main(["--types", ",".join(types), "--record", str(record_path), "--timeout", "300"]) == 0
    record = json.loads(record_path.read_text())
    _check_record(record)
    rows = {r["model_type"]: r for r in record["rows"]}
    assert list(rows) == types
    for name in ("bert", "gpt2", "bart", "deberta-v2", "mpnet", "xlm", "falcon"):
        assert rows[name]["verdict"] == "runs", rows[name]
        assert rows[name]["loads_from_folder"] is True, rows[name]  # saved, loaded back, explained alike
    assert rows["bart"]["explained"].endswith("decoder.layers.1.encoder_attn") and rows["bart"]["query"] == "last"
    assert rows["deberta-v2"]["seam"] == "hooks" and rows["bert"]["seam"] == "interface"
    assert rows["xlm"]["seam"] == "hooks"  # reached at its softmax (no dropout module on the probabilities)
    assert rows["fnet"]["verdict"] == "refused" and "no attention at all" in rows["fnet"]["reason"]
    assert rows["fnet"]["folder_refused"] is True
    doc = tmp_path / "engine.md"
    doc.write_text(f"before\n{sweep.BEGIN}\nold\n{sweep.END}\nafter\n")
    sweep.write_docs(record, str(doc))
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert "| bart | BartForSequenceClassification | runs | interface |" in text
    assert "| fnet | FNetForSequenceClassification | refused: " in text


def test_merging_replaces_the_rows_of_the_types_swept_and_recomputes_the_totals(tmp_path):
    def row(name, verdict, seconds, **extra):
        return {"model_type": name, "built": True, "verdict": verdict, "seconds": seconds, **extra}

    path = tmp_path / "record.json"
    old = {"transformers": "5.0", "seconds": 9.0,
           "rows": [row("a", "runs", 1.0), row("b", "error", 2.0), row("c", "refused", 3.0)]}
    path.write_text(json.dumps(old))
    new = {"transformers": "5.0", "rows": [row("b", "runs", 0.5, loads_from_folder=True)]}
    record = sweep.merged(str(path), new, ["a", "b", "c"])
    assert [r["model_type"] for r in record["rows"]] == ["a", "b", "c"] and record["rows"][1]["verdict"] == "runs"
    assert record["seconds"] == 4.5
    assert record["totals"] == {"types": 3, "built": 3, "runs": 2, "refused": 1, "error": 0,
                                "runs_share_of_built": round(2 / 3, 4), "folder_checked": 1, "loads_from_folder": 1}
    with pytest.raises(SystemExit, match="transformers 5.0"):
        sweep.merged(str(path), new | {"transformers": "6.0"}, ["a", "b", "c"])


def test_committed_record_is_well_formed_and_the_docs_are_generated_from_it():
    with open(os.path.join(ROOT, "docs", "benchmarks", "architecture_sweep.json"), encoding="utf-8") as f:
        record = json.load(f)
    _check_record(record)
    with open(sweep.ENGINE_DOC, encoding="utf-8") as f:
        doc = f.read()
    assert sweep.matrix_markdown(record) in doc, "docs/engine.md's matrix is not the record's: run --docs"
    assert record["totals"]["error"] == 0
