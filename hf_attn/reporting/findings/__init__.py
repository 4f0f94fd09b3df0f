"""Findings: each is a claim of a paper, checked against the measured numbers of one dataset.

A finding is a small table of checks (:class:`Check`): (id, paper, the quoted sentence(s) of the paper,
the rule derived from them, the tolerance from the seed spread measured in this report, the measured
and published values, the verdict, :func:`verdict_of`). Every quote is verbatim from the paper texts in
shared/papers beside the checkout (published.QUOTES; tests/test_verdicts.py checks it). Where a paper
states nothing to grade against, the verdict is "new measurement"; where it ran no such test (ERASER,
J&W's per-instance adversary on the T&Š models, a corpus W&P did not run), "extension": the checks are
shown, they extend the paper and cannot reproduce it.

Tolerances: a difference is real when it exceeds Z = 2 standard errors of the difference, the
standard errors computed from the spread over seeds measured in this very report (std over the
T&Š grid's seeds, over the W&P seed models, over the adversary seeds). A published single run is
assumed to have our seed spread; a published average over n runs (T&Š Table 1: five) our spread / √n;
a published average across corpora (J&W "on average") is treated as exact. Where the report holds
no seed spread for a quantity this is said in the tolerance and the fallback named.

Published numbers: every published number printed in a verdict carries its source beside it
(``published.SOURCES``: a paper table, the paper's text, J&W's released outputs, or a value read off a
figure J&W released), and each finding records them in ``published_source``.

Checks that can fail: a check against a published value or a threshold is graded only when its
tolerance is narrow enough to decide it — an F1 within ±:data:`MAX_F1_TOLERANCE`; otherwise at most
:data:`MAX_RELATIVE_TOLERANCE` of the published scale the check decides on (JW-5 and every check of
JW-2 / JW-3, significance and "modest" included: the contrast J&W draw between their BiLSTM and the
value they call very high, or between their BiLSTM's and Average encoder's significant fractions;
JW-4: J&W's gap itself; JW-7: J&W's value itself; WP-1: half W&P's SST "large drop", Table 3 BASE LSTM − ADVERSARY guide, within the F1
cap; WP-3's numbers: half the gap between the guide's Table 3 F1 and the nearest other guide's). A pass on a
wider tolerance would pass values far off, so it is not graded and says why; a miss beyond even the
wide tolerance stands (it is a miss whatever the spread).

Near a threshold: a claim that places a value on one side of a threshold drawn from the papers'
numbers (JW-2 / JW-3 "modest" and "weak significance", WP-5 an adversary beyond the seed models'
variance, WP-3 BASE LSTM above UNIFORM, TS-7 a smaller F1 change at the deeper BiLSTM)
holds only when the value is beyond the tolerance on the claimed side, fails beyond it on the other
side, and is not decided (``holds`` None) within it. A claim of an effect (a difference from a
reference, e.g. T&Š's regularised models vs base) holds only when the difference exceeds the
tolerance: an effect within the noise is not reproduced.

Verdicts (:func:`verdict_of`) are computed from the graded checks only; the checks that could not be
graded are listed in the sentence and counted in ``graded`` ([graded, all]), which the report prints
beside the verdict ("3 of 4 checks graded").

One function per finding (``_finding_jw1`` … ``_finding_ts7``, ``_findings_eraser``), one module per
paper (:mod:`~hf_attn.reporting.findings.jw`, :mod:`~hf_attn.reporting.findings.wp`,
:mod:`~hf_attn.reporting.findings.ts`, :mod:`~hf_attn.reporting.findings.eraser`) over the checks and
verdict rules of :mod:`~hf_attn.reporting.findings.checks`, listed in :data:`FINDINGS` in report order;
:func:`findings_for` runs them on one dataset's numbers and :func:`regrade` on a saved report.json.
"""

from __future__ import annotations

from hf_attn.reporting.findings.checks import (MAX_F1_TOLERANCE, MAX_RELATIVE_TOLERANCE,  # noqa: F401 (re-exported)
                                               TOLERANCE, VERDICTS, Z, Check, _f, _finding, graded_count, _side,
                                               verdict_of)
from hf_attn.reporting.findings.jw import (_finding_jw1, _finding_jw2, _finding_jw3, _finding_jw4, _finding_jw5,
                                           _finding_jw6, _finding_jw7, _finding_jw8)
from hf_attn.reporting.findings.jw import PREPROCESSING_RECORD  # noqa: F401 (re-exported)
from hf_attn.reporting.findings.across import ACROSS, ACROSS_FINDINGS, findings_across  # noqa: F401 (re-exported)
from hf_attn.reporting.findings.jw_snli import _finding_jws1, _finding_jws2, _finding_jws3, _finding_jws4
from hf_attn.reporting.findings.jw_variants import _finding_jw9, _finding_jw10
from hf_attn.reporting.findings.wp import _finding_wp1, _finding_wp2, _finding_wp3, _finding_wp4, _finding_wp5
from hf_attn.reporting.findings.ts import (_finding_ts1, _finding_ts2a, _finding_ts2d, _finding_ts3, _finding_ts4,
                                           _finding_ts5, _finding_ts6, _finding_ts7)
from hf_attn.reporting.findings.eraser import _findings_eraser

# Every finding builder in report order: ``builder(data)`` → a finding, None (not measurable on these
# numbers) or, for ERASER, one finding per measured cell.
FINDINGS = (
    ("JW-1", _finding_jw1), ("JW-2", _finding_jw2), ("JW-3", _finding_jw3), ("JW-4", _finding_jw4),
    ("JW-7", _finding_jw7), ("JW-8", _finding_jw8), ("JW-5", _finding_jw5), ("JW-6", _finding_jw6),
    ("JW-9", _finding_jw9), ("JW-10", _finding_jw10),
    ("JWS-1", _finding_jws1), ("JWS-2", _finding_jws2), ("JWS-3", _finding_jws3), ("JWS-4", _finding_jws4),
    ("WP-1", _finding_wp1), ("WP-2", _finding_wp2), ("WP-3", _finding_wp3), ("WP-4", _finding_wp4),
    ("WP-5", _finding_wp5),
    ("TS-1", _finding_ts1), ("TS-2a", _finding_ts2a), ("TS-2d", _finding_ts2d), ("TS-3", _finding_ts3),
    ("TS-4", _finding_ts4), ("TS-5", _finding_ts5), ("TS-6", _finding_ts6), ("TS-7", _finding_ts7),
    ("ER-<cell>", _findings_eraser),
)


def findings_for(data: dict) -> list[dict]:
    """Check every published finding against the measured numbers of one dataset."""
    out = []
    for _, build in FINDINGS:
        found = build(data)
        if isinstance(found, list):
            out += found
        elif found is not None:
            out.append(found)
    return out


def findings_of_report(per_dataset: dict) -> list[dict]:
    """Every finding of a report over ``{dataset: collected numbers}``: each corpus's (:func:`findings_for`,
    in the order given), then J&W's statements across corpora (:func:`findings_across`, with two corpora
    or more)."""
    findings = []
    for ds, data in per_dataset.items():
        for f in findings_for(data):
            f["dataset"] = ds
            findings.append(f)
    return findings + findings_across(per_dataset)


def regrade(report: dict) -> list[dict]:
    """Re-grade a saved ``report.json`` (dict) without its run folders: the findings of every
    dataset computed afresh by :func:`findings_for` from the numbers the report holds, and those
    across corpora."""
    per_dataset = {}
    for ds in report["datasets"]:
        data = dict(report["results"][ds])
        data.pop("findings", None)
        data.setdefault("dataset", ds)
        per_dataset[ds] = data
    return findings_of_report(per_dataset)
