"""Jain & Wallace 2019 §4.2.1 / Fig. 3: median output change under random permutations of the
attention weights, per predicted class and by max attention. Thin wrapper over
``permutation_summary`` of ``_hf_attn_measures.py``, shipped beside this script: the NumPy copy of
``hf_attn.batteries.jw.summary.permutation_summary``, so the module runs without hf_attn."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy

from ._hf_attn_measures import check_class_ids, check_range, check_same_count, permutation_summary, report_undefined

_DESCRIPTION = """J&W Alg. 2: the attention weights of an instance are permuted at random among its
tokens (encoder states unchanged) and the decoder re-run; Δŷ_p = TVD(ŷ_p, ŷ). The metric takes each
instance's Δŷ_p over the permutations (``hf_attn.batteries.jw.permutation_tvd``), reports
Δŷ_med = median_p Δŷ_p per instance and its distribution per predicted class and per max-attention
bin (the data of J&W Fig. 3)."""

_KWARGS = """
Args:
    permutation_tvd: per instance, the TVDs of its P permutations.
    max_attention: per instance, the largest original attention weight.
    predictions: predicted class id per instance.
    num_classes: number of classes (default: max prediction + 1).
Returns:
    per_class: {class: {count, mean, std, median}} of Δŷ_med, overall, by_max_attention (bins
    [0, .25, .5, .75, 1] × class: count, median, q25, q75), median_tvd (per instance), undefined
    ({name: why} for every value that is None).
"""

_CITATION = """@inproceedings{jain-wallace-2019-attention,
  title = {Attention is not {E}xplanation},
  author = {Jain, Sarthak and Wallace, Byron C.},
  booktitle = {Proceedings of NAACL-HLT 2019},
  year = {2019}, pages = {3543--3556}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class JwPermutation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "permutation_tvd": datasets.Sequence(datasets.Value("float64")),
                "max_attention": datasets.Value("float64"),
                "predictions": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/N19-1357/"])

    def _compute(self, permutation_tvd, max_attention, predictions, num_classes=None):
        check_same_count(permutation_tvd=permutation_tvd, max_attention=max_attention,
                                    predictions=predictions)
        check_range("permutation_tvd", permutation_tvd, 0.0, 1.0 + 1e-6)
        for i, row in enumerate(permutation_tvd):  # a median over no permutation is no value
            if len(row) == 0:
                raise ValueError(f"permutation_tvd: instance {i} has no permutations (P must be >= 1)")
        check_range("max_attention", [[v] for v in max_attention], 0.0, 1.0 + 1e-6)
        check_class_ids("predictions", predictions, num_classes)
        return report_undefined(permutation_summary(permutation_tvd, max_attention, predictions, num_classes), {
            "per_class.*.*": "no instance is predicted as this class",
            "by_max_attention[].*": "no instance of this class has its max attention in this bin"})
