"""Jain & Wallace 2019 §4.2.2 / Figs 4–5: ε-max JSD of adversarial attention, per predicted class
and by max attention. Thin wrapper over ``adversary_summary`` of ``_hf_attn_measures.py``, shipped
beside this script: the NumPy copy of ``hf_attn.batteries.jw.summary.adversary_summary``, so the
module runs without hf_attn."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import (adversary_summary, check_class_ids, check_range, check_same_count,
                                check_same_shapes, report_undefined)

_DESCRIPTION = """J&W Alg. 3: k adversarial attention distributions per instance are searched to be as far
(JSD) from the original attention and from each other as possible while the output changes by at
most ε in TVD (``hf_attn.batteries.jw.adversarial_attention``). Given each adversary's output TVD
and attention JSD, the metric reports ε-max JSD = max JSD over adversaries with TVD ≤ ε (0 if
none) per instance, its distribution per predicted class, the fraction of instances with at least
one feasible adversary, and ε-max JSD per max-attention bin (the data of J&W Figs 4–5)."""

_KWARGS = """
Args:
    adversary_tvd: per instance, TVD(ŷ(α(i)), ŷ) of its k adversaries.
    adversary_jsd: per instance, JSD(α(i), α̂) of its k adversaries.
    max_attention: per instance, the largest original attention weight.
    predictions: predicted class id per instance.
    eps: the allowed output change ε (J&W: 0.01 for classification).
    num_classes: number of classes (default: max prediction + 1).
Returns:
    eps, per_class: {class: {count, mean, std, median, fraction_feasible}}, overall,
    by_max_attention, eps_max_jsd (per instance), undefined ({name: why} for every value that is
    None).
"""

_CITATION = """@inproceedings{jain-wallace-2019-attention,
  title = {Attention is not {E}xplanation},
  author = {Jain, Sarthak and Wallace, Byron C.},
  booktitle = {Proceedings of NAACL-HLT 2019},
  year = {2019}, pages = {3543--3556}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class JwAdversary(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "adversary_tvd": datasets.Sequence(datasets.Value("float64")),
                "adversary_jsd": datasets.Sequence(datasets.Value("float64")),
                "max_attention": datasets.Value("float64"),
                "predictions": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/N19-1357/"])

    def _compute(self, adversary_tvd, adversary_jsd, max_attention, predictions, eps=0.01,
                 num_classes=None):
        check_same_count(adversary_tvd=adversary_tvd, adversary_jsd=adversary_jsd,
                                    max_attention=max_attention, predictions=predictions)
        check_range("adversary_tvd", adversary_tvd, 0.0, 1.0 + 1e-6)
        check_range("adversary_jsd", adversary_jsd, 0.0, 0.6931471805599453 + 1e-6)
        check_same_shapes("adversary_tvd", adversary_tvd, "adversary_jsd", adversary_jsd, axis=None)
        check_range("max_attention", [[v] for v in max_attention], 0.0, 1.0 + 1e-6)
        check_class_ids("predictions", predictions, num_classes)
        return report_undefined(adversary_summary(adversary_tvd, adversary_jsd, max_attention, predictions,
                                                  eps, num_classes), {
            "per_class.*.*": "no instance is predicted as this class",
            "by_max_attention[].*": "no instance of this class has its max attention in this bin"})
