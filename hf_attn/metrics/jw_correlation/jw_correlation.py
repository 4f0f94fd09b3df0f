"""Jain & Wallace 2019 Table 2 / Fig. 2: Kendall τ between attention and a feature-importance
measure (gradient or leave-one-out as LOO-TVD), per predicted class. Thin wrapper over
``correlation_summary`` of ``_hf_attn_measures.py``, shipped beside this script: the NumPy copy of
``hf_attn.batteries.jw.summary.correlation_summary``, so the module runs without hf_attn."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy
# Kendall p-values (scipy.special.ndtr)
import scipy

from ._hf_attn_measures import (check_class_ids, check_distributions, check_finite, check_same_count,
                                check_same_shapes, correlation_summary, report_undefined)

TAU_UNDEFINED = "Kendall τ is undefined for fewer than 2 tokens, a constant ranking or a missing value"

_DESCRIPTION = """Per instance, Kendall τ-b (with scipy's p-value) between two rankings of its tokens,
usually the attention weights and a feature-importance score (gradient × input with attention
detached, τ_g, or the leave-one-out output change LOO-TVD = TVD(y(x without t), y(x)), τ_loo; J&W
sec. 4.1, Alg. 1). Summarised per predicted
class: mean ± std of τ, fraction of instances with p < alpha, and instances skipped because τ is
undefined (fewer than 2 tokens, a constant ranking, or a missing value)."""

_KWARGS = """
Args:
    attention: per instance, a (tokens,) list (first ranking, e.g. attention weights).
    importance: per instance, a (tokens,) list of the same length (e.g. gradient or LOO-TVD scores;
        None/NaN marks an undefined value: the instance is skipped).
    predictions: predicted class id per instance.
    alpha: significance level (default 0.05).
    num_classes: number of classes (default: max prediction + 1).
Returns:
    per_class: {class: {count, mean, std, median, fraction_significant, skipped}}, overall: same,
    alpha, tau: per-instance τ (None where skipped), pvalue, valid, undefined ({name: why} for
    every value that is None).
"""

_CITATION = """@inproceedings{jain-wallace-2019-attention,
  title = {Attention is not {E}xplanation},
  author = {Jain, Sarthak and Wallace, Byron C.},
  booktitle = {Proceedings of NAACL-HLT 2019},
  year = {2019}, pages = {3543--3556}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class JwCorrelation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "attention": datasets.Sequence(datasets.Value("float64")),
                "importance": datasets.Sequence(datasets.Value("float64")),
                "predictions": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/N19-1357/"])

    def _compute(self, attention, importance, predictions, alpha=0.05, num_classes=None):
        check_same_count(attention=attention, importance=importance, predictions=predictions)
        check_distributions("attention", attention)
        check_finite("importance", importance, allow_nan=True)  # None/NaN: undefined (skipped)
        check_same_shapes("attention", attention, "importance", importance)
        check_class_ids("predictions", predictions, num_classes)
        importance = [[float("nan") if v is None else v for v in row] for row in importance]
        return report_undefined(correlation_summary(attention, importance, predictions, num_classes, alpha), {
            "per_class.*.*": f"no instance predicted as this class has a defined τ ({TAU_UNDEFINED})",
            "overall.*": f"no instance has a defined τ ({TAU_UNDEFINED})",
            "tau[]": TAU_UNDEFINED, "pvalue[]": TAU_UNDEFINED})
