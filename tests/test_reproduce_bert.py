"""The opt-in BERT-family section of ``hf-attn reproduce``: the report's section shows the
transformer's J&W numbers beside the BiLSTM's, read from the results files (the committed MiniLM
records in docs/bert_family/ and the committed BiLSTM reproduction in docs/reproduction/report.json as
fixtures); without the flag the stage does not run and report.json is as before; with it the plan
lists the stage; the stage itself end to end on a tiny random BERT (no download)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from hf_attn.reproduce import (BERT_FAMILY_HEADER, STAGE_TITLES, ReproducePlan, ReproductionLayout, stage_estimates,
                               write_report)
from hf_attn.reproduce import pipeline

REPO_ROOT = Path(__file__).resolve().parents[1]
BERT_DOCS = REPO_ROOT / "docs" / "bert_family"
COMMITTED_REPORT = REPO_ROOT / "docs" / "reproduction" / "report.json"


def _read(path) -> str:
    return Path(path).read_text(encoding="utf-8")


def _fixture_reproduction(out: Path, plan: ReproducePlan, wp_bert: dict | None = None) -> dict:
    """OUT laid out as a reproduction that ran: the BiLSTM's J&W results and run facts of the committed
    report, MiniLM's run.json and J&W results.json of docs/bert_family (and ``wp_bert`` as the W&P
    transformer battery's results). Returns the dataset's paths."""
    committed = json.loads(_read(COMMITTED_REPORT))["results"]["sst"]
    paths = ReproductionLayout(str(out)).dataset_paths("sst", plan)
    os.makedirs(paths["jw_lstm"])
    Path(paths["jw_lstm"], "results.json").write_text(json.dumps(committed["jw"]["lstm"]))
    facts = committed["models"]["jw_wp_base"]
    os.makedirs(paths["base"])
    Path(paths["base"], "metrics.json").write_text(json.dumps({k: facts[k] for k in (
        "test_f1", "test_accuracy", "test_roc_auc", "train_seconds")}))
    Path(paths["base"], "run.json").write_text(json.dumps({
        "model": {k: facts[k] for k in ("embeddings", "embedding_dim", "encoder", "attention", "variant",
                                        "hidden_size", "parameters")},
        "settings": {"epochs": facts["epochs"], "seed": facts["seed"]}, "split_sizes": facts["split_sizes"]}))
    os.makedirs(paths["bert_model"])
    shutil.copyfile(BERT_DOCS / "train_run.json", Path(paths["bert_model"], "run.json"))
    os.makedirs(paths["jw_bert"])
    shutil.copyfile(BERT_DOCS / "jw_results.json", Path(paths["jw_bert"], "results.json"))
    shutil.copyfile(BERT_DOCS / "fig_tau_per_layer.png", Path(paths["jw_bert"], "fig_tau_per_layer.png"))
    if wp_bert is not None:
        os.makedirs(paths["wp_bert"])
        Path(paths["wp_bert"], "results.json").write_text(json.dumps(wp_bert))
    return paths


def _section(text: str) -> str:
    return text.split(f"## {BERT_FAMILY_HEADER}")[1].split("\n# ")[0]


def _row(section: str, quantity: str) -> list[str]:
    for line in section.splitlines():
        if line.startswith(f"| {quantity}"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError(f"no row {quantity!r} in:\n{section}")


# ------------------------------------------------------------------------------ the section, from fixtures
def test_section_shows_minilm_beside_the_bilstm_from_the_results_files(tmp_path):
    plan = ReproducePlan().with_bert_family()
    wp_bert = {"uniform_baseline": {"base": {"f1": 0.88, "macro_f1": 0.878, "accuracy": 0.879},
                                    "uniform": {"f1": 0.61, "macro_f1": 0.6, "accuracy": 0.62},
                                    "f1_gap": 0.27, "mean_tvd": 0.21}}
    _fixture_reproduction(tmp_path, plan, wp_bert)
    report = write_report(str(tmp_path), ["sst"], plan, {"sst": ReproductionLayout(str(tmp_path)).dataset_paths(
        "sst", plan)})
    text = _read(tmp_path / "REPORT.md")
    section = _section(text)
    bert = json.loads(_read(BERT_DOCS / "jw_results.json"))
    lstm = json.loads(_read(COMMITTED_REPORT))["results"]["sst"]["jw"]["lstm"]
    run = json.loads(_read(BERT_DOCS / "train_run.json"))
    b, l = bert["summary"], lstm["summary"]

    def tau(s, key):
        o = s[key]["overall"]
        return f"{o['mean']:.2f} ± {o['std']:.2f} ({o['fraction_significant']:.2f})"

    for key, label in (("tau_gradient", "τ(attention, gradient)"), ("tau_loo", "τ(attention, LOO-TVD)"),
                       ("tau_gradient_loo", "τ(gradient, LOO-TVD)")):
        cells = _row(section, label)
        assert cells[1].startswith(tau(l, key)) and cells[2].startswith(tau(b, key)), cells
        assert cells[3] == "new measurement"
    per = _row(section, "τ(attention, gradient)")[2]
    assert per.endswith(f"per class {b['tau_gradient']['per_class']['0']['mean']:.2f} / "
                        f"{b['tau_gradient']['per_class']['1']['mean']:.2f}")
    permutation = _row(section, "permutation")
    assert permutation[1].startswith(f"{l['permutation']['overall']['median']:.3f}")
    assert permutation[2].startswith(f"{b['permutation']['overall']['median']:.3f}")
    adversary = _row(section, "adversary")
    assert adversary[2] == (f"{b['adversary']['overall']['mean']:.3f} (100% with an adversary ≤ ε = "
                            f"{b['adversary']['eps']})")
    assert adversary[1].startswith(f"{l['adversary']['overall']['mean']:.3f} (")
    accuracy = _row(section, "test accuracy")
    lstm_facts = json.loads(_read(COMMITTED_REPORT))["results"]["sst"]["models"]["jw_wp_base"]
    assert accuracy[1:] == [f"{lstm_facts['test_accuracy']:.3f}", f"{run['test']['accuracy']:.3f}", "new measurement"]
    # which layer / aggregation, the instances, the rollout rows and the per-layer table
    assert "**layer -1, [CLS] query row, mean over heads** of the 6-layer, 12-head `bert`" in section
    assert f"{b['num_instances']} test sentences (a seeded sample) for the transformer, {l['num_instances']} for the BiLSTM" \
        in section
    assert _row(section, "τ(attention rollout, gradient)")[2].startswith(tau(b, "tau_rollout_gradient"))
    for layer in b["per_layer"]:
        assert f"| {layer['layer']} | {layer['tau_gradient']:.2f} | {layer['tau_loo']:.2f} |" in section
    assert "(sentence-transformers' all-MiniLM-L6-v2: BERT, 6 layers, 12 heads, hidden 384)" in section
    assert f"fine-tuning took {run['seconds']['train']:.0f} s with 1 torch thread(s)" in section
    # the generated comparison, from the numbers
    assert (f"agrees less with gradient importance (τ {b['tau_gradient']['overall']['mean']:.2f} vs the BiLSTM's "
            f"{l['tau_gradient']['overall']['mean']:.2f})") in section
    # W&P's uniform attention, when the W&P transformer battery's results exist
    wp_row = _row(section, "W&P §3.2")
    assert wp_row[2].startswith("0.880 → 0.610 (the [CLS] row made uniform at test time; mean TVD of ŷ 0.210)")
    # the figure is copied, report.json has the numbers and the plan, no machine path anywhere
    assert "figures/sst-fig_tau_per_layer.png" in report["figures"] and (tmp_path / "figures").is_dir()
    saved = json.loads(_read(tmp_path / "report.json"))
    assert saved["results"]["sst"]["bert_family"]["jw"]["summary"]["tau_loo"] == b["tau_loo"]
    assert saved["results"]["sst"]["bert_family"]["model"]["test_accuracy"] == run["test"]["accuracy"]
    assert saved["plan"]["bert_family"]["base_model"] == "minilm-l6"
    assert "--bert-family" in text and "BERT-family section: `minilm-l6`" in text
    for name in ("REPORT.md", "report.json"):
        content = _read(tmp_path / name)
        assert str(tmp_path) not in content
        assert not re.search(r"(?<![\w.~:/-])/(?:tmp|home|work|root|usr|var)/", content), name


def test_section_without_wp_results_and_with_a_given_folder(tmp_path):
    """No W&P transformer results: no W&P row (never a typed number); a reused folder is named as such
    and shipped as <local path>."""
    given = tmp_path / "elsewhere" / "minilm"
    plan = ReproducePlan().with_bert_family(model_dir=str(given), instances=500)
    out = tmp_path / "out"
    _fixture_reproduction(out, plan)
    write_report(str(out), ["sst"], plan, {"sst": ReproductionLayout(str(out)).dataset_paths("sst", plan)})
    section = _section(_read(out / "REPORT.md"))
    assert "W&P §3.2" not in section and "reused" in section
    saved = json.loads(_read(out / "report.json"))
    assert saved["results"]["sst"]["bert_family"]["model"]["dir"] == "<local path>"
    assert saved["plan"]["bert_family"]["model_dir"] == "<local path>"


# ------------------------------------------------------------------------------ opt-in
def test_without_the_flag_the_stage_is_skipped_and_report_json_is_unchanged(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline, "STAGES", tuple(
        (key, (lambda run, key=key: calls.append((key, run.plan.bert_family is not None))) if key == "bert_family"
         else (lambda run: None), wanted) for key, _, wanted in pipeline.STAGES))
    plan = ReproducePlan()
    assert plan.bert_family is None and "bert_family" not in stage_estimates(plan)
    run = pipeline.DatasetRun("sst", plan, ReproductionLayout(str(tmp_path)).dataset_paths("sst", plan), "sst", None,
                              progress=False)
    assert "bert_model" not in run.paths
    clock = pipeline.StageClock(str(tmp_path), progress=False)
    pipeline._run_stages(run, clock, [key for key, _, _ in pipeline.STAGES])
    assert calls == [] and "sst/bert_family" not in clock.record["stages"]
    with_flag = plan.with_bert_family()
    run = pipeline.DatasetRun("sst", with_flag, ReproductionLayout(str(tmp_path)).dataset_paths("sst", with_flag),
                              "sst", None, progress=False)
    pipeline._run_stages(run, clock, [key for key, _, _ in pipeline.STAGES])
    assert calls == [("bert_family", True)] and "sst/bert_family" in clock.record["stages"]
    imdb = pipeline.DatasetRun("imdb", with_flag, {}, "imdb", None, progress=False)  # SST only
    assert not dict((k, w) for k, _, w in pipeline.STAGES)["bert_family"](imdb)
    # the report of a reproduction without the flag: no bert_family key anywhere in report.json
    report = write_report(str(tmp_path / "r"), ["sst"], plan, {"sst": ReproductionLayout(str(tmp_path / "r"))
                                                               .dataset_paths("sst", plan)})
    assert "bert_family" not in report["plan"] and "bert_family" not in report["results"]["sst"]
    text = _read(tmp_path / "r" / "REPORT.md")
    assert f"## {BERT_FAMILY_HEADER}\n\nNot run: the section is opt-in (`hf-attn reproduce --bert-family`" in text
    assert "--bert-family`" not in text.split("\n")[2]  # the command line of the report


def test_the_plan_lists_the_stage_with_the_flag(capsys):
    from hf_attn.cli import build_parser

    plan = ReproducePlan.for_mode(quick=False).with_bert_family()
    est = stage_estimates(plan)
    # calibrated on docs/bert_family (training, J&W) and docs/faithfulness (6.5 s a sentence, 50 sentences)
    assert est["bert_family"] == pytest.approx(216 * 2 + 40 + 0.56 * 500 + 6.5 * 50)
    assert "bert_family" in STAGE_TITLES and "MiniLM" in STAGE_TITLES["bert_family"]
    reused = stage_estimates(ReproducePlan().with_bert_family(model_dir="runs/minilm", instances=100))
    assert reused["bert_family"] == pytest.approx(0.56 * 100 + 6.5 * 50)
    quick = ReproducePlan.for_mode(quick=True).with_bert_family()
    assert quick.bert_family.epochs == 1 and quick.bert_family.jw_instances == 40
    assert quick.bert_family.faithfulness_instances == 5
    assert stage_estimates(quick)["bert_family"] < 60 + 6.5 * 5
    default_total = sum(stage_estimates(ReproducePlan()).values())
    assert sum(est.values()) == pytest.approx(default_total + est["bert_family"])
    with pytest.raises(ValueError, match="jw_instances"):
        ReproducePlan().with_bert_family(instances=0)
    parser = build_parser("reproduce")
    args = parser.parse_args(["reproduce", "--output-dir", "x", "--bert-family", "--bert-instances", "50"])
    assert args.bert_family and args.bert_instances == 50 and args.bert_model_dir is None
    args = parser.parse_args(["reproduce", "--output-dir", "x"])
    assert not args.bert_family and args.bert_model_dir is None


# ------------------------------------------------------------------------------ the stage, on a tiny BERT
def test_stage_end_to_end_on_a_tiny_bert(tmp_path):
    """The stage fine-tunes a tiny random BERT (as base model) on a toy task through
    train_transformer_classifier, runs the J&W battery on 5 seeded-sampled test sentences and the
    faithfulness table on 5, is resumable (a rerun trains and analyses nothing), and the report shows
    the sections."""
    from test_transformer_hub import tiny_base_and_toy_task

    base, task = tiny_base_and_toy_task(tmp_path)
    out = tmp_path / "out"
    plan = ReproducePlan.for_mode(quick=True).with_bert_family(base_model=str(base), instances=5)
    paths = ReproductionLayout(str(out)).dataset_paths("sst", plan)
    run = pipeline.DatasetRun("sst", plan, paths, "sst", None, progress=False, _task=task)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipeline._stage_bert_family(run)
        results = json.loads(_read(Path(paths["jw_bert"], "results.json")))
        faithfulness = json.loads(_read(Path(paths["faith_bert"], "results.json")))
        stamps = {p: os.stat(p).st_mtime_ns for p in (Path(paths["bert_model"], "model.safetensors"),
                                                      Path(paths["jw_bert"], "results.json"),
                                                      Path(paths["faith_bert"], "results.json"))}
        pipeline._stage_bert_family(run)  # resumable: nothing redone
        assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps
    finally:
        torch.set_num_threads(threads)
    assert json.loads(_read(Path(paths["bert_model"], "run.json")))["kind"] == "transformer"
    assert results["summary"]["num_instances"] == 5 and results["parameters"]["num_permutations"] == plan.jw_permutations
    assert results["parameters"]["steps"] == plan.jw_steps and results["model"]["attention"].startswith("layer -1")
    report = write_report(str(out), ["sst"], plan, {"sst": paths})
    section = _section(_read(out / "REPORT.md"))
    tau = results["summary"]["tau_gradient"]["overall"]
    assert _row(section, "τ(attention, gradient)")[2].startswith(f"{tau['mean']:.2f} ± {tau['std']:.2f}")
    assert _row(section, "τ(attention, gradient)")[1] == "–"  # no BiLSTM in this folder
    assert report["results"]["sst"]["bert_family"]["model"]["dataset"] == "toy"
    # the faithfulness table of the same model: every method of the plan runs on a transformer
    assert faithfulness["num_instances"] == 5 and faithfulness["methods"] == list(plan.faithfulness_methods)
    from hf_attn.reproduce import FAITHFULNESS_HEADER

    table = _read(out / "REPORT.md").split(f"## {FAITHFULNESS_HEADER}")[1].split("(the BERT-family section's model)")[1]
    c = faithfulness["table"]["alti"]["comprehensiveness"]
    assert f"| alti | {c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}] med {c['median']:.3f}" in table
    wp = report["results"]["sst"]["bert_family"]["wp"]
    if wp is not None:  # the W&P transformer battery exists: its uniform numbers are in the section
        assert _row(section, "W&P §3.2")[2].startswith(f"{wp['uniform_baseline']['base']['f1']:.3f} → ")
