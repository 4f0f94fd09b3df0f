"""J&W's other models (the ``jw_extra_models`` of a reproduction): the two sentences in which J&W say
their conclusions carry over to other encoders and to scaled dot-product attention.

* JW-9, Table 1's caption: "results using convolutional and average (i.e., non-recurrent) encoders
  are comparable for classification". Graded as: each non-recurrent encoder's test F1 (CNN + additive,
  and the J&W Average model) within the tolerance of the BiLSTM + additive's, and with dot attention
  CNN + dot and Average + dot within the tolerance of BiLSTM + dot's.
* JW-10, §4: "The results for Scaled Dot Product in its place are comparable." Graded per encoder
  (BiLSTM, CNN, Average) as: the dot model's test F1, mean τ(attention, gradient) and share of test
  instances with a feasible adversary each within the tolerance of the additive model's.

Tolerances: 2·√2·σ_seed, σ_seed the spread of the same number over the BiLSTM's seed models (the W&P
seed models: test F1; their J&W batteries: τ and the adversaries' feasible share), used for every
encoder. A report without seed models grades nothing here and says so. J&W's released SST outputs
(single runs, 300-d embeddings) are printed beside ours for information, not graded: they are not
the paper's numbers.
"""

from __future__ import annotations

from hf_attn.core.published import JW_COMMITTED_SST
from hf_attn.reporting.findings.checks import Check, Z, _f, _graded, _se, _seed_difference_tolerance, _src, _wp_f1_spread
from hf_attn.reporting.findings.jw import _jw_seed_values

ENCODER_LABELS = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average"}


def _model(data: dict, encoder: str, attention: str) -> tuple[dict | None, dict | None]:
    """(run facts, J&W results) of one encoder + attention of the report, (None, None) when missing. The
    BiLSTM + additive is the J&W BiLSTM, the Average + additive the J&W Average model."""
    if (encoder, attention) == ("lstm", "additive"):
        return data["models"].get("jw_wp_base"), data["jw"].get("lstm")
    if (encoder, attention) == ("average", "additive"):
        return data["models"].get("jw_average"), data["jw"].get("average")
    item = (data["jw"].get("extra") or {}).get(f"{encoder}-{attention}") or {}
    return item.get("model"), item.get("results")


def _comparable(name: str, label: str, a: float | None, b: float | None, tol: float | None,
                what: str) -> Check:
    """``|a − b| ≤ tol``: a "claim" check; not graded without both values or a tolerance."""
    if a is None or b is None:
        return Check(name, "claim", None, f"{label}: {what} not measured")
    if tol is None:
        return Check(name, "claim", None, f"{label}: {what} {a:.3f} vs {b:.3f}: no seed spread to grade with")
    return Check(name, "claim", abs(a - b) <= tol, f"{label}: {what} {a:.3f} vs {b:.3f}, |Δ| = {abs(a - b):.3f} "
                                                  f"≤ {tol:.3f}")


def _tau_g(results: dict | None) -> float | None:
    return results["summary"]["tau_gradient"]["overall"]["mean"] if results else None


def _feasible(results: dict | None) -> float | None:
    return results["summary"]["adversary"]["overall"]["fraction_feasible"] if results else None


def _label(name: str) -> str:
    encoder, attention = name.split("-")
    return f"{ENCODER_LABELS[encoder]} + {attention}"


def _share_floor(a: float | None, b: float | None, n: int | None) -> float | None:
    """The binomial sampling error of a difference of two shares over ``n`` instances each (at least
    1/n): the tolerance's floor where the seed models' shares do not vary (all 1.0)."""
    if a is None or b is None or not n:
        return None
    pooled = (a + b) / 2
    return max(Z * (2 * pooled * (1 - pooled) / n) ** 0.5, 1 / n)


def _released_note(data: dict, names: tuple) -> str:
    """J&W's released SST outputs for these runs (information, not graded)."""
    if data["dataset"] != "sst":
        return ""
    parts = [f"{_label(n)} F1 {JW_COMMITTED_SST[n]['test_f1']:.3f}, τ_g "
             f"{' / '.join(map(str, JW_COMMITTED_SST[n]['tau_gradient']))} (class 0 / 1)"
             for n in names if JW_COMMITTED_SST.get(n, {}).get("test_f1") is not None]
    return (f"(For information, not graded: {'; '.join(parts)} {_src('jw_released')}.) " if parts else "")


def _finding_jw9(data: dict) -> dict | None:
    """JW-9: non-recurrent encoders (CNN, Average) reach an F1 comparable with the BiLSTM's, with either
    attention."""
    if not any(_model(data, e, a)[0] for e in ("cnn",) for a in ("additive", "dot")):
        return None
    f1_std, n_seeds = _wp_f1_spread(data.get("wp"))
    tol = Z * _se((f1_std, 1), (f1_std, 1)) if f1_std is not None else None
    checks = []
    for attention in ("additive", "dot"):
        ref, _ = _model(data, "lstm", attention)
        for encoder in ("cnn", "average"):
            facts, _ = _model(data, encoder, attention)
            if facts is None and ref is None:
                continue
            label = f"{ENCODER_LABELS[encoder]} + {attention} vs BiLSTM + {attention}"
            checks.append(_comparable(f"{encoder}-{attention}", label, facts and facts["test_f1"],
                                      ref and ref["test_f1"], tol, "test F1"))
    return _graded("JW-9", "J&W Table 1 caption", "non-recurrent encoders (CNN, Average) are comparable with "
                   "the BiLSTM for classification", checks,
                   "per attention, each non-recurrent encoder's test F1 within the tolerance of the BiLSTM's",
                   f"{Z:g}·√2·σ, σ = {_f(f1_std, 4)} = std of the BiLSTM's test F1 over the {n_seeds} W&P seed "
                   "models (used for every encoder)" if tol is not None else
                   "no seed spread in this report (W&P battery missing): not graded",
                   measured={c.name: c.holds for c in checks},
                   lead=_released_note(data, ("cnn-additive",)))


def _finding_jw10(data: dict) -> dict | None:
    """JW-10: scaled dot-product attention in place of additive gives comparable results (F1, τ_g, adversaries)."""
    if not any(_model(data, e, "dot")[0] for e in ENCODER_LABELS):
        return None
    f1_std, _ = _wp_f1_spread(data.get("wp"))
    tolerances = {"test F1": Z * _se((f1_std, 1), (f1_std, 1)) if f1_std is not None else None,
                  "mean τ(attention, gradient)": _seed_difference_tolerance(
                      _jw_seed_values(data, lambda x: x["tau_gradient"]["overall"]["mean"])),
                  "share with a feasible adversary": _seed_difference_tolerance(
                      _jw_seed_values(data, lambda x: x["adversary"]["overall"]["fraction_feasible"]))}
    checks = []
    for encoder, label in ENCODER_LABELS.items():
        dot_facts, dot_res = _model(data, encoder, "dot")
        add_facts, add_res = _model(data, encoder, "additive")
        if dot_facts is None:
            continue
        pairs = {"test F1": (dot_facts["test_f1"], add_facts and add_facts["test_f1"]),
                 "mean τ(attention, gradient)": (_tau_g(dot_res), _tau_g(add_res)),
                 "share with a feasible adversary": (_feasible(dot_res), _feasible(add_res))}
        for what, (a, b) in pairs.items():
            tol = tolerances[what]
            if what == "share with a feasible adversary" and tol is not None:
                n = dot_res and dot_res["summary"]["adversary"]["overall"]["count"]
                tol = max(tol, _share_floor(a, b, n) or 0.0)
            checks.append(_comparable(f"{encoder} {what}", f"{label} dot vs additive", a, b, tol, what))
    basis = "; ".join(f"{what}: " + (f"±{tol:.3f}" if tol is not None else "no seed spread, not graded")
                      for what, tol in tolerances.items())
    basis += "; a share's tolerance is at least the binomial sampling error of the difference (and 1/n)"
    return _graded("JW-10", "J&W §4", "scaled dot-product attention in place of additive gives comparable "
                   "results", checks,
                   "per encoder, the dot model's test F1, mean τ(attention, gradient) and share of instances with "
                   "a feasible adversary each within the tolerance of the additive model's",
                   f"{Z:g}·√2·σ_seed of the BiLSTM's number over its seed models ({basis})",
                   measured={c.name: c.holds for c in checks},
                   lead=_released_note(data, ("lstm-dot",)))
