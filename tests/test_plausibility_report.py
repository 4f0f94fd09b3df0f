"""The "Faithful or plausible?" section (hf_attn.reporting.plausibility): the committed page re-made
from the committed records alone, the models paired over the same sentences against scipy's
Wilcoxon test and hand-computed means, the verdict words following the tests, no local path in a
record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import wilcoxon

from hf_attn.reporting import plausibility as section

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "plausibility" / "runs"


def test_the_page_is_remade_from_the_committed_records():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "plausibility_report.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    records = section.load_records(str(RECORDS))
    assert set(records) == {m.name for m in section.MODELS}
    page = (ROOT / "docs" / "plausibility" / "report.md").read_text(encoding="utf-8")
    for model in section.MODELS:
        assert f"### {model.label}" in page and f"figures/{model.name}.png" in page
        assert (ROOT / "docs" / "plausibility" / "figures" / f"{model.name}.png").exists()
        assert model.analyze_command() in page


def test_records_keep_no_local_path_and_pair_on_the_same_texts():
    records = section.load_records(str(RECORDS))
    for name, record in records.items():
        text = json.dumps(record)
        for local in ("/work/", "/home/", "/tmp/", "/root/"):
            assert local not in text, (name, local)
        assert record["model"]["model_dir"] == f"runs/{name}"
        assert record["request"]["rationales"] == "sst_rationales"
    assert records["ts-base"]["texts"] == records["ts-tying"]["texts"] == records["ts-mlm"]["texts"]
    assert records["minilm-sst"]["texts"] == records["ts-base"]["texts"][:len(records["minilm-sst"]["texts"])]


def _record(texts, comprehensiveness, auprc):
    return {"texts": texts, "per_instance": {"attention": {"comprehensiveness": list(comprehensiveness),
                                                           "auprc": list(auprc)}}}


def test_models_are_paired_over_the_same_sentences():
    rng = np.random.default_rng(1)
    texts = [f"text {i}" for i in range(30)]
    base_c, base_a = rng.uniform(0, 0.3, 30), rng.uniform(0.4, 0.8, 30)
    variant_c, variant_a = base_c + rng.uniform(0.05, 0.1, 30), base_a - rng.uniform(0.0, 0.01, 30) + 0.004
    a, b = _record(texts, base_c, base_a), _record(texts, variant_c, variant_a)
    test = section.paired_models(a, b, "attention", "comprehensiveness")
    assert test["difference"] == pytest.approx(float(np.mean(variant_c - base_c)))
    assert test["p"] == pytest.approx(wilcoxon(variant_c, base_c).pvalue, rel=1e-6)
    assert test["better"] == "b" and test["n"] == 30
    shorter = _record(texts[:20], variant_c[:20], variant_a[:20])  # the first 20 sentences pair
    assert section.paired_models(a, shorter, "attention", "auprc")["n"] == 20
    with pytest.raises(ValueError, match="analysed different texts"):
        section.paired_models(a, _record(texts[::-1], variant_c, variant_a), "attention", "auprc")


def test_the_variant_sentence_says_what_the_tests_carry(monkeypatch):
    rng = np.random.default_rng(2)
    texts = [f"text {i}" for i in range(40)]
    c, a = rng.uniform(0, 0.3, 40), rng.uniform(0.4, 0.8, 40)
    base = _record(texts, c, a)
    base["per_instance"]["attention"]["token_f1"] = list(a)
    tying = _record(texts, c + 0.1, a - 0.2)  # more faithful, less plausible
    tying["per_instance"]["attention"]["token_f1"] = list(a)
    mlm = _record(texts, c + rng.normal(0, 1e-3, 40), a + 0.1)  # no significant change, more plausible
    mlm["per_instance"]["attention"]["token_f1"] = list(a)
    lines = section.variant_lines({"ts-base": base, "ts-tying": tying, "ts-mlm": mlm})
    said = "\n".join(lines)
    assert "Tying made attention more faithful by comprehensiveness and less plausible by AUPRC" in said
    assert "MLM made attention no more faithful (no significant change) by comprehensiveness and more plausible" \
           in said
    assert section.variant_lines({"ts-tying": tying}) == ["T&Š's base model was not analysed: no comparison."]


def test_the_readme_sentence_holds_in_the_records():
    """Every claim of the README's sentence on SST, checked by the tests that decide it."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert ("On SST's human rationales the plain BiLSTMs' attention is the most plausible of all the methods yet "
            "less faithful than integrated gradients, T&Š's tying and MLM variants make attention less plausible, "
            "and on a fine-tuned MiniLM rollout and attention flow point at the rationale less than random scores "
            "do") in readme
    records = section.load_records(str(RECORDS))
    for name in ("sst-lstm", "ts-base"):
        result = section._result(records[name])
        assert result.ranking("auprc")[0] == "attention", name
        runner_up = result.ranking("auprc")[1]  # the most plausible by a paired test, not by the mean alone
        assert result.compare("attention", runner_up, "auprc")["better"] == "attention", name
        assert result.compare("attention", "integrated_gradients", "comprehensiveness")["better"] == \
            "integrated_gradients", name
    for name in ("ts-tying", "ts-mlm"):
        assert section.paired_models(records["ts-base"], records[name], "attention", "auprc")["better"] == "a", name
    axes = section._result(records["minilm-sst"]).two_axes()
    assert "plausible" in axes["rollout"]["below"] and "plausible" in axes["attention_flow"]["below"]
