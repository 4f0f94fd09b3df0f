"""The table's second axis: plausibility, each method's scores against a human rationale per word
(ERASER, DeYoung et al. 2020; the metrics of :mod:`hf_attn.core.plausibility`, computed as
``rationale_benchmark/metrics.py`` of jayded/eraserbenchmark does).

From tokens to the rationale's words: the model's tokens of a text are mapped to the text's
whitespace words by the tokenizer's character offsets (:func:`content_word_ids`), and a word's
score is the **sum** of its tokens' scores — the rule of the adapters' word display
(:mod:`hf_attn.core.word_pieces`). The scores are the ones the faithfulness columns rank (the
method's own sign: a signed method's most negative word is its least important). Words a text lost
to the model's length limit rank below every word the model read.

Per text and method, three columns:

- ``auprc``: the area under the precision-recall curve of the word scores against the rationale
  (metrics.py ``_auprc``); its mean over texts is ERASER's AUPRC;
- ``token_f1``: the F1 of the top ``int(k_fraction × words)`` words against the rationale; its mean
  is ERASER's instance-macro token F1 (``k_fraction``: the rationales' share of marked words, ERASER's
  ``params/*_soft.json``; the battery takes it from the rationale data's train split);
- ``iou_f1``: the text's F1 of span precision and recall at IOU ≥ 0.5 (metrics.py
  ``partial_match_score`` on one text). ERASER's macro IOU F1 is the F1 of the averaged precision
  and recall instead; it is recorded per method in ``metric_details["plausibility"]["eraser"]``
  beside every other data-set-level value of :func:`hf_attn.core.plausibility.plausibility`.

A text whose rationale marks no word has no plausibility (undefined, counted, with the reason), as
ERASER's scorer cannot score it either. The cells then carry what every column carries: mean,
interval, median, the texts covered and the paired Wilcoxon test against the random floor.
"""

from __future__ import annotations

import math

import numpy as np

from hf_attn.core import plausibility as pl
from hf_attn.batteries.faithfulness.settings import PLAUSIBILITY_METRICS, UNDEFINED

ANALYSED_K = "the mean share of marked words over the analysed texts' rationales"


def checked_rationales(texts: list[str], rationales) -> list[np.ndarray]:
    """``rationales`` as one 0/1 ``int8`` array per text, one mark per whitespace word
    (``text.split()``); a one-line ``ValueError`` naming the text at fault otherwise."""
    if isinstance(rationales, (str, bytes)) or not hasattr(rationales, "__len__"):
        raise ValueError("rationales must be a list with one 0/1 mark per whitespace word for each text")
    if len(rationales) != len(texts):
        raise ValueError(f"{len(rationales)} rationales for {len(texts)} texts; give one per text")
    out = []
    for i, (text, marks) in enumerate(zip(texts, rationales)):
        if not isinstance(text, str):
            raise ValueError(f"text {i} is a {type(text).__name__}: plausibility takes single texts, one rationale "
                             "mark per whitespace word")
        array = np.asarray(marks)
        words = len(text.split())
        if array.ndim != 1 or array.size != words:
            raise ValueError(f"rationale {i} has {array.size} marks but text {i} has {words} whitespace words; "
                             "give one 0/1 mark per word of text.split()")
        if not np.all((array == 0) | (array == 1)):
            raise ValueError(f"rationale {i} holds a value other than 0 or 1")
        out.append(array.astype(np.int8))
    return out


def _offsets(tokenizer, text: str):
    """The ids and character offsets of ``text``'s own tokens (no special tokens)."""
    from hf_attn.adapters.contract import encode_as_text

    try:
        encoded = encode_as_text(tokenizer, text, add_special_tokens=False, return_offsets_mapping=True,
                                 truncation=False, verbose=False)
    except (NotImplementedError, TypeError, ValueError) as error:
        if "offset" not in str(error).lower() and not isinstance(error, NotImplementedError):
            raise
        raise ValueError(f"plausibility needs the character offsets of a fast tokenizer to map tokens to words; "
                         f"{type(tokenizer).__name__} gives none ({error})") from None
    return list(encoded["input_ids"]), list(encoded["offset_mapping"])


def _aligned_start(full: list[int], kept: list[int], where: str, kept_end: str = "start") -> int:
    """Where the model's content tokens ``kept`` sit in the text's full tokenization ``full``: the
    end the adapter keeps first (``kept_end`` ``"start"``: a text cut at its end; ``"end"``: at its
    start, as decoders keep the last tokens), then the other, else the first place they occur."""
    n = len(kept)
    ends = (len(full) - n, 0) if kept_end == "end" else (0, len(full) - n)
    for start in dict.fromkeys(ends):
        if 0 <= start and full[start:start + n] == kept:
            return start
    for start in range(len(full) - n + 1):
        if full[start:start + n] == kept:
            return start
    raise ValueError(f"{where}: the model's tokens are not a run of the tokenizer's tokens of the text, so they "
                     "cannot be mapped to its words")


def content_word_ids(adapter, texts: list[str], instances, cut: list | None = None) -> list[list[int | None]]:
    """Per text, per content token of its instance (the tokens the methods score), the index of the
    whitespace word its characters overlap most (:func:`hf_attn.core.plausibility.whitespace_word_ids`;
    None: no word). ``cut``, a list, receives the indices of the texts the model read cut (fewer
    tokens than the text's tokenization)."""
    tokenizer = getattr(adapter, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"{type(adapter).__name__} has no tokenizer: plausibility cannot map its tokens to words")
    kept_end = getattr(adapter, "kept_end", "start")
    out = []
    for i, (text, instance) in enumerate(zip(texts, instances)):
        kept = [int(t) for t in np.asarray(instance.tokens)[np.asarray(instance.content, bool)]]
        ids, offsets = _offsets(tokenizer, text)
        start = _aligned_start([int(t) for t in ids], kept, f"text {i}", kept_end)
        if cut is not None and len(kept) < len(ids):
            cut.append(i)
        out.append(pl.whitespace_word_ids(text, offsets[start:start + len(kept)]))
    return out


def text_word_scores(content_scores, word_ids, num_words: int) -> np.ndarray:
    """``(W,)`` word scores of one text from its content tokens' scores: each word the sum of its
    tokens; words no token reached (cut by the length limit, or a word of characters the tokenizer
    drops) one below the lowest word reached."""
    ids = list(word_ids)
    reached = np.zeros(num_words, bool)
    reached[[w for w in ids if w is not None]] = True
    scores = pl.word_scores(content_scores, ids, num_words)
    if not reached.all():
        floor = scores[reached].min() - 1.0 if reached.any() else 0.0
        scores[~reached] = floor
    return scores


def _text_values(words: np.ndarray, truth: np.ndarray, k_fraction: float) -> tuple[float, float, float]:
    """(AUPRC, token F1, IOU F1) of one text; NaN each when the rationale marks no word."""
    if not truth.any():
        return math.nan, math.nan, math.nan
    hard = pl.top_k_mask(words, int(k_fraction * truth.size))
    return (pl.auprc(words, truth), pl.token_prf([hard], [truth])["macro_f1"],
            pl.iou_f1([hard], [truth])["macro_f1"])


def k_fraction_of(rationales: list[np.ndarray]) -> float:
    """ERASER's default ``k_fraction`` from human rationales
    (:func:`hf_attn.core.plausibility.rationale_share`)."""
    return pl.rationale_share(rationales)


def plausibility_cells(columns, adapter, texts: list[str], instances, scores: dict, rationales: list[np.ndarray],
                       k_fraction: float | None, wanted, k_source: str | None = None) -> dict:
    """Add the plausibility columns of every method to ``columns`` (:class:`~hf_attn.batteries.
    faithfulness.table._Columns`); returns ``metric_details["plausibility"]``: the k fraction, the IOU
    threshold, the word rule, the texts without a marked word, the fully marked ones, the texts cut
    by the length limit, and per method ERASER's data-set-level values."""
    if k_fraction is None:
        k_fraction, k_source = k_fraction_of(rationales), k_source or ANALYSED_K
    else:
        k_fraction, k_source = float(k_fraction), k_source or "given (rationale_k_fraction)"
    cut: list = []
    word_ids = content_word_ids(adapter, texts, instances, cut)
    no_rationale = [i for i, r in enumerate(rationales) if not r.any()]
    unread = [i for i, (ids, r) in enumerate(zip(word_ids, rationales))
              if i not in cut and len({w for w in ids if w is not None}) < r.size]
    eraser = {}
    for method, rows in scores.items():
        words = [text_word_scores(np.asarray(row)[np.asarray(inst.content, bool)], ids, r.size)
                 for row, inst, ids, r in zip(rows, instances, word_ids, rationales)]
        values = np.array([_text_values(w, r.astype(bool), k_fraction) for w, r in zip(words, rationales)])
        for j, metric in enumerate(PLAUSIBILITY_METRICS):
            if metric in wanted:
                columns.add(method, metric, values[:, j],
                            [UNDEFINED[metric] if i in no_rationale else None for i in range(len(texts))])
        method_undefined = columns.undefined.get(method) or [None] * len(texts)
        kept = [i for i in range(len(texts)) if method_undefined[i] is None]
        if any(rationales[i].any() for i in kept):
            summary = pl.plausibility([words[i] for i in kept], [rationales[i] for i in kept], k_fraction)
            eraser[method] = {k: v for k, v in summary.to_dict().items() if not k.startswith("instance_")} | {
                "without_rationale": [kept[i] for i in summary.without_rationale]}
    return {"k_fraction": k_fraction, "k_fraction_source": k_source, "iou_threshold": pl.ERASER_IOU_THRESHOLD,
            "word_rule": "a word's score is the sum of its tokens' (hf_attn.core.word_pieces); words cut by the "
                         "length limit rank last",
            "without_rationale": no_rationale, "fully_marked": [i for i, r in enumerate(rationales) if r.all() and r.size],
            "cut_by_length_limit": cut, "words_without_token": unread,
            "marked_share": float(np.mean([r.mean() for r in rationales if r.size])), "eraser": eraser}


__all__ = ["checked_rationales", "content_word_ids", "k_fraction_of", "plausibility_cells", "text_word_scores"]
