"""ERASER's token-level plausibility (DeYoung et al. 2020): how well word scores (attention, gradient,
leave-one-out, ...) agree with 0/1 human rationales — AUPRC, average precision, token F1 of the top-k
words and IOU F1, computed as ``rationale_benchmark/metrics.py`` of jayded/eraserbenchmark does.
Model-free (NumPy only). Thin wrapper over ``plausibility`` of ``_hf_attn_measures.py``, shipped
beside this script: the copy of ``hf_attn.core.plausibility.plausibility``, so the module runs
without hf_attn; an undefined value is None with its reason (``report_undefined``)."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import ERASER_IOU_THRESHOLD, check_number, plausibility, report_undefined

_DESCRIPTION = """Plausibility of word scores against human rationales (ERASER, DeYoung et al. 2020):
per text, the AUPRC of the scores against the 0/1 rationale (scikit-learn's precision_recall_curve
then auc, as ERASER's metrics.py) and the step-wise average precision; the token precision, recall
and F1 of the top-k words (k = int(k_fraction x words)); the IOU F1 of the runs of top-k words
against the rationale's spans (a predicted span counts when its best IOU with a human span is at
least iou_threshold). Means over the texts whose rationale marks a word; the others are counted and
listed, never scored."""

_KWARGS = """
Args:
    predictions: per text, a list of word scores (finite floats; higher = more important).
    references: per text, a list of 0/1 rationale marks, one per word (as many as its scores).
    k_fraction: the share of each text's words predicted as rationale for token and IOU F1, in
        [0, 1] (default None: the scored rationales' mean share of marked words; ERASER fixes it per
        data set, e.g. 0.07 for movie reviews).
    per_instance_k: k = the text's own number of marked words instead (default False).
    iou_threshold: the IOU a predicted span needs to count, in (0, 1] (default 0.5, ERASER's).
Returns:
    auprc, average_precision (over texts with marked and unmarked words; None when there is none),
    token_f1, token_precision, token_recall (means over texts), token_f1_micro (pooled), iou_f1,
    iou_f1_micro, k_fraction, per_instance_k, iou_threshold, n_texts, scored, without_rationale (the
    positions of the texts with no marked word, left out), fully_marked, instance_auprc and
    instance_token_f1 (per scored text), undefined ({name: why} for every value that is None).
"""

_CITATION = """@inproceedings{deyoung-etal-2020-eraser,
  title = {{ERASER}: A Benchmark to Evaluate Rationalized {NLP} Models},
  author = {DeYoung, Jay and Jain, Sarthak and Rajani, Nazneen Fatema and Lehman, Eric and
            Xiong, Caiming and Socher, Richard and Wallace, Byron C.},
  booktitle = {Proceedings of ACL 2020},
  year = {2020}, pages = {4443--4458}}"""


def checked_texts(predictions, references):
    """The texts as float arrays; a ValueError naming the argument at fault otherwise."""
    if len(predictions) == 0:
        raise ValueError("predictions: no text given; pass one list of word scores per text")
    scores, marks = [], []
    for i, (s, m) in enumerate(zip(predictions, references)):
        s = numpy.asarray([numpy.nan if v is None else v for v in s], dtype=numpy.float64)
        m = numpy.asarray([numpy.nan if v is None else v for v in m], dtype=numpy.float64)
        if s.size != m.size:
            raise ValueError(f"predictions and references: text {i} has {s.size} scores but {m.size} rationale "
                             "marks; they must be as many (one per word)")
        if not numpy.isfinite(s).all():
            raise ValueError(f"predictions: text {i} has a score that is not a finite number ({s[~numpy.isfinite(s)][0]})")
        bad = m[(m != 0) & (m != 1)]
        if bad.size:
            raise ValueError(f"references: text {i} has the mark {bad[0]:g}; rationale marks must be 0 or 1")
        scores.append(s), marks.append(m)
    if not any(m.any() for m in marks):
        raise ValueError(f"references: no text marks a word ({len(marks)} given), so there is nothing to score")
    return scores, marks


def summarize_plausibility(predictions, references, k_fraction=None, per_instance_k=False,
                           iou_threshold=ERASER_IOU_THRESHOLD):
    if k_fraction is not None:
        k_fraction = check_number("k_fraction", k_fraction, 0.0, 1.0)
    if not isinstance(per_instance_k, (bool, numpy.bool_)):
        raise ValueError(f"per_instance_k must be True or False, got {per_instance_k!r}")
    iou_threshold = check_number("iou_threshold", iou_threshold, 0.0, 1.0, low_open=True)
    scores, marks = checked_texts(predictions, references)
    result = plausibility(scores, marks, k_fraction, bool(per_instance_k), iou_threshold).to_dict()
    reasons = {"average_precision": "every scored text is marked entirely: average precision needs a text with "
                                    "marked and unmarked words (ERASER leaves the others out of it)"}
    return report_undefined(result, reasons)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class Plausibility(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("float64")),
                                        "references": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://aclanthology.org/2020.acl-main.408/",
                            "https://github.com/jayded/eraserbenchmark"])

    def _compute(self, predictions, references, k_fraction=None, per_instance_k=False,
                 iou_threshold=ERASER_IOU_THRESHOLD):
        return summarize_plausibility(predictions, references, k_fraction, per_instance_k, iou_threshold)
