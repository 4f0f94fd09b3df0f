"""ERASER findings, beyond the papers: none of J&W, W&P and T&Š ran ERASER, so each measured cell is an
"extension" (our numbers extend the papers, they cannot reproduce them)."""

from __future__ import annotations

from hf_attn.reporting.findings.checks import _f, _finding


def _findings_eraser(data: dict) -> list[dict]:
    """ER-<cell>: is attention a worse explanation than gradients by ERASER comprehensiveness? One
    extension per measured cell (none of the three papers ran ERASER)."""
    out = []
    for cell_name, res in data["eraser"].items():
        if not res:
            continue
        m = res["measures"]
        comp = {k: v["comprehensiveness_aopc"] for k, v in m.items()}
        suff = {k: v["sufficiency_aopc"] for k, v in m.items()}
        ranked = sorted((k for k in comp if k != "random"), key=lambda k: -comp[k])
        att_rank = ranked.index("attention") + 1 if "attention" in ranked else None
        worse_than_grad = ("gradient" in comp and "attention" in comp and comp["attention"] < comp["gradient"])
        beats_random = [k for k in comp if k != "random" and "random" in comp and comp[k] > comp["random"]]
        out.append(_finding(f"ER-{cell_name}", "beyond the papers (DeYoung et al. 2020)",
                            f"is attention a worse explanation than gradients by ERASER comprehensiveness? "
                            f"({cell_name}, seed 0)", "extension",
                            f"{cell_name}: comprehensiveness AOPC " + ", ".join(f"{k} {comp[k]:.3f}" for k in ranked)
                            + (f", random {comp['random']:.3f}" if "random" in comp else "")
                            + f"; attention ranks {att_rank} of {len(ranked)} and is "
                            f"{'worse' if worse_than_grad else 'not worse'} than the gradient "
                            f"(sufficiency AOPC attention {_f(suff.get('attention'))} vs gradient "
                            f"{_f(suff.get('gradient'))}, lower is better); {len(beats_random)} of {len(ranked)} "
                            "measures beat random. None of J&W, W&P and T&Š ran ERASER: an extension, not a "
                            "reproduction — extension.",
                            None, {"comprehensiveness_aopc": comp, "sufficiency_aopc": suff},
                            rule="none of the three papers ran ERASER: not graded", tolerance=None))
    return out
