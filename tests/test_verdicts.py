"""Verdicts of ``hf-attn reproduce`` (hf_attn.reproduce.findings_for), re-graded without run folders from
the SST numbers committed on 21 Nov 2026 (tests/data/verdicts/, a fixed fixture) and from the current
docs/reproduction/report.json (its verdicts are what the current rules give):

* every quoted sentence is verbatim in the paper texts (/work/shared/papers);
* every finding carries its quote(s), rule and tolerance, and the report prints the quote beside the rule;
* per finding id: the committed numbers give the expected verdict, and a counter-example (numbers altered)
  flips it — the verdict follows the numbers, not a fixed label;
* the T&Š Fig. 1 finding is graded only on adversaries trained with T&Š's Eq. 6 objective.
"""

import copy
import json
import os
import re

import pytest

from hf_attn.cli.reproduce import main
from hf_attn.reproduce import QUOTES, VERDICTS, Check, format_findings_table, regrade, verdict_of
from hf_attn.reporting.report import _verdict_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The numbers of the SST reproduction committed on 21 Nov 2026 (before the W&P/J&W protocols of the current report), kept
# as a fixture: the verdict rules are tested on fixed numbers, whatever docs/reproduction holds now.
REPORT = os.path.join(ROOT, "tests", "data", "verdicts", "report_sst_2026-11-21.json")
CURRENT_REPORT = os.path.join(ROOT, "docs", "reproduction", "report.json")
# The paper texts live in shared/ beside the checkout (CI clones main with shared/ beside it).
PAPERS = next((p for p in (os.path.join(os.path.dirname(ROOT), "shared", "papers"), "/work/shared/papers")
               if os.path.isdir(p)), "/work/shared/papers")

# The verdicts the current rules give the committed SST numbers.
EXPECTED_SST = {
    "JW-1": "reproduced", "JW-2": "not reproduced", "JW-3": "qualitatively reproduced",
    "JW-4": "partly reproduced", "JW-5": "qualitatively reproduced", "JW-6": "qualitatively reproduced",
    # JW-7: one run without seed batteries cannot be compared with J&W's one run (no seed spread: not graded)
    "JW-7": "undecided", "JW-8": "reproduced",
    # W&P §3.2's "three tasks" include SST; a pass now counts up to the F1 cap ±0.1 (the old cap, Table 3's
    # 0.012 gap, could never be reached): the gap −0.001 within ±0.049 holds
    "WP-1": "reproduced",
    # WP-3: the guides' matches are not graded (±0.049 is wider than half the gaps between W&P's guides),
    # BASE − UNIFORM is within the tolerance (not decided): the ADVERSARY miss is the one graded check
    "WP-2": "reproduced", "WP-3": "not reproduced", "WP-4": "partly reproduced",
    # W&P §6: adversarial distributions can be found; the consistent adversary surpasses the seeds at no cost
    "WP-5": "reproduced",
    # TS-2d: "the base's dot attention ≈ uniform" is not measured (no attention entropy): no longer a failed gate
    "TS-1": "partly reproduced", "TS-2a": "partly reproduced", "TS-2d": "partly reproduced",
    "TS-3": "reproduced",  # MI on one seed: the Table 2 numbers are not graded, every graded claim holds
    "TS-4": "partly reproduced",
    "TS-5": "not measured",  # the committed adversaries used W&P's KL objective, not T&Š's Eq. 6
    "TS-6": "extension",  # J&W's per-instance adversary, which T&Š never ran: the checks extend T&Š §6
    # none of the three papers ran ERASER
    "ER-base-additive": "extension", "ER-tying-additive": "extension", "ER-mlm-additive": "extension",
}


@pytest.fixture(scope="module")
def committed():
    with open(REPORT, encoding="utf-8") as f:
        return json.load(f)


def _verdicts(report) -> dict:
    return {f["id"]: f for f in regrade(report)}


def _sst(report) -> dict:
    return report["results"]["sst"]


# ------------------------------------------------------------------------------------------------
# quotes

def _normalise(text: str) -> str:
    # the paper texts are PDF extractions: words are hyphenated across lines and columns break
    # sentences; compare without whitespace and hyphens
    return re.sub(r"[\s\-‐]+", "", text)


def test_every_quote_is_verbatim_in_a_paper():
    if not os.path.isdir(PAPERS):
        pytest.skip("paper texts not available")
    papers = {}
    for name in os.listdir(PAPERS):
        with open(os.path.join(PAPERS, name), encoding="utf-8") as f:
            papers[name] = _normalise(f.read())
    prefix = {"J&W": "jain-wallace-2019-attention", "W&P": "wiegreffe-pinter", "T&Š": "tutek-snajder"}
    for fid, quotes in QUOTES.items():
        assert quotes, fid
        for source, text in quotes:
            wanted = prefix[source.split()[0]]
            hits = [n for n, body in papers.items() if n.startswith(wanted) and _normalise(text) in body]
            assert hits, f"{fid}: not verbatim in the {source.split()[0]} paper: {text!r}"


def test_every_finding_has_quote_rule_tolerance_and_the_report_prints_them(committed):
    findings = regrade(committed)
    for f in findings:
        assert f["verdict"] in VERDICTS
        assert f["sentence"].rstrip(".").endswith(f["verdict"]) or f["verdict"] == "new measurement"
        if not f["id"].startswith("ER-"):
            assert f["quotes"], f["id"]
            assert f["rule"], f["id"]
        if f["verdict"] not in ("new measurement", "not measured", "extension"):  # ERASER: nothing to check
            assert f["tolerance"] and f["checks"], f["id"]
        text = _verdict_lines(findings, [f["id"]])
        for q in f["quotes"]:
            assert q["text"] in text  # the quoted sentence is printed beside the rule
        if f["rule"]:
            assert "Rule: " + f["rule"] in text
    table = format_findings_table(findings)
    assert table.count("\n") == len(findings) + 2
    assert "“In general, observed correlations are modest" in table


# ------------------------------------------------------------------------------------------------
# the committed numbers give the expected verdicts

def test_committed_numbers_give_the_expected_verdicts(committed):
    got = {fid: f["verdict"] for fid, f in _verdicts(committed).items()}
    assert got == EXPECTED_SST


def test_current_committed_report_is_graded_by_the_current_rules():
    """docs/reproduction/REPORT.md's verdicts are those the current rules give its numbers, and every
    verdict of the report is printed in REPORT.md."""
    with open(CURRENT_REPORT, encoding="utf-8") as f:
        report = json.load(f)
    regraded = {f["id"]: f["verdict"] for f in regrade(report)}
    assert regraded == {f["id"]: f["verdict"] for f in report["findings"]}
    with open(os.path.join(os.path.dirname(CURRENT_REPORT), "REPORT.md"), encoding="utf-8") as f:
        text = f.read()
    for finding in report["findings"]:
        assert finding["sentence"] in text


def test_jw1_compares_f1_with_table_1_f1(committed):
    """J&W Table 1's caption says its classification numbers are F1: JW-1 grades our F1 against Table 1's
    0.81 and says so; J&W's released run's F1 / accuracy are shown with their source, not graded."""
    finding = _verdicts(committed)["JW-1"]
    assert finding["published"] == 0.81 and finding["published_source"] == "J&W Table 1, paper table"
    assert "vs 0.81 (J&W Table 1, paper table)" in finding["sentence"]
    assert "0.784 and accuracy 0.81 (J&W's released SST outputs, released outputs)" in finding["sentence"]
    assert "is their run's accuracy" not in finding["sentence"]
    # the caption quoted is the one that says F1
    assert "Test metrics are F1 score" in finding["quotes"][0]["text"]


def test_a_number_check_that_could_not_fail_is_not_graded(committed):
    """WP-3: a guide whose tolerance is wider than ±0.1 F1 cannot pass (a pass is not graded: it would pass
    almost any F1); a miss beyond even that tolerance stands (the committed ADVERSARY guide: 0.749 vs
    0.592 ± 0.121); with a narrow spread the check is graded either way. The verdict counts graded
    checks only and says how many were graded."""
    from hf_attn.reporting.findings import MAX_F1_TOLERANCE

    wp3 = _verdicts(committed)["WP-3"]
    adversary = next(c for c in wp3["checks"] if c["name"] == "adversary")
    # the UNIFORM / TRAINED / BASE matches (±0.049) are wider than half the gaps between W&P's guides and
    # the BASE − UNIFORM ordering is within its tolerance: the ADVERSARY miss is the one graded check
    assert adversary["holds"] is False and wp3["verdict"] == "not reproduced" and wp3["graded"] == [1, 5]
    wide_pass = copy.deepcopy(committed)
    _sst(wide_pass)["wp"]["diagnostic_mlp"]["guides"]["adversary"]["test_f1"] = 0.60
    wp3 = _verdicts(wide_pass)["WP-3"]
    adversary = next(c for c in wp3["checks"] if c["name"] == "adversary")
    assert adversary["holds"] is None and "too wide for a pass to decide" in adversary["detail"]
    # nothing graded: "undecided", and the sentence says so
    assert wp3["verdict"] == "undecided" and wp3["graded"] == [0, 5]
    assert "(0 of 5 checks graded) — undecided." in wp3["sentence"]
    narrow = copy.deepcopy(committed)
    guide = _sst(narrow)["wp"]["diagnostic_mlp"]["guides"]["adversary"]
    guide["test_f1_std"] = 0.01  # tolerance 2·0.01·√(4/3) ≈ 0.023 < MAX_F1_TOLERANCE
    guide["test_f1"] = 0.592 + 5 * 0.023
    adversary = next(c for c in _verdicts(narrow)["WP-3"]["checks"] if c["name"] == "adversary")
    assert adversary["holds"] is False and 0.023 < MAX_F1_TOLERANCE


def test_regrade_cli_prints_and_writes_the_table(tmp_path, capsys):
    assert main(["--regrade", REPORT, "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| sst | TS-2d |" in out and "not reproduced" in out
    with open(tmp_path / "findings.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert {f["id"]: f["verdict"] for f in saved} == EXPECTED_SST
    written = (tmp_path / "findings.md").read_text(encoding="utf-8")
    assert written.startswith("<!-- generated by ") and written.split("\n", 1)[1] in out


# ------------------------------------------------------------------------------------------------
# counter-examples: numbers altered so that each verdict flips

def _set_class_means(block: dict, values, sig=None):
    for c, v in enumerate(values):
        block["per_class"][str(c)]["mean"] = v
        if sig is not None:
            block["per_class"][str(c)]["fraction_significant"] = sig[c]


def _jw1(r):
    _sst(r)["models"]["jw_wp_base"]["test_f1"] = 0.70


def _jw2(r):  # J&W's own Table 2 numbers
    _set_class_means(_sst(r)["jw"]["lstm"]["summary"]["tau_gradient"], [0.34, 0.36], [0.48, 0.49])


def _jw3(r):
    _set_class_means(_sst(r)["jw"]["lstm"]["summary"]["tau_loo"], [0.27, 0.32])


def _jw4(r):  # gaps exactly J&W's 0.2 (LOO) and 0.25 (gradient)
    s = _sst(r)["jw"]["lstm"]["summary"]
    tgl = s["tau_gradient_loo"]["overall"]["mean"]
    s["tau_gradient"]["overall"]["mean"] = tgl - 0.25
    s["tau_loo"]["overall"]["mean"] = tgl - 0.20


def _jw5(r):
    _set_class_means(_sst(r)["jw"]["average"]["summary"]["tau_gradient"], [0.61, 0.60])


def _jw6(r):
    d = _sst(r)["jw"]
    d["average"]["summary"]["tau_loo"]["overall"]["mean"] = d["lstm"]["summary"]["tau_loo"]["overall"]["mean"] + 0.375


def _jw7(r):  # permuting now flips the outputs (0.9), with seed batteries (±5 %) to grade against
    # (JW-7 grades nothing without a seed spread: the fixture has none)
    for row in _sst(r)["jw"]["lstm"]["summary"]["permutation"]["by_max_attention"]:
        row["median"] = 0.9
    _with_seed_batteries(r, (0, 0, 0), scale_permutation=(0.95, 1.05, 1.0))


def _jw8(r):
    for c in ("0", "1"):
        _sst(r)["jw"]["lstm"]["summary"]["adversary"]["per_class"][c]["mean"] = 0.30


def _wp1(r):  # a seed spread narrow enough to grade (±0.006 < 0.012) and a 0.10 gap: not "little"
    _sst(r)["wp"]["seed_variance"]["summary"]["f1_std"] = 0.002
    u = _sst(r)["wp"]["uniform_baseline"]
    u["uniform"]["f1"] = u["base"]["f1"] - 0.10
    u["f1_gap"] = 0.10


def _wp2(r):
    _sst(r)["wp"]["seed_variance"]["summary"]["mean_max_jsd"] = 0.55


def _wp3(r):  # the ADVERSARY guide matches W&P with a spread narrow enough to be graded
    _sst(r)["wp"]["diagnostic_mlp"]["guides"]["adversary"].update(test_f1=0.592, test_f1_std=0.02)


def _wp4(r):
    _sst(r)["wp"]["diagnostic_mlp"]["guides"]["adversary"]["test_f1"] = 0.59


def _wp5(r):  # the consistent adversary stays below the seed models' variance at every λ: none found
    for row in _sst(r)["wp"]["consistent_adversary"]["rows"]:
        row["mean_jsd"] = 0.1


def _ts1(r):
    cells = _sst(r)["ts"]["cells"]
    cells["tying-additive"]["f1_trained"]["mean"] = cells["base-additive"]["f1_trained"]["mean"]


def _ts2a(r):
    _ts1(r)


def _ts2d(r):  # a base dot attention that matters (drops well away from 0 and from each other)
    b = _sst(r)["ts"]["cells"]["base-dot"]
    b["delta_uniform"].update(mean=-1.0, std=0.3)
    b["delta_permuted"].update(mean=-1.5, std=0.3)


def _ts3(r):
    c = _sst(r)["ts"]["cells"]["residual-additive"]
    c["mi_MF"]["mean"] = 1.0


def _ts4(r):
    cells = _sst(r)["ts"]["cells"]
    for a in ("additive", "dot"):
        cells[f"tying-{a}"]["f1_trained"]["mean"] = cells[f"base-{a}"]["f1_trained"]["mean"]


def _ts5(r, seeds=(0, 1, 2)):  # adversaries with T&Š's objective, three seeds each (TVD ± 0.002 around the
    # mean): at equal JSD the MLM adversary pays more TVD at both λ
    rows = _sst(r)["ts"]["wp_consistent_adversary"]
    jitter = {0: 0.0, 1: -0.002, 2: 0.002}
    for lam, (bj, bt), (mj, mt) in ((0.01, (0.3, 0.08), (0.4, 0.12)), (0.1, (0.6, 0.10), (0.5, 0.13))):
        for seed in seeds:
            rows.append({"cell": "base-additive", "seed": seed, "lambda": lam, "divergence": "jsd", "mean_jsd": bj,
                         "mean_tvd": bt + jitter[seed], "test_f1": 0.81})
            rows.append({"cell": "mlm-additive", "seed": seed, "lambda": lam, "divergence": "jsd", "mean_jsd": mj,
                         "mean_tvd": mt + jitter[seed], "test_f1": 0.81})


def _ts2d_holds(r):  # MLM's dot attention now fragile too, and tying keeps the base's F1: every claim holds
    cells = _sst(r)["ts"]["cells"]
    cells["mlm-dot"]["delta_uniform"].update(mean=-3.0, std=0.3)
    cells["mlm-dot"]["delta_permuted"].update(mean=-5.4, std=0.3)
    cells["tying-dot"]["f1_trained"]["mean"] = cells["base-dot"]["f1_trained"]["mean"]


def _ts6(r):
    _sst(r)["ts"]["cells"]["tying-additive"]["jw_mean_eps_max_jsd"]["mean"] = 0.2


def _er(r):
    for res in _sst(r)["eraser"].values():
        res["measures"]["attention"]["comprehensiveness_aopc"] = 0.9


FLIPS = {  # id → (counter-example, the verdict it must give)
    "JW-1": (_jw1, "not reproduced"),
    "JW-2": (_jw2, "reproduced"),
    "JW-3": (_jw3, "reproduced"),
    "JW-4": (_jw4, "reproduced"),
    "JW-5": (_jw5, "reproduced"),
    "JW-6": (_jw6, "reproduced"),
    "JW-7": (_jw7, "not reproduced"),
    "JW-8": (_jw8, "not reproduced"),
    "WP-1": (_wp1, "not reproduced"),
    "WP-2": (_wp2, "not reproduced"),
    "WP-3": (_wp3, "reproduced"),
    "WP-4": (_wp4, "reproduced"),
    "WP-5": (_wp5, "not reproduced"),
    "TS-1": (_ts1, "qualitatively reproduced"),
    "TS-2a": (_ts2a, "qualitatively reproduced"),
    "TS-2d": (_ts2d_holds, "qualitatively reproduced"),  # the committed numbers are "partly reproduced" now
    "TS-3": (_ts3, "partly reproduced"),
    "TS-4": (_ts4, "qualitatively reproduced"),
    "TS-5": (_ts5, "reproduced"),
    "TS-6": (_ts6, "extension"),  # T&Š ran no per-instance adversary: shown, whatever the numbers
    "ER-base-additive": (_er, "extension"),
    "ER-tying-additive": (_er, "extension"),
    "ER-mlm-additive": (_er, "extension"),
}


def test_every_finding_has_a_counter_example():
    assert set(FLIPS) == set(EXPECTED_SST)


@pytest.mark.parametrize("fid", sorted(FLIPS))
def test_counter_example_flips_the_verdict(committed, fid):
    before = _verdicts(committed)[fid]
    assert before["verdict"] == EXPECTED_SST[fid]
    altered = copy.deepcopy(committed)
    change, wanted = FLIPS[fid]
    change(altered)
    after = _verdicts(altered)[fid]
    assert after["verdict"] == wanted, after["sentence"]
    if EXPECTED_SST[fid] in ("new measurement", "extension"):
        # nothing published to grade against, or no such test in the paper: the verdict cannot flip, the
        # reported numbers do
        assert after["sentence"] != before["sentence"]
    else:
        assert after["verdict"] != before["verdict"]


def test_ts5_other_direction_and_kl_rows_are_not_graded(committed):
    altered = copy.deepcopy(committed)
    _ts5(altered)
    for row in _sst(altered)["ts"]["wp_consistent_adversary"]:
        if row.get("divergence") == "jsd" and row["cell"] == "mlm-additive":
            row["mean_tvd"] = 0.05  # MLM now pays less TVD than base at the same JSD
    f = _verdicts(altered)["TS-5"]
    assert f["verdict"] == "not reproduced"
    assert "0.001" not in f["sentence"]  # the committed KL rows (λ = 0.001, 0.01) are not among the checks
    assert "base's TVD 0.0867 at that JSD" in f["sentence"]  # interpolated between (0.3, 0.08) and (0.6, 0.10)
    # tying rows are shown but not graded (T&Š's figure shows only MLM)
    _sst(altered)["ts"]["wp_consistent_adversary"].append(
        {"cell": "tying-additive", "seed": 0, "lambda": 0.01, "divergence": "jsd", "mean_jsd": 0.1,
         "mean_tvd": 0.5, "test_f1": 0.7})
    f = _verdicts(altered)["TS-5"]
    assert f["verdict"] == "not reproduced" and "Not graded (not in T&Š's figure): tying-additive" in f["sentence"]
    # an MLM point outside the base's JSD range is not graded
    for row in _sst(altered)["ts"]["wp_consistent_adversary"]:
        if row.get("divergence") == "jsd" and row["cell"] == "mlm-additive":
            row["mean_jsd"] = 0.69
    assert _verdicts(altered)["TS-5"]["verdict"] == "undecided"  # measured, but nothing graded


def test_ts2d_names_the_likely_cause(committed):
    # the report holds no attention entropy of the T&Š grid: "≈ uniform" (T&Š App. C) is not measured, so
    # the precondition is shown ungraded and no cause is asserted (the F1 insensitivity is what is measured)
    f = _verdicts(committed)["TS-2d"]
    assert "App. C" in f["sentence"] and "not measured" in f["sentence"] and "Likely cause" not in f["sentence"]
    assert f["checks"][0]["kind"] == "gate" and f["checks"][0]["holds"] is None


def test_wp5_is_graded_against_wp_s_sentence(committed):
    """WP-5 grades W&P §6's conclusion "adversarial distributions can be found" (§3.3 only announces §4):
    the committed consistent adversaries surpass the seed models' max JSD at no cost in F1 or TVD, so
    the claim is reproduced (the old rule read §3.3's forward reference as the claim: not reproduced)."""
    f = _verdicts(committed)["WP-5"]
    assert f["verdict"] == "reproduced" and f["checks"][0]["kind"] == "claim"
    assert "adversarial distributions can be found" in f["quotes"][0]["text"] and f["quotes"][0]["source"] == "W&P §6"
    assert "0.40–0.67" in f["sentence"] and "0.205" in f["sentence"] and "as W&P §6 conclude" in f["sentence"]
    # an adversary that only surpasses by wrecking the predictions finds no alternative attention
    altered = copy.deepcopy(committed)
    for row in _sst(altered)["wp"]["consistent_adversary"]["rows"]:
        row["f1"] = 0.5
    assert _verdicts(altered)["WP-5"]["verdict"] == "undecided"  # neither below the seeds nor free: not decided


def test_jw_tolerances_use_the_seed_batteries_when_present(committed):
    # with J&W batteries on seed models the τ tolerance is the seed spread, not the instance sampling error
    altered = copy.deepcopy(committed)
    base = _sst(altered)["jw"]["lstm"]["summary"]
    seeds = []
    for i, shift in enumerate((-0.04, 0.03, 0.05)):
        s = copy.deepcopy({k: base[k] for k in ("tau_gradient", "tau_loo", "tau_gradient_loo", "permutation",
                                                 "adversary")})
        for c in ("0", "1"):
            s["tau_gradient"]["per_class"][c]["mean"] += shift
        seeds.append({"seed": i + 1, "summary": s})
    _sst(altered)["jw"]["seeds"] = seeds
    f = _verdicts(altered)["JW-2"]
    assert "σ_seed" in f["tolerance"] and "seed models" in f["tolerance"]
    before = _verdicts(committed)["JW-2"]
    assert "no seed spread" in before["tolerance"]


# ------------------------------------------------------------------------------------------------
# the verdict rule itself

@pytest.mark.parametrize("checks, wanted", [
    ([Check("a", "claim", True, ""), Check("n", "number", True, "")], "reproduced"),
    ([Check("a", "claim", True, ""), Check("n", "number", False, "")], "qualitatively reproduced"),
    # a check that could not be graded neither helps nor hurts: the verdict is that of the graded ones
    ([Check("a", "claim", True, ""), Check("n", "number", None, "")], "reproduced"),
    ([Check("n", "number", True, ""), Check("m", "number", None, "")], "reproduced"),
    ([Check("a", "claim", None, ""), Check("n", "number", False, "")], "not reproduced"),
    ([Check("a", "claim", None, ""), Check("b", "claim", True, ""), Check("n", "number", False, "")],
     "qualitatively reproduced"),
    ([Check("g", "gate", None, ""), Check("a", "claim", True, "")], "reproduced"),
    ([Check("a", "claim", True, ""), Check("b", "claim", False, "")], "partly reproduced"),
    ([Check("a", "claim", False, ""), Check("n", "number", True, "")], "not reproduced"),
    ([Check("g", "gate", False, ""), Check("a", "claim", True, "")], "not reproduced"),
    ([Check("n", "number", True, ""), Check("m", "number", False, "")], "partly reproduced"),
    ([Check("n", "number", False, "")], "not reproduced"),
    ([Check("a", "claim", None, "")], "not measured"),
])
def test_verdict_of(checks, wanted):
    assert verdict_of(checks) == wanted


# ------------------------------------------------------------------------------------------------
# sources, recorded causes, near-threshold decisions, checks that can fail

def test_every_published_number_carries_its_source(committed):
    """Every finding with a published value names its source(s) — paper table, paper text, released
    outputs or a released figure read off — and prints each beside its number in the sentence; a
    finding without one cannot be built."""
    from hf_attn.reporting.findings import _finding
    from hf_attn.reporting.published import SOURCE_KINDS

    for f in regrade(committed):
        if f["published"] is None:
            continue
        assert f["published_source"], f["id"]
        for label in f["published_source"].split("; "):
            label = label.replace(" (shown, not graded)", "")
            assert label.rsplit(", ", 1)[1] in SOURCE_KINDS if ", released" not in label else True
            assert f"({label})" in f["sentence"], (f["id"], label)
    got = _verdicts(committed)
    assert "(J&W's released SST Fig. 3, released figure, read off)" in got["JW-7"]["sentence"]
    assert "(J&W's released SST Fig. 4, released figure, read off)" in got["JW-8"]["sentence"]
    assert "(J&W's released SST outputs, released outputs)" in got["JW-4"]["sentence"]
    assert "(J&W §4.1, paper text)" in got["JW-4"]["sentence"]
    with pytest.raises(AssertionError):
        _finding("JW-1", "J&W Table 1", "x", "reproduced", "x — reproduced.", published=0.81)


def test_report_header_says_where_published_numbers_come_from():
    with open(os.path.join(ROOT, "hf_attn", "reporting", "report.py"), encoding="utf-8") as f:
        code = f.read()
    assert "Every published number is from the " not in code
    with open(os.path.join(os.path.dirname(CURRENT_REPORT), "REPORT.md"), encoding="utf-8") as f:
        head = f.read().split("## Summary")[0]
    assert "Every published number is from the papers' tables" not in head
    assert "released outputs" in head and "its source beside it" in head


def test_jw2_cause_is_read_from_the_preprocessing_record(committed, tmp_path, monkeypatch):
    """A cause is printed only from the committed preprocessing record, quoting its numbers; without the
    record (or with other numbers in it) the sentence follows; no unrecorded cause is printed."""
    from hf_attn.reporting.findings import jw as F

    f = _verdicts(committed)["JW-2"]
    assert f["verdict"] == "not reproduced"
    assert "docs/reproduction/jw_preprocessing/summary.json" in f["sentence"]
    assert "64 % of the distance" in f["sentence"] and "0.41 instead of 0.51" in f["sentence"]
    assert "random 300-d" not in f["sentence"] and "Likely cause" not in f["sentence"]
    with open(os.path.join(ROOT, F.PREPROCESSING_RECORD), encoding="utf-8") as fh:
        record = json.load(fh)
    record["comparison"]["tau_gradient"].update(jw=0.45, gap_closed=0.38)
    (tmp_path / "record.json").write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.setattr(F, "PREPROCESSING_RECORD", str(tmp_path / "record.json"))
    f = _verdicts(committed)["JW-2"]
    assert "0.45 instead of 0.51" in f["sentence"] and "38 % of the distance" in f["sentence"]
    monkeypatch.setattr(F, "PREPROCESSING_RECORD", str(tmp_path / "absent.json"))
    f = _verdicts(committed)["JW-2"]
    assert "cause" not in f["sentence"] and f["verdict"] == "not reproduced"


def test_jw3_applies_jw2_significance_rule(committed):
    """JW-3 grades the significant fraction like JW-2 (J&W's Average τ_loo fractions come from their
    released SST outputs — Table 2 has none — and the sentence says so); for a dataset without them the
    check is not graded and says why."""
    f = _verdicts(committed)["JW-3"]
    sig = [c for c in f["checks"] if c["name"].startswith("weak significance")]
    assert len(sig) == 2 and all("released outputs" in c["detail"] for c in sig)
    near_average = copy.deepcopy(committed)
    _set_class_means(_sst(near_average)["jw"]["lstm"]["summary"]["tau_loo"], [0.27, 0.32], [0.86, 0.88])
    f = _verdicts(near_average)["JW-3"]
    assert [c["holds"] for c in f["checks"] if c["name"].startswith("weak")] == [False, False]
    assert f["verdict"] == "partly reproduced"
    near_bilstm = copy.deepcopy(committed)
    _set_class_means(_sst(near_bilstm)["jw"]["lstm"]["summary"]["tau_loo"], [0.27, 0.32], [0.33, 0.40])
    assert _verdicts(near_bilstm)["JW-3"]["verdict"] == "reproduced"
    other = copy.deepcopy(committed)
    other["results"]["agnews"] = other["results"].pop("sst")
    other["results"]["agnews"]["dataset"] = "agnews"
    other["datasets"] = ["agnews"]
    f = {x["id"]: x for x in regrade(other)}["JW-3"]
    sig = [c for c in f["checks"] if c["name"].startswith("weak significance")]
    assert all(c["holds"] is None and "J&W give no significant fraction" in c["detail"] for c in sig)


def test_a_claim_within_its_tolerance_of_the_threshold_is_not_decided(committed):
    """"modest" = τ below the midpoint between J&W's BiLSTM and Average: 0.0003 below it is not a pass."""
    from hf_attn.reporting.findings import _side

    assert _side(0.4597, 0.46, 0.094, below=True) is None
    assert _side(0.30, 0.46, 0.094, below=True) is True
    assert _side(0.60, 0.46, 0.094, below=True) is False
    altered = copy.deepcopy(committed)
    mid = (0.27 + 0.27 + 0.375) / 2
    _set_class_means(_sst(altered)["jw"]["lstm"]["summary"]["tau_loo"], [mid - 0.0003, 0.32])
    modest = next(c for c in _verdicts(altered)["JW-3"]["checks"] if c["name"] == "modest class 0")
    assert modest["holds"] is None and "(not graded)" in _verdicts(altered)["JW-3"]["sentence"]
    _set_class_means(_sst(altered)["jw"]["lstm"]["summary"]["tau_loo"], [mid + 0.2, 0.32])
    modest = next(c for c in _verdicts(altered)["JW-3"]["checks"] if c["name"] == "modest class 0")
    assert modest["holds"] is False


def test_ts5_needs_a_seed_spread(committed):
    """One adversary per (model, λ) gives no tolerance: TS-5 is not graded and says why; with three
    seeds the same means are graded."""
    single = copy.deepcopy(committed)
    _ts5(single, seeds=(0,))
    f = _verdicts(single)["TS-5"]
    assert f["verdict"] == "undecided" and "no seed spread" in f["sentence"]
    assert all(c["holds"] is None for c in f["checks"])
    seeded = copy.deepcopy(committed)
    _ts5(seeded)
    f = _verdicts(seeded)["TS-5"]
    assert f["verdict"] == "reproduced" and "mean of 3 seeds" in f["sentence"]


def _with_seed_batteries(report, shifts, scale_permutation=None):
    """J&W batteries on seed models: the base summary with τ_g per class shifted by ``shifts`` (a seed
    spread of τ) and, with ``scale_permutation``, every permutation median scaled per seed."""
    base = _sst(report)["jw"]["lstm"]["summary"]
    seeds = []
    for i, shift in enumerate(shifts):
        s = copy.deepcopy({k: base[k] for k in ("tau_gradient", "tau_loo", "tau_gradient_loo", "permutation",
                                                 "adversary")})
        for c in ("0", "1"):
            s["tau_gradient"]["per_class"][c]["mean"] += shift
        if scale_permutation:
            for row in s["permutation"]["by_max_attention"]:
                row["median"] *= scale_permutation[i]
        seeds.append({"seed": i + 1, "summary": s})
    _sst(report)["jw"]["seeds"] = seeds


def test_jw5_number_with_a_wide_tolerance_is_not_graded_but_can_fail(committed):
    """JW-5: a tolerance wider than half J&W's contrast Average − BiLSTM (0.27 / 0.24) cannot pass a
    Table 2 number (it would accept the BiLSTM's value); a value far off still fails."""
    wide = copy.deepcopy(committed)
    _with_seed_batteries(wide, (-0.1, 0.1, -0.08, 0.08))  # σ ≈ 0.08: ±0.23
    _set_class_means(_sst(wide)["jw"]["average"]["summary"]["tau_gradient"], [0.61, 0.60])
    numbers = [c for c in _verdicts(wide)["JW-5"]["checks"] if c["kind"] == "number"]
    assert all(c["holds"] is None and "too wide for a pass" in c["detail"] for c in numbers)
    _set_class_means(_sst(wide)["jw"]["average"]["summary"]["tau_gradient"], [0.95, 0.95])
    numbers = [c for c in _verdicts(wide)["JW-5"]["checks"] if c["kind"] == "number"]
    assert all(c["holds"] is False for c in numbers)
    narrow = copy.deepcopy(committed)  # no seed batteries: instance sampling error, ±0.02
    _set_class_means(_sst(narrow)["jw"]["average"]["summary"]["tau_gradient"], [0.70, 0.70])
    numbers = [c for c in _verdicts(narrow)["JW-5"]["checks"] if c["kind"] == "number"]
    assert all(c["holds"] is False for c in numbers)


def test_jw7_bin_with_a_wide_tolerance_is_not_graded_but_can_fail(committed):
    """JW-7: a tolerance wider than half J&W's bin value cannot pass the comparison with J&W's figure
    (±0.090 on 0.107 accepts twice J&W's value); medians far above J&W's still fail it."""
    wide = copy.deepcopy(committed)
    _with_seed_batteries(wide, (0, 0, 0, 0), scale_permutation=(0.2, 2.0, 0.3, 1.8))
    f = _verdicts(wide)["JW-7"]
    numbers = [c for c in f["checks"] if c["kind"] == "number"]
    assert numbers and all(c["holds"] is None and "half J&W's value" in c["detail"] for c in numbers)
    # the claim itself ("little": below half the change J&W call large, ~0.39) is decided even with this
    # spread, the medians (≤ 0.08) being far below it: it is graded and holds
    assert f["verdict"] == "reproduced"
    for row in _sst(wide)["jw"]["lstm"]["summary"]["permutation"]["by_max_attention"]:
        row["median"] = 0.9  # permuting now flips the output: far beyond even the wide tolerance
    f = _verdicts(wide)["JW-7"]
    assert any(c["holds"] is False for c in f["checks"]) and f["verdict"] == "not reproduced"


def test_wp1_can_hold_and_fail_only_with_a_narrow_tolerance(committed):
    # the cap is now ±0.1 (half W&P's SST large drop 0.232, within the F1 cap), not Table 3's 0.012 gap
    f = _verdicts(committed)["WP-1"]
    assert f["checks"][0]["holds"] is True and "0.232 (W&P Table 3, paper table)" in f["rule"]
    too_wide = copy.deepcopy(committed)
    _sst(too_wide)["wp"]["seed_variance"]["summary"]["f1_std"] = 0.05  # ±0.141 > ±0.1: a pass is not graded
    assert _verdicts(too_wide)["WP-1"]["verdict"] == "undecided"
    narrow = copy.deepcopy(committed)
    _sst(narrow)["wp"]["seed_variance"]["summary"]["f1_std"] = 0.002
    assert _verdicts(narrow)["WP-1"]["verdict"] == "reproduced"  # gap −0.001 within ±0.006
    wide_miss = copy.deepcopy(committed)
    _wp1(wide_miss)
    _sst(wide_miss)["wp"]["seed_variance"]["summary"]["f1_std"] = 0.017
    assert _verdicts(wide_miss)["WP-1"]["verdict"] == "not reproduced"  # 0.10 beyond even ±0.049


def test_ts6_is_graded_against_ts_section_6(committed):
    # T&Š ran no per-instance adversary: the checks are shown, the verdict is "extension"
    f = _verdicts(committed)["TS-6"]
    assert f["verdict"] == "extension" and all(c["kind"] == "claim" for c in f["checks"])
    assert [c["holds"] for c in f["checks"]] == [False, False]
    assert any("more susceptible to attacks" in q["text"] for q in f["quotes"])


def test_average_model_predicting_one_class_leaves_that_class_ungraded(committed):
    """A (quick, small) Average model that predicts no test instance as class 1: JW-5 grades class 0 only."""
    from hf_attn.reporting.findings.jw import _finding_jw5

    data = copy.deepcopy(committed["results"]["sst"])
    data.setdefault("dataset", "sst")
    del data["jw"]["average"]["summary"]["tau_gradient"]["per_class"]["1"]
    found = _finding_jw5(data)
    one = [c for c in found["checks"] if c["name"] == "above BiLSTM class 1"]
    assert one[0]["holds"] is None and "predicts no test instance" in one[0]["detail"]
    assert not any(c["name"] == "Table 2 class 1" for c in found["checks"])
    assert found["graded"][0] >= 1
