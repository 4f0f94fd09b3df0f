"""scripts/regrade_report.py: the committed report is current, and a report written before a finding
existed gets it in place of the text the writer of that time printed there."""

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from hf_attn.reporting.markdown import _finding_lines, format_findings_table
from hf_attn.reporting.report import ADDED_AT, _summary_line, regraded_report_md

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "reproduction"
spec = importlib.util.spec_from_file_location("regrade_report", ROOT / "scripts" / "regrade_report.py")
regrade_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regrade_report)


def test_committed_report_is_current(capsys):
    assert regrade_report.main([str(REPORT), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def _older_copy(tmp_path) -> Path:
    """The committed report as a writer without TS-7 left it: no TS-7 finding, its ADDED_AT line."""
    folder = tmp_path / "report"
    folder.mkdir()
    report = json.loads((REPORT / "report.json").read_text(encoding="utf-8"))
    text = (REPORT / "REPORT.md").read_text(encoding="utf-8")
    ts7 = next(f for f in report["findings"] if f["id"] == "TS-7")
    text = text.replace("\n".join(_finding_lines(ts7)) + "\n", ADDED_AT["TS-7"])
    older = [f for f in report["findings"] if f["id"] != "TS-7"]
    text = text.replace(_summary_line(report["findings"]), _summary_line(older))
    text = text.replace(format_findings_table(report["findings"]), format_findings_table(older))
    report["findings"] = older
    report["results"]["sst"]["findings"] = [f for f in report["results"]["sst"]["findings"] if f["id"] != "TS-7"]
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    (folder / "REPORT.md").write_text(text, encoding="utf-8")
    return folder


def test_a_new_finding_takes_its_place(tmp_path):
    folder = _older_copy(tmp_path)
    assert regrade_report.main([str(folder), "--check"]) == 1
    assert regrade_report.main([str(folder)]) == 0
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    text = (folder / "REPORT.md").read_text(encoding="utf-8")
    ts7 = next(f for f in report["findings"] if f["id"] == "TS-7")
    assert "\n".join(_finding_lines(ts7)) in text and ADDED_AT["TS-7"] not in text
    assert [f["id"] for f in report["findings"]] == \
        [f["id"] for f in json.loads((REPORT / "report.json").read_text(encoding="utf-8"))["findings"]]
    assert regrade_report.main([str(folder), "--check"]) == 0


def test_a_new_finding_without_a_place_is_refused():
    report = json.loads((REPORT / "report.json").read_text(encoding="utf-8"))
    text = (REPORT / "REPORT.md").read_text(encoding="utf-8")
    extra = copy.deepcopy(report["findings"][0]) | {"id": "JW-99"}
    with pytest.raises(ValueError, match="JW-99 is new to the rules and has no place"):
        regraded_report_md(text, report["findings"], report["findings"] + [extra])
