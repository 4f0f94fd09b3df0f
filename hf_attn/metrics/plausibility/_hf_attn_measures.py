# Generated from hf_attn/core/numpy_primitives.py, hf_attn/core/numpy_measures.py and hf_attn/core/plausibility.py
# by scripts/generate_metric_copies.py: do not edit.
# It holds what this folder's scripts import from it and what that uses, nothing more.
# Edit the sources and run `python scripts/generate_metric_copies.py` to update every copy.
"""Plausibility: how well an explanation's word scores agree with a human rationale (0/1 per word),
with the token-level metrics of ERASER (DeYoung et al. 2020), computed as
``rationale_benchmark/metrics.py`` of jayded/eraserbenchmark does. NumPy only.

* **AUPRC** (:func:`auprc`; ``score_soft_tokens`` → ``_auprc``): per text, the area under the
  precision-recall curve of the soft scores against the 0/1 rationale — ``sklearn``'s
  ``precision_recall_curve`` then ``auc`` (trapezoids between the curve's points, the point
  recall 0 / precision 1 included) — then the mean over texts. ERASER also reports the step-wise
  **average precision** (:func:`average_precision`, ``sklearn.metrics.average_precision_score``),
  averaged over the texts whose rationale is neither empty nor every word (``_score_aggregator``
  with ``discard_single_class_answers=True``).
* **Token F1** (:func:`token_prf`; ``score_hard_rationale_predictions`` on token-level rationales):
  hard predictions are the top-k words of each text, ``k = int(k_fraction × words)`` with
  ``k_fraction`` the human rationales' share of words, as ERASER's soft-scoring baselines do
  (``models/encode_attend.py`` ``decode``: ``nlargest(int(k_fraction * len(doc)))``, ``k_fraction``
  from ``params/*_soft.json``). Reported: the instance-macro F1 (the mean of the per-text F1s,
  ``token_prf.instance_macro.f1``) and the micro F1 over all words.
* **IOU F1** (:func:`iou_f1`; ``partial_match_score``): spans are maximal runs of marked words; a
  predicted span is a true positive when its best intersection-over-union with a human span is
  ≥ the threshold (0.5). Macro: recall averaged over texts with a human span, precision over texts
  with a predicted span, F1 of the two averages (``iou_scores[0].macro.f1``); micro: counts pooled.

Texts whose human rationale marks no word cannot be scored (ERASER's data has none; every metric
above would be undefined or zero for them): :func:`plausibility` leaves them out, counts them and
names their positions. Word-piece scores become word scores by :func:`word_scores` (the sum rule of
:mod:`hf_attn.core.word_pieces`) over the whitespace words of :func:`whitespace_word_ids`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


def check_number(name: str, value, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in ``[low, high]`` (``low_open`` / ``high_open``: the bound excluded);
    a ``ValueError`` naming ``name`` otherwise (NaN and ±inf included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (number <= low if low_open else number < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if high is not None and (number >= high if high_open else number > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value!r}")
    return number


def jsonable(value):
    """Summary → plain JSON types (arrays → lists, NaN → None): what the evaluate modules return."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (float, np.floating)):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


# ------------------------------------------------------------------------------------------------
# undefined values: None with a reason, in every evaluate module's result
UNDEFINED_KEY = "undefined"


def _is_undefined(value) -> bool:
    if value is None:
        return True
    return isinstance(value, (float, np.floating)) and not math.isfinite(float(value))


def _positions(indices: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(i) for i in indices[:limit])
    return shown + (f", … ({len(indices)} in all)" if len(indices) > limit else "")


def _reason_for(path: str, reasons: dict) -> str | None:
    """The reason for ``path`` (keys joined by ".", a list's items as "[]"): the first key of
    ``reasons`` that matches it component by component ("*" matches any one component), else the
    reason given for its last component alone."""
    parts = path.split(".")
    for pattern, reason in reasons.items():
        wanted = pattern.split(".")
        if len(wanted) == len(parts) and all(w in ("*", p) for w, p in zip(wanted, parts)):
            return reason
    return reasons.get(parts[-1])


def report_undefined(summary: dict, reasons: dict) -> dict:
    """``summary`` as plain JSON types (:func:`jsonable`) in which every undefined value (NaN, ±inf
    or None) is ``None`` and named, with why, in ``result["undefined"]`` (``{path: reason}``;
    ``{}`` when every value is defined), so that no module returns NaN or a silent null.

    ``path`` joins dict keys with "."; the undefined items of a list are named once, under the
    list's path with "[]" for the items' position (``"tau[]"``, ``"by_max_attention[].median"``),
    their positions added to the reason. ``reasons`` maps a path pattern ("*" matches any one
    component: ``"per_class.*.mean"``) or a last component (``"mean"``) to the reason. An undefined
    value without a reason is a ``RuntimeError``: the module, not its input, is at fault."""
    found: dict[str, list[int]] = {}

    def walk(value, path, position):
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k), position) for k, v in value.items()}
        if isinstance(value, (list, tuple, np.ndarray)):
            items = value.tolist() if isinstance(value, np.ndarray) else value
            return [walk(v, f"{path}[]", i) for i, v in enumerate(items)]
        if _is_undefined(value):
            found.setdefault(path, [])
            if position is not None:
                found[path].append(position)
            return None
        return jsonable(value)

    out = walk(summary, "", None)
    undefined = {}
    for path, positions in found.items():
        reason = _reason_for(path, reasons)
        if reason is None:
            raise RuntimeError(f"{path} is undefined and no reason is given for it")
        undefined[path] = reason + (f" (positions {_positions(sorted(set(positions)))})" if positions else "")
    out[UNDEFINED_KEY] = undefined
    return out


ERASER_IOU_THRESHOLD = 0.5  # metrics.py: --iou_thresholds default [0.5]


# ----------------------------------------------------------------------------------------------
# per text


def _checked(scores, truth, where: str = "text") -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    t = np.asarray(truth).reshape(-1)
    if s.shape != t.shape:
        raise ValueError(f"{where}: {s.size} scores but {t.size} rationale marks; they must be as many (one per word)")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{where}: scores must be finite (got NaN or inf)")
    if not np.all((t == 0) | (t == 1)):
        raise ValueError(f"{where}: rationale marks must be 0 or 1")
    return s, t.astype(bool)


def _masks(predicted, truth, where: str) -> tuple[np.ndarray, np.ndarray]:
    p, t = np.asarray(predicted).reshape(-1), np.asarray(truth).reshape(-1)
    if p.shape != t.shape:
        raise ValueError(f"{where}: {p.size} predicted marks but {t.size} rationale marks; they must be as many")
    if not (np.all((p == 0) | (p == 1)) and np.all((t == 0) | (t == 1))):
        raise ValueError(f"{where}: predicted and rationale marks must be 0 or 1")
    return p.astype(bool), t.astype(bool)


def pr_curve(scores, truth) -> tuple[np.ndarray, np.ndarray]:
    """``(recall, precision)`` at each distinct score, highest threshold first, after the point
    recall 0 / precision 1 — the points of ``sklearn.metrics.precision_recall_curve`` (reversed).
    ``scores``, ``truth``: ``(W,)``; ``truth`` needs a marked word."""
    s, t = _checked(scores, truth)
    if not t.any():
        raise ValueError("the rationale marks no word: precision and recall are undefined")
    order = np.argsort(-s, kind="stable")
    s, t = s[order], t[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # the last position of each distinct score
    tps = np.cumsum(t)[last].astype(np.float64)
    fps = (last + 1) - tps
    return np.r_[0.0, tps / tps[-1]], np.r_[1.0, tps / (tps + fps)]


def auprc(scores, truth) -> float:
    """ERASER's AUPRC of one text (metrics.py ``_auprc``): trapezoidal area under :func:`pr_curve`."""
    recall, precision = pr_curve(scores, truth)
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2))


def average_precision(scores, truth) -> float:
    """Step-wise average precision of one text, ``Σ (R_n − R_{n−1}) P_n`` (``sklearn.metrics.
    average_precision_score``)."""
    recall, precision = pr_curve(scores, truth)
    return float(np.sum(np.diff(recall) * precision[1:]))


def top_k_mask(scores, k: int) -> np.ndarray:
    """``(W,)`` bool: the ``k`` highest scores (ties: the earlier word first)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    mask = np.zeros(s.size, dtype=bool)
    mask[np.argsort(-s, kind="stable")[:max(int(k), 0)]] = True
    return mask


def spans(mask) -> list[tuple[int, int]]:
    """Maximal runs of marked words as ``(start, end)``, end exclusive (ERASER's evidence spans)."""
    m = np.r_[False, np.asarray(mask, dtype=bool).reshape(-1), False]
    edges = np.flatnonzero(np.diff(m.astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def _f1(p: float, r: float) -> float:
    return 0.0 if p == 0 or r == 0 else 2 * p * r / (p + r)


def token_prf(predicted: Sequence, truth: Sequence) -> dict[str, float]:
    """Token precision / recall / F1 of hard predictions (``(W_i,)`` 0/1 per text) against the
    rationales, ERASER's ``score_hard_rationale_predictions`` on token-level rationales: ``macro_*``
    the mean over the texts with a marked or predicted word of each text's P, R, F1 (a text with no
    prediction has P = 0); ``micro_*`` from the pooled counts."""
    tp = n_pred = n_true = 0
    ps, rs, fs = [], [], []
    for i, (pred, true) in enumerate(zip(predicted, truth, strict=True)):
        pred, true = _masks(pred, true, f"text {i}")
        hit, np_, nt = int((pred & true).sum()), int(pred.sum()), int(true.sum())
        tp, n_pred, n_true = tp + hit, n_pred + np_, n_true + nt
        if np_ or nt:
            p, r = (hit / np_ if np_ else 0.0), (hit / nt if nt else 0.0)
            ps.append(p), rs.append(r), fs.append(_f1(p, r))
    micro_p, micro_r = (tp / n_pred if n_pred else 0.0), (tp / n_true if n_true else 0.0)
    mean = lambda v: float(np.mean(v)) if v else 0.0  # noqa: E731
    return {"macro_p": mean(ps), "macro_r": mean(rs), "macro_f1": mean(fs),
            "micro_p": micro_p, "micro_r": micro_r, "micro_f1": _f1(micro_p, micro_r)}


def iou_f1(predicted: Sequence, truth: Sequence, threshold: float = ERASER_IOU_THRESHOLD) -> dict[str, float]:
    """ERASER's partial-match (IOU) F1 (metrics.py ``partial_match_score``) of hard predictions
    (``(W_i,)`` 0/1 per text) against the rationales, spans = maximal runs (:func:`spans`): a predicted
    span counts when its best IOU with a human span of the same text is ≥ ``threshold``. ``macro_r``
    averages TP / human spans over texts with a human span, ``macro_p`` TP / predicted spans over
    texts with a predicted span, ``macro_f1`` = F1(macro_p, macro_r); ``micro_*`` pool the counts."""
    if not 0 < float(threshold) <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    tps, n_pred, n_true, rs, ps = 0, 0, 0, [], []
    for i, (pred, true) in enumerate(zip(predicted, truth, strict=True)):
        pred, true = _masks(pred, true, f"text {i}")
        p_spans, t_spans = spans(pred), spans(true)
        hits = 0
        for a, b in p_spans:
            best = max((max(0, min(b, d) - max(a, c)) / (max(b, d) - min(a, c)) for c, d in t_spans), default=0.0)
            hits += int(best >= threshold)
        tps, n_pred, n_true = tps + hits, n_pred + len(p_spans), n_true + len(t_spans)
        if t_spans:
            rs.append(hits / len(t_spans))
        if p_spans:
            ps.append(hits / len(p_spans))
    micro_p, micro_r = (tps / n_pred if n_pred else 0.0), (tps / n_true if n_true else 0.0)
    macro_p, macro_r = (float(np.mean(ps)) if ps else 0.0), (float(np.mean(rs)) if rs else 0.0)
    return {"macro_p": macro_p, "macro_r": macro_r, "macro_f1": _f1(macro_p, macro_r),
            "micro_p": micro_p, "micro_r": micro_r, "micro_f1": _f1(micro_p, micro_r)}


# ----------------------------------------------------------------------------------------------
# a data set


@dataclass(frozen=True)
class PlausibilityResult:
    """Plausibility of N texts' word scores against their rationales (module docstring for the
    definitions). ``scored``: the texts with a marked word, the only ones the metrics average over;
    ``without_rationale``: the positions of the others (counted, never silently dropped);
    ``fully_marked``: scored texts whose rationale is every word (their AUPRC is 1 whatever the
    scores; average precision leaves them out, as ERASER). ``instance_auprc`` / ``instance_token_f1``:
    per scored text, in order."""

    auprc: float
    average_precision: float | None  # None when no scored text has both marked and unmarked words
    token_f1: float
    token_precision: float
    token_recall: float
    token_f1_micro: float
    iou_f1: float
    iou_f1_micro: float
    k_fraction: float
    per_instance_k: bool
    iou_threshold: float
    n_texts: int
    scored: int
    without_rationale: tuple[int, ...]
    fully_marked: int
    instance_auprc: tuple[float, ...]
    instance_token_f1: tuple[float, ...]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["without_rationale"] = list(self.without_rationale)
        out["instance_auprc"] = list(self.instance_auprc)
        out["instance_token_f1"] = list(self.instance_token_f1)
        return out


def rationale_share(rationales: Sequence) -> float:
    """The mean share of marked words over the rationales (``(W_i,)`` 0/1 arrays) that mark a word:
    ERASER's ``k_fraction`` from human rationales. Raises when none marks a word."""
    shares = [np.asarray(r).mean() for r in rationales if np.asarray(r).any()]
    if not shares:
        raise ValueError(f"none of the {len(rationales)} rationales marks a word: nothing to score plausibility on")
    return float(np.mean(shares))


def plausibility(scores: Sequence, rationales: Sequence, k_fraction: float | None = None,
                 per_instance_k: bool = False, iou_threshold: float = ERASER_IOU_THRESHOLD) -> PlausibilityResult:
    """ERASER's token-level plausibility of word ``scores`` (one ``(W_i,)`` array per text, higher =
    more important) against ``rationales`` (``(W_i,)`` 0/1 per text). Hard predictions for token and
    IOU F1: the top ``int(k_fraction × W_i)`` words; ``k_fraction`` defaults to the scored rationales'
    mean share of marked words (ERASER fixes it per data set from the human rationales; pass the
    train split's share to do the same); ``per_instance_k``: k = the text's own number of marked
    words instead. Texts whose rationale marks no word are left out and reported."""
    scores, rationales = list(scores), list(rationales)
    if len(scores) != len(rationales):
        raise ValueError(f"{len(scores)} score arrays but {len(rationales)} rationales; they must be as many")
    pairs = [_checked(s, t, f"text {i}") for i, (s, t) in enumerate(zip(scores, rationales))]
    keep = [i for i, (_, t) in enumerate(pairs) if t.any()]
    if not keep:
        raise ValueError(f"none of the {len(pairs)} texts has a rationale (a marked word): nothing to score")
    if k_fraction is None:
        k_fraction = rationale_share([t for _, t in pairs])
    elif not 0 <= float(k_fraction) <= 1:
        raise ValueError(f"k_fraction must be in [0, 1], got {k_fraction!r}")
    s_kept, t_kept = [pairs[i][0] for i in keep], [pairs[i][1] for i in keep]
    ks = [int(t.sum()) if per_instance_k else int(float(k_fraction) * t.size) for t in t_kept]
    hard = [top_k_mask(s, k) for s, k in zip(s_kept, ks)]
    inst_auprc = [auprc(s, t) for s, t in zip(s_kept, t_kept)]
    mixed = [average_precision(s, t) for s, t in zip(s_kept, t_kept) if not t.all()]
    inst_f1 = [token_prf([h], [t])["macro_f1"] for h, t in zip(hard, t_kept)]
    tok, iou = token_prf(hard, t_kept), iou_f1(hard, t_kept, iou_threshold)
    return PlausibilityResult(
        auprc=float(np.mean(inst_auprc)), average_precision=float(np.mean(mixed)) if mixed else None,
        token_f1=tok["macro_f1"], token_precision=tok["macro_p"], token_recall=tok["macro_r"],
        token_f1_micro=tok["micro_f1"], iou_f1=iou["macro_f1"], iou_f1_micro=iou["micro_f1"],
        k_fraction=float(k_fraction), per_instance_k=bool(per_instance_k), iou_threshold=float(iou_threshold),
        n_texts=len(pairs), scored=len(keep),
        without_rationale=tuple(i for i, (_, t) in enumerate(pairs) if not t.any()),
        fully_marked=sum(1 for t in t_kept if t.all()),
        instance_auprc=tuple(inst_auprc), instance_token_f1=tuple(inst_f1))
