"""J&W's statements about corpora taken together (§4.1, appendix C), graded on every corpus of a report
that ran the J&W battery: they need at least two.

* JWX-1: "The centrality of observed densities hovers around or below 0.5 in most of the corpora
  considered": the BiLSTM's median τ(attention, gradient) and τ(attention, LOO) at most 0.5 (within
  the tolerance) on more than half of the corpora.
* JWX-2: a significant correlation "cannot consistently be established across corpora": on at least one
  corpus, a class whose share of significant τ(attention, gradient) or τ(attention, LOO) is below
  :data:`ESTABLISHED` beyond the tolerance. Per corpus, the number: whether significance is established
  there agrees with J&W's NAACL Table 2 for that corpus (established = every class's share at least
  :data:`ESTABLISHED`; IMDB yes, SST and AG News no — the same in arXiv v3's Table 2).
* JWX-3: "on average across corpora, correlation between LOO scores and attention weights is ∼0.375
  points higher" for the Average encoder: the mean over corpora of Average τ_loo − BiLSTM τ_loo
  positive beyond the tolerance, and ~0.375 within it.
* JWX-4: gradient and LOO "exhibit, on average, a (i) 0.2 and (ii) ∼0.25 greater correlation with each
  other" than BiLSTM attention with LOO and gradients: the mean gaps over corpora.

Tolerances: per corpus 2·σ_seed (the spread over the BiLSTM's seed models in that corpus's J&W
batteries); a mean over k corpora 2·√(Σ σ_i²)/k (·√2 for a difference of two models, each with the
BiLSTM's spread). A corpus without seed batteries contributes the sampling error over its test
instances and the tolerance says so.
"""

from __future__ import annotations

import math

from hf_attn.core.published import JW_AVERAGE_LOO_GAIN, JW_GRADIENT_LOO_GAP, JW_PUBLISHED
from hf_attn.reporting.findings.checks import Check, Z, _graded, _sources, _src, _std
from hf_attn.reporting.findings.jw import _jw_seed_values

# a share of significant correlations this high counts as "established" on a corpus (J&W Table 2: IMDB and
# the MIMIC tasks, which J&W call "consistently significant", are at 0.99–1.00)
ESTABLISHED = 0.95
CENTRALITY = 0.5  # J&W: "hovers around or below 0.5"


def _spread_or_sampling(data: dict, key: str, fn) -> tuple[float, bool]:
    """(σ of ``fn`` over seeds, True) or, without seed batteries, (std / √n of the BiLSTM's ``key``, False)."""
    sigma = _std(_jw_seed_values(data, fn))
    if sigma is not None:
        return sigma, True
    o = data["jw"]["lstm"]["summary"][key]["overall"]
    return o["std"] / math.sqrt(max(o["count"], 1)), False


def _corpora(per_dataset: dict) -> dict:
    return {ds: d for ds, d in per_dataset.items() if (d.get("jw") or {}).get("lstm")}


def _basis(seeded: list[bool]) -> str:
    if all(seeded):
        return "from every corpus's seed spread"
    return (f"{sum(not s for s in seeded)} of {len(seeded)} corpora without seed batteries: their sampling "
            "error over test instances, an underestimate")


def _finding_jwx1(corpora: dict) -> dict:
    checks, held, seeded = [], 0, []
    for ds, d in corpora.items():
        s = d["jw"]["lstm"]["summary"]
        parts = []
        ok = True
        for key, name in (("tau_gradient", "τ_g"), ("tau_loo", "τ_loo")):
            sigma, has = _spread_or_sampling(d, key, lambda x, key=key: x[key]["overall"]["median"])
            seeded.append(has)
            median, tol = s[key]["overall"]["median"], Z * sigma
            ok = ok and median <= CENTRALITY + tol
            parts.append(f"{name} median {median:.2f} ≤ {CENTRALITY} + {tol:.3f}")
        held += ok
        checks.append(Check(ds, "number", ok, f"{ds}: {', '.join(parts)}"))
    claim = Check("most corpora", "claim", held > len(corpora) / 2,
                  f"{held} of {len(corpora)} corpora at or below 0.5 (more than half needed)")
    return _graded("JWX-1", "J&W §4.1", "correlations hover around or below 0.5 in most corpora", [claim, *checks],
                   "each corpus: the BiLSTM's overall median τ_g and τ_loo ≤ 0.5 + tolerance; the claim holds on "
                   "more than half of the corpora", f"{Z:g}·σ of the median over seeds ({_basis(seeded)})",
                   CENTRALITY, {c.name: c.holds for c in checks}, published_source=_sources("jw_text"))


def _jw_established(ds: str) -> list[str] | None:
    """J&W's NAACL Table 2 shares below :data:`ESTABLISHED` on corpus ``ds`` ([] = significance established on
    every class), None for a corpus J&W's Table 2 does not have."""
    pub = JW_PUBLISHED.get(ds)
    if pub is None:
        return None
    return [f"{name} class {c} {p:.2f}" for key, name in (("tau_gradient", "τ_g"), ("tau_loo", "τ_loo"))
            for c, p in enumerate(pub[f"{key}_sig"]) if p < ESTABLISHED]


def _low_shares(d: dict) -> tuple[list[str], list[bool]]:
    """The classes of one corpus whose share of significant τ_g or τ_loo is below :data:`ESTABLISHED`
    beyond its tolerance (as printed), and per share whether its tolerance came from seed batteries."""
    s = d["jw"]["lstm"]["summary"]
    low, seeded = [], []
    for key, name in (("tau_gradient", "τ_g"), ("tau_loo", "τ_loo")):
        for c, blk in sorted(s[key]["per_class"].items(), key=lambda kv: int(kv[0])):
            sigma = _std(_jw_seed_values(d, lambda x, key=key, c=c: x[key]["per_class"][c]["fraction_significant"]))
            seeded.append(sigma is not None)
            p, n = blk["fraction_significant"], max(blk["count"], 1)
            tol = Z * (sigma if sigma is not None else math.sqrt(max(p * (1 - p), 1 / n) / n))
            if p < ESTABLISHED - tol:
                low.append(f"{name} class {c} {p:.2f} < {ESTABLISHED} − {tol:.3f}")
    return low, seeded


def _finding_jwx2(corpora: dict) -> dict:
    checks, seeded, not_consistent = [], [], 0
    for ds, d in corpora.items():
        low, has = _low_shares(d)
        seeded += has
        not_consistent += bool(low)
        ours = ("not established: " + "; ".join(low) if low else "established: every class significant in ≥ "
                f"{ESTABLISHED} − tolerance of its instances")
        jw_low = _jw_established(ds)
        if jw_low is None:
            checks.append(Check(ds, "number", None, f"{ds}: {ours}; J&W's Table 2 has no {ds} row to agree with"))
            continue
        theirs = ("not established (" + ", ".join(jw_low) + ")" if jw_low else
                  f"established (every class ≥ {ESTABLISHED})")
        # the number is J&W's own finding on this corpus: it holds when ours agrees, whichever way it goes
        checks.append(Check(ds, "number", bool(low) == bool(jw_low),
                            f"{ds}: ours {ours}; J&W {theirs} {_src('jw_table2')}"))
    claim = Check("not consistent", "claim", not_consistent > 0,
                  f"{not_consistent} of {len(corpora)} corpora where significance is not established (at least "
                  "one needed)")
    return _graded("JWX-2", "J&W §4.1, NAACL Table 2", "a significant correlation cannot consistently be established "
                   "across corpora", [claim, *checks],
                   f"the claim holds when on at least one corpus a class's share of significant τ_g or τ_loo is "
                   f"below {ESTABLISHED} beyond the tolerance (J&W's 'consistently significant' corpora are at "
                   "0.99–1.00); per corpus (number): established or not as in J&W's NAACL Table 2 for that corpus "
                   "(IMDB established, SST and AG News not; arXiv v3's Table 2 agrees)",
                   f"{Z:g}·σ of the share over seeds, without seeds the binomial sampling error ({_basis(seeded)})",
                   ESTABLISHED, {c.name: c.holds for c in checks},
                   published_source=_sources("jw_table2"))


def _mean_over_corpora(corpora: dict, value, key: str, spread, factor: float = 1.0):
    """(mean over ``corpora`` of ``value(data)``, its tolerance Z·factor·√(Σσ_i²)/k, whether each corpus
    had seed batteries, the per-corpus values): σ_i the seed spread of ``spread(summary)`` in corpus i
    (:func:`_spread_or_sampling`, ``key`` its fallback)."""
    values, sigmas, seeded = {}, [], []
    for ds, d in corpora.items():
        values[ds] = value(d)
        sigma, has = _spread_or_sampling(d, key, spread)
        sigmas.append(sigma)
        seeded.append(has)
    k = len(values)
    return sum(values.values()) / k, Z * factor * math.sqrt(sum(s * s for s in sigmas)) / k, seeded, values


def _average_gain(d: dict) -> float | None:
    jwa = d["jw"].get("average")
    if not jwa:
        return None
    return jwa["summary"]["tau_loo"]["overall"]["mean"] - d["jw"]["lstm"]["summary"]["tau_loo"]["overall"]["mean"]


def _finding_jwx3(corpora: dict) -> dict | None:
    with_average = {ds: d for ds, d in corpora.items() if _average_gain(d) is not None}
    if len(with_average) < 2:
        return None
    mean, tol, seeded, values = _mean_over_corpora(with_average, _average_gain, "tau_loo",
                                                   lambda s: s["tau_loo"]["overall"]["mean"], math.sqrt(2))
    k = len(values)
    each = ", ".join(f"{ds} {v:+.2f}" for ds, v in values.items())
    checks = [Check("higher on average", "claim", mean > tol,
                    f"mean over {k} corpora of Average τ_loo − BiLSTM τ_loo ({each}) = {mean:+.3f} > {tol:.3f}"),
              Check("~0.375", "number", abs(mean - JW_AVERAGE_LOO_GAIN) <= tol,
                    f"{mean:+.3f} vs ~{JW_AVERAGE_LOO_GAIN} {_src('jw_text')} (±{tol:.3f})")]
    return _graded("JWX-3", "J&W §4.1, Fig. 8", "on average across corpora, Average attention correlates ~0.375 "
                   "higher with LOO than BiLSTM attention", checks,
                   "the mean over corpora of the difference positive beyond tolerance; number: |mean − 0.375| ≤ "
                   "tolerance", f"{Z:g}·√2·√(Σσ_i²)/k, σ_i the BiLSTM's seed spread of τ_loo per corpus "
                   f"({_basis(seeded)})", JW_AVERAGE_LOO_GAIN, {"mean": mean, **values},
                   published_source=_sources("jw_text"))


def _finding_jwx4(corpora: dict) -> dict:
    checks, measured, seeded_all = [], {}, []
    for key, published, what in (("tau_loo", JW_GRADIENT_LOO_GAP[0], "LOO"),
                                 ("tau_gradient", JW_GRADIENT_LOO_GAP[1], "gradient")):
        gap = (lambda s, key=key: s["tau_gradient_loo"]["overall"]["mean"] - s[key]["overall"]["mean"])
        mean, tol, seeded, values = _mean_over_corpora(corpora, lambda d, gap=gap: gap(d["jw"]["lstm"]["summary"]),
                                                       key, gap)
        seeded_all += seeded
        k = len(values)
        measured[what] = mean
        each = ", ".join(f"{ds} {v:+.2f}" for ds, v in values.items())
        checks.append(Check(f"{what} gap positive", "claim", mean > tol,
                            f"mean over {k} corpora of τ(g, LOO) − τ(α, {what}) ({each}) = {mean:+.3f} > {tol:.3f}"))
        checks.append(Check(f"{what} gap size", "number", abs(mean - published) <= tol,
                            f"{what} gap {mean:+.3f} vs J&W's {published:.2f} {_src('jw_text')} (±{tol:.3f})"))
    return _graded("JWX-4", "J&W §4.1, appendix C", "on average across corpora, gradient and LOO agree with each "
                   "other 0.2 (LOO) / ~0.25 (gradient) more than BiLSTM attention with them", checks,
                   "each mean gap over corpora positive beyond tolerance; numbers: |mean gap − J&W's| ≤ tolerance",
                   f"{Z:g}·√(Σσ_i²)/k, σ_i the seed spread of the gap per corpus ({_basis(seeded_all)})",
                   list(JW_GRADIENT_LOO_GAP), measured, published_source=_sources("jw_text"))


ACROSS = "across corpora"  # the ``dataset`` of these findings
ACROSS_FINDINGS = ("JWX-1", "JWX-2", "JWX-3", "JWX-4")  # their ids, in report order


def findings_across(per_dataset: dict) -> list[dict]:
    """J&W's across-corpora findings over ``{dataset: collected numbers}``; [] with fewer than two
    corpora holding a J&W battery (quick smoke tests included: their numbers are graded as any other)."""
    corpora = _corpora(per_dataset)
    if len(corpora) < 2:
        return []
    out = [_finding_jwx1(corpora), _finding_jwx2(corpora), _finding_jwx3(corpora), _finding_jwx4(corpora)]
    out = [f for f in out if f is not None]
    for f in out:
        f["dataset"] = ACROSS
        f["corpora"] = list(corpora)
    return out
