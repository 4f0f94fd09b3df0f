"""What every finding is made of: :class:`Check`, the verdict rules (:func:`verdict_of`), the
tolerance policy and the checks that can fail (capped tolerances, sides of a threshold, F1
matches), a finding's record, and the number formats of the sentences."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from hf_attn.reporting.published import QUOTES, source_label

# How every tolerance of the checks is set (recorded in report.json): from the seed spread measured in
# the report itself, never a fixed number.
TOLERANCE = {"z": 2.0,
             "policy": "a difference is real when it exceeds 2 standard errors of the difference; standard errors "
                       "from the spread over seeds measured in this report (T&Š grid seeds, W&P seed models, "
                       "adversary seeds, J&W battery on the W&P seed models); a published single run is assumed to "
                       "have our seed spread, a published average of n runs our spread/√n, a published average "
                       "across corpora is treated as exact; where no seed spread exists the finding says so; a check "
                       "that could not fail is not graded: an F1 whose tolerance exceeds ±0.1, any other value whose "
                       "tolerance exceeds half the published scale it decides on; a claim within its tolerance of "
                       "a threshold is not decided; verdicts count graded checks only"}
VERDICTS = ("reproduced", "qualitatively reproduced", "partly reproduced", "not reproduced",
            "undecided", "not measured", "new measurement", "extension")
# The verdicts that grade a paper's claim against our numbers; the others say why none is given:
# "undecided" (measured, but no check could decide: every tolerance too wide, or the value within its
# tolerance of the claimed threshold), "not measured" (the numbers the claim needs were not produced),
# "new measurement" (the paper states the claim but publishes nothing to grade against) and
# "extension" (the paper ran no such test: our numbers extend it, they cannot reproduce it).
REPRODUCTION_VERDICTS = VERDICTS[:4]
UNGRADED_VERDICTS = VERDICTS[4:]
Z = 2.0  # standard errors of a difference that make it real (TOLERANCE["z"])

# A number check must be able to fail: when the seed spread makes the tolerance of an F1 wider than
# this, the check is not graded (it would pass almost any value), and says so.
MAX_F1_TOLERANCE = 0.10

# The same for other values: a tolerance wider than this share of the published scale a check decides
# on (a published value, or the published contrast the claim rests on) leaves the check not graded.
MAX_RELATIVE_TOLERANCE = 0.5


@dataclass
class Check:
    """One comparison inside a finding. ``kind``: "gate" (a precondition of the experiment: if it
    fails the claim cannot be reproduced), "claim" (what the quoted sentence says), "number" (a
    published value matched within the tolerance). ``holds`` None = not gradeable here."""

    name: str
    kind: str
    holds: bool | None
    detail: str


def verdict_of(checks: list[Check], measured: bool = False) -> str:
    """The verdict of a list of checks, from the graded ones only (``holds`` not None): a check that
    could not be graded neither helps nor hurts, and the finding says how many were graded.

    * any graded gate fails → "not reproduced";
    * no claim or number graded → "undecided" when the numbers were ``measured`` (every tolerance too
      wide, or every value within its tolerance of the threshold), else "not measured";
    * every graded claim and number holds → "reproduced";
    * every graded claim holds (at least one) but a graded published number is missed → "qualitatively
      reproduced";
    * some graded claims (or, with no graded claim, some graded numbers) hold → "partly reproduced";
    * none holds → "not reproduced".
    """
    graded = [c for c in checks if c.holds is not None]
    if any(c.kind == "gate" and not c.holds for c in graded):
        return "not reproduced"
    claims = [c for c in graded if c.kind == "claim"]
    numbers = [c for c in graded if c.kind == "number"]
    if not claims + numbers:
        return "undecided" if measured else "not measured"
    if all(c.holds for c in claims + numbers):
        return "reproduced"
    if claims and all(c.holds for c in claims):
        return "qualitatively reproduced"
    if any(c.holds for c in (claims or numbers)):
        return "partly reproduced"
    return "not reproduced"


def has_numbers(measured) -> bool:
    """Does a finding's ``measured`` record hold at least one number (a finite value anywhere in it)?"""
    if isinstance(measured, dict):
        return any(has_numbers(v) for v in measured.values())
    if isinstance(measured, (list, tuple)):
        return any(has_numbers(v) for v in measured)
    if isinstance(measured, bool) or measured is None:
        return False
    if isinstance(measured, (int, float, np.integer, np.floating)):
        return math.isfinite(float(measured))
    return False


def graded_count(checks: list[Check]) -> list[int]:
    """[checks graded, all checks] of a finding (claims, numbers and gates)."""
    return [sum(c.holds is not None for c in checks), len(checks)]


def _finding(fid, paper, claim, verdict, sentence, published=None, measured=None, rule=None,
             tolerance=None, checks=None, published_source=None) -> dict:
    """One finding's record; ``published_source`` names where ``published`` comes from (each source
    label is also printed beside its number in the sentence)."""
    assert verdict in VERDICTS, verdict
    assert published is None or published_source, f"{fid}: a published value needs its source"
    quotes = QUOTES.get(fid.split(":")[0], [])
    return {"id": fid, "paper": paper, "claim": claim, "verdict": verdict, "sentence": sentence,
            "quotes": [{"source": s, "text": t} for s, t in quotes], "rule": rule, "tolerance": tolerance,
            "checks": [asdict(c) for c in checks or []], "graded": graded_count(checks or []),
            "published": published, "published_source": published_source, "measured": measured}


def _graded(fid, paper, claim, checks, rule, tolerance, published=None, measured=None, lead="",
            cause="", published_source=None) -> dict:
    """A finding whose verdict follows from its graded checks; the sentence lists every check (✓ holds,
    ✗ fails, "(not graded)"), how many were graded when some were not, and, when the claim is not (fully)
    reproduced, a ``cause`` (only one a committed record measures)."""
    verdict = verdict_of(checks, measured=has_numbers(measured))
    body = "; ".join(f"{c.detail} {'✓' if c.holds else '✗' if c.holds is not None else '(not graded)'}"
                     for c in checks)
    n, total = graded_count(checks)
    count = f" ({n} of {total} checks graded)" if n < total else ""
    tail = f". {cause}" if cause and verdict in ("not reproduced", "partly reproduced") else ""
    return _finding(fid, paper, claim, verdict, f"{lead}{body}{count}{tail} — {verdict}.", published, measured,
                    rule, tolerance, checks, published_source)


def _ungraded(fid, paper, claim, verdict, checks, why, rule, tolerance, published=None, measured=None, lead="",
              published_source=None) -> dict:
    """A finding the paper gives nothing to reproduce with — ``verdict`` "extension" (the paper ran no
    such test) or "new measurement" (the paper makes no claim for these numbers) — whose checks are
    still shown (✓ / ✗ / "(not graded)") and do not make a reproduction verdict; ``why`` says which."""
    assert verdict in UNGRADED_VERDICTS, verdict
    body = "; ".join(f"{c.detail} {'✓' if c.holds else '✗' if c.holds is not None else '(not graded)'}"
                     for c in checks)
    body = f"{body}. " if body else ""
    return _finding(fid, paper, claim, verdict, f"{lead}{body}{why} — {verdict}.", published, measured, rule,
                    tolerance, checks, published_source)


def _src(key: str) -> str:
    """A published number's source, as printed beside it: "(J&W Table 2, paper table)"."""
    return f"({source_label(key)})"


def _sources(*keys: str) -> str:
    """``published_source`` of a finding: its sources' labels."""
    return "; ".join(source_label(k) for k in keys)


def _capped(name: str, kind: str, holds, detail: str, tol: float | None, cap: float, scale_name: str) -> Check:
    """A check that can fail: a pass counts only when the tolerance is at most ``cap`` (the widest that
    still decides it, e.g. half the published scale ``scale_name``); a pass on a wider tolerance is not
    graded, with the reason (it would pass values far off). A failure beyond even the wide tolerance
    stands."""
    if tol is None or holds is None:
        return Check(name, kind, None, f"{detail}: no tolerance (no seed spread)" if tol is None else detail)
    if tol > cap and holds:
        digits = 3 if cap >= 0.01 else 4
        return Check(name, kind, None, f"{detail}: tolerance ±{tol:.{digits}f} wider than ±{cap:.{digits}f} "
                                       f"({scale_name}), too wide for a pass to decide")
    return Check(name, kind, holds, detail)


def _side(value, threshold, tol, below: bool) -> bool | None:
    """Is ``value`` on the claimed side of ``threshold`` (below it when ``below``)? True / False beyond
    the tolerance, None (not decided) within it."""
    if value is None or tol is None:
        return None
    if abs(value - threshold) <= tol:
        return None
    return (value < threshold) == below


def _within(measured, published, tol) -> bool:
    return measured is not None and published is not None and abs(measured - published) <= tol


def _f1_check(name: str, measured: float, published: float, tol: float | None, detail: str) -> "Check":
    """A number check on an F1 that can fail: a match counts only when the tolerance is narrower than
    :data:`MAX_F1_TOLERANCE` (otherwise the seed spread is too large for the number to decide); a miss
    beyond even a wider tolerance stands."""
    if tol is None:
        return Check(name, "number", None, detail)
    within = _within(measured, published, tol)
    if tol > MAX_F1_TOLERANCE and within:
        return Check(name, "number", None, f"{detail}: tolerance wider than ±{MAX_F1_TOLERANCE:g}, the seed "
                                           "spread is too large for this number to decide")
    return Check(name, "number", within, detail)


def _se(*terms) -> float:
    """Standard error of a difference: √Σ σ²/n over ``(σ, n)`` terms."""
    return math.sqrt(sum((s or 0.0) ** 2 / max(n, 1) for s, n in terms))


def _f(x, digits=3):
    """``x`` with ``digits`` decimals, "–" when missing (the number format of sentences and tables)."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _std(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.std(values, ddof=1)) if len(values) >= 2 else None


def _seed_difference_tolerance(values) -> float | None:
    """Z·√2·σ of ``values`` over seeds (a difference of two single runs, each with that spread); None
    without two values."""
    sigma = _std(values)
    return None if sigma is None else Z * _se((sigma, 1), (sigma, 1))


def _wp_f1_spread(wp: dict | None) -> tuple[float | None, int]:
    """Std over the W&P seed models of the BiLSTM's test F1 (the seed spread of one model's F1)."""
    if not wp:
        return None, 0
    s = wp["seed_variance"]["summary"]
    return s.get("f1_std"), len(wp["seed_variance"]["seeds"])
