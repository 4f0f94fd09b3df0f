"""scripts/compare_reports.py: findings matched by id and corpus, changed verdicts listed first."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("compare_reports", ROOT / "scripts" / "compare_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_reports_by_hand(tmp_path):
    import json

    m = _module()
    old = {"findings": [{"id": "A", "dataset": "sst", "verdict": "reproduced", "measured": 0.5},
                        {"id": "A", "dataset": "imdb", "verdict": "not reproduced", "measured": 0.1},
                        {"id": "B", "dataset": "sst", "verdict": "reproduced", "measured": [1, 2]}]}
    new = {"findings": [{"id": "A", "dataset": "sst", "verdict": "reproduced", "measured": 0.51},
                        {"id": "A", "dataset": "imdb", "verdict": "reproduced", "measured": 0.3,
                         "sentence": "now within"},
                        {"id": "C", "dataset": "sst", "verdict": "new measurement"}]}
    result = m.compare(old, new)
    assert [(r["id"], r["dataset"]) for r in result["changed"]] == [("A", "imdb")]
    assert result["added"] == [("C", "sst")] and result["removed"] == [("B", "sst")]
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = tmp_path / "changes.md"
    assert m.main([str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--title", "T", "--output", str(out)]) == 0
    text = out.read_text()
    assert "| A | imdb | not reproduced | reproduced | now within |" in text
    assert "| A | sst | reproduced | reproduced | 0.5 | 0.51 |" in text
    assert "2 findings compared; 1 verdict(s) changed; the measured value of 2 moved" in text
    assert [(r["id"], r["dataset"]) for r in result["moved"]] == [("A", "sst"), ("A", "imdb")]
