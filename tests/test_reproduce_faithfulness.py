"""The faithfulness section of ``hf-attn reproduce``'s SST report: the tables of the J&W BiLSTM and
(with --bert-family) of the BERT-family model, read from their results.json (the committed records
docs/faithfulness/bilstm_sst.json and minilm_sst.json as fixtures) and rendered with the numbers,
the cost per sentence and the sentence on where attention ranks (checked against a mean rank
computed here from the fixture); "not run" / "not measured" otherwise; the stage end to end on a
tiny papers' BiLSTM (seeded sample, resumable)."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from hf_attn.reproduce import (FAITHFULNESS_HEADER, STAGE_TITLES, BertFamilyPlan, ReproducePlan, ReproductionLayout,
                               write_report)
from hf_attn.reproduce import pipeline

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs" / "faithfulness"
TEXTS = ["a gripping and wonderful film", "the plot is dull", "not a good movie at all", "great acting",
         "boring", "a very fun story", "the film is bad but the acting is good", "wonderful"]


def _read(path) -> str:
    return Path(path).read_text(encoding="utf-8")


def _section(text: str) -> str:
    return text.split(f"## {FAITHFULNESS_HEADER}")[1].split("\n# ")[0]


def _subsection(section: str, label_start: str) -> str:
    return section.split(f"### {label_start}")[1].split("\n### ")[0]


def _row(block: str, method: str) -> list[str]:
    from hf_attn.batteries.faithfulness.settings import METHOD_LABELS

    label = METHOD_LABELS.get(method, method)  # the leave_one_out row is printed with its measure, LOO-drop
    for line in block.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip().strip("|").split(" | ")]
    raise AssertionError(f"no row {method!r} in:\n{block}")


def _cell(table: dict, method: str, metric: str, alpha: float = 0.05) -> str:
    """A table cell as the summary prints it: mean [interval], the median, * when the paired test
    against the random floor is significant."""
    c = table[method][metric]
    text = f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"
    if c.get("median") is not None:
        text += f" med {c['median']:.3f}"
    p = (c.get("vs_random") or {}).get("p")
    return text + (" *" if p is not None and p < alpha else "")


def _mean_rank_of_attention(payload: dict) -> tuple[float, int]:
    """Attention's mean rank (1 = best) over the faithfulness metrics, by an explicit loop over the
    fixture's table: per metric, 1 + the methods strictly better + half the methods tied (ties share
    their mean position), undefined values left out, a metric on which every method scores alike not
    ranked; and the number of methods with a rank."""
    higher = {"comprehensiveness": True, "sufficiency": False, "soft_comprehensiveness": True,
              "soft_sufficiency": True, "naopc_comprehensiveness": True, "naopc_sufficiency": False,
              "tau_loo": True}
    methods = payload["methods"]
    ranks, ranked_methods = [], set()
    for metric, up in higher.items():
        values = {m: (payload["table"][m].get(metric) or {}).get("mean") for m in methods}
        values = {m: v for m, v in values.items() if v is not None and not math.isnan(v)}
        if len(values) < 2 or max(values.values()) - min(values.values()) <= 1e-12:
            continue
        ranked_methods |= set(values)
        if "attention" not in values:
            continue
        mine = values["attention"]
        better = sum(1 for m, v in values.items() if m != "attention" and round(v, 12) != round(mine, 12)
                     and (v > mine if up else v < mine))
        tied = sum(1 for m, v in values.items() if m != "attention" and round(v, 12) == round(mine, 12))
        ranks.append(1 + better + tied / 2)
    return float(np.mean(ranks)), len(ranked_methods)


def _fixture(out: Path, plan: ReproducePlan) -> dict:
    paths = ReproductionLayout(str(out)).dataset_paths("sst", plan)
    os.makedirs(paths["faith_lstm"])
    shutil.copyfile(DOCS / "bilstm_sst.json", Path(paths["faith_lstm"], "results.json"))
    shutil.copyfile(DOCS / "bilstm_sst.png", Path(paths["faith_lstm"], "faithfulness.png"))
    if plan.bert_family is not None:
        os.makedirs(paths["faith_bert"])
        shutil.copyfile(DOCS / "minilm_sst.json", Path(paths["faith_bert"], "results.json"))
        os.makedirs(paths["bert_model"])
        shutil.copyfile(REPO_ROOT / "docs" / "bert_family" / "train_run.json", Path(paths["bert_model"], "run.json"))
    return paths


def test_section_shows_both_tables_with_their_numbers(tmp_path):
    plan = ReproducePlan().with_bert_family()
    paths = _fixture(tmp_path, plan)
    report = write_report(str(tmp_path), ["sst"], plan, {"sst": paths})
    section = _section(_read(tmp_path / "REPORT.md"))
    for name, label in (("bilstm_sst", "J&W BiLSTM"), ("minilm_sst", "MiniLM")):
        payload = json.loads(_read(DOCS / f"{name}.json"))
        block = _subsection(section, label)
        assert f"{payload['num_instances']} SST test sentences" in block
        for method in payload["methods"]:
            row = _row(block, method)
            assert row[1] == _cell(payload["table"], method, "comprehensiveness"), (name, method)
            assert row[2] == _cell(payload["table"], method, "sufficiency"), (name, method)
            cost = payload["cost"][method]
            assert row[-2] == f"{cost['seconds_per_sentence']:.4f}" and row[-1] == f"{cost['peak_mb_per_sentence']:.2f}"
        for method in payload["skipped"]:
            assert f"- skipped {method}: " in block
        rank, count = _mean_rank_of_attention(payload)
        assert f"raw attention has mean rank {rank:.1f} of {count} methods" in block, name
    # the numbers quoted above, from the fixtures
    assert _row(_subsection(section, "J&W BiLSTM"), "attention")[1] == "0.182 [0.159, 0.204] med 0.151 *"
    assert "(the W&P base)" in section and "(the BERT-family section's model)" in section
    assert "![Faithfulness table, J&W BiLSTM" in section and "figures/sst-faithfulness-lstm.png" in report["figures"]
    kept = report["results"]["sst"]["faithfulness"]
    assert kept["methods"] == json.loads(_read(DOCS / "bilstm_sst.json"))["methods"]
    assert "texts" not in kept and "per_instance" not in kept  # report.json keeps the table, not the sentences
    assert report["results"]["sst"]["bert_family"]["faithfulness"]["num_instances"] == 200


def test_section_without_the_tables(tmp_path):
    plan = ReproducePlan()
    write_report(str(tmp_path), ["sst"], plan, {"sst": ReproductionLayout(str(tmp_path)).dataset_paths("sst", plan)})
    section = _section(_read(tmp_path / "REPORT.md"))
    assert "J&W BiLSTM: not measured." in section
    assert "BERT-family model: not run; its table is part of the opt-in BERT-family section" in section
    flagged = ReproducePlan().with_bert_family()
    out = tmp_path / "flagged"
    write_report(str(out), ["sst"], flagged, {"sst": ReproductionLayout(str(out)).dataset_paths("sst", flagged)})
    assert "BERT-family model: not measured." in _section(_read(out / "REPORT.md"))
    # other datasets have no such section
    assert FAITHFULNESS_HEADER not in _read(tmp_path / "REPORT.md").split("# Dataset: sst")[0]


def test_plan_runs_the_stage_on_sst_only_and_estimates_it():
    from hf_attn.reproduce import stage_estimates

    plan = ReproducePlan()
    assert "faithfulness" in STAGE_TITLES and stage_estimates(plan)["faithfulness"] == pytest.approx(0.45 * 200)
    assert ReproducePlan.for_mode(quick=True).faithfulness_instances == 20
    wanted = dict((k, w) for k, _, w in pipeline.STAGES)["faithfulness"]
    assert wanted(pipeline.DatasetRun("sst", plan, {}, "sst", None, progress=False))
    assert not wanted(pipeline.DatasetRun("imdb", plan, {}, "imdb", None, progress=False))
    none = ReproducePlan(faithfulness_instances=0)
    assert not wanted(pipeline.DatasetRun("sst", none, {}, "sst", None, progress=False))
    assert "kernel_shap" not in plan.faithfulness_methods and "deeplift" not in plan.faithfulness_methods
    with pytest.raises(ValueError, match="faithfulness_instances"):
        BertFamilyPlan(faithfulness_instances=-1).validate()


def _tiny_bilstm_folder(root: Path) -> str:
    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    tokenizer = build_tokenizer(TEXTS, max_length=24)
    config = AttnClassifierConfig(vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, encoder="lstm",
                                  hidden_size=4, num_labels=2, max_tokens=24, pad_token_id=0, unk_token_id=1,
                                  mask_token_id=2)
    torch.manual_seed(0)
    folder = str(root / "lstm")
    AttnClassifierForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_stage_end_to_end_on_a_tiny_bilstm(tmp_path):
    """The stage runs the table on a seeded sample of the test split (the rule of the BERT-family
    section), skips the transformer-only methods with the reason, is resumable, and the report shows it."""
    from datasets import Dataset, DatasetDict

    from hf_attn.data.tasks import TaskData

    rows = {"text": TEXTS, "label": [1, 0, 0, 1, 0, 1, 0, 1]}
    task = TaskData(DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")}),
                    ["negative", "positive"], "toy")
    plan = ReproducePlan(faithfulness_instances=4)
    out = tmp_path / "out"
    paths = ReproductionLayout(str(out)).dataset_paths("sst", plan)
    paths["base"] = _tiny_bilstm_folder(tmp_path)
    run = pipeline.DatasetRun("sst", plan, paths, "sst", None, progress=False, _task=task)
    pipeline._stage_faithfulness(run)
    results_path = Path(paths["faith_lstm"], "results.json")
    results = json.loads(_read(results_path))
    expected_rows = sorted(int(i) for i in np.random.default_rng(0).choice(len(TEXTS), size=4, replace=False))
    assert results["texts"] == [TEXTS[i] for i in expected_rows]
    assert results["num_instances"] == 4 and "attention" in results["methods"]
    assert "needs the layers of a transformers model" in results["skipped"]["alti"]
    stamp = os.stat(results_path).st_mtime_ns
    pipeline._stage_faithfulness(run)  # resumable: the finished table is reused
    assert os.stat(results_path).st_mtime_ns == stamp
    write_report(str(out), ["sst"], plan, {"sst": paths})
    block = _subsection(_section(_read(out / "REPORT.md")), "J&W BiLSTM")
    assert _row(block, "attention")[1] == _cell(results["table"], "attention", "comprehensiveness")
    assert "4 SST test sentences" in block and "- skipped alti: " in block
