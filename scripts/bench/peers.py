#!/usr/bin/env python
"""hf_attn against captum and ferret on the same transformer, the same sentences and the same
definitions: seconds, peak memory and agreement of the numbers.

    python scripts/bench/peers.py [--quick | --full] [--model runs/minilm-sst]
        [--sentences N] [--rounds R] [--ig-steps S] [--device cpu|cuda|auto]
        [--methods ...] [--peers captum ferret] [--cache DIR] [--write docs/benchmarks/peers.json]
    python scripts/bench/peers.py --growth [--growth-max-count 1000] [--write ...]
    python scripts/bench/peers.py --bilstm [--baseline COMMIT] [--run runs/sst-lstm]

Each side is its own process: hf_attn from this checkout (``PYTHONPATH``), captum and ferret from a
virtual environment per peer, created in ``--cache`` (default ``~/.cache/hf_attn-bench``) when
absent, with torch pinned to the version hf_attn pins:

- ``captum``: captum==0.9.0 with the transformers hf_attn pins;
- ``ferret``: ferret-xai==0.4.2, which needs transformers<5 and captum<0.8 (transformers 4.57.6,
  captum 0.7.0) and numpy<2, so pyarrow==17.0.0 (newer pyarrow needs numpy 2).

hf_attn's per-method rows call its public API as a user does — ``Explainer.attributions(texts,
methods=[m])``, the library grouping and padding the texts itself (``--internal``: the internal
functions on length groups made here, the earlier protocol). Every worker loads the same model
folder, reads the same sentences (token ids and content masks made
here once; ferret tokenizes the text itself and the worker checks it gets the same ids), sets one
torch thread (``--threads``), computes one method, and writes the attributions (npz) with its
seconds (the method only, model loading excluded) and its peak RSS (``ru_maxrss``). Sides alternate
in rounds (the order reversed every round); the table gives medians.

Rows (only where the definitions are equal; the differences are said in ``DEFINITIONS``):

- ``integrated_gradients``: ŷ_c (softmax probability of the predicted class), the text's embeddings
  from 0, Gauss–Legendre nodes: hf_attn ``integrated_gradients_attribution`` vs captum
  ``IntegratedGradients(method="gausslegendre")``;
- ``integrated_gradients_logit``: ferret's definition (logit z_c, the text's embeddings from [PAD]'s,
  Gauss–Legendre): hf_attn with ``target="logit", baseline="pad"`` vs ferret
  ``IntegratedGradientExplainer``;
- ``gradient_x_input``: ŷ_c: hf_attn vs captum ``InputXGradient``;
- ``gradient_x_input_logit``: z_c: hf_attn vs ferret ``GradientExplainer``;
- ``saliency``: ‖∂ŷ_c/∂e_t‖₂: hf_attn vs captum ``Saliency(abs=False)`` normed over the embedding
  (ferret's saliency is Σ|∂z_c/∂e|, another quantity: not compared);
- ``leave_one_out``: ŷ_c(x) − ŷ_c(x₋t), token deleted: hf_attn ``leave_one_out_deletion`` vs captum
  ``FeatureAblation`` whose forward deletes the ablated tokens vs ferret's
  ``TauLOO_Evaluation.compute_leave_one_out_occlusion`` (decoded text, re-tokenized);
- ``erasure``: ERASER comprehensiveness and sufficiency per sentence of one fixed ranking (hf_attn's
  gradient × input): hf_attn ``batteries.faithfulness.erasure_scores`` vs ferret's
  ``AOPC_Comprehensiveness_Evaluation`` / ``AOPC_Sufficiency_Evaluation``. ferret's defaults differ
  (k = floor(p·n) over 10 … 100 %, only positive scores, a bin whose rationale equals the previous
  one dropped): ferret is given our k per sentence (``based_on="k"``, k = ceil(p·n) in [1, n] for
  the ERASER bins, repeated k's removed, ``only_pos=False``) and hf_attn's bins are averaged over the
  same distinct k's. ferret decodes each erased input to text and tokenizes it again; sentences where
  that round trip changes the ids are counted apart.
- ``faithfulness_table``: the whole table, same methods × same metrics: gradient × input and integrated
  gradients (z_c, [PAD] baseline, 50 Gauss–Legendre nodes: each library's default) × comprehensiveness,
  sufficiency and Kendall τ with leave-one-out. hf_attn ``run_faithfulness`` (leave-one-out a row of
  its own, every erased input scored once) vs a captum script (``InputXGradient``,
  ``IntegratedGradients`` one sentence at a time with its 50 nodes in one internal batch (its
  tutorials' setting), ``FeatureAblation`` deleting tokens, the erasures batched per sentence by
  hand, ``scipy.stats.kendalltau``) vs ferret's ``Benchmark.evaluate_explanations`` with
  ``AOPC_Comprehensiveness_Evaluation``, ``AOPC_Sufficiency_Evaluation`` and ``TauLOO_Evaluation``.
  Comprehensiveness and sufficiency average the distinct k's (ferret's rule; hf_attn's table averages
  the bins, so its agreement numbers recompute the bins of its rankings, untimed). The floor: the FLOPs
  of the forwards and backwards the table needs, and each side's GFLOP/s.

Agreement: max |Δ| over the sentences' tokens (or per-sentence values), and the share of sentences
whose values all agree within ``--tolerance``.

``--growth``: hf_attn's faithfulness methods against sentence length (16 … 512 tokens, SST sentences
concatenated and cut) and count (100, 1000, 10000; ``--growth-max-count`` caps it), seconds and peak
RSS per cell. ``--bilstm``: the papers' BiLSTM J&W battery through ``scripts/check_regression.py``
(this checkout against ``--baseline``). Bad arguments: one line naming the argument, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(Path(__file__).resolve().parent) not in sys.path:  # stage_flops.py, when loaded by path (as a script it is first)
    sys.path.append(str(Path(__file__).resolve().parent))
TORCH_PIN = "torch==2.13.0"
PEER_PINS = {
    "captum": [TORCH_PIN, "transformers==5.23.0", "tokenizers==0.23.3", "captum==0.9.0", "safetensors", "numpy", "scipy==1.17.1"],
    "ferret": [TORCH_PIN, "ferret-xai==0.4.2", "transformers==4.57.6", "pyarrow==17.0.0"],
}
PEERS = tuple(PEER_PINS)
# a peer run at another of its documented settings, from the same environment
VARIANTS = {"captum_per_sentence": "captum"}
SIDES = ("hf_attn",) + PEERS + tuple(VARIANTS)
# method: the peers that compute it with hf_attn's definition
METHODS = {
    "integrated_gradients": ("captum", "captum_per_sentence"),
    "integrated_gradients_target": (),
    "integrated_gradients_logit": ("ferret",),
    "gradient_x_input": ("captum",),
    "gradient_x_input_logit": ("ferret",),
    "saliency": ("captum",),
    "leave_one_out": ("captum", "ferret"),
    "erasure": ("ferret",),
    "erasure_eraser": ("ferret",),
    "faithfulness_table": ("captum", "ferret"),
    "faithfulness_table_target": (),
}
# rows where only hf_attn runs, at its completeness target; the peers' runs of the named row (their
# fixed node count) are the comparison
PEER_ROWS = {"integrated_gradients_target": "integrated_gradients", "faithfulness_table_target": "faithfulness_table"}
IG_TARGET = 0.01  # hf_attn's default: each sentence's nodes refined until |gap| ≤ 1 % of |f(x) − f(x')|
# hf_attn's settings at its completeness target: the nested rule (the Kronrod step reuses the 16 Gauss nodes)
TARGET_OPTIONS = {"ig_target": IG_TARGET, "ig_rule": "gauss-kronrod"}
# the goals the record is judged by: every row against its fastest peer, and these rows against each peer
GOALS = {"row_vs_fastest_peer": 1.2}
EACH_PEER_GOALS = {"integrated_gradients_target": 2.0, "faithfulness_table": 2.0, "faithfulness_table_target": 3.0}
TABLE_METHODS = ("gradient_x_input", "integrated_gradients")  # ferret's explainers that hf_attn has
TABLE_METRICS = ("comprehensiveness", "sufficiency", "tau_loo")
TABLE_PEER_IG_STEPS = 50  # captum's IntegratedGradients default (ferret calls it with the defaults), and
# hf_attn's faithfulness table's
DEFINITIONS = {
    "integrated_gradients": "ŷ_c, zero baseline on the text, Gauss–Legendre nodes",
    "integrated_gradients_logit": "z_c, [PAD] baseline on the text, Gauss–Legendre nodes (ferret's IG)",
    "gradient_x_input": "Σ_d e·∂ŷ_c/∂e",
    "gradient_x_input_logit": "Σ_d e·∂z_c/∂e (ferret's Gradient × Input)",
    "saliency": "‖∂ŷ_c/∂e‖₂ (ferret's saliency is Σ_d |∂z_c/∂e|: not compared)",
    "leave_one_out": "ŷ_c(x) − ŷ_c(x₋t), token deleted",
    "erasure": "ERASER comprehensiveness + sufficiency per sentence, mean over the distinct k = ceil(p·n)",
    "erasure_eraser": "the same through hf_attn.methods.eraser.eraser_scores (the ERASER table's scorer)",
    "integrated_gradients_target": "ŷ_c, zero baseline: hf_attn at its completeness target with its nested rule "
                                   "(`ig_rule=\"gauss-kronrod\"`, the table's default: 16 "
                                   "Gauss–Legendre nodes, then for a sentence whose |gap| > 1 % of |f(x) − f(x')| "
                                   "the 33-node Kronrod rule reusing them, then 64, 128, … Gauss–Legendre nodes) "
                                   "against the peers' fixed node count",
    "faithfulness_table_target": "the whole table with hf_attn's integrated gradients at its completeness target "
                                 "(nested rule, as above) against the peers' tables at 50 nodes",
    "faithfulness_table": "the whole table: gradient × input and integrated gradients (z_c, [PAD] baseline) × "
                          "comprehensiveness, sufficiency (mean over the distinct k) and τ with leave-one-out; "
                          "per sentence 6 numbers; integrated gradients with 50 Gauss–Legendre nodes on every side "
                          "(each library's default)",
}
FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)
GROWTH_LENGTHS = (16, 32, 64, 128, 256, 512)
GROWTH_COUNTS = (100, 1000, 10000)
GROWTH_METHODS = ("saliency", "gradient_x_input", "integrated_gradients", "leave_one_out", "erasure")
DEFAULT_MODEL = "runs/minilm-sst"  # e.g. hf-attn train --dataset sst --base-model minilm-l6 --output-dir runs/minilm-sst
DEFAULT_CACHE = "~/.cache/hf_attn-bench"
FULL_LONG_LENGTHS = (128, 256, 512)  # --full adds inputs of these token lengths
FULL_LONG_PER_LENGTH = 8


class ArgumentError(ValueError):
    """Bad command-line input: one line naming the argument."""


# ------------------------------------------------------------------------------------------------
# pure parts (tested in tests/test_benchmark_peers.py)


def parse_args(argv=None) -> argparse.Namespace:
    """The arguments, validated; bad input raises :class:`ArgumentError` naming the argument."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="20 sentences, 1 round, IG with 8 steps (minutes)")
    mode.add_argument("--full", action="store_true", help="the 1821 SST test sentences + inputs up to 512 tokens")
    mode.add_argument("--growth", action="store_true", help="hf_attn's cost against sentence length and count")
    mode.add_argument("--bilstm", action="store_true", help="the papers' BiLSTM J&W battery regression line")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a transformers classifier folder")
    parser.add_argument("--sentences", type=str, default=None, help="number of SST test sentences (default 100)")
    parser.add_argument("--rounds", type=str, default=None, help="rounds of alternating sides (default 3)")
    parser.add_argument("--ig-steps", type=str, default=None, help="integrated gradients' nodes (default 50)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto (every side)")
    parser.add_argument("--threads", type=str, default="1", help="torch threads per side")
    parser.add_argument("--methods", nargs="+", default=None, help=f"subset of {list(METHODS)}")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), help=f"subset of {list(PEERS)}")
    parser.add_argument("--cache", default=DEFAULT_CACHE, help="folder of the peers' virtual environments")
    parser.add_argument("--tolerance", type=str, default="1e-5", help="agreement threshold on |Δ|")
    parser.add_argument("--write", default=None, help="save the results as JSON (and a .md page beside it)")
    parser.add_argument("--growth-max-count", type=str, default=None,
                        help="cap the sentence counts of --growth (default: no cap)")
    parser.add_argument("--growth-lengths", nargs="+", default=None, help="token lengths of --growth")
    parser.add_argument("--baseline", default=None, help="--bilstm: the commit to compare with")
    parser.add_argument("--run", default="runs/sst-lstm", help="--bilstm: the trained BiLSTM folder (the README quick start's)")
    parser.add_argument("--internal", action="store_true",
                        help="hf_attn's per-method rows through its internal functions on hand-made length groups "
                             "(the earlier protocol) instead of the public Explainer.attributions")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)

    def error(message):  # argparse's own errors: one line too
        raise ArgumentError(message)

    parser.error = error
    args = parser.parse_args(argv)
    if args.worker:
        return args

    def integer(name, value, default, low=1):
        if value is None:
            return default
        try:
            out = int(value)
        except ValueError:
            raise ArgumentError(f"--{name} must be an integer ≥ {low}, got {value!r}") from None
        if out < low:
            raise ArgumentError(f"--{name} must be an integer ≥ {low}, got {value!r}")
        return out

    quick = args.quick
    args.sentences = integer("sentences", args.sentences, 20 if quick else (1821 if args.full else 100))
    args.rounds = integer("rounds", args.rounds, 1 if quick else 3)
    args.ig_steps = integer("ig-steps", args.ig_steps, 8 if quick else 50)
    args.threads = integer("threads", args.threads, 1)
    args.growth_max_count = integer("growth-max-count", args.growth_max_count, max(GROWTH_COUNTS))
    if args.sentences > 1821:
        raise ArgumentError(f"--sentences must be at most 1821 (the SST test split), got {args.sentences}")
    try:
        args.tolerance = float(args.tolerance)
    except ValueError:
        raise ArgumentError(f"--tolerance must be a positive number, got {args.tolerance!r}") from None
    if not args.tolerance > 0 or not math.isfinite(args.tolerance):
        raise ArgumentError(f"--tolerance must be a positive number, got {args.tolerance!r}")
    if args.device not in ("cpu", "cuda", "auto"):
        raise ArgumentError(f"--device must be cpu, cuda or auto, got {args.device!r}")
    methods = args.methods or list(METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ArgumentError(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    args.methods = list(dict.fromkeys(methods))
    unknown = [p for p in args.peers if p not in PEERS]
    if unknown:
        raise ArgumentError(f"--peers: unknown {unknown}; choose from {list(PEERS)}")
    lengths = args.growth_lengths or list(GROWTH_LENGTHS)
    try:
        args.growth_lengths = [int(x) for x in lengths]
    except ValueError:
        raise ArgumentError(f"--growth-lengths must be integers in [3, 512], got {lengths}") from None
    if any(not 3 <= x <= 512 for x in args.growth_lengths):
        raise ArgumentError(f"--growth-lengths must be integers in [3, 512], got {lengths}")
    if not args.bilstm and not args.growth and not os.path.isfile(os.path.join(args.model, "config.json")):
        raise ArgumentError(f"--model must be a transformers model folder (with config.json), got {args.model!r}")
    if args.write is not None and not args.write.endswith(".json"):
        raise ArgumentError(f"--write must name a .json file, got {args.write!r}")
    return args


def resolve_device(requested: str, cuda_available: bool) -> str:
    """``auto`` → cuda when a GPU is visible, else cpu; ``cuda`` without one is an error."""
    if requested == "auto":
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise ArgumentError("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False)")
    return requested


def agreement(reference, other, tolerance: float = 1e-5) -> dict:
    """Per-sentence arrays (lists of 1-D arrays, or ``None`` for a sentence left out) → ``max_abs``
    (max |Δ| over every value of the sentences both sides have), ``equal_share`` (share of those
    sentences whose values all agree within ``tolerance``) and ``compared`` (their count). Sentences
    of different lengths count as unequal and are left out of ``max_abs``."""
    import numpy as np

    if len(reference) != len(other):
        raise ValueError(f"reference has {len(reference)} sentences, other {len(other)}")
    worst, equal, compared = 0.0, 0, 0
    for a, b in zip(reference, other):
        if a is None or b is None:
            continue
        a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
        compared += 1
        if a.shape != b.shape:
            continue
        gap = float(np.max(np.abs(a - b))) if a.size else 0.0
        if not math.isfinite(gap):
            gap = math.inf
        worst = max(worst, gap)
        equal += gap <= tolerance
    return {"max_abs": worst if compared else math.nan, "equal_share": equal / compared if compared else math.nan,
            "compared": compared}


def distinct_k(n: int, fractions=FRACTIONS) -> list[int]:
    """ERASER's k = ceil(p·n) clipped to [1, n] per bin (rounded to 9 decimals first, as
    :func:`hf_attn.methods.eraser.tokens_per_fraction`), repeated values removed, in bin order."""
    out = []
    for f in fractions:
        k = min(n, max(1, math.ceil(round(f * n, 9))))
        if k not in out:
            out.append(k)
    return out


def distinct_bin_mean(values, n: int, fractions=FRACTIONS) -> float:
    """Mean of per-bin ``values`` over the bins with distinct k (the first bin of each k)."""
    seen, kept = set(), []
    for f, v in zip(fractions, values):
        k = min(n, max(1, math.ceil(round(f * n, 9))))
        if k not in seen:
            seen.add(k)
            kept.append(float(v))
    return sum(kept) / len(kept)


TABLE_COLUMNS = [f"{m} {c}" for m in TABLE_METHODS for c in TABLE_METRICS]


def table_means(rows) -> dict:
    """The faithfulness table of one side: each column's mean over the sentences it scored (NaN
    τ of constant scores left out)."""
    import numpy as np

    kept = np.array([r for r in rows if r is not None], dtype=np.float64).reshape(-1, len(TABLE_COLUMNS))
    return {c: float(np.nanmean(kept[:, j])) if len(kept) else None for j, c in enumerate(TABLE_COLUMNS)}


def format_columns(columns: dict) -> str:
    """Markdown: the table's cells (rows) by side (columns)."""
    sides = list(columns)
    lines = ["| cell | " + " | ".join(sides) + " |", "|---" * (len(sides) + 1) + "|"]
    for c in TABLE_COLUMNS:
        lines.append(f"| {c} | " + " | ".join(_fmt(columns[s].get(c), ".4f") for s in sides) + " |")
    return "\n".join(lines)


def ratios(row: dict) -> None:
    """Peer ÷ hf_attn per side: compute-only wall (``ratio``), compute-only CPU (``cpu_ratio``) and
    the whole process, loading included (``total_ratio``)."""
    for key, name in (("seconds", "ratio"), ("cpu_seconds", "cpu_ratio"), ("total_seconds", "total_ratio")):
        values = row.get(key) or {}
        base = values.get("hf_attn")
        row[name] = {p: v / base for p, v in values.items() if p != "hf_attn" and base and v is not None}


def goals(rows: list[dict], flops: dict | None = None, peak: float | None = None) -> list[dict]:
    """Each goal with its value and whether it is met: every row :data:`GOALS` ``row_vs_fastest_peer``
    × as fast as its fastest peer; the rows of :data:`EACH_PEER_GOALS` that many times as fast as each
    peer; peak RSS at most the lowest peer's on every row. An unmet speed goal says what bounds it
    (``bound``) when the row's FLOPs (``flops``, :func:`floors`) and the machine's measured matmul
    ``peak`` (GFLOP/s) are known: the rate hf_attn would need at its own FLOPs."""
    out = []
    for row in rows:
        method, ratio, rss = row["method"], row.get("ratio") or {}, row.get("rss_mb") or {}
        if not ratio:
            continue
        fastest = min(ratio, key=ratio.get)
        wanted = [(fastest, GOALS["row_vs_fastest_peer"], f"≥ {GOALS['row_vs_fastest_peer']}× the fastest peer ({fastest})")]
        if method in EACH_PEER_GOALS:
            wanted += [(peer, EACH_PEER_GOALS[method], f"≥ {EACH_PEER_GOALS[method]}× {peer}") for peer in ratio]
        for peer, at_least, text in wanted:
            goal = {"row": method, "goal": text, "value": ratio[peer], "met": ratio[peer] >= at_least}
            if not goal["met"]:
                bound = speed_bound(row, (flops or {}).get(method), peak, peer, at_least)
                if bound:
                    goal["bound"] = bound
            out.append(goal)
        peers_rss = {p: v for p, v in rss.items() if p != "hf_attn"}
        if "hf_attn" in rss and peers_rss:
            lowest = min(peers_rss, key=peers_rss.get)
            goal = {"row": method, "goal": f"peak RSS ≤ the lowest peer's ({lowest}, MB)",
                    "value": rss["hf_attn"], "met": rss["hf_attn"] <= peers_rss[lowest]}
            if not goal["met"]:
                goal["bound"] = (f"{rss['hf_attn'] - peers_rss[lowest]:.0f} MB above {lowest}'s "
                                 f"{peers_rss[lowest]:.0f} MB")
            out.append(goal)
    return out


def speed_bound(row: dict, floor: dict | None, peak: float | None, peer: str, at_least: float) -> str | None:
    """What bounds an unmet speed goal: the rate (GFLOP/s) hf_attn would need to be ``at_least`` × ``peer``
    at its own FLOPs, against the machine's measured matmul ``peak`` (:func:`stage_flops.rate_bound`); None
    without FLOPs or peak."""
    seconds = row.get("seconds") or {}
    if not floor or not peak or peer not in seconds or "hf_attn" not in seconds:
        return None
    from stage_flops import rate_bound

    return rate_bound(floor["gflop"], seconds["hf_attn"], seconds[peer], peer, at_least, peak)


def median(values) -> float:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else math.nan


def _fmt(value, spec=".2f", none="–") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


def format_table(rows, peers=PEERS) -> str:
    """Markdown table of benchmark rows: ``{"method", "seconds": {side: s}, "rss_mb": {side: MB},
    "agreement": {peer: {"max_abs", "equal_share"}}}``; ratio = peer / hf_attn (≥ 1: hf_attn faster)."""
    head = ["method", "hf_attn s"] + [f"{p} s" for p in peers] + [f"{p}/hf_attn" for p in peers] \
        + ["peak RSS MB (hf_attn" + "".join(f" / {p}" for p in peers) + ")"] \
        + [f"agreement {p} (max abs Δ, equal share)" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        seconds, rss, agree = row.get("seconds", {}), row.get("rss_mb", {}), row.get("agreement", {})
        base = seconds.get("hf_attn")
        cells = [row["method"], _fmt(base)]
        cells += [_fmt(seconds.get(p)) for p in peers]
        for p in peers:
            s = seconds.get(p)
            ratio = None if s is None or not base else s / base
            cells.append(_fmt(ratio) + ("×" if ratio is not None else ""))
        cells.append(" / ".join(_fmt(rss.get(s), ".0f") for s in ("hf_attn",) + tuple(peers)))
        for p in peers:
            a = agree.get(p)
            if not a:
                cells.append("–")
            else:
                share = a.get("equal_share")
                cells.append(f"{_fmt(a.get('max_abs'), '.1e')}, {_fmt(None if share is None else 100 * share, '.0f')} %")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def with_variants(peers) -> tuple:
    """The peers and their variants (:data:`VARIANTS`) that run from their environments."""
    return tuple(peers) + tuple(v for v, of in VARIANTS.items() if of in peers)


def format_ratios(rows, peers) -> str:
    """Peer ÷ hf_attn on compute-only CPU seconds and on the whole process's wall seconds."""
    head = ["method"] + [f"{p} CPU" for p in peers] + [f"{p} with load" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["method"]]
        for key in ("cpu_ratio", "total_ratio"):
            values = row.get(key) or {}
            cells += [_fmt(values.get(p)) + ("×" if values.get(p) is not None else "") for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_flops(flops: dict, peak: dict | None, peers) -> str:
    """Each row's FLOPs beside its seconds: the forwards and backwards it cannot avoid
    (:func:`row_gflop`), each side's seconds and achieved GFLOP/s, and that rate's share of the
    machine's measured matmul peak."""
    value = (peak or {}).get("gflops")
    head = ["FLOPs beside the seconds (each row's floor: the forwards and backwards it needs, "
            "BERT-type arithmetic, 2 FLOP per multiply–add; a side's rate is its FLOPs over its seconds)"
            + (f"; the machine's measured matmul peak on {peak.get('threads', 1)} thread(s): {value:.0f} GFLOP/s "
               f"({peak.get('shape', '')}, best of {peak.get('repeats', '?')})" if value else "") + ":", ""]
    sides = ("hf_attn",) + tuple(peers)
    head += ["| method | GFLOP (hf_attn / peers) | " + " | ".join(f"{s} s, GFLOP/s (% of peak)" for s in sides) + " |",
             "|---|---|" + "---|" * len(sides)]
    for name, f in flops.items():
        seconds, rates = f.get("side_seconds", {"hf_attn": f["seconds"]}), {"hf_attn": f["gflops"]} | f.get("peers_gflops", {})
        peer_gflop = f.get("peers_gflop")
        cells = [f"{f['gflop']:.0f}" + (f" / {peer_gflop:.0f}" if peer_gflop and abs(peer_gflop - f["gflop"]) > 0.5 else "")]
        for side in sides:
            if side in rates and side in seconds:
                share = f" ({100 * rates[side] / value:.0f} %)" if value else ""
                cells.append(f"{seconds[side]:.2f}, {rates[side]:.0f}{share}")
            else:
                cells.append("–")
        head.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(head)


def format_growth(cells) -> str:
    """Markdown table of growth cells ``{"method", "length", "count", "seconds", "rss_mb"}``."""
    lines = ["| method | tokens | sentences | seconds | s / 1000 tokens | peak RSS MB |", "|---|---|---|---|---|---|"]
    for c in cells:
        per = c["seconds"] / (c["length"] * c["count"]) * 1000 if c.get("seconds") is not None else None
        lines.append(f"| {c['method']} | {c['length']} | {c['count']} | {_fmt(c.get('seconds'))} | {_fmt(per, '.4f')} | "
                     f"{_fmt(c.get('rss_mb'), '.0f')} |")
    return "\n".join(lines)


def markdown_page(record: dict) -> str:
    """The docs page generated from the JSON record."""
    title = "hf_attn against captum and ferret" if record.get("rows") else "hf_attn's cost against length and count"
    lines = ["<!-- generated by scripts/bench/peers.py -->", "", f"# {title}", ""]
    setup = record.get("setup", {})
    if not record.get("rows"):  # a growth record
        lines += [f"Written by `scripts/bench/peers.py {setup.get('argv', '--growth')}` from "
                  f"`{os.path.basename(record.get('path', 'growth.json'))}`: hf_attn alone on the fine-tuned model, "
                  f"{setup.get('threads', 1)} torch thread, device {setup.get('device', 'cpu')}, every cell a fresh "
                  "process; inputs of exactly the given length made of SST test sentences concatenated and cut; "
                  "peak RSS is the whole process (model included).", ""]
    else:
        lines += [f"Written by `scripts/bench/peers.py {setup.get('argv', '')}` from `{os.path.basename(record.get('path', 'peers.json'))}`: "
                  f"{setup.get('sentences', '?')} SST test sentences, {setup.get('rounds', '?')} round(s), integrated gradients "
                  f"with {setup.get('ig_steps', '?')} nodes, device {setup.get('device', '?')}, {setup.get('threads', '?')} "
                  f"torch thread per side{', hf_attn at commit ' + setup['commit'] if setup.get('commit') else ''}; "
                  "every side a fresh process; medians over the rounds. Ratio = peer seconds / "
                  "hf_attn seconds (≥ 1: hf_attn is faster). Peak RSS is the whole worker process (model included).", ""]
    if record.get("rows"):
        sides = with_variants(setup.get("peers", PEERS))
        lines += [format_table(record["rows"], sides), ""]
        if any(r.get("cpu_ratio") for r in record["rows"]):
            lines += ["The same ratios on CPU time (compute only) and on the whole process (start, imports and "
                      "model loading included):", "", format_ratios(record["rows"], sides), ""]
        load = record.get("load_average") or {}
        if load.get("median") is not None:
            lines += [f"Load average (1 min) before each run: median {load['median']:.2f}, from {load['min']:.2f} "
                      f"to {load['max']:.2f}.", ""]
        if record.get("goals"):
            lines += ["Goals (an unmet one says what bounds it):", "", "| row | goal | value | met | bound |",
                      "|---|---|---|---|---|"]
            lines += [f"| {g['row']} | {g['goal']} | {g['value']:.2f} | {'yes' if g['met'] else '**no**'} | "
                      f"{g.get('bound', '')} |" for g in record["goals"]]
            lines.append("")
        if record.get("flops"):
            lines += [format_flops(record["flops"], record.get("peak_gflops"), sides), ""]
        lines += ["Definitions compared:", ""]
        lines += [f"- `{r['method']}`: {DEFINITIONS.get(r['method'], '')}" for r in record["rows"]]
        lines.append("")
    for row in record.get("rows", []):
        if row.get("columns"):
            lines += ["", "The whole faithfulness table, each side's means over the sentences it scored (ferret's "
                          "over those whose erased inputs survive its decode → tokenize round trip):", "",
                      format_columns(row["columns"]), ""]
            ig = row.get("extra", {}).get("hf_attn", {}).get("ig_completeness")
            if ig:
                lines.append(f"hf_attn's integrated gradients: |completeness gap| within 1 % of |f(x) − f(x')| on "
                             f"{100 * ig['completeness_within_1pct_share']:.0f} % of the sentences (mean |gap| "
                             f"{ig['completeness_gap_mean_abs']:.2g}).")
                lines.append("")
    for note in record.get("notes", []):
        lines.append(f"- {note}")
    if record.get("growth"):
        lines += ["", "## Growth (hf_attn)", "", format_growth(record["growth"])]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------
# the peers' environments


def venv_python(cache: Path, peer: str) -> Path:
    return cache / peer / "bin" / "python"


def ensure_venv(cache: Path, peer: str) -> tuple[Path | None, str]:
    """``(python, "")`` of the peer's environment, created when absent (marker file: the pins), or
    ``(None, reason)`` when it cannot be installed."""
    pins = PEER_PINS[peer]
    folder = cache / peer
    marker = folder / ".hf_attn-bench-pins"
    if marker.is_file() and marker.read_text().split() == pins:
        return venv_python(cache, peer), ""
    cache.mkdir(parents=True, exist_ok=True)
    print(f"creating the {peer} environment in {folder} ({' '.join(pins)}) …", flush=True)
    steps = [[sys.executable, "-m", "venv", "--clear", str(folder)],
             [str(venv_python(cache, peer)), "-m", "pip", "install", "-q", *pins]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode:
            lines = [x for x in (done.stderr + done.stdout).splitlines() if x.strip() and "is ignored" not in x]
            return None, f"{peer}: `{' '.join(step[-len(pins):]) if 'pip' in step else 'venv'}` failed: " + \
                " | ".join(lines[-3:])
    check = subprocess.run([str(venv_python(cache, peer)), "-c", f"import {peer}, torch, transformers"],
                           capture_output=True, text=True)
    if check.returncode:
        return None, f"{peer} installed but does not import: {check.stderr.strip().splitlines()[-1]}"
    marker.write_text("\n".join(pins) + "\n")
    return venv_python(cache, peer), ""


# ------------------------------------------------------------------------------------------------
# workers (run in the side's own python; import only what that side has)


_CPU: dict = {}  # the worker's process CPU seconds over its timed region (nested regions: the outer one)


def _start() -> float:
    """Start the timed region: wall clock returned, process CPU time kept."""
    _CPU.setdefault("start", time.process_time())
    return time.perf_counter()


def _stop(start: float) -> float:
    """End the timed region: its wall seconds; its CPU seconds in ``_CPU["seconds"]``."""
    _CPU["seconds"] = time.process_time() - _CPU["start"]
    return time.perf_counter() - start


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _content_rows(values, ids, content):
    """Per sentence: the values on its content positions (values: per sentence over its positions)."""
    import numpy as np

    return [np.asarray(v, dtype=np.float64)[np.asarray(c, bool)] for v, c in zip(values, content)]


def _groups(lengths, budget):
    """Length-sorted groups of at most ``budget`` padded tokens (the rule of hf_attn's batching)."""
    import numpy as np

    order = np.argsort(np.asarray(lengths), kind="stable")
    groups, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * lengths[order[stop]] <= budget:
            stop += 1
        groups.append(order[start:stop].tolist())
        start = stop
    return groups


def _hf_attn_worker(job):
    """hf_attn's side of one row; its extras also say whether the adapter pruned the last layer to
    the read row (:mod:`hf_attn.adapters.readout`), which sets the row's FLOPs (:func:`floors`)."""
    from hf_attn import Explainer

    explainer = Explainer.from_pretrained(job["model"], device=job["device"])
    out, seconds, extra = _hf_attn_method(job, explainer)
    return out, seconds, extra | {"adapter": {"readout_pruning": bool(getattr(explainer.adapter, "readout_pruning",
                                                                                  False))}}


def _hf_attn_method(job, explainer):
    import numpy as np
    import torch

    from hf_attn.methods import adapter_integrated_gradients, deletion, gradient_x_input, saliency

    ids, content, method = job["ids"], job["content"], job["method"]
    adapter = explainer.adapter

    def batch_of(rows):
        return adapter.from_token_lists([ids[i] for i in rows],
                                        word_ids=[[j if c else None for j, c in enumerate(content[i])] for i in rows])

    steps = job["ig_steps"]
    functions = {
        "integrated_gradients": lambda b: adapter_integrated_gradients.integrated_gradients_attribution(
            adapter, b, steps, "gauss-legendre").attributions,
        "integrated_gradients_logit": lambda b: adapter_integrated_gradients.integrated_gradients_attribution(
            adapter, b, steps, "gauss-legendre", target="logit", baseline="pad").attributions,
        "gradient_x_input": lambda b: gradient_x_input.gradient_x_input(adapter, b),
        "gradient_x_input_logit": lambda b: gradient_x_input.gradient_x_input(adapter, b, target="logit"),
        "saliency": lambda b: saliency.saliency(adapter, b),
        "leave_one_out": lambda b: deletion.leave_one_out_deletion(adapter, b),
    }
    lengths = [len(s) for s in ids]
    out = [None] * len(ids)
    start = _start()
    if method in ("faithfulness_table", "faithfulness_table_target"):
        from hf_attn.batteries.faithfulness import erasure_scores

        nodes = {"ig_steps": TABLE_PEER_IG_STEPS, "ig_target": None} if method == "faithfulness_table" else \
            TARGET_OPTIONS  # equal nodes, or hf_attn's completeness target from its default 16 nodes
        with torch.inference_mode(False):  # the public API, as a user calls it
            result = explainer.faithfulness(job["texts"], methods=TABLE_METHODS + ("leave_one_out",),
                                            metrics=TABLE_METRICS, fractions=FRACTIONS, gradient_target="logit",
                                            ig_baseline="pad", **nodes)
        _sync(job["device"])
        seconds = _stop(start)
        # not timed: the table's AOPC averages the bins (repeated k's included); the peers average the
        # distinct k's (ferret's rule), so the agreement recomputes the bins of the table's rankings
        columns = []
        for name in TABLE_METHODS:
            given = [np.asarray(row)[np.asarray(c, bool)] for row, c in zip(result.attributions[name], result.content)]
            bins = erasure_scores(adapter, job["texts"], given, FRACTIONS)
            columns.append([[distinct_bin_mean(bins["comprehensiveness"][i], int(np.sum(c))),
                             distinct_bin_mean(bins["sufficiency"][i], int(np.sum(c))),
                             result.per_instance[name]["tau_loo"][i]] for i, c in enumerate(result.content)])
        out = [np.array(a + b, dtype=np.float64) for a, b in zip(*columns)]
        table = {name: {metric: result.table[name][metric]["mean"] for metric in TABLE_METRICS}
                 for name in TABLE_METHODS}
        completeness = {k: v for k, v in result.cost["integrated_gradients"].items()
                        if "completeness" in k or k == "ig_gradients_mean"}
        return out, seconds, {"table": table, "ig_completeness": completeness}
    if method == "erasure_eraser":
        from hf_attn.methods.eraser import eraser_scores

        result = eraser_scores(_Framed(adapter.model, adapter.tokenizer), *_content_padded(ids, content, adapter.pad_id),
                               _content_padded(job["scores"], content, 0.0, float)[0], FRACTIONS)
        _sync(job["device"])
        seconds = _stop(start)
        for i in range(len(ids)):
            n = int(np.sum(content[i]))
            out[i] = np.array([distinct_bin_mean(result.comprehensiveness[i], n),
                               distinct_bin_mean(result.sufficiency[i], n)])
    elif method == "erasure":
        from hf_attn.batteries.faithfulness import erasure_scores

        scores = [np.asarray(s, dtype=np.float64) for s in job["scores"]]
        result = erasure_scores(adapter, job["texts"], scores, FRACTIONS)
        _sync(job["device"])
        seconds = _stop(start)
        for i in range(len(ids)):
            n = int(np.sum(content[i]))
            out[i] = np.array([distinct_bin_mean(result["comprehensiveness"][i], n),
                               distinct_bin_mean(result["sufficiency"][i], n)])
    elif job.get("internal"):  # the internal functions on hand-made length groups (the earlier protocol)
        with torch.inference_mode(False):
            for group in _groups(lengths, job["budget"]):
                batch = batch_of(group)
                values = functions[method](batch)
                for r, i in enumerate(group):
                    out[i] = values[r, :lengths[i]].detach().double().cpu().numpy()
        _sync(job["device"])
        seconds = _stop(start)
        out = _content_rows(out, ids, content)
    else:  # the public API, as a user calls it: the texts in, the library batches them itself
        name = method.removesuffix("_logit").removesuffix("_target")
        options = {"ig_steps": steps, "ig_target": None} if name == "integrated_gradients" else {}
        if method == "integrated_gradients_target":
            options = dict(TARGET_OPTIONS)
        if method.endswith("_logit"):
            options |= {"gradient_target": "logit"} | ({"ig_baseline": "pad"} if name == "integrated_gradients" else {})
        with torch.inference_mode(False):
            result = explainer.attributions(job["texts"], methods=(name,), **options)
        _sync(job["device"])
        seconds = _stop(start)
        out = [np.asarray(row, dtype=np.float64) for row in result.values[name]]
        if name == "integrated_gradients":
            cost = result.cost.get(name, {})
            return out, seconds, {"ig_completeness": {k: v for k, v in cost.items()
                                                      if "completeness" in k or k.startswith(("ig_steps",
                                                                                               "ig_gradients"))}}
    return out, seconds, {}


def _content_padded(rows, content, fill, dtype=int):
    """The content positions of each row (ids, or scores already over the content) right-padded ``(N, T)``
    with the mask."""
    import torch

    values = [[v for v, c in zip(r, m) if c] if len(r) == len(m) else list(r) for r, m in zip(rows, content)]
    width = max(len(v) for v in values)
    out = torch.full((len(values), width), fill, dtype=torch.long if dtype is int else torch.float64)
    mask = torch.zeros((len(values), width), dtype=torch.long)
    for i, v in enumerate(values):
        out[i, :len(v)] = torch.tensor(v, dtype=out.dtype)
        mask[i, :len(v)] = 1
    return out, mask


def _Framed(model, tokenizer):
    """``model`` reading text-only rows: [CLS] … [SEP] added around each row's real tokens (the
    ERASER scorer ranks every real token it is given, so it is given the text's alone)."""
    import torch

    class Framed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.config = model, model.config

        def forward(self, input_ids, attention_mask, **kwargs):
            n = attention_mask.sum(1)
            width = input_ids.shape[1] + 2
            ids = torch.full((len(n), width), int(self.config.pad_token_id or 0), dtype=input_ids.dtype,
                             device=input_ids.device)
            ids[:, 0] = tokenizer.cls_token_id
            ids[:, 1:-1] = torch.where(attention_mask.bool(), input_ids, ids[:, 1:-1])
            ids[torch.arange(len(n)), n + 1] = tokenizer.sep_token_id
            mask = (torch.arange(width, device=ids.device)[None] < (n + 2)[:, None]).long()
            return self.inner(input_ids=ids, attention_mask=mask)

    return Framed()


def _torch_model(job):
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(job["model"]).eval().to(job["device"])
    for p in model.parameters():
        p.requires_grad_(False)
    return model, torch


def _erase_by_hand(model, torch, ids, content, scores, target, device):
    """ERASER comprehensiveness and sufficiency of one sentence, as a captum user writes it: the
    text's top-k tokens (ties by position) deleted / kept alone with the special tokens, every
    distinct k of the bins in one forward; the mean over the distinct k's."""
    import numpy as np

    text = [j for j, c in enumerate(content) if c]
    order = [text[j] for j in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")]
    specials = [j for j, c in enumerate(content) if not c]
    variants = []
    for k in distinct_k(len(text)):
        top = set(order[:k])
        variants.append([ids[j] for j in range(len(ids)) if j not in top])
        variants.append([ids[j] for j in range(len(ids)) if j in top or j in specials])
    width = len(ids)
    x = torch.full((len(variants) + 1, width), int(model.config.pad_token_id or 0), dtype=torch.long)
    m = torch.zeros_like(x)
    for r, v in enumerate([ids] + variants):
        x[r, :len(v)], m[r, :len(v)] = torch.tensor(v), 1
    with torch.no_grad():
        p = model(input_ids=x.to(device), attention_mask=m.to(device)).logits.float().softmax(-1)[:, target]
    p = p.double().cpu().numpy()
    return float(np.mean(p[0] - p[1::2])), float(np.mean(p[0] - p[2::2]))


def _captum_table(job, model, torch):
    """The faithfulness table as a captum script: InputXGradient and IntegratedGradients on the
    logit (pad baseline), FeatureAblation with deletion for leave-one-out, ERASER by hand, τ by scipy."""
    import numpy as np
    from captum.attr import InputXGradient, IntegratedGradients
    from scipy.stats import kendalltau

    device, ids, content = job["device"], job["ids"], job["content"]
    embedding = model.get_input_embeddings()
    pad_row = embedding.weight[int(model.config.pad_token_id or 0)]
    start = _start()
    loo, _, _ = _captum_worker(dict(job, method="leave_one_out"), model)
    lengths = [len(s) for s in ids]
    out = [[] for _ in ids]

    def logits(inputs_embeds, mask):
        return model(inputs_embeds=inputs_embeds, attention_mask=mask).logits.float()

    for name in TABLE_METHODS:
        # integrated gradients as captum's tutorials run them: one sentence at a time, its nodes in one
        # internal batch (measured faster than the batched variant on a CPU); gradient × input batched
        groups = [[i] for i in range(len(ids))] if name == "integrated_gradients" else _groups(lengths, job["budget"])
        for group in groups:
            width = max(lengths[i] for i in group)
            x = torch.zeros((len(group), width), dtype=torch.long)
            m, c = torch.zeros_like(x), torch.zeros((len(group), width), dtype=torch.bool)
            for r, i in enumerate(group):
                x[r, :lengths[i]], m[r, :lengths[i]], c[r, :lengths[i]] = torch.tensor(ids[i]), 1, torch.tensor(content[i])
            x, m, c = x.to(device), m.to(device), c.to(device)
            with torch.no_grad():
                e = embedding(x)
                target = logits(e, m).argmax(-1)
            if name == "gradient_x_input":
                attr = InputXGradient(logits).attribute(e, target=target, additional_forward_args=(m,)).sum(-1)
            else:
                base = torch.where(c[..., None], pad_row.expand_as(e), e)
                attr = IntegratedGradients(logits).attribute(
                    e, baselines=base, target=target, additional_forward_args=(m,), n_steps=TABLE_PEER_IG_STEPS,
                    method="gausslegendre", internal_batch_size=TABLE_PEER_IG_STEPS).sum(-1)
            for r, i in enumerate(group):
                scores = attr[r, :lengths[i]][c[r, :lengths[i]]].detach().double().cpu().numpy()
                comp, suff = _erase_by_hand(model, torch, ids[i], content[i], scores, int(target[r]), device)
                out[i] += [comp, suff, float(kendalltau(scores, loo[i]).statistic)]
    _sync(device)
    return [np.array(o) for o in out], _stop(start), {}


def _captum_worker(job, model=None):
    from captum.attr import FeatureAblation, InputXGradient, IntegratedGradients, Saliency

    if model is None:
        model, torch = _torch_model(job)
    else:
        import torch
    if job["method"] == "faithfulness_table":
        return _captum_table(job, model, torch)
    device, ids, content, method = job["device"], job["ids"], job["content"], job["method"]
    embedding = model.get_input_embeddings()
    pad = int(model.config.pad_token_id or 0)
    lengths = [len(s) for s in ids]
    out = [None] * len(ids)

    def padded(rows):
        width = max(lengths[i] for i in rows)
        x = torch.full((len(rows), width), pad, dtype=torch.long)
        m = torch.zeros((len(rows), width), dtype=torch.long)
        c = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, i in enumerate(rows):
            x[r, :lengths[i]] = torch.tensor(ids[i])
            m[r, :lengths[i]] = 1
            c[r, :lengths[i]] = torch.tensor(content[i])
        return x.to(device), m.to(device), c.to(device)

    def probability(inputs_embeds, mask):
        return model(inputs_embeds=inputs_embeds, attention_mask=mask).logits.float().softmax(-1)

    start = _start()
    if method == "leave_one_out":
        # captum's ablation with deletion: an ablated token (id −1) is removed and the row repacked
        def deleting(tokens):
            rows = [[int(t) for t in row if t >= 0] for row in tokens.tolist()]
            width = max(len(r) for r in rows)
            x = torch.full((len(rows), width), pad, dtype=torch.long, device=device)
            m = torch.zeros((len(rows), width), dtype=torch.long, device=device)
            for r, row in enumerate(rows):
                x[r, :len(row)] = torch.tensor(row, device=device)
                m[r, :len(row)] = 1
            return model(input_ids=x, attention_mask=m).logits.float().softmax(-1)

        with torch.no_grad():
            for i in range(len(ids)):
                x = torch.tensor([ids[i]], device=device)
                c = torch.tensor([content[i]], device=device)
                target = int(deleting(x).argmax(-1))
                mask = torch.where(c, torch.arange(lengths[i], device=device)[None] + 1, torch.zeros_like(x))
                # features 1…T are the text's tokens; feature 0 (the specials) is never ablated alone:
                # captum ablates every feature id, so it is attributed but dropped below
                attr = FeatureAblation(deleting).attribute(x, baselines=-1, target=target, feature_mask=mask,
                                                           perturbations_per_eval=max(1, min(
                                                               int(sum(content[i])) + 1,
                                                               job["adapter_budget"] // lengths[i])))
                out[i] = attr[0].double().cpu().numpy()
    else:
        per_sentence = bool(job.get("per_sentence"))
        # captum's tutorials: one sentence at a time, its nodes in internal batches; batched: hf_attn's
        # token budget per pass
        groups = [[i] for i in range(len(ids))] if per_sentence else _groups(lengths, job["budget"])
        for group in groups:
            x, m, c = padded(group)
            with torch.no_grad():
                e = embedding(x)
                target = probability(e, m).argmax(-1)
            if method == "integrated_gradients":
                base = torch.where(c[..., None], torch.zeros_like(e), e)
                rows = job["ig_steps"] if per_sentence else max(1, job["budget"] // x.shape[1])
                attr = IntegratedGradients(probability).attribute(
                    e, baselines=base, target=target, additional_forward_args=(m,), n_steps=job["ig_steps"],
                    method="gausslegendre", internal_batch_size=rows).sum(-1)
            elif method == "gradient_x_input":
                attr = InputXGradient(probability).attribute(e, target=target, additional_forward_args=(m,)).sum(-1)
            elif method == "saliency":
                attr = Saliency(probability).attribute(e, target=target, additional_forward_args=(m,),
                                                       abs=False).norm(dim=-1)
            else:
                raise ValueError(f"captum has no row {method}")
            for r, i in enumerate(group):
                out[i] = attr[r, :lengths[i]].detach().double().cpu().numpy()
    _sync(device)
    seconds = _stop(start)
    extra = {}
    if method == "integrated_gradients":  # not timed: how complete the fixed node count is
        gaps, differences = [], []
        with torch.no_grad():
            for group in _groups(lengths, job["budget"]):
                x, m, c = padded(group)
                e = embedding(x)
                p = probability(e, m)
                target = p.argmax(-1)
                p0 = probability(torch.where(c[..., None], torch.zeros_like(e), e), m)
                for r, i in enumerate(group):
                    difference = float(p[r, target[r]] - p0[r, target[r]])
                    differences.append(abs(difference))
                    gaps.append(abs(float(out[i].sum()) - difference))
        within = [g <= 0.01 * d for g, d in zip(gaps, differences)]
        extra["ig_completeness"] = {"completeness_within_1pct_share": sum(within) / len(within),
                                    "completeness_gap_mean_abs": sum(gaps) / len(gaps)}
    return _content_rows(out, ids, content), seconds, extra


def _ferret_worker(job):
    import numpy as np
    from transformers import AutoTokenizer

    model, torch = _torch_model(job)
    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    texts, ids, content, method = job["texts"], job["ids"], job["content"], job["method"]
    mismatched = [i for i, t in enumerate(texts) if tokenizer(t, truncation=True)["input_ids"] != ids[i]]
    out = [None] * len(ids)
    extra = {"tokenization_mismatches": len(mismatched)}
    start = _start()
    if method in ("integrated_gradients_logit", "gradient_x_input_logit"):
        from ferret import GradientExplainer, IntegratedGradientExplainer

        if method == "gradient_x_input_logit":
            explainer, kwargs = GradientExplainer(model, tokenizer, multiply_by_inputs=True), {}
        else:
            explainer = IntegratedGradientExplainer(model, tokenizer, multiply_by_inputs=True)
            kwargs = {"call_args": {"n_steps": job["ig_steps"], "method": "gausslegendre"}}
        for i, text in enumerate(texts):
            with torch.no_grad():
                target = int(model(input_ids=torch.tensor([ids[i]], device=job["device"])).logits.argmax(-1))
            out[i] = np.asarray(explainer(text, target=target, **kwargs).scores, dtype=np.float64)
        out = [None if i in mismatched else v for i, v in enumerate(_content_rows(out, ids, content))]
    elif method == "leave_one_out":
        from ferret.evaluators.faithfulness_measures import TauLOO_Evaluation

        evaluator = TauLOO_Evaluation(model, tokenizer)
        for i, text in enumerate(texts):
            with torch.no_grad():
                target = int(model(input_ids=torch.tensor([ids[i]], device=job["device"])).logits.argmax(-1))
            out[i] = -evaluator.compute_leave_one_out_occlusion(text, target=target).numpy().astype(np.float64)
        text_ids = [[t for t, c in zip(s, m) if c] for s, m in zip(ids, content)]
        changed = [i for i, s in enumerate(text_ids) if not _survive_roundtrip(tokenizer, _deletions(s))]
        extra["decode_roundtrip_changed"] = len(changed)
        out = [None if i in mismatched or i in changed else v for i, v in enumerate(out)]
    elif method in ("erasure", "erasure_eraser"):
        from ferret.evaluators.faithfulness_measures import (AOPC_Comprehensiveness_Evaluation,
                                                             AOPC_Sufficiency_Evaluation)
        from ferret.explainers.explanation import Explanation

        comp, suff = AOPC_Comprehensiveness_Evaluation(model, tokenizer), AOPC_Sufficiency_Evaluation(model, tokenizer)
        roundtrip = 0
        for i, text in enumerate(texts):
            n = int(np.sum(content[i]))
            # ferret's only_pos=False path fails for k ≥ 2 (it compares a NumPy array with []): the
            # scores are shifted to be positive instead (the same ranking) and only_pos kept
            given = np.asarray(job["scores"][i], dtype=np.float64)
            scores = np.zeros(len(ids[i]))
            scores[np.asarray(content[i], bool)] = given - given.min() + 1.0
            with torch.no_grad():
                target = int(model(input_ids=torch.tensor([ids[i]], device=job["device"])).logits.argmax(-1))
            explanation = Explanation(text, tokenizer.convert_ids_to_tokens(ids[i]), scores, "given", target)
            args = {"removal_args": {"based_on": "k", "thresholds": distinct_k(n)}, "only_pos": True}
            c = comp.compute_evaluation(explanation, target=target, **args).score
            s = suff.compute_evaluation(explanation, target=target, **args).score
            out[i] = np.array([c, s], dtype=np.float64)
            if not _roundtrip_exact(tokenizer, ids[i], content[i], job["scores"][i]):
                out[i] = None
                roundtrip += 1
        extra["decode_roundtrip_changed"] = roundtrip
    elif method == "faithfulness_table":
        from ferret import Benchmark, GradientExplainer, IntegratedGradientExplainer
        from ferret.evaluators.faithfulness_measures import (AOPC_Comprehensiveness_Evaluation,
                                                             AOPC_Sufficiency_Evaluation, TauLOO_Evaluation)

        explainers = [GradientExplainer(model, tokenizer, multiply_by_inputs=True),
                      IntegratedGradientExplainer(model, tokenizer, multiply_by_inputs=True)]
        calls = [{}, {}]  # ferret's IG with its defaults: captum's 50 Gauss–Legendre nodes
        bench = Benchmark(model, tokenizer, explainers=explainers,
                          evaluators=[e(model, tokenizer) for e in (AOPC_Comprehensiveness_Evaluation,
                                                                    AOPC_Sufficiency_Evaluation, TauLOO_Evaluation)])
        kept = []
        for i, text in enumerate(texts):
            with torch.no_grad():
                target = int(model(input_ids=torch.tensor([ids[i]], device=job["device"])).logits.argmax(-1))
            explanations = [e(text, target=target, **kw) for e, kw in zip(explainers, calls)]
            kept.append(explanations)
            for explanation in explanations:  # positive scores, the same ranking (see the erasure row)
                given = np.asarray(explanation.scores, dtype=np.float64)
                shifted = np.zeros(len(given))
                keep = np.asarray(content[i], bool)
                shifted[keep] = given[keep] - given[keep].min() + 1.0
                explanation.scores = shifted
            n = int(np.sum(content[i]))
            evaluations = bench.evaluate_explanations(
                explanations, target=target, show_progress=False, only_pos=True,
                removal_args={"based_on": "k", "thresholds": distinct_k(n)})
            out[i] = np.array([{x.name: x.score for x in ev.evaluation_scores}[key] for ev in evaluations
                               for key in ("aopc_compr", "aopc_suff", "taucorr_loo")], dtype=np.float64)
        seconds = _stop(start)
        # not timed: sentences whose erased or token-deleted inputs change in ferret's decode → tokenize
        # round trip are scored on other inputs by ferret (left out of the agreement, counted)
        roundtrip = 0
        for i, explanations in enumerate(kept):
            text_ids = [t for t, c in zip(ids[i], content[i]) if c]
            same = all(_roundtrip_exact(tokenizer, ids[i], content[i], e.scores[np.asarray(content[i], bool)])
                       for e in explanations) and _survive_roundtrip(tokenizer, _deletions(text_ids))
            if not same:
                out[i] = None
                roundtrip += 1
        extra["decode_roundtrip_changed"] = roundtrip
        out = [None if i in mismatched else v for i, v in enumerate(out)]
        return out, seconds, extra
    else:
        raise ValueError(f"ferret has no row {method}")
    _sync(job["device"])
    return out, _stop(start), extra


def _survive_roundtrip(tokenizer, token_lists) -> bool:
    """Whether every token list is given back unchanged by ferret's decode → tokenize round trip."""
    return all(tokenizer(tokenizer.decode(t), add_special_tokens=False)["input_ids"] == t for t in token_lists)


def _deletions(text_ids) -> list[list[int]]:
    """The text's single-token deletions (leave-one-out's inputs), in token order."""
    return [text_ids[:j] + text_ids[j + 1:] for j in range(len(text_ids))]


def _roundtrip_exact(tokenizer, ids, content, scores) -> bool:
    """Whether every erased input of the sentence (the top-k tokens of ``scores`` deleted, or kept
    alone, for each distinct k) survives ferret's decode → tokenize round trip."""
    import numpy as np

    text_ids = [t for t, c in zip(ids, content) if c]
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    erased = []
    for k in distinct_k(len(text_ids)):
        top = set(order[:k].tolist())
        erased += [[t for j, t in enumerate(text_ids) if j not in top], [t for j, t in enumerate(text_ids) if j in top]]
    return _survive_roundtrip(tokenizer, erased)


def run_worker(job_path: str) -> int:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    import torch

    torch.set_num_threads(job["threads"])
    worker = {"hf_attn": _hf_attn_worker, "captum": _captum_worker, "ferret": _ferret_worker,
              "captum_per_sentence": lambda j: _captum_worker(dict(j, per_sentence=True))}[job["side"]]
    rows, seconds, extra = worker(job)
    import numpy as np

    present = [r is not None for r in rows]
    flat = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in rows if r is not None]) \
        if any(present) else np.zeros(0)
    sizes = np.array([0 if r is None else np.asarray(r).size for r in rows])
    np.savez(job["out"] + ".npz", values=flat, sizes=sizes, present=np.array(present))
    with open(job["out"] + ".json", "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "cpu_seconds": _CPU.get("seconds"), "rss_mb": _peak_rss_mb(), **extra}, f)
    return 0


def read_worker_output(prefix: str):
    import numpy as np

    with np.load(prefix + ".npz") as data:
        values, sizes, present = data["values"], data["sizes"], data["present"]
    rows, at = [], 0
    for size, ok in zip(sizes, present):
        rows.append(values[at:at + size] if ok else None)
        at += size if ok else 0
    with open(prefix + ".json", encoding="utf-8") as f:
        return rows, json.load(f)


# ------------------------------------------------------------------------------------------------
# the harness


def _environment(threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    return env


def run_side(python, side: str, job: dict, folder: str, threads: int):
    job = dict(job, side=side, out=os.path.join(folder, f"{side}-{job['method']}"))
    path = job["out"] + ".job.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(job, f)
    env = _environment(threads)
    if side == "hf_attn":
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    else:
        env.pop("PYTHONPATH", None)
    load = os.getloadavg()[0]
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run([str(python), str(Path(__file__).resolve()), "--worker", path], env=env,
                          capture_output=True, text=True)
    total = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        tail = [x for x in done.stderr.splitlines() if x.strip()][-3:]
        return None, {"error": " | ".join(tail)}
    rows, info = read_worker_output(job["out"])
    info |= {"total_seconds": total, "load_average": load,
             "total_cpu_seconds": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}
    return rows, info


def sst_sentences(count: int) -> list[str]:
    from hf_attn.data.tasks import load_sst

    return list(load_sst().splits["test"]["text"][:count])


def encode(tokenizer, texts, max_length=512):
    encoding = tokenizer(list(texts), truncation=True, max_length=max_length)
    ids = [list(map(int, s)) for s in encoding["input_ids"]]
    content = [[w is not None for w in encoding.word_ids(i)] for i in range(len(texts))]
    return ids, content


def long_inputs(tokenizer, texts, lengths, per_length):
    """Inputs of exactly ``length`` tokens (specials included): SST sentences concatenated and cut,
    decoded to text so that every side (ferret reads text) gets them; returns texts."""
    pieces = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    stream = [t for p in pieces for t in p]
    out, at = [], 0
    for length in lengths:
        for _ in range(per_length):
            if at + length > len(stream):
                at = 0
            chunk = stream[at:at + length - 2]
            at += length - 2
            out.append(tokenizer.decode(chunk))
    return out


def compare(args) -> dict:
    from transformers import AutoTokenizer

    import torch

    device = resolve_device(args.device, torch.cuda.is_available())
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    texts = sst_sentences(args.sentences)
    if args.full:
        texts += long_inputs(tokenizer, sst_sentences(1821), FULL_LONG_LENGTHS, FULL_LONG_PER_LENGTH)
    ids, content = encode(tokenizer, texts)
    notes, pythons = [], {"hf_attn": Path(sys.executable)}
    cache = Path(os.path.expanduser(args.cache))
    for peer in args.peers:
        python, reason = ensure_venv(cache, peer)
        if python is None:
            notes.append(f"{peer} not run: {reason}")
            print(notes[-1], flush=True)
        else:
            pythons[peer] = python
            pythons |= {variant: python for variant, of in VARIANTS.items() if of == peer}
    job = {"model": os.path.abspath(args.model), "device": device, "threads": args.threads, "ids": ids,
           "content": content, "texts": texts, "ig_steps": args.ig_steps, "budget": 1024, "adapter_budget": 8192,
           "internal": bool(args.internal)}
    seconds = {m: {s: [] for s in SIDES} for m in args.methods}
    rss = {m: {s: [] for s in SIDES} for m in args.methods}
    measured = {key: {m: {s: [] for s in SIDES} for m in args.methods}
                for key in ("cpu_seconds", "total_seconds", "total_cpu_seconds", "load_average")}
    results, extras = {m: {} for m in args.methods}, {m: {} for m in args.methods}
    methods = list(args.methods)
    erasing = [m for m in methods if m.startswith("erasure")]
    if erasing:  # the ranking they score: hf_attn's gradient × input, computed first
        methods = [m for m in methods if m not in erasing] + erasing
    with tempfile.TemporaryDirectory(prefix="hf_attn-peers-") as folder:
        erasure_scores = None
        if erasing:
            rows, _ = run_side(pythons["hf_attn"], "hf_attn", dict(job, method="gradient_x_input"), folder, args.threads)
            if rows is None:
                raise RuntimeError("hf_attn's gradient × input failed; cannot rank for the erasure row")
            erasure_scores = [r.tolist() for r in rows]
        for round_index in range(args.rounds):
            for method in methods:
                sides = ["hf_attn"] + [p for p in METHODS[method] if p in pythons]
                if round_index % 2:
                    sides.reverse()
                for side in sides:
                    method_job = dict(job, method=method, scores=erasure_scores)
                    rows, info = run_side(pythons[side], side, method_job, folder, args.threads)
                    if rows is None:
                        notes.append(f"{side} {method} failed: {info['error']}")
                        print(notes[-1], flush=True)
                        continue
                    seconds[method][side].append(info["seconds"])
                    rss[method][side].append(info["rss_mb"])
                    for key, runs in measured.items():
                        runs[method][side].append(info[key])
                    results[method][side] = rows
                    extras[method][side] = {k: v for k, v in info.items()
                                            if k not in ("seconds", "rss_mb", *measured)}
                    print(f"round {round_index + 1} {method:28s} {side:8s} {info['seconds']:8.2f} s "
                          f"{info['rss_mb']:7.0f} MB", flush=True)
    table = []
    for method in args.methods:
        row = {"method": method, "definition": DEFINITIONS[method],
               "seconds": {s: median(v) for s, v in seconds[method].items() if v},
               "rss_mb": {s: median(v) for s, v in rss[method].items() if v},
               "runs": {s: v for s, v in seconds[method].items() if v}, "agreement": {}, "extra": extras[method],
               **{key: {s: median(v) for s, v in runs[method].items() if v} for key, runs in measured.items()}}
        reference = results[method].get("hf_attn")
        for peer in METHODS[method]:
            if reference is not None and peer in results[method]:
                row["agreement"][peer] = agreement(reference, results[method][peer], args.tolerance)
        source = PEER_ROWS.get(method)
        if source is not None and source in args.methods:  # the peers' runs of the fixed-node row
            given = next(r for r in table if r["method"] == source)
            for key in ("seconds", "rss_mb", "cpu_seconds", "total_seconds", "total_cpu_seconds"):
                row[key] |= {p: v for p, v in given[key].items() if p != "hf_attn"}
            row["peers_from"] = source
            for peer in METHODS[source]:
                if reference is not None and peer in results[source]:
                    row["agreement"][peer] = agreement(reference, results[source][peer], args.tolerance)
            row["extra"] = {"hf_attn": extras[method].get("hf_attn", {}),
                            **{p: v for p, v in extras[source].items() if p != "hf_attn"}}
        ratios(row)
        if method == "faithfulness_table":  # each side's table: the column means over its sentences
            row["columns"] = {side: table_means(rows) for side, rows in results[method].items()}
        table.append(row)
    for method in args.methods:
        for side, extra in extras[method].items():
            for key, value in extra.items():
                if value and not isinstance(value, dict):
                    notes.append(f"{side} {method}: {key} = {value} sentence(s) (left out of the agreement)")
    flops = floors(args, texts, ids, table)
    from stage_flops import matmul_peak

    peak = matmul_peak(args.threads)
    loads = [x for m in args.methods for v in measured["load_average"][m].values() for x in v]
    return {"setup": {"argv": " ".join(sys.argv[1:]), "commit": checkout_commit(),
                      "model": os.path.basename(os.path.normpath(args.model)),
                      "sentences": len(texts), "rounds": args.rounds, "ig_steps": args.ig_steps, "device": device,
                      "threads": args.threads, "peers": list(args.peers), "tolerance": args.tolerance,
                      "pins": PEER_PINS, "fractions": list(FRACTIONS)},
            "rows": table, "notes": notes, "flops": flops, "peak_gflops": peak,
            "goals": goals(table, flops, peak["gflops"]),
            "load_average": {"min": min(loads, default=None), "median": median(loads) if loads else None,
                             "max": max(loads, default=None)}}


def checkout_commit() -> str | None:
    """The commit of this checkout (``git rev-parse --short HEAD``), None outside a git checkout."""
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def model_gflop(config, length: int, pruned: bool = False) -> float:
    """Forward GFLOP of a BERT-type encoder on one sequence of ``length`` tokens (2 per multiply–add:
    the Q/K/V/O projections, the two attention products, the feed-forward layers). ``pruned``: the
    last layer computed as hf_attn's read-out pruning computes it (hf_attn/adapters/readout.py): the
    capture call's Q/K/V projections for every row; the replay's Q/K/V and output projections, its
    attention products over the ``length`` keys and its feed-forward block for the one row the head
    reads."""
    h, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 2 * length * (4 * h * h + 2 * h * f) + 2 * 2 * length * length * h
    if not pruned:
        return layers * per_layer / 1e9
    last = 2 * length * 3 * h * h + 2 * (4 * h * h + 2 * h * f) + 2 * 2 * length * h
    return ((layers - 1) * per_layer + last) / 1e9


def row_gflop(method: str, config, ids, nodes: float = TABLE_PEER_IG_STEPS, pruned: bool = False) -> float:
    """The GFLOP of one row over the sentences ``ids``: the forwards (F) and backwards to the inputs
    (≈ F each) any tool computing it needs; ``nodes``: integrated gradients' gradients per sentence.
    Saliency and gradient × input 2F; leave-one-out F(L) + n·F(L − 1); erasure F(L) and, per distinct
    k, the text with its top k deleted and kept alone; integrated gradients (2·nodes + 1)·F (the
    nodes' forwards and backwards, the prediction); the whole table (2·nodes + 4)·F (integrated
    gradients' nodes, f(x), f(x'), gradient × input), leave-one-out and each ranking's erasures.
    ``pruned``: every forward's last layer as :func:`model_gflop` counts it with ``pruned``."""
    def f(length):
        return model_gflop(config, length, pruned)

    total = 0.0
    for s in ids:
        length, n = len(s), len(s) - 2
        erased = sum(f(length - k) + f(k + 2) for k in distinct_k(n))
        if method in ("saliency", "gradient_x_input", "gradient_x_input_logit"):
            total += 2 * f(length)
        elif method == "leave_one_out":
            total += f(length) + n * f(length - 1)
        elif method in ("erasure", "erasure_eraser"):
            total += f(length) + erased
        elif method.startswith("integrated_gradients"):
            total += (2 * nodes + 1) * f(length)
        elif method.startswith("faithfulness_table"):
            total += (2 * nodes + 4) * f(length) + f(length) + n * f(length - 1) + len(TABLE_METHODS) * erased
        else:
            raise ValueError(f"no FLOP count for the row {method!r}")
    return total


def floors(args, texts, ids, table) -> dict:
    """Each row's FLOPs (:func:`row_gflop`) and the rate each side achieved. At the completeness target
    hf_attn's own gradients per sentence count (``ig_gradients_mean`` of its run) and the peers keep
    their fixed node count (``peers_gflop``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.model)
    out = {}
    for row in table:
        seconds = row.get("seconds") or {}
        if "hf_attn" not in seconds:
            continue
        method, nodes = row["method"], getattr(args, "ig_steps", TABLE_PEER_IG_STEPS)
        if method.startswith("faithfulness_table"):
            nodes = TABLE_PEER_IG_STEPS
        peers_gflop = row_gflop(method, config, ids, nodes)
        own = row.get("extra", {}).get("hf_attn", {}) or {}
        # erasure_eraser scores through the model itself (_Framed), never through the adapter's forwards
        pruned = bool(own.get("adapter", {}).get("readout_pruning")) and method != "erasure_eraser"
        gflop = row_gflop(method, config, ids, nodes, pruned)
        if method in PEER_ROWS:  # hf_attn's own work at its target
            ig = own.get("ig_completeness", {})
            if "ig_gradients_mean" not in ig:
                continue
            gflop = row_gflop(method, config, ids, ig["ig_gradients_mean"], pruned)
        entry = {"gflop": gflop, "seconds": seconds["hf_attn"], "gflops": gflop / seconds["hf_attn"],
                 "peers_gflops": {p: peers_gflop / v for p, v in seconds.items() if p != "hf_attn"},
                 "side_seconds": dict(seconds)}
        if gflop != peers_gflop:
            entry["peers_gflop"] = peers_gflop
        out[method] = entry
    return out


# ------------------------------------------------------------------------------------------------
# growth


def _growth_worker(job):
    import numpy as np
    import torch

    from hf_attn import Explainer
    from hf_attn.batteries.faithfulness import erasure_scores
    from hf_attn.methods import adapter_integrated_gradients, deletion, gradient_x_input, saliency

    explainer = Explainer.from_pretrained(job["model"], device=job["device"])
    adapter = explainer.adapter
    stream, length, count, method = job["stream"], job["length"], job["count"], job["method"]
    special = adapter.tokenizer
    rows, at = [], 0
    for _ in range(count):
        if at + length - 2 > len(stream):
            at = 0
        rows.append([special.cls_token_id] + stream[at:at + length - 2] + [special.sep_token_id])
        at += length - 2
    functions = {
        "saliency": lambda b: saliency.saliency(adapter, b),
        "gradient_x_input": lambda b: gradient_x_input.gradient_x_input(adapter, b),
        "integrated_gradients": lambda b: adapter_integrated_gradients.integrated_gradients_attribution(
            adapter, b, job["ig_steps"], "gauss-legendre").attributions,
        "leave_one_out": lambda b: deletion.leave_one_out_deletion(adapter, b),
    }
    start = time.perf_counter()
    if method == "erasure":
        rng = np.random.default_rng(0)
        texts = [adapter.tokenizer.decode(r[1:-1]) for r in rows]
        encoded = adapter.encode(texts)
        scores = [rng.random(int(encoded.attention_mask[i].sum())) for i in range(count)]
        start = time.perf_counter()
        erasure_scores(adapter, texts, scores, FRACTIONS)
    else:
        per_batch = max(1, job["budget"] // length)
        with torch.inference_mode(False):
            for begin in range(0, count, per_batch):
                functions[method](adapter.from_token_lists(rows[begin:begin + per_batch]))
    _sync(job["device"])
    return time.perf_counter() - start


def growth(args) -> list:
    from transformers import AutoTokenizer

    import torch

    device = resolve_device(args.device, torch.cuda.is_available())
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    stream = [t for p in tokenizer(sst_sentences(1821), add_special_tokens=False)["input_ids"] for t in p]
    counts = [c for c in GROWTH_COUNTS if c <= args.growth_max_count] or [args.growth_max_count]
    cells = []
    chosen = [m for m in GROWTH_METHODS if m in args.methods]
    if not chosen:
        raise ArgumentError(f"--methods: --growth runs {list(GROWTH_METHODS)}, none of them was chosen")
    with tempfile.TemporaryDirectory(prefix="hf_attn-growth-") as folder:
        for method in chosen:
            for count in counts:
                for length in args.growth_lengths:
                    job = {"model": os.path.abspath(args.model), "device": device, "threads": args.threads,
                           "stream": stream, "length": length, "count": count, "method": method,
                           "ig_steps": args.ig_steps, "budget": 1024, "growth": True,
                           "out": os.path.join(folder, f"{method}-{count}-{length}")}
                    path = job["out"] + ".job.json"
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(job, f)
                    env = _environment(args.threads)
                    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
                    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", path], env=env,
                                          capture_output=True, text=True)
                    if done.returncode:
                        print(f"{method} {length} × {count} failed: {done.stderr.strip().splitlines()[-1:]}")
                        continue
                    with open(job["out"] + ".json", encoding="utf-8") as f:
                        info = json.load(f)
                    cell = {"cell": f"{method}-{length}-{count}", "method": method, "length": length, "count": count,
                            **info}
                    cells.append(cell)
                    print(f"{method:22s} {length:4d} tokens × {count:6d}: {info['seconds']:8.2f} s "
                          f"{info['rss_mb']:7.0f} MB", flush=True)
    return cells


def run_growth_worker(job) -> int:
    import torch

    torch.set_num_threads(job["threads"])
    seconds = _growth_worker(job)
    with open(job["out"] + ".json", "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "rss_mb": _peak_rss_mb()}, f)
    return 0


# ------------------------------------------------------------------------------------------------


def bilstm(args) -> int:
    """The papers' BiLSTM J&W battery: this checkout against ``--baseline`` through
    ``scripts/check_regression.py`` (same numbers, time ratio). The repository holds no runner of the
    authors' research code (it compares with their published numbers, ``docs/reproduction``), and that
    code is no package on a registry the project's machines reach, so this line is the regression one."""
    print("The papers' BiLSTM: scripts/ and docs/benchmarks hold no runner of the authors' research code "
          "(docs/reproduction compares with their published numbers); this line runs the J&W battery of this "
          "checkout against an earlier commit through scripts/check_regression.py.", flush=True)
    if not args.baseline:
        print("peers.py: error: --bilstm needs --baseline COMMIT (the commit to compare with)", file=sys.stderr)
        return 2
    command = [sys.executable, str(ROOT / "scripts" / "check_regression.py"), "--baseline", args.baseline,
               "--run", args.run, "--rounds", str(args.rounds)]
    return subprocess.call(command, env=_environment(args.threads))


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except ArgumentError as error:
        print(f"peers.py: error: {error}", file=sys.stderr)
        return 2
    if args.worker:
        with open(args.worker, encoding="utf-8") as f:
            job = json.load(f)
        return run_growth_worker(job) if job.get("growth") else run_worker(args.worker)
    if args.bilstm:
        return bilstm(args)
    try:
        if args.growth:
            cells = growth(args)
            print(format_growth(cells))
            record = {"setup": {"argv": " ".join(sys.argv[1:]), "device": args.device, "threads": args.threads,
                                "ig_steps": args.ig_steps}, "growth": cells}
        else:
            record = compare(args)
            print(format_table(record["rows"], with_variants(args.peers)))
            for row in record["rows"]:
                if row.get("columns"):
                    print(format_columns(row["columns"]))
            for note in record["notes"]:
                print(f"- {note}")
            print(format_flops(record["flops"], record.get("peak_gflops"), with_variants(args.peers)))
    except ArgumentError as error:
        print(f"peers.py: error: {error}", file=sys.stderr)
        return 2
    if args.write:
        write_record(args.write, record)
    return 0


def write_record(path: str, record: dict) -> None:
    target = Path(path)
    if target.is_file():  # --growth and the comparison share one file: keep the other part
        old = json.loads(target.read_text(encoding="utf-8"))
        if "rows" not in record and "rows" in old:
            record = {**old, "growth": record["growth"], "growth_setup": record["setup"]}
        elif "growth" in old and "growth" not in record:
            record = {**record, "growth": old["growth"], "growth_setup": old.get("growth_setup", {})}
    record["path"] = target.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=1, default=float) + "\n", encoding="utf-8")
    target.with_suffix(".md").write_text(markdown_page(record), encoding="utf-8")
    print(f"wrote {target} and {target.with_suffix('.md')}")


if __name__ == "__main__":
    sys.exit(main())
