"""hf-attn reproduce: the --quick pipeline end to end (every table, published values, one verdict
sentence per finding with the paper's quoted sentence beside its rule, report.json), the same numbers
as the golden file made before the package was restructured, no machine path in what is shipped,
resumability (a rerun trains nothing). The verdicts following the numbers (per finding, the committed
report's numbers and a counter-example that flips each verdict) are in tests/test_verdicts.py."""

import importlib.util
import json
from dataclasses import replace
import os
import re

import pytest
import torch

from hf_attn.batteries.ts.battery import PUBLISHED_SST as TS_SST
from hf_attn.cli.reproduce import main
from hf_attn.reproduce import TABLE_HEADERS, VERDICTS, reproduce
from hf_attn.training.wp import WP_TABLE3_SST

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the golden file and the flattening that made it (scripts/make_golden_reproduce.py)
_spec = importlib.util.spec_from_file_location("make_golden_reproduce",
                                               os.path.join(ROOT, "scripts", "make_golden_reproduce.py"))
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


def _metrics_files(root):
    found = {}
    for folder, _, files in os.walk(root):
        if "metrics.json" in files:
            path = os.path.join(folder, "metrics.json")
            found[path] = os.stat(path).st_mtime_ns
    return found


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """A quick SST reproduction, on one torch thread as the golden file was made (restored after)."""
    threads = torch.get_num_threads()
    out = str(tmp_path_factory.mktemp("reproduce"))
    report = reproduce(["sst"], out, quick=True, progress=False, threads=1)
    yield out, report
    torch.set_num_threads(threads)


def _read(out, name):
    with open(os.path.join(out, name), encoding="utf-8") as f:
        return f.read()


@pytest.mark.slow
def test_quick_report_matches_golden(quick):
    """Every deterministic number, string and verdict of report.json as in the golden file made with the
    code before the restructure (timings, machine, versions and paths left out). Regenerate the golden
    file only deliberately: scripts/make_golden_reproduce.py."""
    out, _ = quick
    with open(golden.GOLDEN, encoding="utf-8") as f:
        expected = json.load(f)["values"]
    measured = golden.flatten_report(json.loads(_read(out, "report.json")))
    diffs = golden.compare_flat(expected, measured, rel=1e-4, abs_=1e-6)
    assert not diffs, f"{len(diffs)} values differ from the golden file; the first:\n" + "\n".join(diffs[:20])


@pytest.mark.slow
def test_two_jobs_give_the_golden_numbers(tmp_path):
    """--jobs 2 (the W&P chain in a second, spawned process) changes nothing but the wall time: the
    same golden numbers, and both lanes' stage times in stages.json."""
    import torch

    threads = torch.get_num_threads()
    try:
        report = reproduce(["sst"], str(tmp_path), quick=True, progress=False, threads=1, jobs=2)
    finally:
        torch.set_num_threads(threads)
    with open(golden.GOLDEN, encoding="utf-8") as f:
        expected = json.load(f)["values"]
    diffs = golden.compare_flat(expected, golden.flatten_report(json.loads(_read(str(tmp_path), "report.json"))),
                                rel=1e-4, abs_=1e-6)
    assert not diffs, f"{len(diffs)} values differ from the golden file; the first:\n" + "\n".join(diffs[:20])
    assert {"sst/wp", "sst/jw_seeds", "sst/ts_grid", "sst/ts"} <= set(report["stages"])
    with pytest.raises(ValueError, match="jobs"):
        reproduce(["sst"], str(tmp_path / "x"), quick=True, progress=False, jobs=3)


@pytest.mark.slow
def test_quick_report_has_no_machine_path(quick):
    """report.json and REPORT.md: paths relative to the output folder, no absolute path (neither the
    folder's nor the current directory's); --report-only rebuilds them the same way."""
    out, _ = quick
    roots = {out, os.path.realpath(out), os.getcwd(), os.path.expanduser("~")}
    for name in ("report.json", "REPORT.md"):
        text = _read(out, name)
        for root in roots:
            assert root not in text, (name, root)
        assert not re.search(r"(?<![\w.~:/-])/(?:tmp|home|work|root|usr|var)/", text), name
    report = json.loads(_read(out, "report.json"))
    models = report["results"]["sst"]["models"]
    assert models["jw_wp_base"]["dir"] == "runs/sst/lstm-additive"
    assert report["results"]["sst"]["data"] == "data/sst-quick"
    assert report["results"]["sst"]["wp"]["runs_dir"] == "runs/sst/wp"
    assert report["results"]["sst"]["jw"]["lstm"]["model_dir"] == "runs/sst/lstm-additive"
    assert "--output-dir . --quick" in _read(out, "REPORT.md")
    before = {name: _read(out, name) for name in ("report.json", "REPORT.md")}
    assert main(["--datasets", "sst", "--output-dir", out, "--quick", "--quiet", "--report-only", "--threads", "1"]) == 0
    rebuilt = json.loads(_read(out, "report.json"))
    assert rebuilt["results"] == report["results"] and rebuilt["figures"] == report["figures"]
    strip = re.compile(r"(?m)^- Machine:.*$|^\| .*\| [0-9.]+ \| [0-9.]+ \|$|^\| total \|.*$")
    assert strip.sub("", _read(out, "REPORT.md")) == strip.sub("", before["REPORT.md"])


@pytest.mark.slow
def test_quick_report_has_every_table_and_published_value(quick):
    out, report = quick
    with open(os.path.join(out, "REPORT.md"), encoding="utf-8") as f:
        text = f.read()
    for header in TABLE_HEADERS:
        assert header in text, header
    # published values beside the measured ones (J&W Table 2, W&P Table 3, T&Š Tables 1–3)
    assert "0.34±0.21 (0.48) / 0.36±0.21 (0.49)" in text
    assert "0.61 (0.87) / 0.60 (0.83)" in text
    for value in WP_TABLE3_SST.values():
        assert f"| {value} |" in text
    for variant, (tr, un, pm) in TS_SST["fragility"].items():
        assert f"| {variant} | additive | {tr} / {un} / {pm} |" in text
    for variant, value in TS_SST["mi_MF"].items():
        assert f"| {variant} | {value} / {TS_SST['mi_RS'][variant]} |" in text
    for variant, value in TS_SST["token_probability"].items():
        assert f"| {variant} | additive | {value} |" in text
    # machine, versions and stage wall times are stated
    assert "Machine:" in text and "transformers 5." in text and "Wall time per stage" in text
    # J&W's QA rows on generated bAbI, labelled as such and ungraded; T&Š Table 6 at each depth
    assert "#### J&W QA: bAbI tasks 1–3, **generated data**" in text and "**not graded**" in text
    assert "| babi1 | " in text
    assert "T&Š Table 6 (appendix B): 2-layer BiLSTM" in text and "T&Š Table 6 (appendix B): 3-layer BiLSTM" in text
    # one corpus: no section across corpora, no list of differing verdicts
    assert "## Across corpora" not in text and "differs between corpora" not in text
    # one computed sentence per finding, with its verdict, for every part of every paper
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["findings"] == json.loads(json.dumps(report["findings"]))
    ids = {f["id"] for f in saved["findings"]}
    for wanted in ("JW-1", "JW-2", "JW-3", "JW-4", "JW-5", "JW-6", "JW-7", "JW-8", "WP-1", "WP-2", "WP-3",
                   "WP-4", "WP-5", "TS-1", "TS-2a", "TS-3", "TS-4", "TS-5", "ER-base-additive"):
        assert wanted in ids, wanted
    for finding in saved["findings"]:
        assert finding["verdict"] in VERDICTS
        assert finding["sentence"] in text
        for quote in finding["quotes"]:  # the paper's sentence is printed beside the rule
            assert f"Paper ({quote['source']}): “{quote['text']}”" in text
        if finding["rule"]:
            assert f"Rule: {finding['rule']}." in text
        assert finding["sentence"].rstrip(".").endswith(finding["verdict"]) or finding["verdict"] == "new measurement"
        assert finding["verdict"] in text
    for figure in saved["figures"]:
        assert os.path.getsize(os.path.join(out, figure)) > 1000
        assert f"({figure})" in text
    assert {"sst/models", "sst/jw", "sst/jw_more", "sst/wp", "sst/jw_seeds", "sst/ts_grid", "sst/ts", "sst/eraser"} <= set(
        saved["stages"])
    # T&Š Fig. 1 is run with T&Š's Eq. 6 objective (TVD − λ·JSD) and graded on it
    rows = saved["results"]["sst"]["ts"]["wp_consistent_adversary"]
    assert rows and all(r["divergence"] == "jsd" for r in rows)
    assert "TVD − λ·JSD (T&Š)" in text
    ts5 = next(f for f in saved["findings"] if f["id"] == "TS-5")
    assert ts5["checks"] and "W&P's L = TVD − λ·KL" not in ts5["sentence"]  # graded on T&Š-objective rows
    # J&W battery on the CNN and the dot-attention BiLSTM, beside J&W's committed SST outputs; Figs. 1 and 5
    assert "sst/jw_more" in saved["stages"]
    extra = saved["results"]["sst"]["jw"]["extra"]
    assert set(extra) == {"cnn-additive", "lstm-dot", "average-dot", "cnn-dot"} and all(e["results"] for e in extra.values())
    assert extra["cnn-additive"]["model"]["encoder"] == "cnn" and extra["lstm-dot"]["model"]["attention"] == "dot"
    assert "0.48±0.17 (0.75) / 0.48±0.17 (0.75)ᶜ" in text  # CNN τ_g, GradientPval_kendalltau
    assert "0.61±0.16 (0.87) / 0.64±0.15 (0.89)ᶜ" in text  # Average τ_loo, pyxc-pyc_pval_kendalltau
    assert "| τ(attention, gradient), BiLSTM + dot |" in text
    assert any(f.endswith("fig1_adversarial_heatmap.png") for f in saved["figures"])
    assert any(f.endswith("fig5_eps_max_jsd_vs_max_attention.png") for f in saved["figures"])
    # the W&P consistent adversaries use W&P's protocol (½·TVD, class weights, early stopping on the
    # training objective; capped at 2 epochs in --quick)
    wp_ca = saved["results"]["sst"]["wp"]["consistent_adversary"]
    assert wp_ca["protocol"]["name"] == "wp" and wp_ca["protocol"]["tvd_scale"] == 0.5
    assert all(1 <= r["epochs_trained"] <= 2 for r in wp_ca["rows"])
    assert "run_adversarial.sh" in text and "epochs trained" in text
    # T&Š Table 6 (2-layer BiLSTM) beside the published SST rows; the SNLI section says what it measured or why not
    assert "sst/ts_layers" in saved["stages"] and "T&Š Table 6 (appendix B): 2-layer BiLSTM" in text
    layered = saved["results"]["sst"]["ts_layers"]
    assert set(layered) == {"2", "3"}
    assert {"base-additive", "mlm-additive"} <= set(layered["2"]["cells"]) <= set(layered["3"]["cells"])
    assert "| base | 84.2 / -2.8 / -5.0 | 84.2 / -1.0 / -1.2 |" in text
    assert "| base | 84.2 / -2.8 / -5.0 | 84.2 / -0.7 / -0.7 |" in text  # the 3-layer row
    assert "J&W SNLI (sentence pairs" in text
    # the J&W battery ran on the W&P seed models: the J&W tolerances come from their seed spread
    assert len(saved["results"]["sst"]["jw"]["seeds"]) == 2
    jw2 = next(f for f in saved["findings"] if f["id"] == "JW-2")
    assert "σ_seed" in jw2["tolerance"]


@pytest.mark.slow
def test_rerun_reuses_every_run(quick):
    out, _ = quick
    before = _metrics_files(os.path.join(out, "runs")) | _metrics_files(os.path.join(out, "analysis"))
    assert len(before) >= 15  # base, average, W&P helpers, T&Š grid, Fig. 1 adversaries
    assert main(["--datasets", "sst", "--output-dir", out, "--quick", "--quiet"]) == 0
    after = _metrics_files(os.path.join(out, "runs")) | _metrics_files(os.path.join(out, "analysis"))
    assert after == before  # nothing retrained
    with open(os.path.join(out, "stages.json"), encoding="utf-8") as f:
        stages = json.load(f)["stages"]
    # the recorded wall time stays the one of the invocation that did the work
    assert all(s["seconds"] >= s["seconds_this_invocation"] for s in stages.values())


def test_plan_estimates_cover_the_new_stages():
    from hf_attn.reproduce import ReproducePlan, stage_estimates

    plan = ReproducePlan()
    est = stage_estimates(plan)
    assert {"jw_more", "ts_layers"} <= set(est)
    # W&P's protocol, capped: every adversary costs its epoch cap × the calibrated epoch time
    assert plan.wp_adversary_protocol == "wp" and plan.wp_adversary_max_epochs == 40
    fast = stage_estimates(ReproducePlan(wp_adversary_protocol="fast"))
    adversaries = len(set(plan.wp_lambdas) | {plan.wp_guide_lambda}) + plan.wp_guide_seeds - 1
    assert est["wp"] - fast["wp"] == 40 * 2.5 * adversaries - 20 * adversaries
    # with --jobs 2 the W&P chain runs beside the rest: the longer lane stays within the hour on 2 idle cores
    second = est["wp"] + est["jw_seeds"]
    assert max(sum(est.values()) - second, second) < 60 * 60
    assert est["ts_select"] > 0 and stage_estimates(ReproducePlan(ts_tying_deltas=(10.0,), ts_mlm_weights=(1.0,)))[
        "ts_select"] == 0


def test_snli_quick_stage_on_the_fixture(tmp_path, monkeypatch):
    """The SNLI stage end to end on the tiny committed SNLI fixture (tests/data/snli)."""
    from hf_attn.reproduce import ReproducePlan, snli_folder, stage_estimates, train_and_analyse_snli

    fixture = os.path.join(os.path.dirname(__file__), "data", "snli")
    monkeypatch.delenv("HF_ATTN_SNLI_DIR", raising=False)
    plan = ReproducePlan.for_mode(quick=True)
    assert snli_folder(plan) is None and stage_estimates(ReproducePlan())["snli"] == 0
    monkeypatch.setenv("HF_ATTN_SNLI_DIR", fixture)
    assert snli_folder(plan) == fixture and stage_estimates(ReproducePlan())["snli"] > 0
    results = train_and_analyse_snli(fixture, str(tmp_path / "model"), str(tmp_path / "jw"),
                                     plan, progress=False)
    assert results["pair"] and results["dataset"] == "snli" and results["published"]
    assert set(results["summary"]["tau_gradient"]["per_class"]) <= {"0", "1", "2"}
    # rerun: the finished model is reused, whether it holds the plan's pairs or every pair the fixture has
    again = train_and_analyse_snli(fixture, str(tmp_path / "model"), str(tmp_path / "jw"), plan, progress=False)
    assert again == results
    more = replace(plan, snli_train_pairs=10 ** 6)  # more than the fixture holds: all of it was used
    with open(tmp_path / "model" / "run.json", encoding="utf-8") as f:
        trained = json.load(f)["split_sizes"]["train"]
    if trained < plan.snli_train_pairs:
        assert train_and_analyse_snli(fixture, str(tmp_path / "model"), str(tmp_path / "jw"), more,
                                      progress=False)["summary"]
    fewer = replace(plan, snli_train_pairs=max(trained - 1, 1))  # a model made for another plan: refused
    with pytest.raises(ValueError, match="move it away"):
        train_and_analyse_snli(fixture, str(tmp_path / "model"), str(tmp_path / "jw"), fewer, progress=False)


def test_layout_public_paths(tmp_path, monkeypatch):
    """What is shipped names paths relative to the output folder, given relative or absolute, and any
    other absolute path as <local path>; text around a path is kept."""
    from hf_attn.reproduce import ReproductionLayout

    monkeypatch.chdir(tmp_path)
    report = {"dir": "out/runs/sst/lstm-additive", "abs": str(tmp_path / "out" / "analysis" / "sst" / "wp"),
              "elsewhere": "/srv/data/ag_news.csv", "note": "trained on /srv/data/x.csv today",
              "list": [("figures/sst-fragility.png", 1.5)], "name": "sst"}
    expected = {"dir": "runs/sst/lstm-additive", "abs": "analysis/sst/wp", "elsewhere": "<local path>",
                "note": "trained on <local path> today", "list": [["figures/sst-fragility.png", 1.5]], "name": "sst"}
    assert ReproductionLayout("out").public(report) == expected
    assert ReproductionLayout(str(tmp_path / "out")).public({**report, "dir": str(tmp_path / "out/runs/x")}) == {
        **expected, "dir": "runs/x"}


def test_quick_per_corpus_and_corpus_plans():
    """--quick DATASET runs the smoke-test plan on the named corpora only; IMDB's plan takes a seeded
    subset on a 2-core machine unless --full-corpora."""
    from hf_attn.reproduce import ReproducePlan
    from hf_attn.reproduce.pipeline import reproduce

    plan = ReproducePlan(quick_datasets=("imdb",))
    assert plan.for_dataset("imdb").quick and plan.for_dataset("imdb").quick_sizes == (240, 60, 80)
    assert not plan.for_dataset("sst").quick and plan.for_dataset("sst").epochs == 8
    imdb = ReproducePlan().for_dataset("imdb")
    assert imdb.subset_sizes == (4000, 500, 1000) and imdb.wp_seeds == 3 and imdb.ts_attentions == ("additive",)
    assert ReproducePlan(full_corpora=True).for_dataset("imdb").subset_sizes is None
    assert ReproducePlan().for_dataset("agnews").subset_sizes is None
    with pytest.raises(ValueError, match="not among --datasets"):
        reproduce(["sst"], "unused-folder", quick=["imdb"], progress=False)


def test_quick_argument_parses_per_corpus():
    import argparse

    from hf_attn.cli import reproduce as cli

    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    assert parser.parse_args(["reproduce", "--quick"]).quick == []
    assert parser.parse_args(["reproduce", "--datasets", "sst", "imdb", "--quick", "imdb"]).quick == ["imdb"]
    assert parser.parse_args(["reproduce"]).quick is None


def test_grid_cells_made_with_another_selection_are_named_not_reused(tmp_path):
    """A grid cell trained with δ = 10 when the selection now chooses 30: the grid stage refuses and names
    every folder made from those models (grid runs, T&Š analyses, ERASER, adversaries)."""
    from hf_attn.reproduce.pipeline import DatasetRun, _stage_ts_grid, _stale_regularised_cells
    from hf_attn.reproduce.layout import ReproductionLayout
    from hf_attn.reproduce import ReproducePlan

    plan = ReproducePlan(ts_variants=("base", "tying"), ts_attentions=("additive",), ts_seeds=1)
    paths = ReproductionLayout(str(tmp_path)).dataset_paths("sst", plan)
    run = DatasetRun("sst", plan, paths, "sst", None, False)
    assert _stale_regularised_cells(run) == []
    os.makedirs(paths["ts_select"])
    with open(os.path.join(paths["ts_select"], "selection.json"), "w", encoding="utf-8") as f:
        json.dump({"tying-additive": {"setting": "tying_delta", "dev_f1": {"10": 0.8, "30": 0.9}, "chosen": 30.0}}, f)
    trained = os.path.join(paths["grid"], "tying-additive", "seed0")
    os.makedirs(trained)
    with open(os.path.join(trained, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"settings": {"variant": "tying", "tying_delta": 10.0}}, f)
    os.makedirs(os.path.join(paths["eraser"]["tying-additive"]))
    os.makedirs(os.path.join(paths["ts"], "ts-adversary", "tying-additive-seed0"))
    stale = _stale_regularised_cells(run)
    assert stale == [os.path.join(paths["grid"], "tying-additive"), paths["eraser"]["tying-additive"],
                     os.path.join(paths["ts"], "ts-adversary", "tying-additive-seed0")]
    with pytest.raises(ValueError, match="remove them and rerun"):
        _stage_ts_grid(run)
