"""scripts/reproduce_cost.py: the per-corpus cost record from reproduction folders' stages.json."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("reproduce_cost", os.path.join(ROOT, "scripts", "reproduce_cost.py"))
cost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cost)


def _folder(tmp_path, name, dataset, seconds, quick=False):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "stages.json").write_text(json.dumps({"stages": {
        f"{dataset}/{k}": {"title": k, "seconds": v, "estimate_seconds": 1} for k, v in seconds.items()}}))
    (folder / "report.json").write_text(json.dumps({
        "plan": {"quick": quick}, "machine_start": {"load_average_1_5_15": [1.0, 1.0, 1.0]},
        "machine_end": {"cpu": "x", "cpu_count": 2, "torch_threads": 1},
        "results": {dataset: {"models": {"jw_wp_base": {"split_sizes": {"train": 10, "validation": 2, "test": 3}}}}}}))
    return str(folder)


def test_cost_record_sums_each_corpus_stages(tmp_path):
    full = _folder(tmp_path, "full", "imdb", {"models": 120, "wp": 600})
    quick = _folder(tmp_path, "quick", "imdb", {"models": 6, "wp": 30}, quick=True)
    out = str(tmp_path / "cost")
    assert cost.main(["--folder", f"imdb={full}", "--quick-folder", f"imdb={quick}", "--plan", "imdb=a subset",
                      "--out", out]) == 0
    record = json.loads(open(out + ".json", encoding="utf-8").read())
    imdb = record["corpora"]["imdb"]
    assert imdb["full"]["total_minutes"] == 12.0 and imdb["full"]["stages_minutes"] == {"models": 2.0, "wp": 10.0}
    assert imdb["quick"]["total_minutes"] == 0.6 and imdb["quick"]["quick"] is True
    text = open(out + ".md", encoding="utf-8").read()
    assert "| imdb | a subset | 10 / 2 / 3 | 12.0 |" in text and "| imdb | --quick imdb | 10 / 2 / 3 | 0.6 |" in text
    assert imdb["full"]["report_load_average_at_start"] == [1.0, 1.0, 1.0]
    with pytest.raises(SystemExit, match="no stage of sst"):
        cost.corpus_cost(full, "sst")
    with pytest.raises(SystemExit, match="DATASET=FOLDER"):
        cost.main(["--folder", "imdb", "--out", out])
