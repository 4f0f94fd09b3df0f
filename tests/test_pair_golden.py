"""The sentence-pair J&W battery (NLI: SNLI; QA: bAbI) gives the numbers of its golden records: two
small pair models trained here, ``hf-attn analyze --battery jw`` on them, and every number of
results.json and every per-instance array of instances.jsonl equal to the record within 1e-6 — the
same permutations and adversary starts (seeded by the batch number), the same batches. The records
and the runs are scripts/make_golden_pair_jw.py's (regenerate only deliberately)."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("make_golden_pair_jw",
                                               os.path.join(ROOT, "scripts", "make_golden_pair_jw.py"))
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


# added since the records were made: what the lengths count (a label, not a number)
NEW_KEYS = {"summary/length/unit"}


@pytest.mark.parametrize("case", ["snli", "babi1"])
def test_pair_battery_reproduces_its_golden_record(tmp_path, case):
    with open(golden.golden_path(case), encoding="utf-8") as f:
        expected = json.load(f)
    model_dir = golden.train_model(case, str(tmp_path / "model"))
    measured = golden.analyze(case, model_dir, str(tmp_path / "jw"))
    diffs, largest = golden.compare(expected, measured, tolerance=1e-6, new_keys=NEW_KEYS)
    assert not diffs, f"{len(diffs)} values differ from the golden record; the first:\n" + "\n".join(diffs[:20])
    assert largest <= 1e-6
    # the record is not empty: every instance, each analysis's arrays over its premise (passage) tokens
    rows = expected["instances"]
    assert len(rows) == expected["results"]["summary/num_instances"] == (29 if case == "snli" else 70)
    assert all(len(r["attention"]) == len(r["gradient"]) == len(r["loo"]) == len(r["premise_tokens"])
               for r in rows)


def test_compare_reports_a_moved_number_a_missing_key_and_a_changed_string():
    record = {"results": {"summary/tau/mean": 0.5, "dataset": "snli"},
              "instances": [{"attention": [0.25, 0.75]}]}
    moved = {"results": {"summary/tau/mean": 0.5 + 3e-6, "dataset": "babi1"},
             "instances": [{"attention": [0.25, 0.75 - 4e-7]}, {"attention": [1.0]}]}
    diffs, largest = golden.compare(record, moved)
    assert golden.compare(record, record) == ([], 0.0)
    assert largest == pytest.approx(3e-6)
    assert any(d.startswith("results: summary/tau/mean") for d in diffs)
    assert any("dataset: 'snli' → 'babi1'" in d for d in diffs)
    assert any("instances: 1/attention/0 new" in d for d in diffs)
    assert not any("0/attention/1" in d for d in diffs)  # 4e-7 is within 1e-6
