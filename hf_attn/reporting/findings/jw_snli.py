"""J&W's SNLI rows (premise attention given the hypothesis; classes neutral / contradiction /
entailment), graded as the SST rows are, with the spread over the SNLI seed models
(``ReproducePlan.snli_seeds``) as tolerance:

* JWS-1, Table 1: the test micro-F1 (accuracy, one label per pair) against J&W's 0.78;
* JWS-2 / JWS-3, Table 2: τ(attention, gradient) and τ(attention, LOO) per predicted class are modest
  (below the midpoint between J&W's BiLSTM value and the value J&W call very high: their Average
  encoder's τ_g; the BiLSTM + 0.375 for τ_loo), and match Table 2 within the tolerance (a match is not
  graded when the tolerance exceeds half the contrast between the two J&W values);
* JWS-4, appendix C: SNLI is the "lone exception" where gradient and LOO do not agree with each other
  considerably more than LOO with attention: the gap τ(g, LOO) − τ(α, LOO) below J&W's average 0.2 by more
  than the tolerance.

Without seed models (a plan with ``snli_seeds = 1``) nothing here is graded and each finding says so.
"""

from __future__ import annotations

from hf_attn.core.published import JW_AVERAGE_LOO_GAIN, JW_GRADIENT_LOO_GAP, JW_SNLI_SUMMARY
from hf_attn.reporting.findings.checks import (MAX_RELATIVE_TOLERANCE, Check, Z, _capped, _f, _f1_check, _graded,
                                               _seed_difference_tolerance, _side, _sources, _src, _std, _within)

CLASSES = ("neutral", "contradiction", "entailment")


def _snli(data: dict) -> dict | None:
    snli = (data.get("jw") or {}).get("snli") or {}
    return snli if snli.get("results") and snli.get("model") else None


def _seed_values(snli: dict, fn) -> list:
    """``fn(summary)`` over the J&W battery on the seed-0 SNLI model and on every SNLI seed model."""
    out = []
    for s in [snli["results"]["summary"], *[x["summary"] for x in snli.get("seeds") or []]]:
        try:
            out.append(fn(s))
        except (KeyError, TypeError, IndexError):
            pass
    return out


def _seeds_text(snli: dict) -> str:
    return f"the seed-0 model and {len(snli.get('seeds') or [])} SNLI seed model(s)"


def _finding_jws1(data: dict) -> dict | None:
    snli = _snli(data)
    if snli is None:
        return None
    accuracies = [m["test_accuracy"] for m in [snli["model"], *(snli.get("seed_models") or [])] if m]
    tol = _seed_difference_tolerance(accuracies)
    ours, published = snli["model"]["test_accuracy"], JW_SNLI_SUMMARY["lstm"]["test_micro_f1"]
    checks = [_f1_check("test micro-F1", ours, published, tol,
                        f"test micro-F1 (accuracy) {ours:.3f} vs {published:.2f} {_src('jw_table1')}"
                        + (f" (±{tol:.3f})" if tol is not None else ""))]
    size = (snli["model"].get("split_sizes") or {}).get("train")
    return _graded("JWS-1", "J&W Table 1 (SNLI)", "BiLSTM + additive pair model test micro-F1", checks,
                   "|micro-F1 − Table 1's| ≤ tolerance", f"{Z:g}·√2·σ, σ = std of the test accuracy over "
                   f"{_seeds_text(snli)}" if tol is not None else "no SNLI seed models: not graded",
                   published, ours, lead=f"Trained on {size} SNLI train pairs (J&W: all 550k). ",
                   published_source=_sources("jw_table1"))


def _tau_finding(data: dict, fid: str, key: str, label: str) -> dict | None:
    snli = _snli(data)
    if snli is None:
        return None
    s = snli["results"]["summary"]
    pub = JW_SNLI_SUMMARY["lstm"][key]["mean"]
    high = (JW_SNLI_SUMMARY["average"]["tau_gradient"]["mean"] if key == "tau_gradient"
            else [v + JW_AVERAGE_LOO_GAIN for v in pub])
    high_name = "their Average encoder's" if key == "tau_gradient" else "their BiLSTM's + 0.375"
    checks, measured = [], []
    for c, name in enumerate(CLASSES):
        block = s[key]["per_class"].get(str(c))
        mean = block["mean"] if block else None
        measured.append(mean)
        tol = _seed_difference_tolerance(_seed_values(snli, lambda x, c=c: x[key]["per_class"][str(c)]["mean"]))
        if mean is None or tol is None:
            checks.append(Check(f"modest {name}", "claim", None, f"{name}: τ {_f(mean, 2)}: "
                                + ("no SNLI seed models to grade with" if mean is not None else "no instance")))
            continue
        mid = (pub[c] + high[c]) / 2
        checks.append(Check(f"modest {name}", "claim", _side(mean, mid, tol, below=True),
                            f"{name}: τ {mean:.2f} < {mid:.2f} ± {tol:.3f}, the midpoint between J&W's BiLSTM "
                            f"{pub[c]:.2f} {_src('jw_table2')} and {high_name} {high[c]:.2f}"))
        checks.append(_capped(f"Table 2 {name}", "number", _within(mean, pub[c], tol),
                              f"{name}: τ {mean:.2f} vs {pub[c]:.2f} {_src('jw_table2')} (±{tol:.3f})", tol,
                              MAX_RELATIVE_TOLERANCE * abs(high[c] - pub[c]),
                              f"half the contrast {abs(high[c] - pub[c]):.2f} between J&W's two values"))
    return _graded(fid, "J&W Table 2 (SNLI)", f"BiLSTM {label} of premise attention per predicted class is modest "
                   f"(J&W: τ ≈ {' / '.join(f'{v:.2f}' for v in pub)})", checks,
                   "modest = each class's mean τ below the midpoint between J&W's BiLSTM value and the value J&W "
                   "call very high; numbers: |τ − Table 2| ≤ tolerance, not graded when the tolerance exceeds "
                   f"{MAX_RELATIVE_TOLERANCE:g} × the contrast", f"{Z:g}·√2·σ_seed over {_seeds_text(snli)}",
                   pub, measured, published_source=_sources("jw_table2") + ("" if key == "tau_gradient"
                                                                             else "; " + _sources("jw_text")))


def _finding_jws2(data: dict) -> dict | None:
    return _tau_finding(data, "JWS-2", "tau_gradient", "τ(attention, gradient)")


def _finding_jws3(data: dict) -> dict | None:
    return _tau_finding(data, "JWS-3", "tau_loo", "τ(attention, LOO)")


def _finding_jws4(data: dict) -> dict | None:
    snli = _snli(data)
    if snli is None:
        return None
    gap = (lambda x: x["tau_gradient_loo"]["overall"]["mean"] - x["tau_loo"]["overall"]["mean"])
    values = _seed_values(snli, gap)
    sigma = _std(values)
    ours = gap(snli["results"]["summary"])
    published = JW_GRADIENT_LOO_GAP[0]
    if sigma is None:
        check = Check("exception", "claim", None, f"gap τ(g, LOO) − τ(α, LOO) {ours:+.2f}: no SNLI seed models "
                      "to grade with")
    else:
        tol = Z * sigma
        check = Check("exception", "claim", ours < published - tol,
                      f"gap τ(g, LOO) − τ(α, LOO) {ours:+.2f} < J&W's average {published:.2f} {_src('jw_text')} "
                      f"− {tol:.3f}")
    return _graded("JWS-4", "J&W appendix C (SNLI)", "SNLI is the lone corpus where gradient and LOO do not agree "
                   "with each other considerably more than LOO with attention", [check],
                   "the gap τ(g, LOO) − τ(α, LOO) below J&W's cross-corpus average 0.2 beyond the tolerance",
                   f"{Z:g}·σ of the gap over {_seeds_text(snli)}" if sigma is not None else
                   "no SNLI seed models: not graded", published, ours, published_source=_sources("jw_text"))
