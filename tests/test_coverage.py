"""The coverage of the papers' experiments (hf_attn.reporting.coverage) and the corpora table
(scripts/dataset_table.py): every finding belongs to an experiment, every experiment has a status
and, when not graded, a reason; the table is deterministic and the committed REPORT.md opens with
it; the corpora table's SST numbers equal an independent count."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import re
import statistics
from pathlib import Path

import pytest

from hf_attn.reporting.coverage import (EXPERIMENTS, GRADED, HEADING, IMPOSSIBLE, NOT_RUN, STATUSES, UNGRADED,
                                        coverage_counts, coverage_rows, coverage_section, finding_key, status,
                                        with_coverage)
from hf_attn.reporting.findings import ACROSS_FINDINGS, FINDINGS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reproduction"


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads((DOCS / "report.json").read_text(encoding="utf-8"))


def _empty_report() -> dict:
    return {"datasets": [], "plan": {}, "results": {}, "findings": []}


def test_every_finding_belongs_to_an_experiment_and_every_id_is_a_finding():
    claimed = [f for exp in EXPERIMENTS for f in exp.findings]
    ids = [key for key, _ in FINDINGS] + list(ACROSS_FINDINGS)
    assert set(ids) <= set(claimed), set(ids) - set(claimed)
    assert set(claimed) <= set(ids), set(claimed) - set(ids)


def test_every_finding_of_the_committed_report_maps_to_an_experiment(committed):
    claimed = {f for exp in EXPERIMENTS for f in exp.findings}
    assert {finding_key(f["id"]) for f in committed["findings"]} <= claimed
    assert finding_key("ER-base-additive") == "ER-<cell>" and finding_key("JW-2") == "JW-2"


@pytest.mark.parametrize("which", ["committed", "empty"])
def test_every_experiment_has_a_status_and_a_reason_when_not_graded(which, committed):
    report = committed if which == "committed" else _empty_report()
    for exp, row in zip(EXPERIMENTS, coverage_rows(report)):
        assert row["status"] in STATUSES, row
        if row["status"] != GRADED:
            why = row["detail"].split(" — ", 1)[-1]
            assert len(why) > 10, (exp.item, row)
        if row["status"] == IMPOSSIBLE:
            assert not exp.where and exp.reason


def test_registry_is_whole():
    """One entry per table and figure of the papers (J&W Tables 1–2, Figs. 1–8; W&P Tables 1–3,
    Figs. 3–5; T&Š Tables 1–6, Figs. 1–7), each paper with a row its data rules out."""
    items = {paper: [e.item for e in EXPERIMENTS if e.paper == paper] for paper in ("J&W", "W&P", "T&Š")}
    for paper, names in {"J&W": ["Table 1", "Table 2, §4.1", "Fig. 1", "Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5",
                                 "Figs. 6–7", "Fig. 8", "(SNLI)", "(bAbI)", "(CNN QA)", "(MIMIC)"],
                         "W&P": ["Table 1", "Table 2", "Table 3", "Fig. 3", "Fig. 5"],
                         "T&Š": ["Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 6, 2 layers",
                                 "Table 6, 3 layers", "Fig. 1", "Fig. 2", "appendix C"]}.items():
        for name in names:
            assert any(name in item for item in items[paper]), (paper, name)
    for paper in ("J&W", "W&P", "T&Š"):
        assert any(e.paper == paper and not e.where for e in EXPERIMENTS), paper


def test_committed_report_statuses(committed):
    rows = {(r["paper"], r["item"]): r for r in coverage_rows(committed)}
    assert rows[("J&W", "Table 2, §4.1")]["status"] == GRADED
    assert "sst: JW-2 not reproduced" in rows[("J&W", "Table 2, §4.1")]["detail"]
    assert rows[("J&W", "Fig. 3, §4.2.1")]["status"] == GRADED  # JW-7 against J&W's released Fig. 3
    assert rows[("beyond", "ERASER (DeYoung et al. 2020)")]["status"] == UNGRADED  # extension
    assert rows[("T&Š", "Table 6 across depths (appendix B)")]["status"] == GRADED  # TS-7
    assert rows[("J&W", "Tables 1–2, Figs. 2–5 (CNN QA)")]["status"] == IMPOSSIBLE
    assert rows[("T&Š", "Table 6, 3 layers (appendix B)")]["status"] == UNGRADED
    assert rows[("T&Š", "Table 6, 2 layers (appendix B)")]["status"] == UNGRADED
    assert rows[("J&W", "Tables 1–2, Figs. 2–5 (SNLI)")]["status"] == GRADED
    assert rows[("J&W", "Tables 1–2, Figs. 2–5 (bAbI)")]["status"] == UNGRADED  # generated data
    counts = coverage_counts(list(rows.values()))
    assert sum(counts.values()) == len(EXPERIMENTS) and counts[GRADED] > 0


def test_status_follows_the_report(committed):
    """A report made with a 3-layer plan runs the 3-layer row; one without SNLI does not run SNLI's;
    a finding graded on a second corpus names it."""
    exp = {e.item: e for e in EXPERIMENTS}
    three = copy.deepcopy(committed)
    three["plan"]["ts_multilayer_layers"] = 3
    three["results"]["sst"]["ts_layers"] = {"3": next(iter(committed["results"]["sst"]["ts_layers"].values()))}
    assert status(exp["Table 6, 3 layers (appendix B)"], three)[0] == UNGRADED
    assert status(exp["Table 6, 2 layers (appendix B)"], three)[0] == NOT_RUN
    no_snli = copy.deepcopy(committed)
    no_snli["results"]["sst"]["jw"].pop("snli")
    no_snli["findings"] = [f for f in no_snli["findings"] if not f["id"].startswith("JWS")]
    state, detail = status(exp["Tables 1–2, Figs. 2–5 (SNLI)"], no_snli)
    assert state == NOT_RUN and "HF_ATTN_SNLI_DIR" in detail
    two = copy.deepcopy(committed)
    two["findings"].append(dict(two["findings"][0], dataset="agnews"))
    assert "agnews: JW-1" in status(exp["Table 1 (test performance)"], two)[1]
    assert status(exp["Table 1 (test performance)"], _empty_report())[0] == NOT_RUN


def test_rendered_table_is_deterministic(committed):
    first = coverage_section(committed)
    assert first == coverage_section(copy.deepcopy(committed))
    assert first.startswith(HEADING) and first.count("\n| ") == len(EXPERIMENTS) + 1
    assert "Generated by `" not in first  # the report's regrading finds its first paragraph by it
    for row in first.split("\n"):
        if row.startswith("| "):
            assert row.count(" | ") == 5, row  # no stray cell separators


def test_committed_report_opens_with_its_coverage(committed):
    text = (DOCS / "REPORT.md").read_text(encoding="utf-8")
    assert text.split("\n")[2] == HEADING
    assert with_coverage(text, committed) == text  # up to date: scripts/report_coverage.py


def test_with_coverage_inserts_once_after_the_title(committed):
    text = "# hf_attn reproduction report\n\nGenerated by `hf-attn reproduce`.\n\n## Summary\n"
    once = with_coverage(text, committed)
    assert once == with_coverage(once, committed)
    assert once.startswith("# hf_attn reproduction report\n\n" + HEADING)
    assert once.endswith("## How this report was made\n\nGenerated by `hf-attn reproduce`.\n\n## Summary\n")


# ------------------------------------------------------------------------------ the corpora table
def _script():
    spec = importlib.util.spec_from_file_location("dataset_table", ROOT / "scripts" / "dataset_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sst_record():
    from hf_attn.data.tasks import load_task

    return _script().corpus_stats(load_task("sst"))


def test_word_lengths_by_hand():
    from hf_attn.data.tokenization import word_lengths

    assert word_lengths(["It 's a good film .", "I don't like it, it isn't good.", "In 1999 , 42 % ..."]) == [6, 11, 8]
    assert word_lengths(["it s a good film"], "jw") == [5]


def _raw_sst(split: str) -> list[tuple[int, list[str]]]:
    """(root label, leaves) of the bundled PTB trees, parsed here without the loader."""
    path = ROOT / "hf_attn" / "data" / "sst" / f"{split}.txt.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [(int(line[1]), re.findall(r"\(\d ([^()\s]+)\)", line)) for line in f if line.strip()]
    return [(int(label > 2), leaves) for label, leaves in rows if label != 2]


def test_sst_numbers_equal_an_independent_count(sst_record):
    raw = {s: _raw_sst(s) for s in ("train", "dev", "test")}
    assert sst_record["splits"] == {"train": 6920, "validation": 872, "test": 1821}
    for split, name in (("train", "train"), ("dev", "validation"), ("test", "test")):
        labels = [label for label, _ in raw[split]]
        assert sst_record["label_counts"][name] == [labels.count(0), labels.count(1)]
    # counted here from the raw leaves: lower-cased, a word holding a digit → qqq, then every character
    # that is neither a word character nor ' or - stands alone ("..." is three words, "Mr." two)
    words = [[w for leaf in leaves for w in _words(leaf)] for rows in raw.values() for _, leaves in rows]
    lengths = [len(w) for w in words]
    assert sst_record["length"]["text"]["mean"] == round(statistics.fmean(lengths), 2)
    assert sst_record["length"]["text"]["median"] == statistics.median(lengths)
    vocabulary = {w for _, leaves in raw["train"] for leaf in leaves for w in _words(leaf)}
    assert abs(sst_record["vocabulary"] - len(vocabulary)) <= 0.01 * len(vocabulary)


def _words(leaf: str) -> list[str]:
    leaf = re.sub(r"[\w'\-]*\d(?:[\w'\-]|[.,:/]\d)*", "qqq", leaf.lower())
    return re.findall(r"[\w'\-]+|[^\w\s'\-]", leaf)


def test_committed_corpora_table_has_the_script_numbers(sst_record):
    records = json.loads((DOCS / "datasets.json").read_text(encoding="utf-8"))
    sst = next(r for r in records if r["corpus"] == "sst")
    assert {k: sst[k] for k in sst_record} == json.loads(json.dumps(sst_record))
    assert (DOCS / "datasets.md").read_text(encoding="utf-8") == _script().render_markdown(records)
    assert {r["corpus"] for r in records if not r["loaded"]} >= {"cnn-qa", "adr", "20news", "diabetes", "anemia"}
    for r in records:
        assert r["loaded"] or r["why_not"], r["corpus"]
        assert "/work" not in json.dumps(r) and "/home" not in json.dumps(r)
